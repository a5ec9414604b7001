// Gradient of the SwiGLU feed-forward activation (activation.h) for training.
#pragma once

namespace qkv {

// Forward: h = silu(g) * u, silu(g) = g * s, s = 1 / (1 + exp(-g))     all (n,)
// Backward: dg = dh * u * s * (1 + g * (1 - s));  du = dh * silu(g)   (dg, du overwritten)
void swiglu_backward_ref(float* dg, float* du, const float* dh, const float* g, const float* u, int n);
void swiglu_backward_simd(float* dg, float* du, const float* dh, const float* g, const float* u, int n);

}  // namespace qkv
