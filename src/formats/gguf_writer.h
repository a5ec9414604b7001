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
  // For streaming writers: a tensor described but not held (its bytes come later, in order,
  // each padded to the alignment), and the file's bytes up to the start of the tensor data.
  void add_tensor_info(const std::string& name, std::vector<uint64_t> dims, QType type);
  std::vector<uint8_t> header(uint32_t alignment = 32) const;
  // The encoded bytes of the i-th tensor added with add_tensor (moved out).
  std::vector<uint8_t> tensor_bytes(size_t i) { return std::move(tensors_.at(i).bytes); }

 private:
  struct T {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t ggml_type;
    std::vector<uint8_t> bytes;
    uint64_t size = 0;  // bytes of data (bytes.size() when held)
  };
  std::vector<uint8_t> kv_;
  uint64_t n_kv_ = 0;
  std::vector<T> tensors_;
};

// A llama2.c-style SentencePiece vocabulary as tokenizer.ggml.* keys (pieces with U+2581 for
// spaces, scores, token types).
// `extra_control` pieces are appended as control tokens.
// Attention kinds as gguf_attention_kinds reads them: kinds_key (one name per layer) and, when a
// kind needs them, the additive width and the sparse pattern under prefix (e.g.
// "llama.attention."). Nothing when kinds is empty.
void add_attention_kinds(GgufWriter& w, const std::string& kinds_key, const std::string& prefix,
                         const std::vector<AttnKind>& kinds, const ModelConfig& c);
// Additive attention parameters of one layer as `p`NAME_add_{q,k,v}.weight (F32).
void add_additive_tensors(GgufWriter& w, const std::string& p, const char* name, const AdditiveWeights& a,
                          const ModelConfig& c);
void add_spm_tokenizer(GgufWriter& w, const Tokenizer& tok, const std::vector<std::string>& extra_control = {});

// A T5 Unigram vocabulary as tokenizer.ggml.* keys: pieces (U+2581 for spaces) with their
// scores and token types; </s> 1, <unk> 2, <pad> 0; no BOS.
void add_t5_tokenizer(GgufWriter& w, const std::vector<std::string>& pieces, const std::vector<float>& scores,
                      const std::vector<int32_t>& types, bool add_space_prefix, bool add_eos);

// A llama2.c model and its tokenizer as a `llama` GGUF with the tokenizer embedded; weight
// matrices stored as `type` (norms stay f32).
std::vector<uint8_t> llama2c_to_gguf(const LoadedModel& m, const Tokenizer& tok, const std::string& name,
                                     QType type = QType::F32);
// One row of `cols` floats stored as `type` (qtype_row_bytes(type, cols) bytes at dst): the
// writer's encoders (f16, bf16 rounded to nearest even, the reference block quantizers).
void encode_row(QType type, const float* src, uint8_t* dst, int cols);
// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k" -> QType; throws BadArgument otherwise.
QType parse_qtype(const std::string& s);
// Every name parse_qtype accepts, "q8_0|q4_0|...": the one list the CLIs' help and errors print.
const char* qtype_names();

}  // namespace qkv
