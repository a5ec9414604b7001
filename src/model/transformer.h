// The decoder-only Transformer: a forward pass over a table of layer options, a KV cache,
// and batched prefill (a whole prompt in one pass through the matrix-matrix kernels).
#pragma once
#include <memory>
#include <vector>

#include "../kernels/qdot.h"
#include "../threadpool.h"
#include "weights.h"

namespace qkv {

class Transformer {
 public:
  // context: KV-cache length in positions (0 = the model's seq_len; larger is refused).
  Transformer(LoadedModel model, int context, std::shared_ptr<ThreadPool> pool);

  const ModelConfig& config() const { return m_.config; }
  int context() const { return ctx_; }
  ThreadPool& pool() { return *pool_; }
  // Bytes of KV cache allocated now (it grows with the positions used, up to context()).
  uint64_t kv_cache_bytes() const { return (uint64_t)cache_cap_ * m_.config.n_layers * m_.config.kv_dim() * 2 * sizeof(float); }
  uint64_t weight_bytes() const { return m_.storage ? m_.storage->size() : 0; }

  // Runs tokens[0..n) at positions pos..pos+n-1, writing their keys/values into the cache,
  // and returns the logits of the last token, (vocab,). With all_logits, logits() then holds
  // (n, vocab) for every token. Long inputs are processed in chunks of max_batch tokens.
  const float* forward(const int* tokens, int n, int pos, bool all_logits = false);
  const float* logits() const { return logits_.data(); }

  // Attention inspection: when enabled, the next forward() records softmax probabilities
  // for every layer and head, (n_layers, n_heads, n, pos + n), readable with attention().
  void set_capture_attention(bool on) { capture_ = on; }
  bool capture_attention() const { return capture_; }
  const std::vector<float>& attention() const { return attn_; }
  int attention_queries() const { return attn_n_q_; }
  int attention_keys() const { return attn_n_kv_; }

  static constexpr int kMaxBatch = 64;

 private:
  void forward_chunk(const int* tokens, int n, int pos, float* logits_out, bool all_logits);
  void matmul(float* y, int64_t ldy, const float* x, int64_t ldx, const Tensor& w, int n_tok);
  void norm(float* y, const float* x, const float* w, const float* b, int n_tok);
  void reserve_cache(int positions);

  LoadedModel m_;
  int ctx_;
  std::shared_ptr<ThreadPool> pool_;
  // Per layer (cache_cap_, kv_dim). Grown on demand so memory follows the positions used,
  // not the (untrusted) context length in the header.
  std::vector<std::vector<float>> key_cache_, value_cache_;
  int cache_cap_ = 0;
  // Activations for up to kMaxBatch tokens.
  std::vector<float> x_, xb_, xb2_, q_, hb_, hb2_;  // (B, dim) / (B, q_dim) / (B, hidden)
  std::vector<float> rope_cos_, rope_sin_;        // (B, n_rot/2)
  std::vector<float> logits_;
  std::vector<BlockQ8A> xq_;  // (B, n/32) activations quantized for the block weight types
  bool capture_ = false;
  std::vector<float> attn_;
  int attn_n_q_ = 0, attn_n_kv_ = 0;
};

}  // namespace qkv
