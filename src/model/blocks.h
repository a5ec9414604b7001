// The building blocks every model stack shares (decoder, encoder, encoder-decoder): norms over
// rows, the feed-forward's hidden layer with its GLU choice, the residual with its post-norm,
// sinusoidal positions, token checks, a growing KV cache and the attention record.
#pragma once
#include <cstdint>
#include <vector>

#include "../kernels/attention.h"
#include "../kernels/attention_additive.h"
#include "../threadpool.h"
#include "config.h"
#include "products.h"
#include "weights.h"

namespace qkv {

// y = norm(x) for n rows of c.dim (c.norm's kind and eps; b: LayerNorm bias or null). y may be x.
void norm_rows(const ModelConfig& c, float* y, const float* x, const float* w, const float* b, int n);

// x += out for n rows of c.dim; under post-norm then x = norm(x) with (w, b).
void residual_add(const ModelConfig& c, float* x, const float* out, const float* w, const float* b, int n);

// Sinusoidal encoding of "Attention Is All You Need", added to x (dim,):
// PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(p / 10000^(2i/d)).
void add_sinusoidal(float* x, int dim, int pos);

// Throws Error(BadArgument) naming the first id outside the vocabulary.
void check_tokens(const int* tokens, int n, int vocab_size);

// The feed-forward's hidden layer for n rows of x (n, c.dim), into out (n, hidden):
// GLU kinds act(x W_gate) * (x W_up) (tmp: (n, hidden) scratch), else act(x W_up + b_up).
// One parallel section over the hidden rows; each chunk activates the columns it wrote.
void ffn_hidden(ThreadPool& pool, ProductInput& in, FfnKind kind, const float* x, int dim, int n, const Tensor& w_up,
                const Tensor& w_gate, const float* b_up, int hidden, float* out, float* tmp);

// Scratch of moe_ffn, kept between calls so a step allocates nothing once warm.
struct MoeScratch {
  std::vector<float> logits, weight, xe, he, he2, ye, out;
  std::vector<int> chosen, rows;
};

// The mixture-of-experts feed-forward (config.h: n_experts) of n rows of x (n, c.dim) into out
// (n, c.dim): the router's softmax, each token's top n_experts_used experts (ties: the lower
// index), their weights (renormalised when expert_norm_topk), then per expert one batched
// SwiGLU feed-forward over the tokens that chose it, and per token the weighted sum in rank order.
void moe_ffn(ThreadPool& pool, ProductInput& in, const ModelConfig& c, const LayerWeights& L, const float* x, int n,
             float* out, MoeScratch& s);

// Attention of query heads [h0, h1) by the layer's kind: a holds q/k/v, masks and probs as for
// attention_flash (scale and softcap unused by the additive kind); w holds the additive
// parameters. Every model stack calls this, so a kind is wired in one place.
void attend(const ModelConfig& c, AttnKind kind, const AdditiveWeights& w, const AttentionArgs& a, int h0, int h1);
// The additive kernel's arguments for query head h of a (its kv head's keys and values, head h's
// parameters, probs at head h's (n_q, n_kv) block when a.probs is set).
AdditiveAttentionArgs additive_head_args(const ModelConfig& c, const AdditiveWeights& w, const AttentionArgs& a, int h);

// Keys and values per layer, (capacity, kv_dim) each, grown on demand so memory follows the
// positions used, not the (untrusted) context length in the header.
class KvCache {
 public:
  // min_step: the least capacity a first growth takes (bounded by context).
  void init(int layers, int kv_dim, int context, int min_step);
  // Capacity for at least `positions` in layers [first, layers) (the layers below stay as they
  // are: a partial offload runs them on the GPU); throws Error(OutOfMemory) naming the size if it cannot.
  void reserve(int positions, int first = 0);
  float* k(int l) { return k_[l].data(); }
  float* v(int l) { return v_[l].data(); }
  int capacity() const { return cap_; }
  uint64_t bytes() const { return (uint64_t)cap_ * (k_.size() - low_) * kv_dim_ * 2 * sizeof(float); }

 private:
  std::vector<std::vector<float>> k_, v_;
  int cap_ = 0, kv_dim_ = 0, ctx_ = 0, min_step_ = 0;
  size_t low_ = 0;  // layers [low_, layers) hold cap_ positions; those below, none
};

// Softmax probabilities of one call, (layers, heads, n_q, n_kv), filled chunk by chunk.
struct AttentionRecord {
  std::vector<float> data;
  int heads = 0, n_q = 0, n_kv = 0;
  // Zeroed record; throws Error(OutOfMemory) above 1 GiB (extra_bytes: the caller's own buffers).
  void start(int layers, int n_heads, int queries, int keys, uint64_t extra_bytes = 0);
  void clear();
  // Copies a chunk's (heads, B, keys) probabilities into rows q0..q0+B of layer l, columns [0, keys).
  void place(int l, const float* probs, int q0, int B, int keys);
};

}  // namespace qkv
