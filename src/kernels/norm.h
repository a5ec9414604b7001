// Normalisations over one vector.
#pragma once

namespace qkv {

// RMSNorm:   y = w * x / sqrt(mean(x^2) + eps)             x, w, y: (n,); y may alias x
void rmsnorm_ref(float* y, const float* x, const float* w, int n, float eps);
void rmsnorm_simd(float* y, const float* x, const float* w, int n, float eps);

// LayerNorm: y = w * (x - mean) / sqrt(var + eps) + b      x, w, b, y: (n,); b may be null
void layernorm_ref(float* y, const float* x, const float* w, const float* b, int n, float eps);
void layernorm_simd(float* y, const float* x, const float* w, const float* b, int n, float eps);

}  // namespace qkv
