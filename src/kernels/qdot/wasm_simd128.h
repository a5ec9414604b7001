// WASM SIMD128 integer primitives, shared by the SIMD128 and relaxed-SIMD builds.
#pragma once
#include <wasm_simd128.h>

#include "common.h"

namespace qkv {
namespace qdot_detail {
namespace {

// Weights are widened to i16 as they are loaded: v128.load8x8_s/u is one sign/zero-extending
// load on x64 and arm64, where widening a loaded 16-byte vector costs three shuffles (the high
// half takes two). Lanes follow the activations: elements 0..7, 8..15, 16..23, 24..31. Nibbles
// and bit fields are then cut from zero-extended bytes with 16-bit shifts and masks, which WASM
// has natively (its 8-bit shifts are emulated).
struct W32 {
  v128_t a, b, c, d;
};
struct X32 {
  v128_t a, b, c, d;
};
using I32 = v128_t;
using F = v128_t;

// LLVM narrows a mask or shift of zero-extended bytes back to 8-bit ops and a shuffle (an
// emulated i8x16.shr_u and a v128.load64_zero instead of one extending load); an empty asm
// statement hides the loaded value from it.
inline v128_t opaque(v128_t v) {
  __asm__("" : "+r"(v));
  return v;
}
inline v128_t u8x8(const uint8_t* p) { return opaque(wasm_u16x8_load8x8(p)); }
inline v128_t s8x8(const uint8_t* p) { return opaque(wasm_i16x8_load8x8(p)); }
inline W32 load_w32(const uint8_t* p) { return {u8x8(p), u8x8(p + 8), u8x8(p + 16), u8x8(p + 24)}; }
inline W32 load_s32(const uint8_t* p) { return {s8x8(p), s8x8(p + 8), s8x8(p + 16), s8x8(p + 24)}; }
[[maybe_unused]] inline X32 load_x32(const int16_t* q) {
  return {wasm_v128_load(q), wasm_v128_load(q + 8), wasm_v128_load(q + 16), wasm_v128_load(q + 24)};
}
[[maybe_unused]] inline X32 load_x32(const int8_t* q) {  // 8-bit activations (relaxed builds), widened as they load
  const uint8_t* b = reinterpret_cast<const uint8_t*>(q);
  return {s8x8(b), s8x8(b + 8), s8x8(b + 16), s8x8(b + 24)};
}
template <class Op>
inline W32 each(W32 v, Op op) {
  return {op(v.a), op(v.b), op(v.c), op(v.d)};
}
[[maybe_unused]] inline W32 nibbles16(const uint8_t* p) {
  const v128_t lo = u8x8(p), hi = u8x8(p + 8), m = wasm_i16x8_splat(0x0f);
  return {wasm_v128_and(lo, m), wasm_v128_and(hi, m), wasm_u16x8_shr(lo, 4), wasm_u16x8_shr(hi, 4)};
}
inline W32 low4(W32 v) {
  return each(v, [](v128_t x) { return wasm_v128_and(x, wasm_i16x8_splat(0x0f)); });
}
inline W32 high4(W32 v) {
  return each(v, [](v128_t x) { return wasm_u16x8_shr(x, 4); });
}  // lanes < 256
inline W32 bits_at(W32 v, int s, int mask) {  // s < 0: left
  return each(v, [=](v128_t x) {
    return wasm_v128_and(s >= 0 ? wasm_u16x8_shr(x, s) : wasm_i16x8_shl(x, -s), wasm_i16x8_splat((int16_t)mask));
  });
}
inline W32 or8(W32 a, W32 b) {
  return {wasm_v128_or(a.a, b.a), wasm_v128_or(a.b, b.b), wasm_v128_or(a.c, b.c), wasm_v128_or(a.d, b.d)};
}
inline W32 sub8(W32 v, int c) {
  return each(v, [=](v128_t x) { return wasm_i16x8_sub(x, wasm_i16x8_splat((int16_t)c)); });
}
[[maybe_unused]] inline W32 bits_to_16s(uint32_t bits) {
  const v128_t bit = wasm_i16x8_make(1, 2, 4, 8, 16, 32, 64, 128), sixteen = wasm_i16x8_splat(16);
  auto group = [&](int g) {
    const v128_t v = wasm_v128_and(wasm_i16x8_splat((int16_t)((bits >> (8 * g)) & 0xff)), bit);
    return wasm_v128_and(wasm_i16x8_eq(v, bit), sixteen);
  };
  return {group(0), group(1), group(2), group(3)};
}
inline I32 dot4(v128_t w0, v128_t w1, v128_t w2, v128_t w3, const X32& x) {
  return wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_dot_i16x8(w0, x.a), wasm_i32x4_dot_i16x8(w1, x.b)),
                        wasm_i32x4_add(wasm_i32x4_dot_i16x8(w2, x.c), wasm_i32x4_dot_i16x8(w3, x.d)));
}
[[maybe_unused]] inline I32 dot_us(const W32& w, const X32& x) { return dot4(w.a, w.b, w.c, w.d, x); }
inline I32 dot_ss(const W32& w, const X32& x) { return dot4(w.a, w.b, w.c, w.d, x); }
// Each half's products summed, then scaled in i32 (two multiplies instead of four on the
// weights).
[[maybe_unused]] inline I32 dot_ss16(const W32& w, const X32& x, int sa, int sb) {
  const v128_t lo = wasm_i32x4_add(wasm_i32x4_dot_i16x8(w.a, x.a), wasm_i32x4_dot_i16x8(w.b, x.b));
  const v128_t hi = wasm_i32x4_add(wasm_i32x4_dot_i16x8(w.c, x.c), wasm_i32x4_dot_i16x8(w.d, x.d));
  return wasm_i32x4_add(wasm_i32x4_mul(lo, wasm_i32x4_splat(sa)), wasm_i32x4_mul(hi, wasm_i32x4_splat(sb)));
}
inline F fzero() { return wasm_f32x4_splat(0.0f); }
// acc + i * s as a multiply and an add, also in the relaxed builds: with relaxed_madd here (and
// for the min term) Q4_0 and Q4_K prefill measured 10-20% slower in Chromium 156.
inline F fmadd_v(I32 i, v128_t s, F acc) { return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(i), s)); }
inline float fsum(F a) {
  return (wasm_f32x4_extract_lane(a, 0) + wasm_f32x4_extract_lane(a, 1)) +
         (wasm_f32x4_extract_lane(a, 2) + wasm_f32x4_extract_lane(a, 3));
}
// u32 lanes holding f16 bits -> f32, exactly for every class: the exponent and mantissa moved
// into f32 position and multiplied by 2^112 (rebias; subnormals come out normalised), Inf and
// NaN given the all-ones exponent, then the sign.
inline v128_t f16_lanes(v128_t h) {
  const v128_t mag = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x7fff)), 13);
  const v128_t finite = wasm_f32x4_mul(mag, wasm_f32x4_splat(0x1p112f));
  const v128_t special = wasm_i32x4_eq(wasm_v128_and(h, wasm_i32x4_splat(0x7c00)), wasm_i32x4_splat(0x7c00));
  const v128_t v = wasm_v128_bitselect(wasm_v128_or(mag, wasm_i32x4_splat(0x7f800000)), finite, special);
  return wasm_v128_or(v, wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16));
}
// The f16 values at p + i * stride, i = 0..3, as f32 lanes.
// kFinite: the caller knows none is Inf or NaN (qdot_scales_finite, checked when the model
// loads). Each f16 then goes into the high half of its lane, where its sign already is the f32
// sign; an arithmetic shift by 3 puts exponent and mantissa in f32 position, a mask clears the
// three copies of the sign that shift made, and the multiply by 2^112 rebiases (subnormals come
// out normalised): 3 instructions and 2 constants against f16_lanes' 10 and 5, which V8
// rematerialises in every pass of the loop. Q8_0 and Q4_0 decode measured 15-20% faster in
// Chromium 156.
template <bool kFinite>
inline v128_t half4(const uint8_t* p, size_t stride) {
  constexpr int L = kFinite ? 1 : 0;  // each f16 into the high or low half of a 32-bit lane
  v128_t h = wasm_i32x4_splat(0);     // (pinsrw on x64)
  h = wasm_v128_load16_lane(p, h, L);
  h = wasm_v128_load16_lane(p + stride, h, L + 2);
  h = wasm_v128_load16_lane(p + 2 * stride, h, L + 4);
  h = wasm_v128_load16_lane(p + 3 * stride, h, L + 6);
  if constexpr (!kFinite) return f16_lanes(h);
  const v128_t v = wasm_v128_and(wasm_i32x4_shr(h, 3), wasm_i32x4_splat((int32_t)0x8fffffff));
  return wasm_f32x4_mul(v, wasm_f32x4_splat(0x1p112f));
}
// [sum of a's lanes, sum of b's, sum of c's, sum of d's]
inline v128_t hsum4(v128_t a, v128_t b, v128_t c, v128_t d) {
  const v128_t ab = wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
  const v128_t cd = wasm_i32x4_add(wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), wasm_i32x4_shuffle(c, d, 2, 6, 3, 7));
  return wasm_i32x4_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7));
}

}  // namespace
}  // namespace qdot_detail
}  // namespace qkv
