// The register tile of the native builds (AVX2, portable): NR rows x NT tokens.
#pragma once
// Over the integer primitives of the including file (avx2.cpp, portable.cpp).
#include "blocks.h"

namespace qkv {
namespace qdot_detail {
namespace {

// Q4_K / Q5_K with the scales and mins unpacked once per super-block into floats.
template <bool K5>
struct QK45Scalar : QK45Bits<K5> {
  float ds[8], ms[8];
  void prepare(const uint8_t* b) {
    this->p = b;
    const float d = half(b), dmin = half(b + 2);
    // The 12 bytes as three words: low 6 bits of bytes 0-3 / 4-7 are scales / mins 0-3; bytes
    // 8-11 hold the low 4 bits of scales / mins 4-7, whose top 2 bits are bytes 0-3 / 4-7's.
    uint32_t a[3], v[4];
    std::memcpy(a, b + 4, 12);
    v[0] = a[0] & 0x3f3f3f3fu;
    v[1] = (a[2] & 0x0f0f0f0fu) | (((a[0] >> 6) & 0x03030303u) << 4);
    v[2] = a[1] & 0x3f3f3f3fu;
    v[3] = ((a[2] >> 4) & 0x0f0f0f0fu) | (((a[1] >> 6) & 0x03030303u) << 4);
    uint8_t sm[16];
    std::memcpy(sm, v, 16);
    scale_u8x8(sm, d, ds);
    scale_u8x8(sm + 8, -dmin, ms);
  }
  float d(int j) const { return ds[j]; }
  float min(int j) const { return ms[j]; }
};

// out[r * NT + t] = row r . token t, for NR weight rows and NT tokens of nb activation blocks.
template <class D, int NR, int NT>
inline void dot_tile(const uint8_t* const* rows, const BlockQ8A* const* xs, int nb, float* out) {
  F acc[NR][NT];
  float macc[NR][NT];
  for (int r = 0; r < NR; r++)
    for (int t = 0; t < NT; t++) {
      acc[r][t] = fzero();
      macc[r][t] = 0.0f;
    }
  D dec[NR];
  for (int s = 0; s < nb / D::kSub; s++) {
    for (int r = 0; r < NR; r++) dec[r].prepare(rows[r] + (size_t)s * D::kBytes);
    QKV_UNROLL
    for (int j = 0; j < D::kSub; j++) {
      const int b = s * D::kSub + j;
      X32 xq[NT];
      float xd[NT];
      for (int t = 0; t < NT; t++) {
        xq[t] = load_x32(xs[t][b].q);
        xd[t] = xs[t][b].d;
      }
      for (int r = 0; r < NR; r++) {
        const W32 w = dec[r].w(j);
        const float dw = dec[r].d(j);
        for (int t = 0; t < NT; t++) {
          I32 i;
          if constexpr (D::kKind == Kind::Signed) i = dot_ss(w, xq[t]);
          else if constexpr (D::kKind == Kind::Signed16) i = dot_ss16(w, xq[t], dec[r].sa(j), dec[r].sb(j));
          else i = dot_us(w, xq[t]);
          acc[r][t] = fmadd(i, dw * xd[t], acc[r][t]);
          if constexpr (D::kKind == Kind::UnsignedMin) macc[r][t] = fma_s(dec[r].min(j), xs[t][b].s, macc[r][t]);
        }
      }
    }
  }
  for (int r = 0; r < NR; r++)
    for (int t = 0; t < NT; t++) out[r * NT + t] = fsum(acc[r][t]) + macc[r][t];
}

// The tile the drivers in tiles.h run.
template <class D, int NR, int NT, class XB = BlockQ8A>
inline void tile(const uint8_t* const* rows, const XB* const* xs, int nb, float* out) {
  dot_tile<D, NR, NT>(rows, xs, nb, out);
}

}  // namespace
}  // namespace qdot_detail
}  // namespace qkv
