// Random-weight `t5` GGUF models (llama.cpp's tensor names and keys) with a Unigram vocabulary,
// for the loader, tokenizer and generation tests. Deterministic per seed.
#include <cmath>
#include <random>

#include "../common.h"
#include "gguf_writer.h"

namespace qkv {

namespace {
// Unigram vocabulary as T5 lays it out: <pad> 0, </s> 1, <unk> 2, the pieces of `spm` (spaces as
// U+2581, random log-probabilities, so segmentations are not simply longest-first), then
// sentinel tokens as user-defined pieces. Byte pieces of the source vocabulary are left out
// (Unigram has no byte fallback: text they would cover becomes <unk>). Returns the size.
int add_unigram_vocab(GgufWriter& w, const Tokenizer& spm, std::mt19937& rng, bool add_eos) {
  auto uniform = [&](float lo, float hi) { return lo + (hi - lo) * (float)((rng() >> 8) * (1.0 / 16777216.0)); };
  std::vector<std::string> pieces = {"<pad>", "</s>", "<unk>"};
  std::vector<float> scores = {0.0f, 0.0f, 0.0f};
  std::vector<int32_t> types = {3, 3, 2};
  for (int i = 3; i < spm.vocab_size(); i++) {
    if (spm.byte_value(i) >= 0) continue;
    std::string p;
    for (char ch : spm.piece(i)) p += ch == ' ' ? std::string("\xE2\x96\x81") : std::string(1, ch);
    pieces.push_back(p);
    scores.push_back(-uniform(1.0f, 9.0f));
    types.push_back(1);
  }
  for (const char* e : {"<extra_id_0>", "<extra_id_1>"}) {
    pieces.push_back(e);
    scores.push_back(0.0f);
    types.push_back(4);
  }
  add_t5_tokenizer(w, pieces, scores, types, true, add_eos);
  return (int)pieces.size();
}
}  // namespace

std::vector<uint8_t> write_test_encdec_model(const TestModelSpec& s) {
  if (s.arch != "t5") fail(ErrorCode::BadArgument, "no encoder-decoder test model for architecture '" + s.arch + "'");
  if (!s.spm) fail(ErrorCode::BadArgument, "the t5 test model needs a SentencePiece vocabulary to take its pieces from");
  std::mt19937 rng(s.seed);
  auto uniform = [&](float lo, float hi) { return lo + (hi - lo) * (float)((rng() >> 8) * (1.0 / 16777216.0)); };
  GgufWriter w;
  w.add_string("general.architecture", "t5");
  w.add_string("general.name", s.name.empty() ? "qkv test t5" : s.name);

  const int V = add_unigram_vocab(w, *s.spm, rng, true);

  const int head_dim = 16, buckets = 32;
  const uint64_t d = s.dim, h = s.hidden, q = (uint64_t)s.heads * head_dim, kv = q;
  const int dec_layers = s.dec_layers > 0 ? s.dec_layers : s.layers;
  w.add_u32("t5.context_length", s.context);
  w.add_u32("t5.embedding_length", s.dim);
  w.add_u32("t5.feed_forward_length", s.hidden);
  w.add_u32("t5.block_count", s.layers);
  if (dec_layers != s.layers) w.add_u32("t5.decoder_block_count", dec_layers);
  w.add_u32("t5.attention.head_count", s.heads);
  w.add_u32("t5.attention.key_length", head_dim);
  w.add_u32("t5.attention.value_length", head_dim);
  w.add_f32("t5.attention.layer_norm_epsilon", 1e-6f);
  w.add_f32("t5.attention.layer_norm_rms_epsilon", 1e-6f);
  w.add_u32("t5.attention.relative_buckets_count", buckets);
  w.add_u32("t5.decoder_start_token_id", 0);

  auto matrix = [&](const std::string& name, uint64_t rows, uint64_t cols, float gain = 1.0f) {
    const float a = gain * 1.7f / std::sqrt((float)cols);
    std::vector<float> v(rows * cols);
    for (float& x : v) x = uniform(-a, a);
    w.add_tensor_f32(name, {cols, rows}, v.data());
  };
  auto vector = [&](const std::string& name, uint64_t n, float center, float spread) {
    std::vector<float> v(n);
    for (float& x : v) x = uniform(center - spread, center + spread);
    w.add_tensor_f32(name, {n}, v.data());
  };
  matrix("token_embd.weight", V, d, 2.0f * std::sqrt((float)d) / 1.7f * 0.5f);
  auto layer = [&](const std::string& p, bool dec, int l) {
    vector(p + "attn_norm.weight", d, 1.0f, 0.2f);
    matrix(p + "attn_q.weight", q, d, 2.0f);
    matrix(p + "attn_k.weight", kv, d, 2.0f);
    matrix(p + "attn_v.weight", kv, d);
    matrix(p + "attn_o.weight", d, q, 3.0f);
    if (l == 0) {  // T5 keeps the bias table in the first layer only; the others share it
      std::vector<float> rb((size_t)buckets * s.heads);
      for (float& x : rb) x = uniform(-3.0f, 3.0f);
      w.add_tensor_f32(p + "attn_rel_b.weight", {(uint64_t)s.heads, (uint64_t)buckets}, rb.data());
    }
    if (dec) {
      vector(p + "cross_attn_norm.weight", d, 1.0f, 0.2f);
      matrix(p + "cross_attn_q.weight", q, d, 2.0f);
      matrix(p + "cross_attn_k.weight", kv, d, 2.0f);
      matrix(p + "cross_attn_v.weight", kv, d);
      matrix(p + "cross_attn_o.weight", d, q, 3.0f);
    }
    vector(p + "ffn_norm.weight", d, 1.0f, 0.2f);
    matrix(p + "ffn_gate.weight", h, d);
    matrix(p + "ffn_up.weight", h, d);
    matrix(p + "ffn_down.weight", d, h, 3.0f);
  };
  for (int l = 0; l < s.layers; l++) layer("enc.blk." + std::to_string(l) + ".", false, l);
  vector("enc.output_norm.weight", d, 1.0f, 0.2f);
  for (int l = 0; l < dec_layers; l++) layer("dec.blk." + std::to_string(l) + ".", true, l);
  vector("dec.output_norm.weight", d, 1.0f, 0.2f);
  if (!s.tied) matrix("output.weight", V, d);
  return w.finish();
}

}  // namespace qkv

namespace qkv {

std::vector<uint8_t> write_unigram_echo_model(const Tokenizer& spm) {
  std::mt19937 rng(5);
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_string("general.name", "qkv test unigram echo");
  const int V = add_unigram_vocab(w, spm, rng, false);
  const int d = ((V + 31) / 32) * 32, hidden = 32;
  w.add_u32("llama.context_length", 256);
  w.add_u32("llama.embedding_length", d);
  w.add_u32("llama.feed_forward_length", hidden);
  w.add_u32("llama.block_count", 1);
  w.add_u32("llama.attention.head_count", 1);
  w.add_u32("llama.attention.head_count_kv", 1);
  w.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-6f);
  w.add_u32("llama.rope.dimension_count", d);
  // One-hot embeddings, blocks whose outputs are zero, tied classifier: the logits of token t
  // are sqrt(d) at t and 0 elsewhere, so greedy decoding repeats the last token fed.
  std::vector<float> e((size_t)V * d, 0.0f);
  for (int t = 0; t < V; t++) e[(size_t)t * d + t] = 1.0f;
  w.add_tensor_f32("token_embd.weight", {(uint64_t)d, (uint64_t)V}, e.data());
  std::vector<float> ones(d, 1.0f), sq((size_t)d * d, 0.01f), zero_o((size_t)d * d, 0.0f), up((size_t)hidden * d, 0.01f),
      zero_down((size_t)d * hidden, 0.0f);
  w.add_tensor_f32("blk.0.attn_norm.weight", {(uint64_t)d}, ones.data());
  w.add_tensor_f32("blk.0.attn_q.weight", {(uint64_t)d, (uint64_t)d}, sq.data());
  w.add_tensor_f32("blk.0.attn_k.weight", {(uint64_t)d, (uint64_t)d}, sq.data());
  w.add_tensor_f32("blk.0.attn_v.weight", {(uint64_t)d, (uint64_t)d}, sq.data());
  w.add_tensor_f32("blk.0.attn_output.weight", {(uint64_t)d, (uint64_t)d}, zero_o.data());
  w.add_tensor_f32("blk.0.ffn_norm.weight", {(uint64_t)d}, ones.data());
  w.add_tensor_f32("blk.0.ffn_gate.weight", {(uint64_t)d, (uint64_t)hidden}, up.data());
  w.add_tensor_f32("blk.0.ffn_up.weight", {(uint64_t)d, (uint64_t)hidden}, up.data());
  w.add_tensor_f32("blk.0.ffn_down.weight", {(uint64_t)hidden, (uint64_t)d}, zero_down.data());
  w.add_tensor_f32("output_norm.weight", {(uint64_t)d}, ones.data());
  return w.finish();
}

}  // namespace qkv
