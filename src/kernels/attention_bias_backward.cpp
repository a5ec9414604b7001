// Direct (non-flash) attention with an additive bias, and its gradient. Sizes in training are
// small (tens of tokens), so the whole probability matrix is kept.
#include "attention_bias_backward.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "simd.h"
#include "softmax.h"

namespace qkv {

namespace {

float dot_simd(const float* a, const float* b, int n) {
  fbatch acc(0.0f);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) acc = madd(fbatch::load_unaligned(a + i), fbatch::load_unaligned(b + i), acc);
  float s = xsimd::reduce_add(acc);
  for (; i < n; i++) s += a[i] * b[i];
  return s;
}

// y += s x
void axpy_simd(float* y, float s, const float* x, int n) {
  const fbatch sb(s);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes)
    madd(sb, fbatch::load_unaligned(x + i), fbatch::load_unaligned(y + i)).store_unaligned(y + i);
  for (; i < n; i++) y[i] += s * x[i];
}

int visible(const BiasAttentionArgs& a, int i) { return a.causal ? std::min(a.n_kv, i + 1) : a.n_kv; }

float bias_at(const BiasAttentionArgs& a, int i, int j, int h) {
  return a.bias ? a.bias[a.bucket[j - i + a.n_q - 1] * a.n_heads + h] : 0.0f;
}

template <bool Simd>
void forward_heads(const BiasAttentionArgs& a, int h0, int h1) {
  const int hd = a.head_dim;
  std::vector<float> p(std::max(a.n_kv, 1));
  for (int h = h0; h < h1; h++) {
    for (int i = 0; i < a.n_q; i++) {
      const float* qi = a.q + i * a.q_stride + h * hd;
      const int nv = visible(a, i);
      for (int j = 0; j < nv; j++) {
        const float* kj = a.k + j * a.kv_stride + h * hd;
        float s;
        if (Simd) {
          s = dot_simd(qi, kj, hd);
        } else {
          double d = 0;
          for (int t = 0; t < hd; t++) d += (double)qi[t] * kj[t];
          s = (float)d;
        }
        p[j] = a.scale * s + bias_at(a, i, j, h);
      }
      if (nv > 0) {
        if (Simd) {
          softmax_simd(p.data(), nv);
        } else {
          float m = *std::max_element(p.begin(), p.begin() + nv);
          double z = 0;
          for (int j = 0; j < nv; j++) z += std::exp((double)p[j] - m);
          for (int j = 0; j < nv; j++) p[j] = (float)(std::exp((double)p[j] - m) / z);
        }
      }
      float* o = a.out + i * a.out_stride + h * hd;
      std::fill(o, o + hd, 0.0f);
      for (int j = 0; j < nv; j++) {
        const float* vj = a.v + j * a.kv_stride + h * hd;
        if (Simd) axpy_simd(o, p[j], vj, hd);
        else
          for (int t = 0; t < hd; t++) o[t] += p[j] * vj[t];
      }
      float* pr = a.probs + ((int64_t)h * a.n_q + i) * a.n_kv;
      std::copy(p.begin(), p.begin() + nv, pr);
      std::fill(pr + nv, pr + a.n_kv, 0.0f);
    }
  }
}

template <bool Simd>
void backward_heads(const BiasAttentionArgs& a, int h0, int h1) {
  const int hd = a.head_dim;
  auto dot = [&](const float* x, const float* y) {
    if (Simd) return dot_simd(x, y, hd);
    double d = 0;
    for (int t = 0; t < hd; t++) d += (double)x[t] * y[t];
    return (float)d;
  };
  auto axpy = [&](float* y, float s, const float* x) {
    if (Simd) axpy_simd(y, s, x, hd);
    else
      for (int t = 0; t < hd; t++) y[t] += s * x[t];
  };
  for (int h = h0; h < h1; h++) {
    for (int i = 0; i < a.n_q; i++) {
      const int nv = visible(a, i);
      const float* P = a.probs + ((int64_t)h * a.n_q + i) * a.n_kv;
      const float* dO = a.dout + i * a.out_stride + h * hd;
      const float* O = a.out + i * a.out_stride + h * hd;
      const float* qi = a.q + i * a.q_stride + h * hd;
      float* dqi = a.dq + i * a.q_stride + h * hd;
      const float Di = dot(dO, O);
      for (int j = 0; j < nv; j++) {
        const float* vj = a.v + j * a.kv_stride + h * hd;
        const float* kj = a.k + j * a.kv_stride + h * hd;
        const float dS = P[j] * (dot(dO, vj) - Di);
        axpy(a.dv + j * a.kv_stride + h * hd, P[j], dO);
        axpy(dqi, a.scale * dS, kj);
        axpy(a.dk + j * a.kv_stride + h * hd, a.scale * dS, qi);
        if (a.dbias) a.dbias[a.bucket[j - i + a.n_q - 1] * a.n_heads + h] += dS;
      }
    }
  }
}

}  // namespace

void bias_attention_ref(const BiasAttentionArgs& a) { forward_heads<false>(a, 0, a.n_heads); }
void bias_attention_simd(const BiasAttentionArgs& a, int h0, int h1) { forward_heads<true>(a, h0, h1); }
void bias_attention_backward_ref(const BiasAttentionArgs& a) { backward_heads<false>(a, 0, a.n_heads); }
void bias_attention_backward_simd(const BiasAttentionArgs& a, int h0, int h1) { backward_heads<true>(a, h0, h1); }

}  // namespace qkv
