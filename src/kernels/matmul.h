// f32 matrix-vector and matrix-matrix products against row-major weight matrices.
#pragma once
#include <cstdint>

namespace qkv {

// y = W x            W: (d, n) row-major, x: (n,), y: (d,)
// The _simd form computes rows [r0, r1) only, so callers can split rows across threads.
void matvec_f32_ref(float* y, const float* W, const float* x, int d, int n);
void matvec_f32_simd(float* y, const float* W, const float* x, int n, int r0, int r1);

// Y = X W^T          X: (T, n) row stride ldx, W: (d, n), Y: (T, d) row stride ldy
// The _simd form computes output columns (weight rows) [r0, r1) for every token, register
// blocked: each loaded weight vector is reused across several tokens and vice versa.
void matmul_f32_ref(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int T,
                    int d, int n);
void matmul_f32_simd(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int T,
                     int n, int r0, int r1);

// Y += X W^T         as matmul_f32 but adding to Y. The packed kernel starts each output from
// Y's value and adds the products in k order (matmul_f32_acc_ref's order).
void matmul_f32_acc_ref(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int T,
                        int d, int n);
void matmul_f32_acc_simd(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int T,
                         int n, int r0, int r1);
// y += b             y: (n,), b: (n,)
void add_f32_ref(float* y, const float* b, int n);
void add_f32_simd(float* y, const float* b, int n);

}  // namespace qkv
