// Attention for training the encoder-decoder model: any number of queries against any number
// of keys (self-attention: n_q == n_kv; cross-attention: queries from the decoder, keys and
// values from the encoder), optionally causal, with an optional learned additive bias per
// (relative-position bucket, head) as T5 has it. The forward keeps the probabilities; the
// backward gives dq, dk, dv and the gradient of the bias table.
#pragma once
#include <cstdint>

namespace qkv {

struct BiasAttentionArgs {
  int n_q = 0, n_kv = 0;  // queries at positions 0..n_q-1, keys at 0..n_kv-1
  int n_heads = 0;        // heads of q, k and v alike (no grouped-query sharing)
  int head_dim = 0;
  const float* q = nullptr;  // (n_q, n_heads * head_dim), row stride q_stride
  int64_t q_stride = 0;
  const float* k = nullptr;  // (n_kv, n_heads * head_dim), row stride kv_stride
  const float* v = nullptr;
  int64_t kv_stride = 0;
  float* out = nullptr;  // (n_q, n_heads * head_dim), row stride out_stride (forward output O)
  int64_t out_stride = 0;
  float* probs = nullptr;  // (n_heads, n_q, n_kv): softmax probabilities, 0 where masked
  float scale = 1.0f;
  bool causal = false;  // key j visible to query i only if j <= i
  // bias: (buckets, n_heads) table or null; score(i, j, h) += bias[bucket[j - i + n_q - 1] * n_heads + h]
  // bucket: (n_q + n_kv - 1) bucket ids, one per key - query distance.
  const float* bias = nullptr;
  const int* bucket = nullptr;
  // Backward only.
  const float* dout = nullptr;  // dL/dO, layout of out
  float* dq = nullptr;          // accumulated (+=): layout of q
  float* dk = nullptr;          // accumulated: layout of k
  float* dv = nullptr;
  float* dbias = nullptr;  // accumulated: layout of bias (may be null when bias is)
};

// S = scale q k^T + B, P = softmax(S) over the visible keys, O = P V.
void bias_attention_ref(const BiasAttentionArgs& a);
void bias_attention_simd(const BiasAttentionArgs& a, int h0, int h1);  // heads [h0, h1)

// With dP_ij = dO_i . V_j and dS_ij = P_ij (dP_ij - dO_i . O_i):
//   dV_j += sum_i P_ij dO_i;  dq_i += scale sum_j dS_ij k_j;  dk_j += scale sum_i dS_ij q_i;
//   dB[bucket(j - i), h] += dS_ij.
// Each head's outputs (its columns of dq/dk/dv, its column of dbias) are written by the call
// that owns the head, so splitting heads across threads does not change results.
void bias_attention_backward_ref(const BiasAttentionArgs& a);
void bias_attention_backward_simd(const BiasAttentionArgs& a, int h0, int h1);

}  // namespace qkv
