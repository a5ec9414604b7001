// Gradient of causal self-attention (attention.h) over one sequence, for training.
#pragma once
#include <cstdint>

namespace qkv {

struct AttentionBackwardArgs {
  int n = 0;           // tokens of the sequence, at positions 0..n-1 (queries and keys alike)
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // key/value heads (grouped-query: query head h uses kv head h / (n_heads / n_kv_heads))
  int head_dim = 0;
  const float* q = nullptr;  // (n, n_heads * head_dim), row stride q_stride
  int64_t q_stride = 0;
  const float* k = nullptr;  // (n, n_kv_heads * head_dim), row stride kv_stride
  const float* v = nullptr;
  int64_t kv_stride = 0;
  const float* probs = nullptr;  // (n_heads, n, n): the forward's softmax probabilities (0 where masked)
  const float* out = nullptr;    // (n, n_heads * head_dim): the forward's output O, row stride out_stride
  const float* dout = nullptr;   // dL/dO, same layout as out
  int64_t out_stride = 0;
  float* dq = nullptr;  // dL/dq, layout of q (overwritten)
  float* dk = nullptr;  // dL/dk, dL/dv, layout of k (overwritten)
  float* dv = nullptr;
  float scale = 1.0f;  // the forward's score scale
  bool causal = true;  // key j visible to query i only if j <= i
};

// With S = scale q k^T, P = softmax(S), O = P V:
//   dV_j += sum_i P_ij dO_i;   dP_ij = dO_i . V_j;   dS_ij = P_ij (dP_ij - dO_i . O_i)
//   dq_i = scale sum_j dS_ij k_j;   dk_j += scale sum_i dS_ij q_i
// (dO_i . O_i = sum_j P_ij dP_ij.) Key/value heads sum over their query heads.
void attention_backward_ref(const AttentionBackwardArgs& a);
// The same for key/value heads [g0, g1) and their query heads (callers split kv heads over
// threads; each output element is written by one call, so the split does not change results).
void attention_backward_simd(const AttentionBackwardArgs& a, int g0, int g1);

}  // namespace qkv
