// The register tile of both WASM builds: four activation blocks per step, scaled once.
#pragma once
// The including file declares first how its types multiply: kRelaxed8<D>, load_act<D>(q),
// weights<D, XB>(dec), weight_pair(dec, j), and block_dot overloads beyond the widened one here.
#include <utility>

#include "wasm_blocks.h"

namespace qkv {
namespace qdot_detail {
namespace {

// The WASM tile: four activation blocks at a time. One block at a time, the float work per
// block (an f16 scale decoded in scalar code, a convert, a splat, a multiply and an add of four
// partial sums) costs about as much as its integer dot product. Here a group's four i32x4
// partial sums are reduced to one vector of four block sums (hsum4: the integer sums are exact,
// so their order does not matter), converted once and multiplied by the four blocks' combined
// scales, whose f16s are decoded together (half4); the min term of the unsigned types is one
// vector multiply-add per group. Every tile shape does the same float operations per (row,
// token), so decode and prefill give the same bits.
template <class D>
inline I32 block_dot(const D& dec, int j, const W32& w, const X32& x) {
  if constexpr (D::kKind == Kind::Signed) return dot_ss(w, x);
  else if constexpr (D::kKind == Kind::Signed16) return dot_ss16(w, x, dec.sa(j), dec.sb(j));
  else return dot_us(w, x);
}

// V8's TurboFan keeps a function's memory accesses in program order but places arithmetic just
// before its first use: a tile's block products, all used by the group's horizontal sums, sank
// below every load of the group, and the 2 x 4 blocks' weights and activations were spilled
// to the stack. A store of each block's sum (to a per-thread slot nobody reads) pins its
// product where it is written. Measured in Chromium 156: decode 9-11% faster for every type,
// prefill 11% for Q8_0 and 14% for relaxed Q6_K; the other prefill tiles measured slower
// pinned, so they are not.
inline void pin(v128_t v) {
  [[maybe_unused]] static thread_local volatile v128_t sink;
  sink = v;
}
template <class D, int NR, int NT, class XB>
inline void dot_tile_grouped(const uint8_t* const* rows, const XB* const* xs, int nb, float* out) {
  constexpr bool kMin = D::kKind == Kind::UnsignedMin;
  constexpr bool kPin = NT == 1 || D::kKind == Kind::Signed || (D::kKind == Kind::Signed16 && kRelaxed8<D>);
  constexpr int U = D::kSub > 4 ? D::kSub : 4;  // activation blocks per step
  static_assert(U % 4 == 0, "a step is whole groups of four");
  F acc[NR][NT], macc[NR][NT];
  for (int r = 0; r < NR; r++)
    for (int t = 0; t < NT; t++) acc[r][t] = macc[r][t] = fzero();
  D dec[NR];
  int b = 0;
  for (; b + U <= nb; b += U) {
    if constexpr (D::kSub > 1)
      for (int r = 0; r < NR; r++) dec[r].prepare(rows[r] + (size_t)(b / D::kSub) * D::kBytes);
    QKV_UNROLL
    for (int g = 0; g < U / 4; g++) {
      const int b0 = b + 4 * g;
      I32 sum[NR][NT][4];
      v128_t d4[NR], m4[NR];
      if constexpr (D::kSub == 1) {
        QKV_UNROLL
        for (int i = 0; i < 4; i++) {
          decltype(load_act<D>(xs[0][0].q)) xq[NT];
          for (int t = 0; t < NT; t++) xq[t] = load_act<D>(xs[t][b0 + i].q);
          for (int r = 0; r < NR; r++) {
            dec[r].p = rows[r] + (size_t)(b0 + i) * D::kBytes;
            const auto w = weights<D, XB>(dec[r]);
            for (int t = 0; t < NT; t++) {
              sum[r][t][i] = block_dot(dec[r], 0, w, xq[t]);
              if constexpr (kPin) pin(sum[r][t][i]);
            }
          }
        }
      } else {  // sub-blocks in pairs that share loads (wpair: prefill 5% faster than one at a time)
        QKV_UNROLL
        for (int i = 0; i < 4; i += 2) {
          const int j = 4 * g + i;
          for (int r = 0; r < NR; r++) {
            const auto [wa, wb] = weight_pair(dec[r], j);
            for (int t = 0; t < NT; t++) {
              sum[r][t][i] = block_dot(dec[r], j, wa, load_act<D>(xs[t][b0 + i].q));
              if constexpr (kPin) pin(sum[r][t][i]);
              sum[r][t][i + 1] = block_dot(dec[r], j + 1, wb, load_act<D>(xs[t][b0 + i + 1].q));
              if constexpr (kPin) pin(sum[r][t][i + 1]);
            }
          }
        }
      }
      for (int r = 0; r < NR; r++) {
        m4[r] = fzero();
        if constexpr (D::kSub == 1) D::group_scales(rows[r] + (size_t)b0 * D::kBytes, &d4[r], &m4[r]);
        else dec[r].group_scales(4 * g, &d4[r], &m4[r]);
      }
      for (int t = 0; t < NT; t++) {
        const XB* xb = xs[t] + b0;
        const v128_t xd = wasm_f32x4_make(xb[0].d, xb[1].d, xb[2].d, xb[3].d);
        const v128_t xsum = kMin ? wasm_f32x4_make(xb[0].s, xb[1].s, xb[2].s, xb[3].s) : fzero();
        // Q6_K's offset in the relaxed builds: the four blocks' half sums against the scale pairs.
        constexpr bool kOffset = kRelaxed8<D> && D::kKind == Kind::Signed16;
        v128_t hs = wasm_i32x4_splat(0);
        if constexpr (kOffset) {
          hs = wasm_v128_load32_lane(xb[0].h, hs, 0);
          hs = wasm_v128_load32_lane(xb[1].h, hs, 1);
          hs = wasm_v128_load32_lane(xb[2].h, hs, 2);
          hs = wasm_v128_load32_lane(xb[3].h, hs, 3);
        }
        for (int r = 0; r < NR; r++) {
          const I32* q = sum[r][t];
          I32 isum = hsum4(q[0], q[1], q[2], q[3]);
          if constexpr (kOffset) isum = wasm_i32x4_sub(isum, wasm_i32x4_shl(wasm_i32x4_dot_i16x8(dec[r].sc[g], hs), 5));
          acc[r][t] = fmadd_v(isum, wasm_f32x4_mul(d4[r], xd), acc[r][t]);
          if constexpr (kMin) macc[r][t] = wasm_f32x4_add(macc[r][t], wasm_f32x4_mul(m4[r], xsum));
        }
      }
    }
  }
  float tail[NR][NT] = {};
  if constexpr (D::kSub == 1) {  // K-type rows are whole groups
    for (; b < nb; b++) {
      for (int r = 0; r < NR; r++) {
        dec[r].prepare(rows[r] + (size_t)b * D::kBytes);
        const auto w = weights<D, XB>(dec[r]);
        for (int t = 0; t < NT; t++) {
          const float v = fsum(wasm_f32x4_convert_i32x4(block_dot(dec[r], 0, w, load_act<D>(xs[t][b].q))));
          tail[r][t] = fma_s(v, dec[r].d(0) * xs[t][b].d, tail[r][t]);
          if constexpr (kMin) tail[r][t] = fma_s(dec[r].min(0), xs[t][b].s, tail[r][t]);
        }
      }
    }
  }
  for (int r = 0; r < NR; r++)
    for (int t = 0; t < NT; t++) out[r * NT + t] = fsum(acc[r][t]) + fsum(macc[r][t]) + tail[r][t];
}

// The tile the drivers in tiles.h run.
template <class D, int NR, int NT, class XB = BlockQ8A>
inline void tile(const uint8_t* const* rows, const XB* const* xs, int nb, float* out) {
  dot_tile_grouped<D, NR, NT, XB>(rows, xs, nb, out);
}

}  // namespace
}  // namespace qdot_detail
}  // namespace qkv
