// Gradient of the SwiGLU feed-forward activation (activation.h) for training.
#pragma once

namespace qkv {

// Forward: h = silu(g) * u, silu(g) = g * s, s = 1 / (1 + exp(-g))     all (n,)
// Backward: dg = dh * u * s * (1 + g * (1 - s));  du = dh * silu(g)   (dg, du overwritten)
void swiglu_backward_ref(float* dg, float* du, const float* dh, const float* g, const float* u, int n);
void swiglu_backward_simd(float* dg, float* du, const float* dh, const float* g, const float* u, int n);

// GELU (tanh form, as activation.h): y = 0.5 x (1 + t), t = tanh(c (x + 0.044715 x^3)), c = sqrt(2/pi)
// dx = dy * (0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 * 0.044715 x^2))     (dx overwritten; may alias dy)
void gelu_backward_ref(float* dx, const float* dy, const float* x, int n);
void gelu_backward_simd(float* dx, const float* dy, const float* x, int n);
// ReLU: dx = dy where x > 0, else 0
void relu_backward_ref(float* dx, const float* dy, const float* x, int n);
void relu_backward_simd(float* dx, const float* dy, const float* x, int n);

}  // namespace qkv
