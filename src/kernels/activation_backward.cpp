// SwiGLU backward: scalar reference and xsimd version.
#include "activation_backward.h"

#include <cmath>

#include "simd.h"

namespace qkv {

void swiglu_backward_ref(float* dg, float* du, const float* dh, const float* g, const float* u, int n) {
  for (int i = 0; i < n; i++) {
    const float s = 1.0f / (1.0f + std::exp(-g[i]));
    dg[i] = dh[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
    du[i] = dh[i] * g[i] * s;
  }
}

void swiglu_backward_simd(float* dg, float* du, const float* dh, const float* g, const float* u, int n) {
  const fbatch one(1.0f);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    fbatch gv = fbatch::load_unaligned(g + i), hv = fbatch::load_unaligned(dh + i);
    fbatch s = one / (one + xsimd::exp(-gv));
    (hv * fbatch::load_unaligned(u + i) * s * xsimd::fma(gv, one - s, one)).store_unaligned(dg + i);
    (hv * gv * s).store_unaligned(du + i);
  }
  swiglu_backward_ref(dg + i, du + i, dh + i, g + i, u + i, n - i);
}

}  // namespace qkv
