// Integer dot products of stored quantized weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K,
// Q6_K) with activations quantized once per matmul to 8 bits in blocks of 32.
//
// Decoding every weight block to float and multiplying in f32 makes quantized decode slower
// than reading f32 weights. Instead the activations x are quantized once per matrix product
// (x[k] ~= d * q[k], q in -127..127), and each 32-element piece of a weight row is multiplied
// with them in 8/16-bit integers, then scaled once in float:
//   sum_k w[k] x[k] ~= sum_blocks d_w * d_x * sum_k wq[k] q[k]  (+ m_w * s_x, s_x = d_x * sum_k q[k],
//   for the types whose values have a min/offset: Q4_1, Q5_1, Q4_K, Q5_K).
// The error against f32 is at most sum_blocks d_x / 2 * sum_k |w[k]| (the activation rounding).
// The implementations: src/kernels/qdot/ (reference.cpp, then one file per instruction set).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "quant.h"

namespace qkv {

// WASM SIMD128 has no 8-bit multiply-add, so there the activations are stored already widened
// to 16 bits (their values are the same, -127..127). The relaxed-SIMD builds have one
// (i16x8.relaxed_dot_i8x16_i7x16_s) and keep 8 bits.
#if defined(__wasm_simd128__) && !defined(QKV_PORTABLE_QDOT) && !defined(QKV_RELAXED_SIMD)
using q8a_t = int16_t;
#else
using q8a_t = int8_t;
#endif

// 32 activations: x[k] ~= d * q[k]; s = d * sum_k q[k] (what a weight min multiplies);
// h = the integer sums of q[0..16) and q[16..32) (Q6_K's offset of 32 in the relaxed-SIMD
// kernel, where the weights are multiplied unsigned).
struct BlockQ8A {
  float d;
  float s;
  q8a_t q[32];
  int16_t h[2];
};

// Weight types that have an integer dot product against BlockQ8A.
bool qtype_int_dot(QType t);

// x (n,) -> n/32 blocks (n a multiple of 32): d = max|x| / 127, q = round-half-even(x / d).
// A block holding Inf or NaN gets d = s = NaN (and q = 0), so products with it are NaN as in f32.
void quantize_act_q8_ref(const float* x, BlockQ8A* dst, int n);
void quantize_act_q8_simd(const float* x, BlockQ8A* dst, int n);

// sum_k w[k] x[k] for one stored row of n elements against n/32 activation blocks: exact
// integer sums per 32, scaled and accumulated in double. (scalar reference) With `mag`, also
// the sum of the magnitudes of every integer product times its scales (for error bounds).
float dot_q8_ref(QType t, const void* row, const BlockQ8A* x, int n, double* mag = nullptr);

// Y = X W^T over weight rows [r0, r1) of a stored (d, n) matrix W; X holds T rows of n/32
// blocks back to back (token t at X + t * n/32); Y is (T, ldy). Registers hold 2 weight rows
// x 4 tokens, so each weight block is decoded once per 4 tokens.
void matmul_q8_ref(QType t, float* Y, int64_t ldy, const BlockQ8A* X, const void* W, int T, int n, int r0, int r1);
// finite_scales: every f16 scale and min of W is finite (qdot_scales_finite said so); the WASM
// kernels then convert them with fewer instructions. With it set on a matrix that holds Inf or
// NaN scales, the results are wrong but finite; nothing else changes.
// packed: X already laid out for this build's prefill kernel (qdot_pack_prefill over the same X,
// T and n); without it, or when it lacks the layout t needs, each call packs its own copy.
struct QdotPacked;
void matmul_q8_simd(QType t, float* Y, int64_t ldy, const BlockQ8A* X, const void* W, int T, int n, int r0, int r1,
                    bool finite_scales = false, const QdotPacked* packed = nullptr);

// BlockQ8A activations laid out once per product for the prefill kernels (the WASM packed GEMM's
// interleaved groups of four blocks, AVX-512 VNNI's 16-token groups), so that threads taking
// chunks of weight rows share one read-only copy instead of each packing its own. The layout is
// private to the kernels; the buffer is kept between calls (as the quantized activations are).
struct QdotPacked {
  std::vector<float> data;
  int T = 0, n = 0;
  // Offsets in data of the layouts packed (-1: absent): the WASM 16-bit and 8-bit packs (the
  // relaxed builds' nibble types take the 8-bit one), or VNNI's (in wide).
  int64_t wide = -1, narrow = -1;
};
// Packs X (T tokens of n/32 blocks) for products against the types[0..n_types) of this build's
// prefill kernels; leaves p empty (T = 0) where none of them reads a packed copy (decode, too few
// tokens, builds without a packed kernel). Throws std::bad_alloc as vector does.
void qdot_pack_prefill(QdotPacked& p, const BlockQ8A* X, int T, int n, const QType* types, int n_types);

// ---- super-block activations for the K types --------------------------------------------
// 256 activations with one scale (x[k] ~= d * q[k], as llama.cpp's Q8_K), and the integer sums
// of q over each 16 and each 32. Builds where qdot_k_super_blocks() is true (the relaxed-SIMD
// WASM builds) multiply Q4_K, Q5_K and Q6_K against these instead of BlockQ8A: with one
// activation scale per super-block, the 6- or 8-bit sub-block scales multiply integer sums and
// the float work (and the min / offset term, from sum16 / sum32) is once per 256 weights rather
// than once per 32. The activation rounding error grows to d_256 / 2 per element (d_256 the
// largest of the eight blocks' d): what llama.cpp's K-type kernels do too.
struct BlockQ8K {
  int8_t q[256];
  int16_t sum16[16];
  int16_t sum32[8];
  float d;
};

// Q4_K, Q5_K, Q6_K: the types with 256-element super-blocks.
bool qtype_k_super(QType t);
// Whether this build's products multiply the K types against BlockQ8K (see above).
bool qdot_k_super_blocks();

// x (n,) -> n/256 blocks (n a multiple of 256): d = max|x| / 127, q = round-half-even(x / d);
// a block holding Inf or NaN gets d = NaN (and q = 0). The two give the same bits.
void quantize_act_q8k_ref(const float* x, BlockQ8K* dst, int n);
void quantize_act_q8k_simd(const float* x, BlockQ8K* dst, int n);

// sum_k w[k] x[k] for one stored row of a K type against n/256 super-block activations, exact
// integer sums per sub-block, scaled and accumulated in double (scalar reference); `mag` as
// dot_q8_ref's.
float dot_q8k_ref(QType t, const void* row, const BlockQ8K* x, int n, double* mag = nullptr);
// Y = X W^T over weight rows [r0, r1) of a stored (d, n) K-type matrix W; X holds T rows of
// n/256 blocks back to back. In the relaxed-SIMD builds a register-blocked kernel (decode and
// prefill give the same bits); elsewhere dot_q8k_ref per output (those builds' models never
// call it: they multiply the K types against BlockQ8A).
void matmul_q8k_simd(QType t, float* Y, int64_t ldy, const BlockQ8K* X, const void* W, int T, int n, int r0, int r1);

// Whether every f16 scale (and min) of a stored (rows, n) matrix of a one-block type (Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1) is finite; false for the other types. One pass over the blocks.
bool qdot_scales_finite(QType t, const void* W, int64_t rows, int n);
// Whether this build's matmul_q8_simd uses finite_scales (the WASM kernels): loaders check
// the scales only then.
bool qdot_uses_finite_scales();

// The WASM builds' prefill kernel for products of >= 8 tokens (BlockQ8A activations): 0 the
// grouped register tile, 1 the packed GEMM (src/kernels/qdot/wasm_gemm.h), -1 (the default)
// each type's run-time trial between them. The relaxed builds' K types against BlockQ8K: 0 the
// tile over the stored rows, 1 rows decoded once per block of tokens, -1 a trial between them. The results are the same
// bits either way; for tests and benchmarks. No effect in the native builds.
void qdot_force_prefill_kernel(int which);

// Name of the integer-dot implementation compiled in ("avx2", "wasm-simd128", "wasm-relaxed", "portable").
const char* qdot_impl_name();

}  // namespace qkv
