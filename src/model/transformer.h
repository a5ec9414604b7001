// The decoder-only Transformer: a forward pass over a table of layer options, a KV cache,
// and batched prefill (a whole prompt in one pass through the matrix-matrix kernels).
#pragma once
#include <algorithm>
#include <memory>
#include <vector>

#include "../kernels/qdot.h"
#include "../kernels/rope.h"
#include "../threadpool.h"
#include "blocks.h"
#include "products.h"
#include "weights.h"

namespace qkv {

class Transformer {
 public:
  // context: KV-cache length in positions (0 = the model's seq_len; larger is refused).
  Transformer(LoadedModel model, int context, std::shared_ptr<ThreadPool> pool);

  const ModelConfig& config() const { return m_.config; }
  const ModelWeights& weights() const { return m_.weights; }
  int context() const { return ctx_; }
  ThreadPool& pool() { return *pool_; }
  // Bytes of KV cache allocated now (it grows with the positions used, up to context()).
  uint64_t kv_cache_bytes() const { return kv_.bytes(); }
  uint64_t weight_bytes() const { return m_.storage ? m_.storage->size() : 0; }

  // Runs tokens[0..n) at positions pos..pos+n-1, writing their keys/values into the cache,
  // and returns the logits of the last token, (vocab,). With all_logits, logits() then holds
  // (n, vocab) for every token. Long inputs are processed in chunks of max_batch tokens.
  // rows: embedding rows (dim wide) for the positions whose id is kEmbeddingRow (an image's
  // tokens), in order; they enter the layers as they are, in place of a token's embedding.
  const float* forward(const int* tokens, int n, int pos, bool all_logits = false, const float* rows = nullptr);
  static constexpr int kEmbeddingRow = -1;
  const float* logits() const { return logits_.data(); }

  // Partial offload (the first layers on another engine, as llama.cpp's n_gpu_layers): layers
  // [first, n_layers), the final norm and the classifier over `hidden`, (n, dim): the states of
  // tokens at positions pos..pos+n-1 entering layer `first`. Keys/values go into this cache's
  // layers [first, n_layers) only; logits as forward(). first = 0 takes the embeddings' output.
  const float* forward_hidden(const float* hidden, int n, int pos, int first, bool all_logits = false);
  // The other half on the CPU: the embedding and layers [0, last) of tokens at pos..pos+n-1 (keys
  // and values into those layers of the cache); the states leaving layer last - 1, (n, dim).
  std::vector<float> hidden_states(const int* tokens, int n, int pos, int last);

  // Attention inspection: when enabled, the next forward() records softmax probabilities
  // for every layer and head, (n_layers, n_heads, n, pos + n), readable with attention().
  void set_capture_attention(bool on) { capture_ = on; }
  bool capture_attention() const { return capture_; }
  const std::vector<float>& attention() const { return attn_.data; }
  int attention_queries() const { return attn_.n_q; }
  int attention_keys() const { return attn_.n_kv; }

  static constexpr int kMaxBatch = 64;

  // RoPE's cos and sin for positions pos0..pos0+n-1, (n, rot_dims/2) each, with this context's
  // scaling (factors, attention factor, YaRN); local: the sliding-window layers' table
  // (config().rope_theta_local). For other engines (WebGPU), which upload it once.
  void rope_table(int pos0, int n, bool local, float* cos, float* sin) const;

  // Encoders: n_seqs texts packed one after another in tokens[0..sum(lens)), each starting at
  // position 0, run layer-major as one token matrix through the same phases as forward() (so
  // every token's keys exist before attention). Each token attends to the tokens of its own
  // text only: all of them when the model is bidirectional (config().causal == false), those up
  // to itself otherwise. types: a token-type id per token, or null for type 0. Uses no KV cache.
  // Returns the last layer's states (after the final norm, if the model has one),
  // (sum(lens), dim), valid until the next call. At most encode_capacity() tokens per call.
  const float* encode(const int* tokens, const int* types, const int* lens, int n_seqs);
  int encode_capacity() const { return std::max(kMinEncodeCapacity, ctx_); }

  // Vision Transformers (config().is_vision()): one image, (n_channels, height, width) floats
  // already normalised, height and width multiples of patch_size. The patches' projections (one
  // matrix product over the unfolded patches), the class token first if the model has one,
  // learned positions (bicubic-interpolated, as resize_bicubic_torch, when the grid differs from
  // the trained one), the pre-norm, then encode()'s layers and final norm. Returns the states,
  // (image_rows(height, width), dim), valid until the next call.
  // With set_capture_attention(true), the call also records every layer's and head's softmax
  // probabilities, (n_layers, n_heads, rows, rows), readable with attention().
  const float* encode_image(const float* pixels, int height, int width);
  int image_rows(int height, int width) const;
  static constexpr int kMinEncodeCapacity = 1024;

 private:
  void prepare(const int* tokens, int n, int pos, bool all_logits, bool rows, int first = 0);
  void check_layer(int first, const char* what) const;
  void chunk_rope(int B, int pos0);  // RoPE tables of a chunk's positions
  void forward_chunk(const int* tokens, int n, int pos, float* logits_out, bool all_logits);
  // One chunk of a forward, in phases (forward_chunk runs them in order; encode() layer-major).
  void chunk_embed(const int* tokens, int B, int pos0);
  void layer_qkv(int l);
  void layer_attention(int l);
  void layer_rest(int l);
  void chunk_logits(float* logits_out, bool all_logits);
  void matmul(float* y, int64_t ldy, const float* x, int64_t ldx, const Tensor& w, int n_tok);
  void residual_product(const float* in, int64_t ld_in, const Tensor& w, const float* bias, const float* post_norm);
  void reserve_rows(int rows);                 // activation buffers for `rows` tokens (encode)
  void encode_layers(int rows);                // encode()'s layers and final norm over x_'s rows
  const float* positions_for(int gh, int gw);  // (rows, dim) position rows for a gh x gw grid
  void size_rope_tables(int rows);             // the cos/sin tables (and the local layers', if any) for `rows` tokens

  LoadedModel m_;
  int ctx_;
  std::shared_ptr<ThreadPool> pool_;
  KvCache kv_;
  // Activations for up to kMaxBatch tokens.
  std::vector<float> x_, xb_, xb2_, q_, hb_, hb2_;      // (B, dim) / (B, q_dim) / (B, hidden)
  std::vector<float> rope_cos_, rope_sin_;              // (B, n_rot/2)
  std::vector<float> rope_cos_local_, rope_sin_local_;  // the same for the local layers (rope_theta_local), if any
  const float* rope_factors_ = nullptr;                 // this context's frequency divisors, if any
  // YaRN's correction ranges (global and local tables) and the cos/sin factor before YaRN's own
  // (rope.h): the attention factor, with llama.cpp's correction when the factor is below 1.
  RopeYarn yarn_, yarn_local_;
  float rope_mscale_ = 1.0f;
  std::vector<float> logits_;
  MoeScratch moe_;   // mixture-of-experts layers' buffers
  ProductInput in_;  // the current section's input (and its quantized copy for the block types)
  bool capture_ = false;
  std::vector<float> kx_, vx_;      // (rows, kv_dim): encode()'s keys/values
  std::vector<float> chunk_probs_;  // (n_heads, B, n_kv) while capturing
  // The chunk in flight: its size and first position.
  int cur_b_ = 0, cur_pos_ = 0;
  const float* ext_rows_ = nullptr;  // forward()'s embedding rows: the next one for the chunk in flight
  AttentionRecord attn_;
  // encode() in flight: per token its position and type, per text its first row (n_seqs + 1).
  bool encoding_ = false;
  bool imaging_ = false;  // encode_image() in flight: one sequence, so its attention can be recorded
  int rows_cap_ = kMaxBatch;
  std::vector<int> row_pos_, row_type_, seq_start_;
  // encode_image: unfolded patches (n_patches, n_channels * patch^2), and the position rows of
  // the last grid asked for (decoded, interpolated when it differs from the trained grid).
  std::vector<float> patches_, pos_rows_;
  int pos_gh_ = 0, pos_gw_ = 0;
};

}  // namespace qkv
