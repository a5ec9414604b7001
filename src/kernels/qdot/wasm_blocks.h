// The block decoders extended for the WASM tile: scales per group of four, sub-block pairs.
#pragma once
#include "wasm_simd128.h"
// (after the primitives it decodes with)
#include "blocks.h"

namespace qkv {
namespace qdot_detail {
namespace {

// kFinite (here and in Q4_5Simd128): every scale of the matrix is known finite (half4).
template <bool kFinite = false>
struct Q8_0Simd128 : Q8_0Block {
  static void group_scales(const uint8_t* blk, v128_t* d, v128_t*) { *d = half4<kFinite>(blk, kBytes); }
};

template <bool M, bool K5, bool kFinite = false>
struct Q4_5Simd128 : Q4_5Block<M, K5> {
  static constexpr int kBytes = Q4_5Block<M, K5>::kBytes;
  static void group_scales(const uint8_t* blk, v128_t* d, v128_t* m) {
    *d = half4<kFinite>(blk, kBytes);
    *m = M ? half4<kFinite>(blk + 2, kBytes) : wasm_f32x4_mul(*d, wasm_f32x4_splat(K5 ? -16.0f : -8.0f));
  }
};

// Q4_K / Q5_K: the scales unpacked in SIMD and kept as vectors (scalar code here, and a store
// of words reloaded as bytes, cost as much per super-block as two sub-blocks' products).
template <bool K5>
struct QK45Simd128 : QK45Bits<K5> {
  v128_t dv[2], mv[2];  // d * scale and -dmin * min of sub-blocks 0-3, 4-7
  // The 6-bit scales of sub-blocks 0-7 in bytes 0-7, their mins in bytes 8-15.
  static v128_t scales_mins(const uint8_t* b) {
    const v128_t a = wasm_v128_load(b + 4);  // words a0 a1 a2 as in the scalar code (then 4 bytes of quants)
    const v128_t lo = wasm_i32x4_shuffle(a, wasm_u32x4_shr(a, 4), 0, 2, 1, 6);  // a0, a2, a1, a2 >> 4
    const v128_t hi = wasm_i32x4_shuffle(a, wasm_i32x4_splat(0), 4, 0, 4, 1);   // 0, a0, 0, a1
    return wasm_v128_or(wasm_v128_and(lo, wasm_i32x4_make(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f)),
                        wasm_i32x4_shl(wasm_v128_and(wasm_u32x4_shr(hi, 6), wasm_i32x4_splat(0x03030303)), 4));
  }
  void prepare(const uint8_t* b) {
    this->p = b;
    const v128_t dd = f16_lanes(wasm_u32x4_extend_low_u16x8(wasm_v128_load32_zero(b)));  // d, dmin
    const v128_t d = wasm_i32x4_shuffle(dd, dd, 0, 0, 0, 0),
                 mneg = wasm_f32x4_neg(wasm_i32x4_shuffle(dd, dd, 1, 1, 1, 1));
    const v128_t v = scales_mins(b);
    // (opaque: knowing the lanes are zero-extended, LLVM converts them one by one in scalar code)
    const v128_t sc = wasm_u16x8_extend_low_u8x16(v), mn = wasm_u16x8_extend_high_u8x16(v);
    auto f = [](v128_t u32) { return wasm_f32x4_convert_i32x4(opaque(u32)); };
    dv[0] = wasm_f32x4_mul(f(wasm_u32x4_extend_low_u16x8(sc)), d);
    dv[1] = wasm_f32x4_mul(f(wasm_u32x4_extend_high_u16x8(sc)), d);
    mv[0] = wasm_f32x4_mul(f(wasm_u32x4_extend_low_u16x8(mn)), mneg);
    mv[1] = wasm_f32x4_mul(f(wasm_u32x4_extend_high_u16x8(mn)), mneg);
  }
  void group_scales(int j0, v128_t* d, v128_t* m) const {
    *d = dv[j0 / 4];
    *m = mv[j0 / 4];
  }
  // Sub-blocks j and j + 1 (j even): the low and high nibbles of one load.
  void wpair(int j, W32* a, W32* b) const {
    const W32 q = load_w32(this->p + (K5 ? 48 : 16) + 32 * (j / 2));
    *a = low4(q);
    *b = high4(q);
    if (K5) {
      const W32 qh = load_w32(this->p + 16);
      *a = or8(*a, bits_at(qh, j - 4, 0x10));
      *b = or8(*b, bits_at(qh, j - 3, 0x10));
    }
  }
};

struct Q6KSimd128 : Q6KBlock {
  void group_scales(int, v128_t* d, v128_t*) const { *d = wasm_f32x4_splat(s); }
  // Sub-blocks j and j + 1 (j even) from one load of their shared high bits.
  void wpair(int j, W32* a, W32* b) const {
    const int h = j / 4, c = j % 4;
    const W32 qh = load_w32(p + 128 + 32 * h);
    const W32 q0 = load_w32(p + 64 * h), q1 = load_w32(p + 64 * h + 32);
    *a = sub8(or8(c < 2 ? low4(q0) : high4(q0), bits_at(qh, 2 * c - 4, 0x30)), 32);
    *b = sub8(or8(c < 2 ? low4(q1) : high4(q1), bits_at(qh, 2 * c - 2, 0x30)), 32);
  }
};

}  // namespace
}  // namespace qdot_detail
}  // namespace qkv
