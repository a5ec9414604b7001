// Numerically stable softmax over one vector.
#pragma once

namespace qkv {

// x <- exp(x - max(x)) / sum(exp(x - max(x)))     x: (n,), n >= 1. -inf entries become 0.
void softmax_ref(float* x, int n);
void softmax_simd(float* x, int n);

}  // namespace qkv
