// Gradients of Y = X W^T (the forward product of matmul.h) for training.
#pragma once
#include <cstdint>

namespace qkv {

// dX = dY W           dY: (T, d) row stride ldy, W: (d, n), dX: (T, n) row stride ldx
// accumulate: dX += dY W instead of overwriting. The _simd form computes token rows [t0, t1)
// (callers split tokens across threads); every element is summed over r = 0..d-1 in order,
// so the result does not depend on how rows are split.
void matmul_dx_ref(float* dX, int64_t ldx, const float* dY, int64_t ldy, const float* W, int T, int d, int n,
                   bool accumulate);
void matmul_dx_simd(float* dX, int64_t ldx, const float* dY, int64_t ldy, const float* W, int d, int n, int t0,
                    int t1, bool accumulate);

// dW += dY^T X       dY: (T, d) row stride ldy, X: (T, n) row stride ldx, dW: (d, n)
// The _simd form updates weight rows [r0, r1) (callers split rows across threads); each element
// sums t = 0..T-1 in order (in tiles, each tile added once), independent of the split.
void matmul_dw_ref(float* dW, const float* dY, int64_t ldy, const float* X, int64_t ldx, int T, int d, int n);
void matmul_dw_simd(float* dW, const float* dY, int64_t ldy, const float* X, int64_t ldx, int T, int n, int r0,
                    int r1);

}  // namespace qkv
