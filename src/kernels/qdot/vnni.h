// The native prefill products of every block type on AVX-512 VNNI (native.h includes it where
// the CPU has it): tokens in the lanes, rounded exactly as decode rounds.
#pragma once
// Over avx2.cpp's primitives and blocks.h / tile_generic.h's decoders.
#include <immintrin.h>

#include <memory>
#include <vector>

namespace qkv {
namespace qdot_detail {
namespace {

// A token's prefill output equals what decode (tile_generic.h's dot_tile, unchanged) gives it,
// bit for bit: there lane k of row r's accumulator adds, block after block, fma(I, d_w * d_x)
// with I the exact integer sum of the block's products 4k..4k+3, the min term goes into a
// scalar in block order, and the end is fsum(acc) + macc. Here the prefill keeps those 8 lanes
// as 8 vectors whose lanes are tokens.

// The activations are packed once per product (qdot_pack_prefill, shared by the threads), 16
// tokens to a group: per block, 8 vectors whose lane t holds token t's bytes 4k..4k+3 plus 128
// (unsigned: vpdpbusd multiplies unsigned by signed bytes), then the 16 scales d and sums s. A
// tile of NR weight rows unpacks its codes (signed bytes) and their sums per 4 once, then runs
// every token group: per block, row and k, one vpdpbusd (the row's codes 4k..4k+3 broadcast
// against the group's vector k) from -128 * (their sum), which takes the +128 back out exactly.
constexpr int kGroup = 16;
// In QdotPacked::data (floats): q [group][block][8][16] (32-bit words), then d and s [group][block][16].
struct PackedX {
  const uint32_t* q;
  const float *d, *s;
};
inline int groups_of(int T) { return (T + kGroup - 1) / kGroup; }
inline size_t packed_x_floats(int T, int nb) { return (size_t)groups_of(T) * nb * kGroup * 10; }
inline PackedX packed_x_at(const float* base, int T, int nb) {
  const size_t qn = (size_t)groups_of(T) * nb * 8 * kGroup, dn = (size_t)groups_of(T) * nb * kGroup;
  return {reinterpret_cast<const uint32_t*>(base), base + qn, base + qn + dn};
}

inline void pack_x(float* base, const BlockQ8A* X, size_t per_token, int nb, int T) {
  const int groups = groups_of(T);
  const size_t qn = (size_t)groups * nb * 8 * kGroup, dn = (size_t)groups * nb * kGroup;
  for (int g = 0; g < groups; g++)
    for (int b = 0; b < nb; b++) {
      alignas(64) uint32_t lanes[8][kGroup];
      float* d = base + qn + ((size_t)g * nb + b) * kGroup;
      float* s = d + dn;
      for (int t = 0; t < kGroup; t++) {
        const int tok = g * kGroup + t;
        if (tok < T) {
          const BlockQ8A& xb = X[(size_t)tok * per_token + b];
          for (int k = 0; k < 8; k++)
            lanes[k][t] = u32_at(reinterpret_cast<const uint8_t*>(xb.q) + 4 * k) ^ 0x80808080u;
          d[t] = xb.d;
          s[t] = xb.s;
        } else {  // padding: codes 0, scale 0 (its outputs are not written)
          for (int k = 0; k < 8; k++) lanes[k][t] = 0x80808080u;
          d[t] = s[t] = 0.0f;
        }
      }
      std::memcpy(base + ((size_t)g * nb + b) * 8 * kGroup, lanes, sizeof lanes);
    }
}

// One row's blocks unpacked: 32 signed codes, -128 times the sum of each 4, scale and min (or
// Q6_K's integer scales of the two halves).
struct RowCodes {
  std::vector<int8_t> q;
  std::vector<int32_t> corr, half;
  std::vector<float> d, m;
};

template <class D>
inline void unpack_row(RowCodes& rc, const uint8_t* row, int nb) {
  rc.q.resize((size_t)nb * 32);
  rc.corr.resize((size_t)nb * 8);
  rc.half.resize((size_t)nb * 2);
  rc.d.resize(nb);
  rc.m.resize(nb);
  D dec;
  for (int s = 0; s < nb / D::kSub; s++) {
    dec.prepare(row + (size_t)s * D::kBytes);
    for (int j = 0; j < D::kSub; j++) {
      const int b = s * D::kSub + j;
      const W32 w = dec.w(j);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(&rc.q[(size_t)b * 32]), w);
      const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)0x80), w);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(&rc.corr[(size_t)b * 8]),
                          _mm256_sub_epi32(_mm256_setzero_si256(), sums));
      rc.d[b] = dec.d(j);
      if constexpr (D::kKind == Kind::UnsignedMin) rc.m[b] = dec.min(j);
      if constexpr (D::kKind == Kind::Signed16) rc.half[2 * b] = dec.sa(j), rc.half[2 * b + 1] = dec.sb(j);
    }
  }
}

// The 8 lane accumulators added in fsum's order: ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7)).
inline __m512 tree8(const __m512* a) {
  return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[4]), _mm512_add_ps(a[2], a[6])),
                       _mm512_add_ps(_mm512_add_ps(a[1], a[5]), _mm512_add_ps(a[3], a[7])));
}

template <class D, int NR>
inline void vnni_prefill_rows(float* Y, int64_t ldy, const PackedX& px, const RowCodes* rc, int nb, int T, int r) {
  const int groups = groups_of(T);
  for (int g = 0; g < groups; g++) {
    __m512 acc[NR][8], macc[NR];  // [row][k], tokens in the lanes
    for (int i = 0; i < NR; i++) {
      macc[i] = _mm512_setzero_ps();
      for (int k = 0; k < 8; k++) acc[i][k] = _mm512_setzero_ps();
    }
    const uint32_t* xq = px.q + (size_t)g * nb * 8 * kGroup;
    const float* xd = px.d + (size_t)g * nb * kGroup;
    const float* xs = px.s + (size_t)g * nb * kGroup;
    for (int b = 0; b < nb; b++) {
      const __m512 d = _mm512_loadu_ps(xd + (size_t)b * kGroup);
      __m512 sc[NR];
      for (int i = 0; i < NR; i++) sc[i] = _mm512_mul_ps(_mm512_set1_ps(rc[i].d[b]), d);  // d_w * d_x as decode
      QKV_UNROLL
      for (int k = 0; k < 8; k++) {
        const __m512i xv = _mm512_loadu_si512(xq + ((size_t)b * 8 + k) * kGroup);
        for (int i = 0; i < NR; i++) {
          const __m512i w =
              _mm512_set1_epi32((int)u32_at(reinterpret_cast<const uint8_t*>(&rc[i].q[(size_t)b * 32 + 4 * k])));
          __m512i sum = _mm512_dpbusd_epi32(_mm512_set1_epi32(rc[i].corr[(size_t)b * 8 + k]), xv, w);
          // Q6_K: dot_ss16's madd multiplies the sums of products 0..15 by sa, 16..31 by sb
          if constexpr (D::kKind == Kind::Signed16)
            sum = _mm512_mullo_epi32(sum, _mm512_set1_epi32(rc[i].half[2 * b + (k >= 4)]));
          acc[i][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), sc[i], acc[i][k]);
        }
      }
      if constexpr (D::kKind == Kind::UnsignedMin) {
        const __m512 s = _mm512_loadu_ps(xs + (size_t)b * kGroup);
        for (int i = 0; i < NR; i++) macc[i] = _mm512_fmadd_ps(_mm512_set1_ps(rc[i].m[b]), s, macc[i]);
      }
    }
    for (int i = 0; i < NR; i++) {
      alignas(64) float o[kGroup];
      _mm512_store_ps(o, _mm512_add_ps(tree8(acc[i]), macc[i]));  // macc 0 for Signed, as in dot_tile
      for (int t = 0; t < kGroup && g * kGroup + t < T; t++) Y[(int64_t)(g * kGroup + t) * ldy + r + i] = o[t];
    }
  }
}

// qdot_pack_prefill of the VNNI build (its layout in `wide`): every token count above one.
inline void pack_prefill_vnni(QdotPacked& p, const BlockQ8A* X, int T, int n, bool any) {
  p.T = p.n = 0;
  p.wide = p.narrow = -1;
  if (T < 2 || !any) return;
  const size_t total = packed_x_floats(T, n / 32);
  if (p.data.size() < total) p.data.resize(total);
  pack_x(p.data.data(), X, (size_t)(n / 32), n / 32, T);
  p.wide = 0, p.T = T, p.n = n;
}

// Without a shared packed copy (pk for these T tokens of nb blocks) X is packed for this call alone.
template <class D>
void vnni_prefill(float* Y, int64_t ldy, const BlockQ8A* X, const QdotPacked* pk, size_t per_token, const uint8_t* W,
                  size_t rb, int nb, int T, int r0, int r1) {
  constexpr int NR = 2;
  thread_local RowCodes rc[NR];  // one per thread, shared by every block type; O(width)
  std::unique_ptr<float[]> own;  // left uninitialised: pack_x writes every float
  const float* base = nullptr;
  if (pk && pk->T == T && pk->n == nb * 32 && pk->wide >= 0) {
    base = pk->data.data() + pk->wide;
  } else {
    own.reset(new float[packed_x_floats(T, nb)]);
    pack_x(own.get(), X, per_token, nb, T);
    base = own.get();
  }
  const PackedX px = packed_x_at(base, T, nb);
  int r = r0;
  for (; r + NR <= r1; r += NR) {
    for (int i = 0; i < NR; i++) unpack_row<D>(rc[i], W + (size_t)(r + i) * rb, nb);
    vnni_prefill_rows<D, NR>(Y, ldy, px, rc, nb, T, r);
  }
  for (; r < r1; r++) {
    unpack_row<D>(rc[0], W + (size_t)r * rb, nb);
    vnni_prefill_rows<D, 1>(Y, ldy, px, rc, nb, T, r);
  }
}

}  // namespace
}  // namespace qdot_detail
}  // namespace qkv
