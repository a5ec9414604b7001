// RMSNorm and LayerNorm: scalar references (RMSNorm follows llama2.c's order of operations)
// and xsimd versions.
#include "norm.h"

#include <cmath>

#include "simd.h"

namespace qkv {

void rmsnorm_ref(float* y, const float* x, const float* w, int n, float eps) {
  float ss = 0.0f;
  for (int i = 0; i < n; i++) ss += x[i] * x[i];
  ss /= n;
  ss += eps;
  ss = 1.0f / std::sqrt(ss);
  for (int i = 0; i < n; i++) y[i] = w[i] * (ss * x[i]);
}

static float sum_squares(const float* x, int n) {
  fbatch acc(0.0f);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    fbatch v = fbatch::load_unaligned(x + i);
    acc = madd(v, v, acc);
  }
  float s = xsimd::reduce_add(acc);
  for (; i < n; i++) s += x[i] * x[i];
  return s;
}

void rmsnorm_simd(float* y, const float* x, const float* w, int n, float eps) {
  float ss = 1.0f / std::sqrt(sum_squares(x, n) / n + eps);
  fbatch s(ss);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes)
    (fbatch::load_unaligned(w + i) * (s * fbatch::load_unaligned(x + i))).store_unaligned(y + i);
  for (; i < n; i++) y[i] = w[i] * (ss * x[i]);
}

void layernorm_ref(float* y, const float* x, const float* w, const float* b, int n, float eps) {
  float mean = 0.0f;
  for (int i = 0; i < n; i++) mean += x[i];
  mean /= n;
  float var = 0.0f;
  for (int i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
  var /= n;
  float inv = 1.0f / std::sqrt(var + eps);
  for (int i = 0; i < n; i++) y[i] = (x[i] - mean) * inv * w[i] + (b ? b[i] : 0.0f);
}

void layernorm_simd(float* y, const float* x, const float* w, const float* b, int n, float eps) {
  fbatch acc(0.0f);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) acc += fbatch::load_unaligned(x + i);
  float mean = xsimd::reduce_add(acc);
  for (; i < n; i++) mean += x[i];
  mean /= n;
  fbatch m(mean), vacc(0.0f);
  for (i = 0; i + kLanes <= n; i += kLanes) {
    fbatch d = fbatch::load_unaligned(x + i) - m;
    vacc = madd(d, d, vacc);
  }
  float var = xsimd::reduce_add(vacc);
  for (; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
  float inv = 1.0f / std::sqrt(var / n + eps);
  fbatch vinv(inv);
  for (i = 0; i + kLanes <= n; i += kLanes) {
    fbatch r = (fbatch::load_unaligned(x + i) - m) * vinv * fbatch::load_unaligned(w + i);
    if (b) r += fbatch::load_unaligned(b + i);
    r.store_unaligned(y + i);
  }
  for (; i < n; i++) y[i] = (x[i] - mean) * inv * w[i] + (b ? b[i] : 0.0f);
}

}  // namespace qkv
