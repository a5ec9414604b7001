// RMSNorm backward: scalar reference and xsimd version.
#include "norm_backward.h"

#include <cmath>

#include "simd.h"

namespace qkv {

void rmsnorm_backward_ref(float* dx, float* dw, const float* dy, const float* x, const float* w, int n, float eps) {
  float ss = 0.0f, dot = 0.0f;
  for (int i = 0; i < n; i++) {
    ss += x[i] * x[i];
    dot += w[i] * dy[i] * x[i];
  }
  const float r = 1.0f / std::sqrt(ss / n + eps);
  const float c = r * r * r * dot / n;
  for (int i = 0; i < n; i++) {
    dx[i] += r * w[i] * dy[i] - c * x[i];
    dw[i] += dy[i] * x[i] * r;
  }
}

void rmsnorm_backward_simd(float* dx, float* dw, const float* dy, const float* x, const float* w, int n, float eps) {
  fbatch ss(0.0f), dot(0.0f);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    fbatch xv = fbatch::load_unaligned(x + i);
    ss = xsimd::fma(xv, xv, ss);
    dot = xsimd::fma(fbatch::load_unaligned(w + i) * fbatch::load_unaligned(dy + i), xv, dot);
  }
  float s = xsimd::reduce_add(ss), d = xsimd::reduce_add(dot);
  for (int j = i; j < n; j++) {
    s += x[j] * x[j];
    d += w[j] * dy[j] * x[j];
  }
  const float r = 1.0f / std::sqrt(s / n + eps);
  const float c = r * r * r * d / n;
  const fbatch rb(r), cb(c);
  for (i = 0; i + kLanes <= n; i += kLanes) {
    fbatch xv = fbatch::load_unaligned(x + i), gy = fbatch::load_unaligned(dy + i);
    fbatch g = rb * fbatch::load_unaligned(w + i) * gy - cb * xv;
    (fbatch::load_unaligned(dx + i) + g).store_unaligned(dx + i);
    xsimd::fma(gy, xv * rb, fbatch::load_unaligned(dw + i)).store_unaligned(dw + i);
  }
  for (; i < n; i++) {
    dx[i] += r * w[i] * dy[i] - c * x[i];
    dw[i] += dy[i] * x[i] * r;
  }
}

}  // namespace qkv
