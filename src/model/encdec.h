// The encoder-decoder Transformer (T5; the original "Attention Is All You Need" model): the
// encoder runs once over the source; the decoder runs token by token with causal self-attention
// over its own KV cache and cross-attention over the encoder output, whose keys and values are
// computed once per source and kept. Layer options come from ModelConfig (norm, post_norm,
// positions, feed-forward) as for the decoder-only Transformer; the kernels are the same.
#pragma once
#include <memory>
#include <vector>

#include "../kernels/qdot.h"
#include "../threadpool.h"
#include "blocks.h"
#include "products.h"
#include "weights.h"

namespace qkv {

struct EncDecLayerWeights {
  // Self-attention (encoder: bidirectional; decoder: causal over its cache). Under post_norm the
  // norm weights are applied after the residual sum, else before the sub-layer.
  const float *attn_norm = nullptr, *attn_norm_b = nullptr;  // (dim,)
  Tensor wq, wk, wv, wo;                                     // (q_dim, dim) x3, (dim, q_dim)
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr, *bo = nullptr;
  const float* rel_bias = nullptr;  // (rel_buckets, n_heads) PosKind::RelativeBucket; null: layer 0's
  // Decoder only: cross-attention, queries from the decoder, keys/values from the encoder output.
  const float *cross_norm = nullptr, *cross_norm_b = nullptr;
  Tensor cq, ck, cv, co;
  const float *cbq = nullptr, *cbk = nullptr, *cbv = nullptr, *cbo = nullptr;
  // Additive attention parameters of the self- and cross-attention when of that kind.
  AdditiveWeights self_add, cross_add;
  // Feed-forward.
  const float *ffn_norm = nullptr, *ffn_norm_b = nullptr;
  Tensor w_gate, w_up, w_down;  // (hidden, dim), (hidden, dim), (dim, hidden); w_gate for GeGLU/SwiGLU
  const float *b_up = nullptr, *b_down = nullptr;
};

struct EncDecConfig {
  int n_dec_layers = 0;      // decoder layers (ModelConfig::n_layers counts the encoder's)
  int decoder_start_id = 0;  // the first decoder input (T5: the pad token, 0)
  // Attention kinds per layer (empty: all softmax): encoder self-attention, decoder
  // self-attention, decoder cross-attention; additive width and sparse pattern from ModelConfig.
  std::vector<AttnKind> enc_attn, dec_attn, cross_attn;
  static AttnKind kind_at(const std::vector<AttnKind>& v, int l) { return v.empty() ? AttnKind::Softmax : v[l]; }
  // The score and embedding scales are ModelConfig's attn_scale (T5 folds it into Wq: 1) and
  // embed_scale (original Transformer: sqrt(dim)).
};

struct EncDecWeights {
  Tensor tok_embed;  // (vocab, dim) shared by encoder and decoder
  std::vector<EncDecLayerWeights> enc, dec;
  const float *enc_norm = nullptr, *enc_norm_b = nullptr;  // final norms (pre-norm models), else null
  const float *dec_norm = nullptr, *dec_norm_b = nullptr;
  Tensor classifier;  // (vocab, dim); tok_embed when tied
};

struct EncDecModelData {
  ModelConfig config;  // sizes and options shared by both stacks; n_layers = encoder layers
  EncDecConfig encdec;
  EncDecWeights weights;
  std::shared_ptr<const Blob> storage;
  std::vector<std::shared_ptr<std::vector<float>>> decoded;  // tables converted to f32 at load
};

// T5's relative position bucket of a key at `rel` = key - query positions (HF transformers'
// and llama.cpp's formula): exact buckets for small distances, logarithmic ones up to
// max_distance; bidirectional models split the buckets between the two directions, causal ones
// map every future key to bucket 0.
int relative_position_bucket(int rel, int n_buckets, int max_distance, bool bidirectional);

class EncoderDecoder {
 public:
  // context: decoder positions and source tokens allowed (0 = the model's seq_len).
  EncoderDecoder(EncDecModelData model, int context, std::shared_ptr<ThreadPool> pool);

  const ModelConfig& config() const { return m_.config; }
  const EncDecConfig& encdec() const { return m_.encdec; }
  int context() const { return ctx_; }
  uint64_t weight_bytes() const { return m_.storage ? m_.storage->size() : 0; }
  int source_length() const { return n_src_; }
  // Bytes held by the decoder's KV cache and the cross-attention K/V of the current source.
  uint64_t cache_bytes() const {
    return kv_.bytes() + (uint64_t)n_src_ * m_.config.kv_dim() * 2 * sizeof(float) * m_.encdec.n_dec_layers;
  }

  // Runs the encoder over src[0..n) and computes every decoder layer's cross-attention keys and
  // values from its output; clears the decoder's cache (a new source starts a new target).
  void encode(const int* src, int n);
  // Runs target tokens at decoder positions pos..pos+n-1 (cached), returns the last token's
  // logits (vocab,); with all_logits, logits() holds (n, vocab). Needs encode() first.
  const float* decode(const int* tokens, int n, int pos, bool all_logits = false);
  const float* logits() const { return logits_.data(); }

  // Attention inspection: when on, encode() records the encoder's self-attention
  // (enc layers, heads, n_src, n_src) and decode() the decoder's self-attention
  // (dec layers, heads, n, pos + n) and cross-attention (dec layers, heads, n, n_src).
  void set_capture_attention(bool on) { capture_ = on; }
  bool capture_attention() const { return capture_; }
  const std::vector<float>& encoder_attention() const { return enc_attn_.data; }
  const std::vector<float>& self_attention() const { return self_attn_.data; }
  const std::vector<float>& cross_attention() const { return cross_attn_.data; }
  int attention_queries() const { return self_attn_.n_q; }
  int attention_keys() const { return self_attn_.n_kv; }

  static constexpr int kMaxBatch = 64;

 private:
  struct Attn;  // one attention call's operands
  void run_attention(const Attn& a);
  void matmul(float* y, int64_t ldy, const float* x, int64_t ldx, const Tensor& w, int n_tok);
  void embed(const int* tokens, int n, int pos0, float* x);
  // Sub-layer input: norm(x) under pre-norm, x itself under post-norm.
  const float* sublayer_input(const float* x, const float* w, const float* b, int n);
  void ffn(const EncDecLayerWeights& L, float* x, int n);

  EncDecModelData m_;
  int ctx_;
  std::shared_ptr<ThreadPool> pool_;
  int n_src_ = 0;
  // Decoder self-attention cache; cross-attention keys and values, per layer (n_src_, kv_dim).
  KvCache kv_;
  std::vector<std::vector<float>> cross_k_, cross_v_;
  std::vector<float> x_, xb_, xb2_, q_, hb_, hb2_;  // activations (rows, dim / q_dim / hidden)
  std::vector<int> buckets_;                        // T5: bucket per key - query distance of one call
  std::vector<float> logits_;
  ProductInput in_;  // the current product's input (and its quantized copy for the block types)
  bool capture_ = false;
  AttentionRecord enc_attn_, self_attn_, cross_attn_;
};

}  // namespace qkv
