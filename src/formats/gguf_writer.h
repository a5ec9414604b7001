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

namespace qkv {

// Small random-weight models of each supported architecture with a tokenizer, for conformance
// tests against other engines (llama.cpp) and for tests of the loaders.
struct TestModelSpec {
  std::string arch = "llama";  // llama, qwen2, qwen3, gpt2, phi3, gemma, gemma2, gemma3, granite, olmo2, stablelm, starcoder2, smollm3,
                               // minicpm, exaone, internlm2; encoders: bert, nomic-bert (WordPiece vocabulary)
  std::string pre = "gpt-2";   // BPE pre-tokenizer name (tokenizer.ggml.pre); unused with spm
  const Tokenizer* spm = nullptr;  // a SentencePiece vocabulary to embed instead of a learned BPE one
  std::vector<std::string> spm_specials;  // control tokens appended to it
  std::vector<std::string> bpe_specials;  // control tokens appended to a learned BPE vocabulary (after the fixed ones)
  std::string name;  // general.name ("qkv test ARCH" if empty)
  int dim = 64, hidden = 96, layers = 2, heads = 4, kv_heads = 2, context = 256;
  int merges = 320;  // BPE merges learned from the built-in corpus
  bool tied = true;
  float rope_linear_factor = 0;  // > 0: rope.scaling.type = linear with this factor
  // > 0: rope.scaling.type = yarn with this factor and rope.scaling.original_context_length =
  // yarn_orig_context (if > 0)
  float rope_yarn_factor = 0;
  int yarn_orig_context = 0;
  bool rope_freq_factors = false;  // a rope_freqs.weight tensor (Llama 3.1-style), random factors in [1, 8)
  // LongRoPE (Phi-3.5 style): rope_factors_long/short.weight (random, long in [1, 8), short in
  // [1, 2)), rope.scaling.original_context_length = this (> 0), and rope.scaling.attn_factor
  // (if > 0).
  int longrope_orig_context = 0;
  float rope_attn_factor = 0;
  // Gemma 2 and 3: attention.sliding_window (-1: a small default, 8, that the test prompts
  // reach; 0: no key).
  int sliding_window = -1;
  uint32_t seed = 1;
  std::string chat_template;  // tokenizer.chat_template, if not empty
  int dec_layers = 0;  // encoder-decoder models: decoder layers (0 = layers)
  int pooling = 1;  // encoders: *.pooling_type (1 mean, 2 cls, 3 last, 4 rank: with cls.weight/bias)
  bool rank_out = true;  // rank: a cls.output.weight/bias stage after the tanh
  int vocab_size = 0;  // encoders: pad the WordPiece vocabulary with [unused*] pieces up to this size
};
std::vector<uint8_t> write_test_model(const TestModelSpec& spec);
// A `t5` encoder-decoder model (arch "t5"; spm gives the pieces of its Unigram vocabulary).
std::vector<uint8_t> write_test_encdec_model(const TestModelSpec& spec);
// A `llama` model with the same Unigram (t5) vocabulary, no EOS added, whose greedy output
// repeats the last token fed: llama.cpp's completion then shows the last id of its tokenization.
std::vector<uint8_t> write_unigram_echo_model(const Tokenizer& spm);

// A byte-level BPE vocabulary learned from `corpus`: the 256 byte symbols (GPT-2 spelling), then
// one token per merge in the order learned (most frequent adjacent pair first, ties broken by
// the pair's text), words being the pre-tokens of `pre`.
struct LearnedBpe {
  std::vector<std::string> tokens;
  std::vector<std::string> merges;
};
LearnedBpe learn_bpe(const std::string& corpus, PreTokenizer pre, int n_merges);

}  // namespace qkv
