// The integer dot products of the WASM relaxed-SIMD build (8-bit relaxed dot products).
#include "common.h"

#if QKV_QDOT_RELAXED
#include <type_traits>
#include <utility>
#include <vector>

#include "wasm_simd128.h"

namespace qkv {
namespace qdot_detail {
namespace {

// Relaxed SIMD's i16x8.relaxed_dot_i8x16_i7x16_s multiplies 16 signed bytes by 16 bytes in
// 0..127 and adds adjacent pairs into i16 (pmaddubsw on x64, sdot-free smull/saddlp on arm64):
// deterministic when the second operand's bytes are below 128, which every code of the
// unsigned types is (nibbles, 5-bit and 6-bit codes), and exact, since a pair sums to at most
// 2 * 127 * 63 in magnitude. Those types keep their codes as bytes (B32) and the activations
// stay 8-bit (X8): a 32-element block is two relaxed dots and one i32x4.dot_i16x8 against ones,
// instead of four of those against widened weights. Q8_0's signed weights are outside i7: its
// decode moves the activations' signs onto them (BlockQ8S below), its prefill keeps the widened
// path above (the activations widened by the load).
//
// clang 14 has no builtin for the instruction. __builtin_wasm_relaxed_swizzle_i8x16 (the
// pre-standard opcode 0xa2, same operand and result types, otherwise unused) stands in for it,
// and scripts/wasm-relaxed.mjs rewrites that opcode to the standard 0x112 after each link.
// (The accumulating i32x4 form, 0x113, returns wrong sums in Node 20's V8.)
struct B32 {
  v128_t lo, hi;
};  // codes of elements 0..15 and 16..31, one per byte
struct X8 {
  v128_t lo, hi;
};  // the 32 activations, one per byte
inline X8 load_x8(const q8a_t* q) { return {wasm_v128_load(q), wasm_v128_load(q + 16)}; }
inline v128_t rdot(v128_t x, v128_t w) { return __builtin_wasm_relaxed_swizzle_i8x16(x, w); }
inline v128_t bmask(int m) { return wasm_i8x16_splat((int8_t)m); }
// (v >> s) & mask per byte through 16-bit shifts (s < 0: left): the masks keep only bits that
// came from the byte's own, as bits_at above.
inline v128_t bits8(v128_t v, int s, int mask) {
  return wasm_v128_and(s >= 0 ? wasm_u16x8_shr(v, s) : wasm_i16x8_shl(v, -s), bmask(mask));
}
// 16 bytes of nibbles: low nibbles are elements 0..15, high nibbles 16..31 (Q4_0 ... Q5_1).
inline B32 nibbles8(const uint8_t* p) {
  const v128_t q = opaque(wasm_v128_load(p));
  return {wasm_v128_and(q, bmask(0x0f)), bits8(q, 4, 0x0f)};
}
inline B32 or8(B32 a, B32 b) { return {wasm_v128_or(a.lo, b.lo), wasm_v128_or(a.hi, b.hi)}; }
// Byte e = 16 where bit e of `bits` is set, else 0.
inline B32 bits_to_16s8(uint32_t bits) {
  const v128_t v = wasm_i32x4_splat((int32_t)bits), bit = wasm_i64x2_splat((int64_t)0x8040201008040201ull);
  auto half = [&](v128_t spread) { return wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(spread, bit), bit), bmask(16)); };
  return {half(wasm_i8x16_shuffle(v, v, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1)),
          half(wasm_i8x16_shuffle(v, v, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3))};
}
inline I32 dot_u8(const B32& w, const X8& x) {  // pairs of at most 2 * 2 * 127 * 31: no overflow
  return wasm_i32x4_dot_i16x8(wasm_i16x8_add(rdot(x.lo, w.lo), rdot(x.hi, w.hi)), wasm_i16x8_splat(1));
}
// The halves' pair sums times their i16 scales (splatted), in the one i32x4.dot_i16x8.
inline I32 dot_u8_16(const B32& w, const X8& x, v128_t sa, v128_t sb) {
  return wasm_i32x4_add(wasm_i32x4_dot_i16x8(rdot(x.lo, w.lo), sa), wasm_i32x4_dot_i16x8(rdot(x.hi, w.hi), sb));
}
// Lane l of v's eight i16 lanes in every lane (l a constant once the callers' loops unroll),
// in two steps: the lanes doubled (one interleave, shared by the four lanes of its half: opaque
// keeps LLVM from folding the two shuffles back into one) and then a 32-bit splat (one pshufd
// on x64). Q6_K decode 5% faster in Chromium 156 than one 16-bit splat shuffle per scale.
template <int L>
inline v128_t lane16(v128_t v) {
  const v128_t z = L < 4 ? opaque(wasm_i16x8_shuffle(v, v, 0, 0, 1, 1, 2, 2, 3, 3))
                         : opaque(wasm_i16x8_shuffle(v, v, 4, 4, 5, 5, 6, 6, 7, 7));
  return wasm_i32x4_shuffle(z, z, L % 4, L % 4, L % 4, L % 4);
}
inline v128_t splat16(v128_t v, int l) {
  switch (l) {
    case 0: return lane16<0>(v);
    case 1: return lane16<1>(v);
    case 2: return lane16<2>(v);
    case 3: return lane16<3>(v);
    case 4: return lane16<4>(v);
    case 5: return lane16<5>(v);
    case 6: return lane16<6>(v);
    default: return lane16<7>(v);
  }
}
// Q8_0 (signed weights) through the same relaxed dot: with m = 0 or -1 the sign of x (bytes),
// x * w = |x| * (w ^ m) + |x| * (m < 0), since w ^ -1 = -w - 1. |x| (0..127) is the i7 operand,
// w ^ m stays a byte even for w = -128, and the second term, the sum of the block's negative
// activations' magnitudes, does not depend on the weights. The activations are split once per
// call (BlockQ8S: |q|, the sign bytes, and that sum spread over four i32 lanes: the block's
// four lanes are summed afterwards, as every block sum is). All of it lives in q, which is what
// the tiles hand over for every kind of activation block.
struct BlockQ8S {
  float d, s;
  uint8_t q[80];  // |q[0..32)|, then 0xff where q < 0, then the i32x4 sum
};
struct XS {
  v128_t alo, ahi, mlo, mhi, c;
};
inline XS load_xs(const uint8_t* q) {
  return {wasm_v128_load(q), wasm_v128_load(q + 16), wasm_v128_load(q + 32), wasm_v128_load(q + 48),
          wasm_v128_load(q + 64)};
}
inline I32 dot_sign(const B32& w, const XS& x) {
  const v128_t one = wasm_i16x8_splat(1);
  return wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_dot_i16x8(rdot(wasm_v128_xor(w.lo, x.mlo), x.alo), one),
                                       wasm_i32x4_dot_i16x8(rdot(wasm_v128_xor(w.hi, x.mhi), x.ahi), one)),
                        x.c);
}

}  // namespace
}  // namespace qdot_detail
}  // namespace qkv

#include "wasm_blocks.h"

namespace qkv {
namespace qdot_detail {
namespace {

// ---- the decoders' 8-bit forms ---------------------------------------------------------------

template <bool M, bool K5, bool kFinite = false>
struct Q4_5Relaxed : Q4_5Simd128<M, K5, kFinite> {
  B32 w8(int) const {
    const uint8_t* p = this->p;
    const B32 codes = nibbles8(p + this->kBytes - 16);
    return K5 ? or8(codes, bits_to_16s8(u32_at(p + (M ? 4 : 2)))) : codes;
  }
};

template <bool K5>
struct QK45Relaxed : QK45Simd128<K5> {
  // Against super-block activations (ktile): the scales and mins as i16 lanes, d and dmin.
  v128_t ksc, kmn;
  float kd, kdmin;
  void prepare_k(const uint8_t* b) {
    this->p = b;
    kd = half(b);
    kdmin = half(b + 2);
    const v128_t v = this->scales_mins(b);
    ksc = wasm_u16x8_extend_low_u8x16(v);
    kmn = wasm_u16x8_extend_high_u8x16(v);
  }
  // Sub-block j's products times its scale: the pair sums (at most 2 * 2 * 127 * 31) in i16,
  // multiplied by the scale (at most 63) in the one i32x4.dot_i16x8.
  I32 kdot(int j, const B32& w, const X8& x) const {
    return wasm_i32x4_dot_i16x8(wasm_i16x8_add(rdot(x.lo, w.lo), rdot(x.hi, w.hi)), splat16(ksc, j));
  }
  // kdot with the scale splats given (kscale's, kept by the decoded prefill panel): the same integers.
  v128_t kscale(int j, int) const { return splat16(ksc, j); }
  static I32 kdot_s(const B32& w, const X8& x, v128_t sa, v128_t) {
    return wasm_i32x4_dot_i16x8(wasm_i16x8_add(rdot(x.lo, w.lo), rdot(x.hi, w.hi)), sa);
  }
  // acc + the super-block's two terms in lanes 0 and 1 (fsum adds them): d * dx * isum and
  // -dmin * dx * sum_j min_j * sum32_j.
  // The two integer totals are reduced exactly before they are converted.
  F kfinish(I32 isum, const BlockQ8K& x, F acc) const {
    const v128_t msum = wasm_i32x4_dot_i16x8(kmn, wasm_v128_load(x.sum32));
    const v128_t a =
        wasm_i32x4_add(wasm_i32x4_shuffle(isum, msum, 0, 4, 1, 5), wasm_i32x4_shuffle(isum, msum, 2, 6, 3, 7));
    const v128_t t = wasm_i32x4_add(a, wasm_i32x4_shuffle(a, a, 2, 3, 0, 1));  // [I, M, I, M]
    const v128_t f = wasm_f32x4_make(kd * x.d, -kdmin * x.d, 0.0f, 0.0f);
    return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(t), f));
  }
  void wpair8(int j, B32* a, B32* b) const {
    const uint8_t* q = this->p + (K5 ? 48 : 16) + 32 * (j / 2);
    const v128_t q0 = opaque(wasm_v128_load(q)), q1 = opaque(wasm_v128_load(q + 16));
    *a = {wasm_v128_and(q0, bmask(0x0f)), wasm_v128_and(q1, bmask(0x0f))};
    *b = {bits8(q0, 4, 0x0f), bits8(q1, 4, 0x0f)};
    if (K5) {
      const v128_t h0 = opaque(wasm_v128_load(this->p + 16)), h1 = opaque(wasm_v128_load(this->p + 32));
      *a = or8(*a, B32{bits8(h0, j - 4, 0x10), bits8(h1, j - 4, 0x10)});
      *b = or8(*b, B32{bits8(h0, j - 3, 0x10), bits8(h1, j - 3, 0x10)});
    }
  }
};

struct Q6KRelaxed : Q6KSimd128 {
  void prepare(const uint8_t* b) {
    Q6KSimd128::prepare(b);
    sc[0] = wasm_i16x8_load8x8(b + 192);
    sc[1] = wasm_i16x8_load8x8(b + 200);
  }
  // The unsigned codes (0..63, without the -32: the kernel subtracts 32 * (sa * h[0] + sb * h[1])
  // per activation block) of sub-blocks j and j + 1 (j even).
  v128_t sc[2];  // the 16 scales as i16: sa(0), sb(0), sa(1), ... sb(3); then sub-blocks 4-7
  void wpair8(int j, B32* a, B32* b) const {
    const int h = j / 4, c = j % 4;
    const uint8_t* ql = p + 64 * h;
    const v128_t h0 = opaque(wasm_v128_load(p + 128 + 32 * h)), h1 = opaque(wasm_v128_load(p + 144 + 32 * h));
    const v128_t l0 = opaque(wasm_v128_load(ql)), l1 = opaque(wasm_v128_load(ql + 16));
    const v128_t m0 = opaque(wasm_v128_load(ql + 32)), m1 = opaque(wasm_v128_load(ql + 48));
    auto codes = [&](v128_t q, v128_t qh, int hs) {  // nibble (low for c < 2) | 2 high bits at 4, 5
      return wasm_v128_or(c < 2 ? wasm_v128_and(q, bmask(0x0f)) : bits8(q, 4, 0x0f), bits8(qh, hs, 0x30));
    };
    *a = {codes(l0, h0, 2 * c - 4), codes(l1, h1, 2 * c - 4)};
    *b = {codes(m0, h0, 2 * c - 2), codes(m1, h1, 2 * c - 2)};
  }
  // sa(j) (half 0) or sb(j) (half 1) in every lane.
  v128_t scale16(int j, int half) const { return splat16(sc[j / 4], 2 * (j % 4) + half); }
  // Against super-block activations (ktile).
  float kd;
  void prepare_k(const uint8_t* b) {
    prepare(b);
    kd = s;
  }
  I32 kdot(int j, const B32& w, const X8& x) const { return dot_u8_16(w, x, scale16(j, 0), scale16(j, 1)); }
  v128_t kscale(int j, int half) const { return scale16(j, half); }
  static I32 kdot_s(const B32& w, const X8& x, v128_t sa, v128_t sb) { return dot_u8_16(w, x, sa, sb); }
  // acc + the super-block's sum in lane 0: d * dx * (isum - 32 * sum_g sc_g * sum16_g). The
  // lanes of isum can be past 2^24 where they cancel across lanes, so the total is reduced
  // exactly before it is converted.
  F kfinish(I32 isum, const BlockQ8K& x, F acc) const {
    const v128_t off = wasm_i32x4_add(wasm_i32x4_dot_i16x8(sc[0], wasm_v128_load(x.sum16)),
                                      wasm_i32x4_dot_i16x8(sc[1], wasm_v128_load(x.sum16 + 8)));
    v128_t t = wasm_i32x4_sub(isum, wasm_i32x4_shl(off, 5));
    t = wasm_i32x4_add(t, wasm_i32x4_shuffle(t, t, 2, 3, 0, 1));
    t = wasm_i32x4_add(t, wasm_i32x4_shuffle(t, t, 1, 0, 3, 2));
    return wasm_f32x4_add(acc,
                          wasm_f32x4_mul(wasm_f32x4_convert_i32x4(t), wasm_f32x4_make(kd * x.d, 0.0f, 0.0f, 0.0f)));
  }
};

// ---- how each type multiplies here (wasm_tile.h) ----------------------------------------------

// Whether type D runs the relaxed 8-bit products (every type but Q8_0).
template <class D>
constexpr bool kRelaxed8 = D::kKind != Kind::Signed;

template <class D>
inline I32 block_dot(const D&, int, const B32& w, const XS& x) {
  return dot_sign(w, x);
}
template <class D>
inline I32 block_dot(const D& dec, int j, const B32& w, const X8& x) {
  if constexpr (D::kKind == Kind::Signed16) return dot_u8_16(w, x, dec.scale16(j, 0), dec.scale16(j, 1));
  else return dot_u8(w, x);
}
// The activations of one block and the weights of a sub-block (pair), as type D multiplies them.
template <class D, class Q>
inline auto load_act(const Q* q) {
  if constexpr (std::is_same_v<Q, uint8_t>) return load_xs(q);  // BlockQ8S (BlockQ8A's q is signed)
  else if constexpr (kRelaxed8<D>) return load_x8(q);
  else return load_x32(q);
}
template <class D, class XB>
inline auto weights(const D& dec) {
  if constexpr (std::is_same_v<XB, BlockQ8S>) {  // Q8_0's 32 signed bytes after its f16 d, as stored
    static_assert(D::kKind == Kind::Signed && D::kBytes == 34, "split activations are for Q8_0");
    return B32{wasm_v128_load(dec.p + 2), wasm_v128_load(dec.p + 18)};
  } else if constexpr (kRelaxed8<D>) return dec.w8(0);
  else return dec.w(0);
}
template <class D>
inline auto weight_pair(const D& dec, int j) {
  if constexpr (kRelaxed8<D>) {
    B32 a, b;
    dec.wpair8(j, &a, &b);
    return std::make_pair(a, b);
  } else {
    W32 a, b;
    dec.wpair(j, &a, &b);
    return std::make_pair(a, b);
  }
}

}  // namespace
}  // namespace qdot_detail
}  // namespace qkv

#include "wasm_tile.h"
// (after the tile they run)
#include "tiles.h"
#include "wasm_gemm.h"

namespace qkv {
namespace qdot_detail {
namespace {

// The K types against super-block activations: out[r * NT + t] = row r . token t. Each
// sub-block's products are multiplied by its integer scale and summed in i32 over the
// super-block (isum); the float work, the min (Q4_K, Q5_K) or offset (Q6_K) term included, is
// once per super-block per (row, token) in the decoder's kfinish. Every tile shape does the
// same operations per (row, token), so decode and prefill give the same bits.
template <class D, int NR, int NT>
inline void ktile(const uint8_t* const* rows, const BlockQ8K* const* xs, int nsb, float* out) {
  F acc[NR][NT];
  for (int r = 0; r < NR; r++)
    for (int t = 0; t < NT; t++) acc[r][t] = fzero();
  D dec[NR];
  for (int s = 0; s < nsb; s++) {
    for (int r = 0; r < NR; r++) dec[r].prepare_k(rows[r] + (size_t)s * D::kBytes);
    I32 isum[NR][NT];
    for (int r = 0; r < NR; r++)
      for (int t = 0; t < NT; t++) isum[r][t] = wasm_i32x4_splat(0);
    QKV_UNROLL
    for (int j = 0; j < 8; j += 2) {
      for (int r = 0; r < NR; r++) {
        const auto [wa, wb] = weight_pair(dec[r], j);
        for (int t = 0; t < NT; t++) {
          const int8_t* q = xs[t][s].q + 32 * j;
          const X8 xa{wasm_v128_load(q), wasm_v128_load(q + 16)}, xb{wasm_v128_load(q + 32), wasm_v128_load(q + 48)};
          isum[r][t] = wasm_i32x4_add(isum[r][t], wasm_i32x4_add(dec[r].kdot(j, wa, xa), dec[r].kdot(j + 1, wb, xb)));
          if constexpr (NT == 1) pin(isum[r][t]);  // decode: Q4_K +1-4%, Q6_K +4-6% (Chromium 156)
        }
      }
    }
    for (int t = 0; t < NT; t++)
      for (int r = 0; r < NR; r++) acc[r][t] = dec[r].kfinish(isum[r][t], xs[t][s], acc[r][t]);
  }
  for (int r = 0; r < NR; r++)
    for (int t = 0; t < NT; t++) out[r * NT + t] = fsum(acc[r][t]);
}

// K-type prefill (>= kPackMinTokens tokens): ktile re-decodes every weight sub-block (codes from
// nibbles and high bits, scale splats) once per 4 tokens. Here each super-block of a panel of
// rows is decoded once per pass over a block of tokens into KRow (codes, scale splats, and the
// decoder itself for kfinish), and the 2 x 4 tile reads it back: per (row, token) the same
// integer dots and the same kfinish as ktile, so the same bits as decode.
template <class D>
struct KRow {
  D dec;
  B32 w[8];
  v128_t sa[8], sb[8];
  void decode(const uint8_t* b) {
    dec.prepare_k(b);
    for (int j = 0; j < 8; j += 2) dec.wpair8(j, &w[j], &w[j + 1]);
    for (int j = 0; j < 8; j++) sa[j] = dec.kscale(j, 0), sb[j] = dec.kscale(j, 1);
  }
};

template <class D, int NR, int NT>
inline void ktile_decoded(const KRow<D>* const* rows, const BlockQ8K* const* xs, int nsb, float* out) {
  F acc[NR][NT];
  for (int r = 0; r < NR; r++)
    for (int t = 0; t < NT; t++) acc[r][t] = fzero();
  for (int s = 0; s < nsb; s++) {
    I32 isum[NR][NT];
    for (int r = 0; r < NR; r++)
      for (int t = 0; t < NT; t++) isum[r][t] = wasm_i32x4_splat(0);
    QKV_UNROLL
    for (int j = 0; j < 8; j += 2) {
      for (int r = 0; r < NR; r++) {
        const KRow<D>& k = rows[r][s];
        const B32 wa = k.w[j], wb = k.w[j + 1];
        for (int t = 0; t < NT; t++) {
          const int8_t* q = xs[t][s].q + 32 * j;
          const X8 xa{wasm_v128_load(q), wasm_v128_load(q + 16)}, xb{wasm_v128_load(q + 32), wasm_v128_load(q + 48)};
          isum[r][t] = wasm_i32x4_add(isum[r][t], wasm_i32x4_add(D::kdot_s(wa, xa, k.sa[j], k.sb[j]),
                                                                 D::kdot_s(wb, xb, k.sa[j + 1], k.sb[j + 1])));
        }
      }
    }
    for (int t = 0; t < NT; t++)
      for (int r = 0; r < NR; r++) acc[r][t] = rows[r][s].dec.kfinish(isum[r][t], xs[t][s], acc[r][t]);
  }
  for (int r = 0; r < NR; r++)
    for (int t = 0; t < NT; t++) out[r * NT + t] = fsum(acc[r][t]);
}

// Y = X W^T over rows [r0, r1) for T tokens through the decoded panels (2 rows, passes of
// kPackTokenBlock tokens whose activations stay in L2; a short last group repeats its last token).
template <class D>
void kprefill_decoded(float* Y, int64_t ldy, const BlockQ8K* X, const uint8_t* W, size_t rb, int T, int nsb, int r0,
                      int r1) {
  constexpr int NR = 2, NT = 4;
  thread_local std::vector<KRow<D>> panel;  // NR rows: bounded by the width
  panel.resize((size_t)NR * nsb);
  float out[NR * NT];
  for (int t0 = 0; t0 < T; t0 += kPackTokenBlock) {
    const int t1 = T - t0 < kPackTokenBlock ? T : t0 + kPackTokenBlock;
    for (int r = r0; r < r1; r += NR) {
      const int nr = r1 - r < NR ? r1 - r : NR;
      const KRow<D>* rows[NR];
      for (int k = 0; k < NR; k++) {
        KRow<D>* p = panel.data() + (size_t)(k < nr ? k : nr - 1) * nsb;
        if (k < nr)
          for (int s = 0; s < nsb; s++) p[s].decode(W + (size_t)(r + k) * rb + (size_t)s * D::kBytes);
        rows[k] = p;
      }
      for (int t = t0; t < t1; t += NT) {
        const BlockQ8K* xs[NT];
        for (int i = 0; i < NT; i++) xs[i] = X + (size_t)(t + i < t1 ? t + i : t1 - 1) * nsb;
        if (nr == NR) ktile_decoded<D, NR, NT>(rows, xs, nsb, out);
        else ktile_decoded<D, 1, NT>(rows, xs, nsb, out);
        for (int i = 0; i < NT && t + i < t1; i++)
          for (int k = 0; k < nr; k++) Y[(t + i) * ldy + r + k] = out[k * NT + i];
      }
    }
  }
}

// Q8_0 decode in the relaxed builds: the token's activations split once per call (dot_sign).
// 7-11% faster in Chromium 156 than widening them once per call and multiplying widened
// weights (39.0 against 35.1 GFLOP/s out of cache).
void sign_split_activations(const BlockQ8A* X, int nb, std::vector<BlockQ8S>* out) {
  out->resize((size_t)nb);
  for (int b = 0; b < nb; b++) {
    BlockQ8S& o = (*out)[(size_t)b];
    o.d = X[b].d;
    o.s = X[b].s;
    const v128_t v0 = wasm_v128_load(X[b].q), v1 = wasm_v128_load(X[b].q + 16);
    const v128_t a0 = wasm_i8x16_abs(v0), a1 = wasm_i8x16_abs(v1), m0 = wasm_i8x16_shr(v0, 7),
                 m1 = wasm_i8x16_shr(v1, 7);
    wasm_v128_store(o.q, a0);
    wasm_v128_store(o.q + 16, a1);
    wasm_v128_store(o.q + 32, m0);
    wasm_v128_store(o.q + 48, m1);
    // The negative activations' magnitudes, summed into four lanes (dot_sign's sums are added
    // across lanes later, so any split of the total will do).
    const v128_t n16 = wasm_i16x8_add(wasm_u16x8_extadd_pairwise_u8x16(wasm_v128_and(a0, m0)),
                                      wasm_u16x8_extadd_pairwise_u8x16(wasm_v128_and(a1, m1)));
    wasm_v128_store(o.q + 64, wasm_u32x4_extadd_pairwise_u16x8(n16));
  }
}

// Weight rows per decode tile: 4 for the one-block types, 2 for the K types (as simd128.cpp).
template <class D>
constexpr int kDecodeRows = D::kSub == 1 ? 4 : 2;

template <class D>
void matmul_typed(float* Y, int64_t ldy, const BlockQ8A* X, const uint8_t* W, int T, int n, int r0, int r1,
                  const QdotPacked* pk) {
  const int nb = n / 32;
  const size_t rb = (size_t)(nb / D::kSub) * D::kBytes;
  if (T >= kPackMinTokens) return prefill_gemm<D>(Y, ldy, X, pk, W, rb, T, nb, r0, r1);
  if (T > 1) return prefill_tiles(BlockTile<D, BlockQ8A>{nb}, Y, ldy, X, (size_t)nb, W, rb, T, r0, r1);
  if constexpr (!kRelaxed8<D>) {
    thread_local std::vector<BlockQ8S> split;
    sign_split_activations(X, nb, &split);
    return decode_tiles<kDecodeRows<D>>(BlockTile<D, BlockQ8S>{nb}, Y, split.data(), W, rb, r0, r1);
  }
  decode_tiles<kDecodeRows<D>>(BlockTile<D, BlockQ8A>{nb}, Y, X, W, rb, r0, r1);
}

template <class D>
struct SuperTile {  // the K types against BlockQ8K
  int nsb;
  template <int NR, int NT>
  void run(const uint8_t* const* rows, const BlockQ8K* const* xs, float* out) const {
    ktile<D, NR, NT>(rows, xs, nsb, out);
  }
};

// Decode 2 rows per tile (4 measured 8-15% slower in Chromium 156).
template <class D>
void matmul_k(float* Y, int64_t ldy, const BlockQ8K* X, const uint8_t* W, int T, int n, int r0, int r1) {
  const int nsb = n / 256;
  const size_t rb = (size_t)nsb * D::kBytes;
  if (T >= kPackMinTokens) {
    // The tile over the stored rows or the decoded rows, whichever this engine runs faster for
    // type D, timed on the first calls as prefill_gemm's two (the same bits either way): the
    // decoded rows' tile holds more vectors live (Q6_K's two scale splats per sub-block), and
    // in Chromium 156 it measured faster for Q4_K and Q5_K but not always for Q6_K.
    static Trial trial;
    auto run = [&](int which) {
      if (which == 1) return kprefill_decoded<D>(Y, ldy, X, W, rb, T, nsb, r0, r1);
      prefill_tiles(SuperTile<D>{nsb}, Y, ldy, X, (size_t)nsb, W, rb, T, r0, r1);
    };
    const int forced = g_prefill_forced.load(std::memory_order_relaxed);
    if (forced >= 0) return run(forced == 0 ? 0 : 1);
    const int kept = trial.decided();
    if (kept >= 0) return run(kept);
    const int which = trial.pick();
    const auto start = std::chrono::steady_clock::now();
    run(which);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    return trial.report(which, (double)T * nsb * (r1 - r0), took.count());
  }
  if (T > 1) return prefill_tiles(SuperTile<D>{nsb}, Y, ldy, X, (size_t)nsb, W, rb, T, r0, r1);
  decode_tiles<2>(SuperTile<D>{nsb}, Y, X, W, rb, r0, r1);
}

// The one-block types, with or without the finite-scale conversion.
template <bool F>
void matmul_one_block(QType t, float* Y, int64_t ldy, const BlockQ8A* X, const uint8_t* w, int T, int n, int r0, int r1,
                      const QdotPacked* pk) {
  switch (t) {
    case QType::Q8_0: return matmul_typed<Q8_0Simd128<F>>(Y, ldy, X, w, T, n, r0, r1, pk);
    case QType::Q4_0: return matmul_typed<Q4_5Relaxed<false, false, F>>(Y, ldy, X, w, T, n, r0, r1, pk);
    case QType::Q4_1: return matmul_typed<Q4_5Relaxed<true, false, F>>(Y, ldy, X, w, T, n, r0, r1, pk);
    case QType::Q5_0: return matmul_typed<Q4_5Relaxed<false, true, F>>(Y, ldy, X, w, T, n, r0, r1, pk);
    default: return matmul_typed<Q4_5Relaxed<true, true, F>>(Y, ldy, X, w, T, n, r0, r1, pk);
  }
}

}  // namespace
}  // namespace qdot_detail

bool qdot_uses_finite_scales() { return true; }
bool qdot_k_super_blocks() { return true; }
const char* qdot_impl_name() { return "wasm-relaxed"; }

void qdot_pack_prefill(QdotPacked& p, const BlockQ8A* X, int T, int n, const QType* types, int n_types) {
  using namespace qdot_detail;
  bool wide = false, narrow = false;
  for (int i = 0; i < n_types; i++) {
    switch (types[i]) {  // the decoders matmul_q8_simd picks (the 8-bit layout: kPack8)
      case QType::Q8_0: (kPack8<Q8_0Simd128<true>> ? narrow : wide) = true; break;
      case QType::Q4_0: (kPack8<Q4_5Relaxed<false, false, true>> ? narrow : wide) = true; break;
      case QType::Q4_1: (kPack8<Q4_5Relaxed<true, false, true>> ? narrow : wide) = true; break;
      case QType::Q5_0: (kPack8<Q4_5Relaxed<false, true, true>> ? narrow : wide) = true; break;
      case QType::Q5_1: (kPack8<Q4_5Relaxed<true, true, true>> ? narrow : wide) = true; break;
      case QType::Q4_K: (kPack8<QK45Relaxed<false>> ? narrow : wide) = true; break;
      case QType::Q5_K: (kPack8<QK45Relaxed<true>> ? narrow : wide) = true; break;
      case QType::Q6_K: (kPack8<Q6KRelaxed> ? narrow : wide) = true; break;
      default: break;
    }
  }
  pack_prefill_wasm(p, X, T, n, wide, narrow);
}

void matmul_q8_simd(QType t, float* Y, int64_t ldy, const BlockQ8A* X, const void* W, int T, int n, int r0, int r1,
                    bool finite_scales, const QdotPacked* pk) {
  using namespace qdot_detail;
  const uint8_t* w = static_cast<const uint8_t*>(W);
  switch (t) {
    case QType::Q8_0:
    case QType::Q4_0:
    case QType::Q4_1:
    case QType::Q5_0:
    case QType::Q5_1:
      if (finite_scales) return matmul_one_block<true>(t, Y, ldy, X, w, T, n, r0, r1, pk);
      return matmul_one_block<false>(t, Y, ldy, X, w, T, n, r0, r1, pk);
    case QType::Q4_K: return matmul_typed<QK45Relaxed<false>>(Y, ldy, X, w, T, n, r0, r1, pk);
    case QType::Q5_K: return matmul_typed<QK45Relaxed<true>>(Y, ldy, X, w, T, n, r0, r1, pk);
    case QType::Q6_K: return matmul_typed<Q6KRelaxed>(Y, ldy, X, w, T, n, r0, r1, pk);
    default: fail(ErrorCode::Internal, "matmul_q8_simd: weight type has no integer dot product");
  }
}

void matmul_q8k_simd(QType t, float* Y, int64_t ldy, const BlockQ8K* X, const void* W, int T, int n, int r0, int r1) {
  if (!qtype_k_super(t)) fail(ErrorCode::Internal, "matmul_q8k_simd: not a K type");
  using namespace qdot_detail;
  const uint8_t* w = static_cast<const uint8_t*>(W);
  switch (t) {
    case QType::Q4_K: return matmul_k<QK45Relaxed<false>>(Y, ldy, X, w, T, n, r0, r1);
    case QType::Q5_K: return matmul_k<QK45Relaxed<true>>(Y, ldy, X, w, T, n, r0, r1);
    default: return matmul_k<Q6KRelaxed>(Y, ldy, X, w, T, n, r0, r1);
  }
}

}  // namespace qkv

#endif
