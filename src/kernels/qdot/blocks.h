// The per-type block decoders (bit unpacking of every weight type) that all ISAs share.
#pragma once
// Written against the integer primitives (W32, load_w32, nibbles16, ...) of the including ISA
// file; the WASM files extend the decoders (wasm_blocks.h, relaxed.cpp).
#include "common.h"

namespace qkv {
namespace qdot_detail {
namespace {

// A decoder reads one weight block (kSub activation blocks of 32, kBytes bytes): prepare(p)
// once per block, then w(j) gives the 32 integers of sub-block j and d(j) their scale; kKind
// says how they multiply.

// Q8_0: f16 d, then 32 signed bytes (load_s32: the one type whose stored weights are signed).
struct Q8_0Block {
  static constexpr int kSub = 1, kBytes = 34;
  static constexpr Kind kKind = Kind::Signed;
  const uint8_t* p;
  float s;
  void prepare(const uint8_t* b) {
    p = b;
    s = half(b);
  }
  W32 w(int) const { return load_s32(p + 2); }
  float d(int) const { return s; }
};

// Q4_0, Q4_1, Q5_0, Q5_1: f16 d, [f16 m], [u32 fifth bits], 16 bytes of nibbles. The unsigned
// codes are multiplied (cheaper than moving signs onto the activations for every token); the
// stored m, or the offset -8 d / -16 d of the _0 types, is the min.
template <bool M, bool K5>
struct Q4_5Block {
  static constexpr int kSub = 1, kBytes = 18 + (M ? 2 : 0) + (K5 ? 4 : 0);
  static constexpr Kind kKind = Kind::UnsignedMin;
  const uint8_t* p;
  float s, m;
  void prepare(const uint8_t* b) {
    p = b;
    s = half(b);
    m = M ? half(b + 2) : (K5 ? -16.0f : -8.0f) * s;
  }
  W32 w(int) const {
    const W32 codes = nibbles16(p + kBytes - 16);
    return K5 ? or8(codes, bits_to_16s(u32_at(p + (M ? 4 : 2)))) : codes;
  }
  float d(int) const { return s; }
  float min(int) const { return m; }
};

// Q4_K / Q5_K: 8 sub-blocks with 6-bit scales and mins; the codes of sub-block j (the ISA files
// unpack the scales: QK45Scalar in tile_generic.h, QK45Simd128 in wasm_blocks.h).
template <bool K5>
struct QK45Bits {
  static constexpr int kSub = 8, kBytes = K5 ? 176 : 144;
  static constexpr Kind kKind = Kind::UnsignedMin;
  const uint8_t* p;
  W32 w(int j) const {
    const W32 q = load_w32(p + (K5 ? 48 : 16) + 32 * (j / 2));
    const W32 lo = j % 2 ? high4(q) : low4(q);
    if (!K5) return lo;
    return or8(lo, bits_at(load_w32(p + 16), j - 4, 0x10));  // bit j to bit 4
  }
};

// Q6_K: 8 sub-blocks of 32 in two halves of 128; an int8 scale per 16 elements.
struct Q6KBlock {
  static constexpr int kSub = 8, kBytes = 210;
  static constexpr Kind kKind = Kind::Signed16;
  const uint8_t* p;
  float s;
  void prepare(const uint8_t* b) {
    p = b;
    s = half(b + 208);
  }
  W32 w(int j) const {
    const int h = j / 4, c = j % 4;
    const W32 ql = load_w32(p + 64 * h + 32 * (c % 2));
    const W32 lo = c < 2 ? low4(ql) : high4(ql);
    return sub8(or8(lo, bits_at(load_w32(p + 128 + 32 * h), 2 * c - 4, 0x30)), 32);  // bits 2c, 2c + 1 to 4, 5
  }
  float d(int) const { return s; }
  int sa(int j) const { return (int8_t)p[192 + 8 * (j / 4) + 2 * (j % 4)]; }
  int sb(int j) const { return (int8_t)p[192 + 8 * (j / 4) + 2 * (j % 4) + 1]; }
};

}  // namespace
}  // namespace qdot_detail
}  // namespace qkv
