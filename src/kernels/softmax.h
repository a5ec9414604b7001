// Numerically stable softmax over one vector.
#pragma once

namespace qkv {

// x <- exp(x - max(x)) / sum(exp(x - max(x)))     x: (n,), n >= 1. -inf entries become 0.
void softmax_ref(float* x, int n);
void softmax_simd(float* x, int n);

// x <- exp(x - shift), returns the sum of the new x (the core of softmax and of the online
// softmax in attention). -inf entries become 0.
float exp_shift_sum_simd(float* x, int n, float shift);

}  // namespace qkv
