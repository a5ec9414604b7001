// Additive (Bahdanau) attention of one head: score(q_i, k_j) = v^T tanh(W_q q_i + W_k k_j),
// softmax over the visible keys, out_i = sum_j p_ij values_j. Forward and backward, each as a
// scalar reference and an xsimd kernel. Several heads: one call per head, pointers offset.
#pragma once
#include <cstdint>

namespace qkv {

struct AdditiveAttentionArgs {
  int n_q = 0;               // query rows
  int n_kv = 0;              // key/value rows
  int d_q = 0;               // query width
  int d_k = 0;               // key width
  int d_att = 0;             // width of the hidden tanh layer (rows of W_q and W_k, length of v)
  int d_v = 0;               // value width (and output width)
  const float* q = nullptr;  // (n_q, d_q), row stride q_stride
  int64_t q_stride = 0;
  const float* k = nullptr;  // (n_kv, d_k), row stride k_stride
  int64_t k_stride = 0;
  const float* values = nullptr;  // (n_kv, d_v), row stride values_stride
  int64_t values_stride = 0;
  const float* w_q = nullptr;  // (d_att, d_q), dense
  const float* w_k = nullptr;  // (d_att, d_k), dense
  const float* v = nullptr;    // (d_att,)
  float* out = nullptr;        // (n_q, d_v), row stride out_stride
  int64_t out_stride = 0;

  // Masks, as in AttentionArgs: query row i sits at position q_pos0 + i, key row j at j.
  int q_pos0 = 0;
  bool causal = false;                 // key j visible only if j <= query position (self attention)
  const uint8_t* key_valid = nullptr;  // padding: key j visible only if key_valid[j] != 0

  // Optional: softmax probabilities, (n_q, n_kv), dense; 0 for masked keys. A query with no
  // visible key gets an all-zero row and a zero output.
  float* probs = nullptr;
};

void attention_additive_ref(const AdditiveAttentionArgs& a);
// Projects the queries and keys once (W_q q, W_k k), then scores each pair with a vector tanh.
void attention_additive_simd(const AdditiveAttentionArgs& a);

struct AdditiveAttentionGrads {
  const float* probs = nullptr;  // (n_q, n_kv): the forward's probabilities (required)
  const float* out = nullptr;    // (n_q, d_v): the forward's output, row stride out_stride of the args
  const float* dout = nullptr;   // dL/dout, same layout as out
  // Gradients, all overwritten: dq, dk, dvalues in the layouts (and strides) of q, k, values;
  // dw_q, dw_k, dv dense like w_q, w_k, v.
  float* dq = nullptr;
  float* dk = nullptr;
  float* dvalues = nullptr;
  float* dw_q = nullptr;
  float* dw_k = nullptr;
  float* dv = nullptr;
};

// With u_ija = (W_q q_i)_a + (W_k k_j)_a, t = tanh(u), S_ij = v . t_ij, P = softmax(S), O = P values:
//   dvalues_j = sum_i P_ij dO_i;  dS_ij = P_ij (dO_i . values_j - dO_i . O_i)
//   dv = sum_ij dS_ij t_ij;  du_ija = dS_ij v_a (1 - t_ija^2)
//   dq_i = W_q^T sum_j du_ij;  dW_q = sum_ij du_ij q_i^T  (keys likewise, summing over i)
// The arguments' out pointer is not read; grads.out is.
void attention_additive_backward_ref(const AdditiveAttentionArgs& a, const AdditiveAttentionGrads& g);
void attention_additive_backward_simd(const AdditiveAttentionArgs& a, const AdditiveAttentionGrads& g);

}  // namespace qkv
