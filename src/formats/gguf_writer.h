// Writing GGUF v3: metadata and f32 tensors. Used by `qkv convert` (llama2.c -> GGUF) and tests.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../model/weights.h"
#include "gguf.h"
#include "../tokenizer/tokenizer.h"

namespace qkv {

class GgufWriter {
 public:
  void add_string(const std::string& key, const std::string& v);
  void add_u32(const std::string& key, uint32_t v);
  void add_i32(const std::string& key, int32_t v);
  void add_f32(const std::string& key, float v);
  void add_bool(const std::string& key, bool v);
  void add_strings(const std::string& key, const std::vector<std::string>& v);
  void add_f32s(const std::string& key, const std::vector<float>& v);
  void add_i32s(const std::string& key, const std::vector<int32_t>& v);
  // Any parsed value (arrays included), as read by GgufFile: for copying metadata across.
  void add_value(const std::string& key, const GgufValue& v);
  // dims fastest first (GGUF order); data is copied, converted to `type` row by row.
  void add_tensor_f32(const std::string& name, std::vector<uint64_t> dims, const float* data);
  void add_tensor(const std::string& name, std::vector<uint64_t> dims, const float* data, QType type);
  std::vector<uint8_t> finish(uint32_t alignment = 32) const;

 private:
  struct T {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t ggml_type;
    std::vector<uint8_t> bytes;
  };
  std::vector<uint8_t> kv_;
  uint64_t n_kv_ = 0;
  std::vector<T> tensors_;
};

// A llama2.c model and its tokenizer as a `llama` GGUF with the tokenizer embedded; weight
// matrices stored as `type` (norms stay f32).
std::vector<uint8_t> llama2c_to_gguf(const LoadedModel& m, const Tokenizer& tok, const std::string& name,
                                     QType type = QType::F32);
// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k" -> QType; throws BadArgument otherwise.
QType parse_qtype(const std::string& s);

}  // namespace qkv
