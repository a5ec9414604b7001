// Gradient of RMSNorm (norm.h) for training.
#pragma once

namespace qkv {

// Forward: y = w * x * r, r = 1 / sqrt(mean(x^2) + eps)          x, w, dy, dx, dw: (n,)
// Backward: dx += r * (w * dy) - x * r^3 * mean(w * dy * x);  dw += dy * x * r
// (dx accumulates: it is the residual stream's gradient; r is recomputed from x.)
void rmsnorm_backward_ref(float* dx, float* dw, const float* dy, const float* x, const float* w, int n, float eps);
void rmsnorm_backward_simd(float* dx, float* dw, const float* dy, const float* x, const float* w, int n, float eps);

// LayerNorm: y = w * xh + b, xh = (x - mean) * r, r = 1 / sqrt(var + eps); with g = w * dy:
// dx += r * (g - mean(g) - xh * mean(g * xh));  dw += dy * xh;  db += dy (db may be null)
void layernorm_backward_ref(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, int n,
                            float eps);
void layernorm_backward_simd(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, int n,
                             float eps);

}  // namespace qkv
