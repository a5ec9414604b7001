// Gradients of Y = X W^T (the forward product of matmul.h) for training.
#pragma once
#include <cstdint>

namespace qkv {

// dX = dY W           dY: (T, d) row stride ldy, W: (d, n), dX: (T, n) row stride ldx
// accumulate: dX += dY W instead of overwriting.
void matmul_dx_ref(float* dX, int64_t ldx, const float* dY, int64_t ldy, const float* W, int T, int d, int n,
                   bool accumulate);

// dW += dY^T X       dY: (T, d) row stride ldy, X: (T, n) row stride ldx, dW: (d, n)
// Scalar references: the fast path is linear_backward (train/model.h) on the packed f32 kernel.
void matmul_dw_ref(float* dW, const float* dY, int64_t ldy, const float* X, int64_t ldx, int T, int d, int n);

}  // namespace qkv
