// Internal to src/kernels/qdot/: ISA selection and helpers shared by every implementation.
#pragma once
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "../../common.h"
#include "../qdot.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

// Exactly one of avx2.cpp, simd128.cpp, relaxed.cpp, portable.cpp compiles its kernels.
#if defined(__AVX2__) && !defined(QKV_PORTABLE_QDOT)
#define QKV_QDOT_AVX2 1
#elif defined(__wasm_simd128__) && !defined(QKV_PORTABLE_QDOT)
#define QKV_QDOT_WASM 1
#if defined(QKV_RELAXED_SIMD)
#define QKV_QDOT_RELAXED 1
#endif
#else
#define QKV_QDOT_PORTABLE 1
#endif

#if defined(__clang__)
#define QKV_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define QKV_UNROLL _Pragma("GCC unroll 8")
#else
#define QKV_UNROLL
#endif

namespace qkv {
namespace qdot_detail {

inline uint16_t u16_at(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t u32_at(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// A block scale (f16) in the hot loop: F16C where the CPU has it, else the exponent rebiased in
// integers for normal values and the full conversion for the rare rest (zero, subnormal, Inf,
// NaN). The sign is moved with integer ops: a `sign ? -f : f` on a float lowers to a branch in
// WASM (V8 has no float cmov), and Q4_0's scales are negative half the time (llama.cpp's
// quantizer divides by the signed extreme), so that branch would mispredict on every other block.
inline float half(const uint8_t* p) {
  const uint16_t h = u16_at(p);
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  const uint32_t e = h & 0x7c00u;
  if (e == 0x7c00u || e == 0) return f16_to_f32(h);
  const uint32_t bits = ((uint32_t)(h & 0x8000u) << 16) | ((((uint32_t)h & 0x7fffu) << 13) + (112u << 23));
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
#endif
}

// a * b + c rounded the same way in every tile shape: with hardware FMA always fused (the
// compiler would otherwise contract some instantiations and not others), else never.
inline float fma_s(float a, float b, float c) {
#if defined(__FMA__)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

// How a decoder's integers multiply: signed weights, unsigned weights plus min(j) * d_x * sum(q),
// or signed weights whose two halves carry the integer scales sa(j), sb(j).
enum class Kind { Signed, UnsignedMin, Signed16 };

// What qdot_force_prefill_kernel set (-1: no kernel forced).
extern std::atomic<int> g_prefill_forced;

// The K types through the scalar reference, one output at a time (the builds without a
// super-block kernel: their models never call it).
void matmul_q8k_by_ref(QType t, float* Y, int64_t ldy, const BlockQ8K* X, const uint8_t* W, int T, int n, int r0,
                       int r1);

}  // namespace qdot_detail
}  // namespace qkv
