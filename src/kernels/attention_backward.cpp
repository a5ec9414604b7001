// Attention backward from saved probabilities: scalar reference and an xsimd version that
// vectorises over head_dim.
#include "attention_backward.h"

#include <vector>

#include "simd.h"

namespace qkv {

void attention_backward_ref(const AttentionBackwardArgs& a) {
  const int hd = a.head_dim, group = a.n_heads / a.n_kv_heads, n = a.n;
  for (int i = 0; i < n; i++) {
    for (int d = 0; d < a.n_heads * hd; d++) a.dq[i * a.q_stride + d] = 0.0f;
    for (int d = 0; d < a.n_kv_heads * hd; d++) a.dk[i * a.kv_stride + d] = a.dv[i * a.kv_stride + d] = 0.0f;
  }
  for (int h = 0; h < a.n_heads; h++) {
    const int g = h / group;
    for (int i = 0; i < n; i++) {
      const float* p = a.probs + ((int64_t)h * n + i) * n;
      const float* o = a.out + i * a.out_stride + h * hd;
      const float* dout = a.dout + i * a.out_stride + h * hd;
      const float* qi = a.q + i * a.q_stride + h * hd;
      float* dqi = a.dq + i * a.q_stride + h * hd;
      float di = 0.0f;
      for (int d = 0; d < hd; d++) di += dout[d] * o[d];
      const int jend = a.causal ? i + 1 : n;
      for (int j = 0; j < jend; j++) {
        const float* kj = a.k + j * a.kv_stride + g * hd;
        const float* vj = a.v + j * a.kv_stride + g * hd;
        float* dkj = a.dk + j * a.kv_stride + g * hd;
        float* dvj = a.dv + j * a.kv_stride + g * hd;
        float dp = 0.0f;
        for (int d = 0; d < hd; d++) dp += dout[d] * vj[d];
        const float ds = p[j] * (dp - di) * a.scale;
        for (int d = 0; d < hd; d++) {
          dvj[d] += p[j] * dout[d];
          dqi[d] += ds * kj[d];
          dkj[d] += ds * qi[d];
        }
      }
    }
  }
}

static inline float dot(const float* x, const float* y, int n) {
  fbatch acc(0.0f);
  int d = 0;
  for (; d + kLanes <= n; d += kLanes) acc = madd(fbatch::load_unaligned(x + d), fbatch::load_unaligned(y + d), acc);
  float s = xsimd::reduce_add(acc);
  for (; d < n; d++) s += x[d] * y[d];
  return s;
}

// y += a * x
static inline void axpy(float* y, float a, const float* x, int n) {
  const fbatch ab(a);
  int d = 0;
  for (; d + kLanes <= n; d += kLanes)
    madd(ab, fbatch::load_unaligned(x + d), fbatch::load_unaligned(y + d)).store_unaligned(y + d);
  for (; d < n; d++) y[d] += a * x[d];
}

void attention_backward_simd(const AttentionBackwardArgs& a, int g0, int g1) {
  const int hd = a.head_dim, group = a.n_heads / a.n_kv_heads, n = a.n;
  thread_local std::vector<float> ds_buf;
  if ((int)ds_buf.size() < n) ds_buf.resize(n);
  float* ds = ds_buf.data();
  for (int g = g0; g < g1; g++) {
    for (int j = 0; j < n; j++)
      for (int d = 0; d < hd; d++) a.dk[j * a.kv_stride + g * hd + d] = a.dv[j * a.kv_stride + g * hd + d] = 0.0f;
    for (int h = g * group; h < (g + 1) * group; h++) {
      for (int i = 0; i < n; i++) {
        const float* p = a.probs + ((int64_t)h * n + i) * n;
        const float* dout = a.dout + i * a.out_stride + h * hd;
        const float* qi = a.q + i * a.q_stride + h * hd;
        float* dqi = a.dq + i * a.q_stride + h * hd;
        const float di = dot(dout, a.out + i * a.out_stride + h * hd, hd);
        const int jend = a.causal ? i + 1 : n;
        for (int j = 0; j < jend; j++) ds[j] = p[j] * (dot(dout, a.v + j * a.kv_stride + g * hd, hd) - di) * a.scale;
        for (int d = 0; d < hd; d++) dqi[d] = 0.0f;
        for (int j = 0; j < jend; j++) {
          if (p[j] == 0.0f) continue;  // masked or underflowed: contributes nothing
          const int64_t kv = j * a.kv_stride + g * hd;
          axpy(a.dv + kv, p[j], dout, hd);
          axpy(dqi, ds[j], a.k + kv, hd);
          axpy(a.dk + kv, ds[j], qi, hd);
        }
      }
    }
  }
}

}  // namespace qkv
