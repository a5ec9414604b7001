// Scaled dot-product attention of a block of queries over a KV cache, with masks and
// grouped-query heads.
#pragma once
#include <cstdint>

namespace qkv {

struct AttentionArgs {
  int n_q = 0;         // query rows (1 when decoding, the prompt length when prefilling)
  int n_kv = 0;        // key/value rows in the cache that may be attended to
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // key/value heads; n_heads % n_kv_heads == 0 (grouped-query attention)
  int head_dim = 0;
  const float* q = nullptr;  // (n_q, n_heads * head_dim), row stride q_stride
  int64_t q_stride = 0;
  const float* k = nullptr;  // (n_kv, n_kv_heads * head_dim), row stride kv_stride
  const float* v = nullptr;  // same layout as k
  int64_t kv_stride = 0;
  float* out = nullptr;  // (n_q, n_heads * head_dim), row stride out_stride
  int64_t out_stride = 0;
  float scale = 1.0f;    // usually 1/sqrt(head_dim)
  float softcap = 0.0f;  // > 0: scores s become softcap * tanh(s / softcap) before the softmax (Gemma 2)

  // Masks. Query row i sits at absolute position q_pos0 + i; key row j at position j.
  int q_pos0 = 0;
  bool causal = true;                  // key j visible only if j <= query position
  int window = 0;                      // > 0: key j visible only if query position - j < window
  const uint8_t* key_valid = nullptr;  // padding: key j visible only if key_valid[j] != 0

  // Learned bias by relative position (T5): the score of query i (position qpos) and key j gets
  // rel_bias[rel_bucket[j - qpos + rel_off] * n_heads + h], after scale and softcap.
  // rel_bucket: one bucket id per key - query distance, from -rel_off up to n_kv - 1 - q_pos0.
  const float* rel_bias = nullptr;  // (buckets, n_heads)
  const int* rel_bucket = nullptr;
  int rel_off = 0;

  // Optional inspection output: softmax probabilities, (n_heads, n_q, n_kv), row stride n_kv.
  // Masked keys get 0. A query with no visible key gets an all-zero row and a zero output.
  float* probs = nullptr;
};

// Direct reference: full score row, softmax, weighted sum (the textbook formula). Every field
// above, the relative-position bias included.
void attention_ref(const AttentionArgs& a);

// Flash-style: key/value tiles with an online softmax, so working memory is a fixed tile
// whatever the sequence length. Computes query heads [h0, h1) (callers split heads over threads).
// The same fields as attention_ref (decoder, encoder and T5's biased attention alike).
void attention_flash(const AttentionArgs& a, int h0, int h1);

// Linear attention (Katharopoulos et al., 2020): the softmax kernel exp(q.k) replaced by the
// feature map phi(x) = elu(x) + 1, so out_i = sum_j (phi(q_i).phi(k_j)) v_j / sum_j phi(q_i).phi(k_j)
// over the visible keys j (same masks as above; `scale` is not used). probs, if set, receives the
// normalised weights. The reference computes that sum directly.
void attention_linear_ref(const AttentionArgs& a);
// The same result through the running state S = sum phi(k) v^T (head_dim^2) and z = sum phi(k),
// advanced key by key in position order: O(n head_dim^2) instead of O(n^2 head_dim) for causal
// attention without window or padding (and without probs); other masks take the direct form.
// Query heads [h0, h1).
void attention_linear(const AttentionArgs& a, int h0, int h1);

}  // namespace qkv
