// Writing GGUF v3: metadata and f32 tensors. Used by `qkv convert` (llama2.c -> GGUF) and tests.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../model/weights.h"
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
  // dims fastest first (GGUF order); data is copied.
  void add_tensor_f32(const std::string& name, std::vector<uint64_t> dims, const float* data);
  std::vector<uint8_t> finish(uint32_t alignment = 32) const;

 private:
  struct T {
    std::string name;
    std::vector<uint64_t> dims;
    std::vector<uint8_t> bytes;
  };
  std::vector<uint8_t> kv_;
  uint64_t n_kv_ = 0;
  std::vector<T> tensors_;
};

// A llama2.c model and its tokenizer as an f32 `llama` GGUF with the tokenizer embedded.
std::vector<uint8_t> llama2c_to_gguf(const LoadedModel& m, const Tokenizer& tok, const std::string& name);

}  // namespace qkv
