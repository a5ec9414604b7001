// f32 matrix-vector and matrix-matrix products against row-major weight matrices.
#pragma once
#include <cstddef>
#include <cstdint>

namespace qkv {

// y = W x            W: (d, n) row-major, x: (n,), y: (d,)
// The _simd form computes rows [r0, r1) only, so callers can split rows across threads.
void matvec_f32_ref(float* y, const float* W, const float* x, int d, int n);
void matvec_f32_simd(float* y, const float* W, const float* x, int n, int r0, int r1);

// Y = X W^T          X: (T, n) row stride ldx, W: (d, n), Y: (T, d) row stride ldy
// The _simd form computes output columns (weight rows) [r0, r1) for every token, register
// blocked: each loaded weight vector is reused across several tokens and vice versa.
void matmul_f32_ref(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int T, int d, int n);
void matmul_f32_simd(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int T, int n, int r0, int r1);

// Y += X W^T         as matmul_f32 but adding to Y. The packed kernel starts each output from
// Y's value and adds the products in k order (matmul_f32_acc_ref's order).
void matmul_f32_acc_ref(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int T, int d, int n);
void matmul_f32_acc_simd(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int T, int n, int r0,
                         int r1);
// The prefill kernel in two steps, for callers that multiply one X by several weight blocks
// (matmul_q_simd's decoded panels): xpack_f32 lays X (T, n; row stride ldx) out in tiles of
// tokens as the kernel reads them, into xpack_f32_floats(T, n) floats; matmul_f32_xpacked then
// computes Y's columns [r0, r1) for every token from W's rows [r0, r1) (row stride ldw >= n),
// adding to Y when `accumulate`, summing as matmul_f32_simd does.
// matmul_f32_simd itself packs X for T >= kXPackMinTokens (fewer go through dot products).
extern const int kXPackMinTokens;
size_t xpack_f32_floats(int T, int n);
void xpack_f32(float* Xp, const float* X, int64_t ldx, int T, int n);
// xpack_f32 into a buffer of the calling thread's, valid until that thread's next call.
const float* xpack_f32_thread(const float* X, int64_t ldx, int T, int n);
// The same layout from X^T: XT is (n, T) with row stride ldxt, X[t][k] = XT[k * ldxt + t].
void xpack_f32_t(float* Xp, const float* XT, int64_t ldxt, int T, int n);
void matmul_f32_xpacked(float* Y, int64_t ldy, const float* Xp, const float* W, int64_t ldw, int T, int n, int r0,
                        int r1, bool accumulate);
// The packed-token kernel's tile height: 4 or 6 weight rows, or 0 while the relaxed-SIMD WASM
// builds are still timing both on their first products (src/kernels/trial.h). Either gives the
// same sums. matmul_f32_force_tile_rows(4 or 6) keeps that height (tests and benchmarks);
// 0 goes back to the build's way (the fixed height, or a new trial).
int matmul_f32_tile_rows();
void matmul_f32_force_tile_rows(int rows);
// y += b             y: (n,), b: (n,)
void add_f32_ref(float* y, const float* b, int n);
void add_f32_simd(float* y, const float* b, int n);

}  // namespace qkv
