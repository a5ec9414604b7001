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
    (hv * fbatch::load_unaligned(u + i) * s * madd(gv, one - s, one)).store_unaligned(dg + i);
    (hv * gv * s).store_unaligned(du + i);
  }
  swiglu_backward_ref(dg + i, du + i, dh + i, g + i, u + i, n - i);
}

static constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
static constexpr float kGeluA = 0.044715f;

void gelu_backward_ref(float* dx, const float* dy, const float* x, int n) {
  for (int i = 0; i < n; i++) {
    const float v = x[i], t = std::tanh(kGeluC * (v + kGeluA * v * v * v));
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluA * v * v));
  }
}

void gelu_backward_simd(float* dx, const float* dy, const float* x, int n) {
  const fbatch half(0.5f), one(1.0f), c(kGeluC), a(kGeluA), a3(3.0f * kGeluA);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    fbatch v = fbatch::load_unaligned(x + i), v2 = v * v;
    fbatch t = xsimd::tanh(c * madd(a * v2, v, v));
    fbatch d = half * (one + t) + half * v * (one - t * t) * c * madd(a3, v2, one);
    (fbatch::load_unaligned(dy + i) * d).store_unaligned(dx + i);
  }
  gelu_backward_ref(dx + i, dy + i, x + i, n - i);
}

void relu_backward_ref(float* dx, const float* dy, const float* x, int n) {
  for (int i = 0; i < n; i++) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

void relu_backward_simd(float* dx, const float* dy, const float* x, int n) {
  const fbatch zero(0.0f);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes)
    xsimd::select(fbatch::load_unaligned(x + i) > zero, fbatch::load_unaligned(dy + i), zero).store_unaligned(dx + i);
  relu_backward_ref(dx + i, dy + i, x + i, n - i);
}

}  // namespace qkv
