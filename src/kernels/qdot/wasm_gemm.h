// The WASM prefill GEMM: weight rows and activations packed so that lane l of every
// i32x4.dot_i16x8 belongs to activation block l of a group of four.
#pragma once
// After wasm_tile.h and tiles.h (the grouped tile: it runs the tail blocks, and decode).
#include <chrono>
#include <memory>
#include <vector>

#include "../trial.h"

namespace qkv {
namespace qdot_detail {
namespace {

// The grouped tile sums each block's four i32 lanes with shuffles (hsum4) before scaling: per
// (row, token, block) that is four dots, three adds and about two and a half shuffle-and-add
// steps, and its 2 x 4 x 4 live block sums spill. Here both operands are packed once per product
// (the activations) or per panel of rows (the weights, reused by every token), 32-bit pairs
// interleaved over a group of four blocks: packed vector m of a group holds, in lane l, the pair
// m of block l (elements 2m, 2m + 1 in the order the decoder's W32 lists them). Sixteen dots and
// adds then leave the four block sums in the four lanes, with no shuffle, and one i32 vector per
// (row, token) is live. The activations are packed once per product (qdot_pack_prefill, shared by
// the threads), the weights per panel of rows in a per-thread buffer of two rows. The float work is the grouped tile's,
// operation for operation, so prefill still gives decode's bits. Q6_K's integer scales are folded into its packed
// weights (|code * scale| <= 32 * 128 fits i16; the sums are the same integers). The relaxed builds pack the nibble
// types' codes (0..31, relaxed dot's 7-bit operand) and the activations as bytes instead: i16 lanes 2l, 2l + 1 of
// i16x8.relaxed_dot_i8x16_i7x16_s hold four products of block l; two such dots are added in i16 (at most 4 * 127 * 31)
// and widened by one i32x4.dot_i16x8 against ones: 3 multiply instructions per 32 products instead of 4.
#if QKV_QDOT_RELAXED
template <class D>
constexpr bool kPack8 = D::kSub == 1 && kRelaxed8<D>;
#else
template <class D>
constexpr bool kPack8 = false;
#endif
template <bool P8>
constexpr int kPackVecs = P8 ? 8 : 16;  // packed vectors per group of four blocks
template <bool P8>
constexpr int kPackGroup = kPackVecs<P8> + 2;  // + the four scales and the four mins / sums
constexpr int kPackMinTokens = 8;              // below this the grouped tile runs
constexpr int kPackRows = 2, kPackTokens = 4;  // the register tile
// Tokens per pass over the rows: their packed activations stay in L2 while every panel of rows
// passes (the weight panels are packed again per pass: a few percent).
constexpr int kPackTokenBlock = 128;

// Four blocks' values, Q vectors each (i16: Q = 4, elements 0-7, 8-15, 16-23, 24-31 as W32 / X32
// lay them; bytes: Q = 2, elements 0-15, 16-31), into the 4 * Q interleaved vectors at out.
template <int Q>
inline void interleave(const v128_t (*v)[Q], v128_t* out) {
  for (int k = 0; k < Q; k++) {  // a 4 x 4 transpose of 32-bit lanes per quarter
    const v128_t a = v[0][k], b = v[1][k], c = v[2][k], d = v[3][k];
    const v128_t ab0 = wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), ab1 = wasm_i32x4_shuffle(a, b, 2, 6, 3, 7);
    const v128_t cd0 = wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), cd1 = wasm_i32x4_shuffle(c, d, 2, 6, 3, 7);
    out[4 * k + 0] = wasm_i32x4_shuffle(ab0, cd0, 0, 1, 4, 5);
    out[4 * k + 1] = wasm_i32x4_shuffle(ab0, cd0, 2, 3, 6, 7);
    out[4 * k + 2] = wasm_i32x4_shuffle(ab1, cd1, 0, 1, 4, 5);
    out[4 * k + 3] = wasm_i32x4_shuffle(ab1, cd1, 2, 3, 6, 7);
  }
}

// Token t's first ng groups of blocks: per group the packed vectors, d of the four blocks, and s
// (the min term's sums).
template <bool P8, class XB>
void pack_activations(const XB* x, int ng, v128_t* out) {
  for (int g = 0; g < ng; g++, out += kPackGroup<P8>) {
    const XB* xb = x + 4 * g;
    if constexpr (P8) {
      v128_t v[4][2];
      for (int i = 0; i < 4; i++) v[i][0] = wasm_v128_load(xb[i].q), v[i][1] = wasm_v128_load(xb[i].q + 16);
      interleave<2>(v, out);
    } else {
      v128_t v[4][4];
      for (int i = 0; i < 4; i++) {
        const X32 q = load_x32(xb[i].q);
        v[i][0] = q.a, v[i][1] = q.b, v[i][2] = q.c, v[i][3] = q.d;
      }
      interleave<4>(v, out);
    }
    out[kPackVecs<P8>] = wasm_f32x4_make(xb[0].d, xb[1].d, xb[2].d, xb[3].d);
    out[kPackVecs<P8> + 1] = wasm_f32x4_make(xb[0].s, xb[1].s, xb[2].s, xb[3].s);
  }
}

// One weight row's first ng groups (4 * ng blocks of 32): the packed codes, then the group's
// scales and mins as the grouped tile's group_scales gives them.
template <class D>
void pack_row(const uint8_t* row, int ng, v128_t* out) {
  constexpr bool P8 = kPack8<D>;
  D dec;
  for (int g = 0; g < ng; g++, out += kPackGroup<P8>) {
    const int b0 = 4 * g;  // first activation block of the group
    v128_t v[4][4];
    v128_t d4, m4 = fzero();
    if constexpr (P8) {
      for (int i = 0; i < 4; i++) {
        dec.prepare(row + (size_t)(b0 + i) * D::kBytes);
        const auto w = dec.w8(0);
        v[i][0] = w.lo, v[i][1] = w.hi;
      }
      D::group_scales(row + (size_t)b0 * D::kBytes, &d4, &m4);
    } else if constexpr (D::kSub == 1) {
      for (int i = 0; i < 4; i++) {
        dec.prepare(row + (size_t)(b0 + i) * D::kBytes);
        const W32 w = dec.w(0);
        v[i][0] = w.a, v[i][1] = w.b, v[i][2] = w.c, v[i][3] = w.d;
      }
      D::group_scales(row + (size_t)b0 * D::kBytes, &d4, &m4);
    } else {
      const int j0 = b0 % D::kSub;
      if (j0 == 0) dec.prepare(row + (size_t)(b0 / D::kSub) * D::kBytes);
      for (int i = 0; i < 4; i++) {
        W32 w = dec.w(j0 + i);
        if constexpr (D::kKind == Kind::Signed16) {
          const v128_t sa = wasm_i16x8_splat((int16_t)dec.sa(j0 + i)), sb = wasm_i16x8_splat((int16_t)dec.sb(j0 + i));
          w = {wasm_i16x8_mul(w.a, sa), wasm_i16x8_mul(w.b, sa), wasm_i16x8_mul(w.c, sb), wasm_i16x8_mul(w.d, sb)};
        }
        v[i][0] = w.a, v[i][1] = w.b, v[i][2] = w.c, v[i][3] = w.d;
      }
      dec.group_scales(j0, &d4, &m4);
    }
    if constexpr (P8) {
      v128_t v2[4][2];
      for (int i = 0; i < 4; i++) v2[i][0] = v[i][0], v2[i][1] = v[i][1];
      interleave<2>(v2, out);
    } else {
      interleave<4>(v, out);
    }
    out[kPackVecs<P8>] = d4;
    out[kPackVecs<P8> + 1] = m4;
  }
}

// out[r * NT + t] (+)= row r . token t over ng packed groups.
template <bool kMin, bool P8, int NR, int NT>
inline void packed_tile(const v128_t* const* w, const v128_t* const* x, int ng, float* out) {
  constexpr int kVecs = kPackVecs<P8>;
  F acc[NR][NT], macc[NR][NT];
  for (int r = 0; r < NR; r++)
    for (int t = 0; t < NT; t++) acc[r][t] = macc[r][t] = fzero();
  for (int g = 0; g < ng; g++) {
    const size_t o = (size_t)g * kPackGroup<P8>;
    I32 s[NR][NT];
    for (int r = 0; r < NR; r++)
      for (int t = 0; t < NT; t++) s[r][t] = wasm_i32x4_splat(0);
        // A loop, not unrolled, so each step's products stay beside its loads: V8 places arithmetic
        // just before its first use, which for unrolled sums is after the group's last load (pin()).
#pragma nounroll
    for (int m = 0; m < kVecs; m += P8 ? 2 : 1) {
      if constexpr (P8) {
#if QKV_QDOT_RELAXED
        v128_t wa[NR], wb[NR];
        for (int r = 0; r < NR; r++) wa[r] = wasm_v128_load(w[r] + o + m), wb[r] = wasm_v128_load(w[r] + o + m + 1);
        for (int t = 0; t < NT; t++) {
          const v128_t xa = wasm_v128_load(x[t] + o + m), xb = wasm_v128_load(x[t] + o + m + 1);
          for (int r = 0; r < NR; r++) {
            const v128_t p16 = wasm_i16x8_add(rdot(xa, wa[r]), rdot(xb, wb[r]));
            s[r][t] = wasm_i32x4_add(s[r][t], wasm_i32x4_dot_i16x8(p16, wasm_i16x8_splat(1)));
          }
        }
#endif
      } else {
        v128_t wv[NR];
        for (int r = 0; r < NR; r++) wv[r] = wasm_v128_load(w[r] + o + m);
        for (int t = 0; t < NT; t++) {
          const v128_t xv = wasm_v128_load(x[t] + o + m);
          for (int r = 0; r < NR; r++) s[r][t] = wasm_i32x4_add(s[r][t], wasm_i32x4_dot_i16x8(wv[r], xv));
        }
      }
    }
    for (int t = 0; t < NT; t++) {
      const v128_t xd = wasm_v128_load(x[t] + o + kVecs);
      const v128_t xsum = kMin ? wasm_v128_load(x[t] + o + kVecs + 1) : fzero();
      for (int r = 0; r < NR; r++) {
        acc[r][t] = fmadd_v(s[r][t], wasm_f32x4_mul(wasm_v128_load(w[r] + o + kVecs), xd), acc[r][t]);
        if constexpr (kMin)
          macc[r][t] = wasm_f32x4_add(macc[r][t], wasm_f32x4_mul(wasm_v128_load(w[r] + o + kVecs + 1), xsum));
      }
    }
  }
  for (int r = 0; r < NR; r++)
    for (int t = 0; t < NT; t++) out[r * NT + t] = fsum(acc[r][t]) + fsum(macc[r][t]);
}

// Every token's whole groups, token t's at out + per * t (per = ng * kPackGroup<P8> vectors).
template <bool P8>
void pack_tokens(const BlockQ8A* X, int T, int nb, v128_t* out) {
  const int ng = nb / 4;
  const size_t per = (size_t)ng * kPackGroup<P8>;
  for (int t = 0; t < T; t++) pack_activations<P8>(X + (size_t)t * nb, ng, out + per * t);
}
template <bool P8>
constexpr size_t packed_floats(int T, int nb) {
  return (size_t)T * (size_t)(nb / 4) * kPackGroup<P8> * 4;
}

// qdot_pack_prefill of the WASM builds: the 16-bit layout where `wide`, the 8-bit one where `narrow`.
inline void pack_prefill_wasm(QdotPacked& p, const BlockQ8A* X, int T, int n, bool wide, bool narrow) {
  p.T = p.n = 0;
  p.wide = p.narrow = -1;
  if (T < kPackMinTokens || !(wide || narrow)) return;
  const int nb = n / 32;
  const size_t w = wide ? packed_floats<false>(T, nb) : 0, total = w + (narrow ? packed_floats<true>(T, nb) : 0);
  if (p.data.size() < total) p.data.resize(total);
  if (wide) p.wide = 0, pack_tokens<false>(X, T, nb, reinterpret_cast<v128_t*>(p.data.data()));
  if (narrow) p.narrow = (int64_t)w, pack_tokens<true>(X, T, nb, reinterpret_cast<v128_t*>(p.data.data() + w));
  p.T = T, p.n = n;
}

// The layout type D reads from p, if p holds it for these T tokens of nb blocks (else null).
template <class D>
const v128_t* packed_for(const QdotPacked* p, int T, int nb) {
  if (!p || p->T != T || p->n != nb * 32) return nullptr;
  const int64_t off = kPack8<D> ? p->narrow : p->wide;
  return off < 0 ? nullptr : reinterpret_cast<const v128_t*>(p->data.data() + off);
}

// Y = X W^T over rows [r0, r1) for T tokens, as prefill_tiles computes it: the whole groups
// packed, the last nb % 4 blocks (one-block types only) through the grouped tile, added last as
// the grouped tile adds its scalar tail. xp: pack_tokens<kPack8<D>> of X, shared by the threads.
template <class D, class XB>
void prefill_packed(float* Y, int64_t ldy, const XB* X, const v128_t* xp, const uint8_t* W, size_t rb, int T, int nb,
                    int r0, int r1) {
  constexpr bool kMin = D::kKind == Kind::UnsignedMin, P8 = kPack8<D>;
  constexpr int NR = kPackRows, NT = kPackTokens;
  const int ng = nb / 4, tail = nb % 4;
  const size_t per = (size_t)ng * kPackGroup<P8>;  // vectors per packed row or token
  thread_local std::vector<v128_t> wp;             // NR rows: bounded by the width
  wp.resize(per * NR);
  float out[NR * NT], tout[NR * NT];
  for (int t0 = 0; t0 < T; t0 += kPackTokenBlock) {
    const int t1 = T - t0 < kPackTokenBlock ? T : t0 + kPackTokenBlock;
    for (int r = r0; r < r1; r += NR) {
      const int nr = r1 - r < NR ? r1 - r : NR;
      const v128_t* w[NR];
      const uint8_t* rows[NR];
      for (int k = 0; k < NR; k++) {
        rows[k] = W + (size_t)(r + (k < nr ? k : nr - 1)) * rb;
        if (k < nr) pack_row<D>(rows[k], ng, wp.data() + per * k);
        w[k] = wp.data() + per * (k < nr ? k : nr - 1);
      }
      for (int t = t0; t < t1; t += NT) {
        const v128_t* x[NT];
        const XB* xs[NT];
        for (int i = 0; i < NT; i++) {
          const int tt = t + i < t1 ? t + i : t1 - 1;
          x[i] = xp + per * tt;
          xs[i] = X + (size_t)tt * nb + 4 * ng;
        }
        packed_tile<kMin, P8, NR, NT>(w, x, ng, out);
        if (tail) {
          const uint8_t* trows[NR];
          for (int k = 0; k < NR; k++) trows[k] = rows[k] + (size_t)(4 * ng) * D::kBytes;
          tile<D, NR, NT, XB>(trows, xs, tail, tout);
          for (int i = 0; i < NR * NT; i++) out[i] += tout[i];
        }
        for (int i = 0; i < NT && t + i < t1; i++)
          for (int k = 0; k < nr; k++) Y[(t + i) * ldy + r + k] = out[k * NT + i];
      }
    }
  }
}

// Prefill of T >= kPackMinTokens tokens: the packed GEMM or the grouped tile (prefill_tiles),
// whichever this engine runs faster for type D, timed on the first calls (they give the same
// bits; the 8-bit relaxed tiles of the nibble types may beat the packed 16-bit products).
// Without a shared packed copy (pk) the packed GEMM packs X for this call alone.
template <class D>
void prefill_gemm(float* Y, int64_t ldy, const BlockQ8A* X, const QdotPacked* pk, const uint8_t* W, size_t rb, int T,
                  int nb, int r0, int r1) {
  static Trial trial;
  auto run = [&](int which) {
    if (which != 1) return prefill_tiles(BlockTile<D, BlockQ8A>{nb}, Y, ldy, X, (size_t)nb, W, rb, T, r0, r1);
    const v128_t* xp = packed_for<D>(pk, T, nb);
    std::unique_ptr<v128_t[]> own;  // left uninitialised: packing writes every vector
    if (!xp) {
      own.reset(new v128_t[packed_floats<kPack8<D>>(T, nb) / 4]);
      pack_tokens<kPack8<D>>(X, T, nb, own.get());
      xp = own.get();
    }
    prefill_packed<D>(Y, ldy, X, xp, W, rb, T, nb, r0, r1);
  };
  const int forced = g_prefill_forced.load(std::memory_order_relaxed);
  if (forced >= 0) return run(forced);
  const int kept = trial.decided();
  if (kept >= 0) return run(kept);
  const int which = trial.pick();
  const auto start = std::chrono::steady_clock::now();
  run(which);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  trial.report(which, (double)T * nb * (r1 - r0), took.count());
}

}  // namespace
}  // namespace qdot_detail
}  // namespace qkv
