// Activations: scalar references (SiLU/SwiGLU as llama2.c writes them) and xsimd versions.
#include "activation.h"

#include <cmath>

#include "simd.h"

namespace qkv {

static constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)

void silu_ref(float* x, int n) {
  for (int i = 0; i < n; i++) x[i] = x[i] * (1.0f / (1.0f + std::exp(-x[i])));
}
void gelu_ref(float* x, int n) {
  for (int i = 0; i < n; i++) {
    float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(kGeluC * (v + 0.044715f * v * v * v)));
  }
}
void quick_gelu_ref(float* x, int n) {
  for (int i = 0; i < n; i++) x[i] = x[i] * (1.0f / (1.0f + std::exp(-1.702f * x[i])));
}
void relu_ref(float* x, int n) {
  for (int i = 0; i < n; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
void swiglu_ref(float* g, const float* u, int n) {
  for (int i = 0; i < n; i++) g[i] = g[i] * (1.0f / (1.0f + std::exp(-g[i]))) * u[i];
}
void geglu_ref(float* g, const float* u, int n) {
  for (int i = 0; i < n; i++) {
    float v = g[i];
    g[i] = 0.5f * v * (1.0f + std::tanh(kGeluC * (v + 0.044715f * v * v * v))) * u[i];
  }
}
void scale_ref(float* x, float a, int n) {
  for (int i = 0; i < n; i++) x[i] *= a;
}

static inline fbatch silu_b(fbatch v) { return v / (fbatch(1.0f) + xsimd::exp(-v)); }
static inline fbatch gelu_b(fbatch v) {
  fbatch inner = fbatch(kGeluC) * (v + fbatch(0.044715f) * v * v * v);
  return fbatch(0.5f) * v * (fbatch(1.0f) + xsimd::tanh(inner));
}

void silu_simd(float* x, int n) {
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) silu_b(fbatch::load_unaligned(x + i)).store_unaligned(x + i);
  silu_ref(x + i, n - i);
}
void gelu_simd(float* x, int n) {
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) gelu_b(fbatch::load_unaligned(x + i)).store_unaligned(x + i);
  gelu_ref(x + i, n - i);
}
void quick_gelu_simd(float* x, int n) {
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const fbatch v = fbatch::load_unaligned(x + i);
    (v / (fbatch(1.0f) + xsimd::exp(fbatch(-1.702f) * v))).store_unaligned(x + i);
  }
  quick_gelu_ref(x + i, n - i);
}
void relu_simd(float* x, int n) {
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) xsimd::max(fbatch::load_unaligned(x + i), fbatch(0.0f)).store_unaligned(x + i);
  relu_ref(x + i, n - i);
}
void swiglu_simd(float* g, const float* u, int n) {
  int i = 0;
  for (; i + kLanes <= n; i += kLanes)
    (silu_b(fbatch::load_unaligned(g + i)) * fbatch::load_unaligned(u + i)).store_unaligned(g + i);
  swiglu_ref(g + i, u + i, n - i);
}
void geglu_simd(float* g, const float* u, int n) {
  int i = 0;
  for (; i + kLanes <= n; i += kLanes)
    (gelu_b(fbatch::load_unaligned(g + i)) * fbatch::load_unaligned(u + i)).store_unaligned(g + i);
  geglu_ref(g + i, u + i, n - i);
}
void scale_simd(float* x, float a, int n) {
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) (fbatch::load_unaligned(x + i) * fbatch(a)).store_unaligned(x + i);
  scale_ref(x + i, a, n - i);
}

}  // namespace qkv
