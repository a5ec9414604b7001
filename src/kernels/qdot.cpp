// Integer dot products of quantized weights with Q8 activations: a scalar reference, and one
// generic register-blocked kernel over per-type block decoders, written against a handful of
// integer primitives that have three implementations:
//   AVX2 (x86): 32 bytes per register; _mm256_maddubs_epi16 (u8 x s8 -> pairs of i16) and
//               _mm256_madd_epi16 (-> i32), which xsimd has no equivalent for;
//   WASM SIMD128: bytes widened to i16 as they are loaded, and i32x4.dot_i16x8 (activations are
//               stored widened);
//   portable: plain loops (any other target, or -DQKV_PORTABLE_QDOT).
// The float work (quantizing activations) uses xsimd.
#include "qdot.h"

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "../common.h"
#include "simd.h"

#if defined(__AVX2__) && !defined(QKV_PORTABLE_QDOT)
#define QKV_QDOT_AVX2 1
#include <immintrin.h>
#elif defined(__wasm_simd128__) && !defined(QKV_PORTABLE_QDOT)
#define QKV_QDOT_WASM 1
#include <wasm_simd128.h>
#if defined(QKV_RELAXED_SIMD)
#define QKV_QDOT_RELAXED 1
#endif
#endif

namespace qkv {

bool qtype_int_dot(QType t) {
  switch (t) {
    case QType::Q8_0: case QType::Q4_0: case QType::Q4_1: case QType::Q5_0: case QType::Q5_1:
    case QType::Q4_K: case QType::Q5_K: case QType::Q6_K: return true;
    default: return false;
  }
}

static inline uint16_t u16_at(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
static inline uint32_t u32_at(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// A block scale (f16) in the hot loop: F16C where the CPU has it, else the exponent rebiased in
// integers for normal values and the full conversion for the rare rest (zero, subnormal, Inf,
// NaN). The sign is moved with integer ops: a `sign ? -f : f` on a float lowers to a branch in
// WASM (V8 has no float cmov), and Q4_0's scales are negative half the time (llama.cpp's
// quantizer divides by the signed extreme), so that branch mispredicted on every other block
// and made Q4_0 decode 3x slower than Q8_0 there.
static inline float half(const uint8_t* p) {
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

// ---- activations ---------------------------------------------------------------------------

// max |v[k]| over n values; *finite: none is Inf or NaN.
static float abs_max(const float* v, int n, bool* finite) {
  float amax = 0.0f;
  *finite = true;
  for (int k = 0; k < n; k++) {
    *finite = *finite && std::isfinite(v[k]);
    amax = std::fmax(amax, std::fabs(v[k]));
  }
  return amax;
}

void quantize_act_q8_ref(const float* x, BlockQ8A* dst, int n) {
  for (int b = 0; b < n / 32; b++) {
    const float* v = x + 32 * b;
    BlockQ8A& o = dst[b];
    bool finite;
    const float amax = abs_max(v, 32, &finite);
    o.h[0] = o.h[1] = 0;
    if (!finite) {
      o.d = o.s = NAN;
      for (int k = 0; k < 32; k++) o.q[k] = 0;
      continue;
    }
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    o.d = amax / 127.0f;
    for (int k = 0; k < 32; k++) {
      const int q = (int)std::nearbyint(v[k] * id);
      o.q[k] = (q8a_t)q;
      o.h[k / 16] = (int16_t)(o.h[k / 16] + q);
    }
    o.s = o.d * (float)(o.h[0] + o.h[1]);
  }
}

void quantize_act_q8_simd(const float* x, BlockQ8A* dst, int n) {
  using ibatch = xsimd::batch<int32_t>;
  constexpr int L = kLanes, NV = 32 / kLanes;  // 4, 8 or 16 lanes: all divide 32
  static_assert(32 % kLanes == 0, "a block of 32 must be whole vectors");
  alignas(64) int32_t qi[32];
  const fbatch fmax_v(FLT_MAX);
  for (int b = 0; b < n / 32; b++) {
    const float* v = x + 32 * b;
    BlockQ8A& o = dst[b];
    fbatch xs[NV], amax(0.0f);
    auto finite = fbatch(0.0f) == fbatch(0.0f);
    for (int i = 0; i < NV; i++) {
      xs[i] = fbatch::load_unaligned(v + i * L);
      const fbatch a = xsimd::abs(xs[i]);
      finite = finite && (a <= fmax_v);  // false for Inf and NaN
      amax = xsimd::max(amax, a);
    }
    o.h[0] = o.h[1] = 0;
    if (!xsimd::all(finite)) {
      o.d = o.s = NAN;
      for (int k = 0; k < 32; k++) o.q[k] = 0;
      continue;
    }
    const float a = xsimd::reduce_max(amax);
    const float id = a != 0.0f ? 127.0f / a : 0.0f;
    o.d = a / 127.0f;
    ibatch sum[2] = {ibatch(0), ibatch(0)};
    for (int i = 0; i < NV; i++) {
      const ibatch q = xsimd::batch_cast<int32_t>(xsimd::nearbyint(xs[i] * fbatch(id)));  // integral: exact cast
      q.store_aligned(qi + i * L);
      sum[i * 2 / NV] += q;
    }
    for (int k = 0; k < 32; k++) o.q[k] = (q8a_t)qi[k];
    o.h[0] = (int16_t)xsimd::reduce_add(sum[0]);
    o.h[1] = (int16_t)xsimd::reduce_add(sum[1]);
    o.s = o.d * (float)(o.h[0] + o.h[1]);
  }
}

// ---- scalar reference ----------------------------------------------------------------------

// Block j (of 32 elements) of the weight block at p, as integers: element k's value is
// d * s[k] * w[k] + m, where s[k] = sa for k < 16 and sb after (1 except for Q6_K).
struct RefBlock {
  int w[32];
  float d = 0.0f, m = 0.0f;
  int sa = 1, sb = 1;
};

static RefBlock ref_block(QType t, const uint8_t* p, int j) {
  RefBlock r;
  switch (t) {
    case QType::Q8_0:
      r.d = f16_to_f32(u16_at(p));
      for (int k = 0; k < 32; k++) r.w[k] = (int8_t)p[2 + k];
      break;
    case QType::Q4_0: case QType::Q4_1: {
      const bool q41 = t == QType::Q4_1;
      const uint8_t* qs = p + (q41 ? 4 : 2);
      r.d = f16_to_f32(u16_at(p));
      if (q41) r.m = f16_to_f32(u16_at(p + 2));
      for (int k = 0; k < 32; k++) r.w[k] = (k < 16 ? qs[k] & 0x0f : qs[k - 16] >> 4) - (q41 ? 0 : 8);
      break;
    }
    case QType::Q5_0: case QType::Q5_1: {
      const bool q51 = t == QType::Q5_1;
      const uint32_t qh = u32_at(p + (q51 ? 4 : 2));
      const uint8_t* qs = p + (q51 ? 8 : 6);
      r.d = f16_to_f32(u16_at(p));
      if (q51) r.m = f16_to_f32(u16_at(p + 2));
      for (int k = 0; k < 32; k++)
        r.w[k] = ((k < 16 ? qs[k] & 0x0f : qs[k - 16] >> 4) | (int)(((qh >> k) & 1) << 4)) - (q51 ? 0 : 16);
      break;
    }
    case QType::Q4_K: case QType::Q5_K: {
      const bool k5 = t == QType::Q5_K;
      int sc, mn;
      kquant_scale_min(j, p + 4, &sc, &mn);
      r.d = f16_to_f32(u16_at(p)) * (float)sc;
      r.m = -f16_to_f32(u16_at(p + 2)) * (float)mn;
      const uint8_t* q = p + (k5 ? 48 : 16) + 32 * (j / 2);
      for (int k = 0; k < 32; k++) {
        r.w[k] = j % 2 ? q[k] >> 4 : q[k] & 0x0f;
        if (k5) r.w[k] |= ((p[16 + k] >> j) & 1) << 4;
      }
      break;
    }
    case QType::Q6_K: {
      const int h = j / 4, c = j % 4;
      const uint8_t* ql = p + 64 * h + 32 * (c % 2);
      const uint8_t* qh = p + 128 + 32 * h;
      r.d = f16_to_f32(u16_at(p + 208));
      r.sa = (int8_t)p[192 + 8 * h + 2 * c];
      r.sb = (int8_t)p[192 + 8 * h + 2 * c + 1];
      for (int k = 0; k < 32; k++)
        r.w[k] = ((c < 2 ? ql[k] & 0x0f : ql[k] >> 4) | (((qh[k] >> (2 * c)) & 3) << 4)) - 32;
      break;
    }
    default: break;
  }
  return r;
}

// One 32-element block's term, d * dx * (sa * sum_{k<16} w q + sb * sum_{k>=16} w q) + m * xs
// (xs: what the min multiplies, dx * sum q), added to *s, and its magnitude (every integer
// product's, times its scales) to *a.
template <class Q>
static void ref_term(const RefBlock& w, const Q* q, double dx, double xs, double* s, double* a) {
  int64_t lo = 0, hi = 0, alo = 0, ahi = 0;
  for (int k = 0; k < 16; k++) {
    lo += (int64_t)w.w[k] * q[k];
    alo += std::abs(w.w[k] * q[k]);
  }
  for (int k = 16; k < 32; k++) {
    hi += (int64_t)w.w[k] * q[k];
    ahi += std::abs(w.w[k] * q[k]);
  }
  *s += (double)w.d * dx * (double)(w.sa * lo + w.sb * hi) + (double)w.m * xs;
  *a += std::fabs((double)w.d * dx) * (double)(std::abs(w.sa) * alo + std::abs(w.sb) * ahi) + std::fabs((double)w.m * xs);
}

float dot_q8_ref(QType t, const void* row, const BlockQ8A* x, int n, double* mag) {
  const int per = qtype_block(t) / 32;  // activation blocks per weight block
  const size_t bytes = qtype_row_bytes(t, qtype_block(t));
  const uint8_t* p = static_cast<const uint8_t*>(row);
  double s = 0.0, a = 0.0;
  for (int b = 0; b < n / 32; b++)
    ref_term(ref_block(t, p + (size_t)(b / per) * bytes, b % per), x[b].q, x[b].d, x[b].s, &s, &a);
  if (mag) *mag = a;
  return (float)s;
}

void matmul_q8_ref(QType t, float* Y, int64_t ldy, const BlockQ8A* X, const void* W, int T, int n, int r0, int r1) {
  const size_t rb = qtype_row_bytes(t, n);
  for (int r = r0; r < r1; r++)
    for (int tok = 0; tok < T; tok++)
      Y[tok * ldy + r] = dot_q8_ref(t, static_cast<const uint8_t*>(W) + (size_t)r * rb, X + (size_t)tok * (n / 32), n);
}

// ---- super-block activations (K types) -----------------------------------------------------

bool qtype_k_super(QType t) { return t == QType::Q4_K || t == QType::Q5_K || t == QType::Q6_K; }

// The sums of q over each 16 and each 32 (at most 32 * 127 in magnitude: int16).
static void q8k_sums(BlockQ8K& o) {
  for (int g = 0; g < 16; g++) {
    int s = 0;
    for (int k = 0; k < 16; k++) s += o.q[16 * g + k];
    o.sum16[g] = (int16_t)s;
  }
  for (int j = 0; j < 8; j++) o.sum32[j] = (int16_t)(o.sum16[2 * j] + o.sum16[2 * j + 1]);
}

void quantize_act_q8k_ref(const float* x, BlockQ8K* dst, int n) {
  for (int b = 0; b < n / 256; b++) {
    const float* v = x + 256 * b;
    BlockQ8K& o = dst[b];
    bool finite;
    const float amax = abs_max(v, 256, &finite);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int k = 0; k < 256; k++) o.q[k] = finite ? (int8_t)(int)std::nearbyint(v[k] * id) : 0;
    o.d = finite ? amax / 127.0f : NAN;
    q8k_sums(o);
  }
}

void quantize_act_q8k_simd(const float* x, BlockQ8K* dst, int n) {
  constexpr int L = kLanes;
  static_assert(256 % kLanes == 0, "a super-block must be whole vectors");
  alignas(64) int32_t qi[256];
  const fbatch fmax_v(FLT_MAX);
  for (int b = 0; b < n / 256; b++) {
    const float* v = x + 256 * b;
    BlockQ8K& o = dst[b];
    fbatch amax(0.0f);
    auto finite = fbatch(0.0f) == fbatch(0.0f);
    for (int i = 0; i < 256; i += L) {
      const fbatch a = xsimd::abs(fbatch::load_unaligned(v + i));
      finite = finite && (a <= fmax_v);  // false for Inf and NaN
      amax = xsimd::max(amax, a);
    }
    if (xsimd::all(finite)) {
      const float a = xsimd::reduce_max(amax);
      const fbatch id(a != 0.0f ? 127.0f / a : 0.0f);
      for (int i = 0; i < 256; i += L)  // integral: exact cast
        xsimd::batch_cast<int32_t>(xsimd::nearbyint(fbatch::load_unaligned(v + i) * id)).store_aligned(qi + i);
      for (int k = 0; k < 256; k++) o.q[k] = (int8_t)qi[k];
      o.d = a / 127.0f;
    } else {
      std::memset(o.q, 0, sizeof o.q);
      o.d = NAN;
    }
    q8k_sums(o);
  }
}

float dot_q8k_ref(QType t, const void* row, const BlockQ8K* x, int n, double* mag) {
  const size_t bytes = qtype_row_bytes(t, 256);
  const uint8_t* p = static_cast<const uint8_t*>(row);
  double s = 0.0, a = 0.0;
  for (int b = 0; b < n / 256; b++)
    for (int j = 0; j < 8; j++)
      ref_term(ref_block(t, p + (size_t)b * bytes, j), x[b].q + 32 * j, x[b].d, (double)x[b].d * x[b].sum32[j], &s, &a);
  if (mag) *mag = a;
  return (float)s;
}

// ---- integer primitives --------------------------------------------------------------------
// W32: 32 weight integers (unsigned 0..63 or signed -128..127); X32: 32 activations;
// I32: partial integer sums whose lanes add up to a dot product; F: float accumulator lanes.
namespace {

#if QKV_QDOT_AVX2
using W32 = __m256i;
using X32 = __m256i;
using I32 = __m256i;
using F = __m256;
const char* const kImpl = "avx2";

inline __m256i bytes(int v) { return _mm256_set1_epi8((char)v); }
inline W32 load_w32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline W32 load_s32(const uint8_t* p) { return load_w32(p); }  // the signed products read the same bytes
inline X32 load_x32(const q8a_t* q) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)); }
// Elements 0..15 = low nibbles of p[0..16), 16..31 = their high nibbles (Q4_0/Q4_1/Q5 order).
inline W32 nibbles16(const uint8_t* p) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), m = _mm_set1_epi8(0x0f);
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(b, m)), _mm_and_si128(_mm_srli_epi16(b, 4), m), 1);
}
inline W32 low4(W32 v) { return _mm256_and_si256(v, bytes(0x0f)); }
inline W32 high4(W32 v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), bytes(0x0f)); }
// (v >> s) & mask per byte, s < 0 shifting left (the masks keep bits of the byte's own).
inline W32 bits_at(W32 v, int s, int mask) {
  const __m256i sh = s >= 0 ? _mm256_srl_epi16(v, _mm_cvtsi32_si128(s)) : _mm256_sll_epi16(v, _mm_cvtsi32_si128(-s));
  return _mm256_and_si256(sh, bytes(mask));
}
inline W32 or8(W32 a, W32 b) { return _mm256_or_si256(a, b); }
inline W32 sub8(W32 v, int c) { return _mm256_sub_epi8(v, bytes(c)); }
// Byte e = 16 where bit e of `bits` is set, else 0.
inline W32 bits_to_16s(uint32_t bits) {
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), bytes(16));
}
// Unsigned weights (< 128) times signed activations: maddubs pairs never saturate
// (2 * 127 * 127 < 32767).
inline I32 dot_us(W32 w, X32 x) { return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1)); }
// Signed weights: |w| times x with w's sign moved onto x (|w| <= 128, |x| <= 127: no saturation).
inline __m256i pairs_ss(W32 w, X32 x) { return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)); }
inline I32 dot_ss(W32 w, X32 x) { return _mm256_madd_epi16(pairs_ss(w, x), _mm256_set1_epi16(1)); }
// Signed, the first 16 products times sa and the last 16 times sb.
inline I32 dot_ss16(W32 w, X32 x, int sa, int sb) {
  const __m256i s = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16((short)sa)), _mm_set1_epi16((short)sb), 1);
  return _mm256_madd_epi16(pairs_ss(w, x), s);
}
// out[0..8) = s * v[0..8) (K-quant sub-block scales).
inline void scale_u8x8(const uint8_t* v, float s, float* out) {
  const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(v))));
  _mm256_storeu_ps(out, _mm256_mul_ps(f, _mm256_set1_ps(s)));
}
inline F fzero() { return _mm256_setzero_ps(); }
inline F fmadd(I32 i, float s, F acc) {
#if defined(__FMA__)
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), _mm256_set1_ps(s), acc);
#else
  return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(i), _mm256_set1_ps(s)));
#endif
}
inline float fsum(F a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

#elif QKV_QDOT_WASM
// Weights are widened to i16 as they are loaded: v128.load8x8_s/u is one sign/zero-extending
// load on x64 and arm64, where widening a loaded 16-byte vector costs three shuffles (the high
// half takes two). Lanes follow the activations: elements 0..7, 8..15, 16..23, 24..31. Nibbles
// and bit fields are then cut from zero-extended bytes with 16-bit shifts and masks, which WASM
// has natively (its 8-bit shifts are emulated).
struct W32 { v128_t a, b, c, d; };
struct X32 { v128_t a, b, c, d; };
using I32 = v128_t;
using F = v128_t;
#if QKV_QDOT_RELAXED
const char* const kImpl = "wasm-relaxed";  // Q8_0 as below; the other types through rdot
#else
const char* const kImpl = "wasm-simd128";
#endif

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
[[maybe_unused]] inline X32 load_x32(const int16_t* q) { return {wasm_v128_load(q), wasm_v128_load(q + 8), wasm_v128_load(q + 16), wasm_v128_load(q + 24)}; }
[[maybe_unused]] inline X32 load_x32(const int8_t* q) {  // 8-bit activations (relaxed builds), widened as they load
  const uint8_t* b = reinterpret_cast<const uint8_t*>(q);
  return {s8x8(b), s8x8(b + 8), s8x8(b + 16), s8x8(b + 24)};
}
template <class Op>
inline W32 each(W32 v, Op op) { return {op(v.a), op(v.b), op(v.c), op(v.d)}; }
[[maybe_unused]] inline W32 nibbles16(const uint8_t* p) {
  const v128_t lo = u8x8(p), hi = u8x8(p + 8), m = wasm_i16x8_splat(0x0f);
  return {wasm_v128_and(lo, m), wasm_v128_and(hi, m), wasm_u16x8_shr(lo, 4), wasm_u16x8_shr(hi, 4)};
}
inline W32 low4(W32 v) { return each(v, [](v128_t x) { return wasm_v128_and(x, wasm_i16x8_splat(0x0f)); }); }
inline W32 high4(W32 v) { return each(v, [](v128_t x) { return wasm_u16x8_shr(x, 4); }); }  // lanes < 256
inline W32 bits_at(W32 v, int s, int mask) {  // s < 0: left
  return each(v, [=](v128_t x) {
    return wasm_v128_and(s >= 0 ? wasm_u16x8_shr(x, s) : wasm_i16x8_shl(x, -s), wasm_i16x8_splat((int16_t)mask));
  });
}
inline W32 or8(W32 a, W32 b) { return {wasm_v128_or(a.a, b.a), wasm_v128_or(a.b, b.b), wasm_v128_or(a.c, b.c), wasm_v128_or(a.d, b.d)}; }
inline W32 sub8(W32 v, int c) { return each(v, [=](v128_t x) { return wasm_i16x8_sub(x, wasm_i16x8_splat((int16_t)c)); }); }
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


#if QKV_QDOT_RELAXED
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
struct B32 { v128_t lo, hi; };  // codes of elements 0..15 and 16..31, one per byte
struct X8 { v128_t lo, hi; };   // the 32 activations, one per byte
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
struct XS { v128_t alo, ahi, mlo, mhi, c; };
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
#endif

#else  // portable: plain loops the compiler may vectorise
struct W32 { int16_t v[32]; };
struct X32 { int16_t v[32]; };
using I32 = int32_t;
using F = float;
const char* const kImpl = "portable";

inline W32 load_w32(const uint8_t* p) { W32 r; for (int k = 0; k < 32; k++) r.v[k] = p[k]; return r; }
inline W32 load_s32(const uint8_t* p) { W32 r; for (int k = 0; k < 32; k++) r.v[k] = (int8_t)p[k]; return r; }
inline X32 load_x32(const q8a_t* q) { X32 r; for (int k = 0; k < 32; k++) r.v[k] = q[k]; return r; }
inline W32 nibbles16(const uint8_t* p) {
  W32 r;
  for (int k = 0; k < 16; k++) { r.v[k] = p[k] & 0x0f; r.v[k + 16] = p[k] >> 4; }
  return r;
}
inline W32 low4(W32 v) { for (auto& e : v.v) e &= 0x0f; return v; }
inline W32 high4(W32 v) { for (auto& e : v.v) e = (e >> 4) & 0x0f; return v; }
inline W32 bits_at(W32 v, int s, int mask) { for (auto& e : v.v) e = (s >= 0 ? e >> s : e << -s) & mask; return v; }
inline W32 or8(W32 a, W32 b) { for (int k = 0; k < 32; k++) a.v[k] |= b.v[k]; return a; }
// Bytes loaded by load_w32 are unsigned; a signed weight type reinterprets them first.
inline W32 sub8(W32 v, int c) { for (auto& e : v.v) e = (int16_t)(int8_t)(uint8_t)(e - c); return v; }
inline W32 bits_to_16s(uint32_t bits) { W32 r; for (int k = 0; k < 32; k++) r.v[k] = ((bits >> k) & 1) << 4; return r; }
inline I32 dot_us(const W32& w, const X32& x) { int32_t s = 0; for (int k = 0; k < 32; k++) s += w.v[k] * x.v[k]; return s; }
inline I32 dot_ss(const W32& w, const X32& x) { return dot_us(w, x); }
inline I32 dot_ss16(const W32& w, const X32& x, int sa, int sb) {
  int32_t a = 0, b = 0;
  for (int k = 0; k < 16; k++) a += w.v[k] * x.v[k];
  for (int k = 16; k < 32; k++) b += w.v[k] * x.v[k];
  return sa * a + sb * b;
}
inline void scale_u8x8(const uint8_t* v, float s, float* out) { for (int k = 0; k < 8; k++) out[k] = s * (float)v[k]; }
inline F fzero() { return 0.0f; }
inline F fmadd(I32 i, float s, F acc) { return acc + (float)i * s; }
inline float fsum(F a) { return a; }
#endif

// ---- per-type decoders ---------------------------------------------------------------------
// A decoder reads one weight block (kSub activation blocks of 32, kBytes bytes): prepare(p)
// once per block, then w(j) gives the 32 integers of sub-block j and d(j) their scale.
// kKind says how they multiply: signed weights, unsigned weights plus min(j) * d_x * sum(q),
// or signed weights whose two halves carry the integer scales sa(j), sb(j).
enum class Kind { Signed, UnsignedMin, Signed16 };

// Q8_0: f16 d, then 32 signed bytes (load_s32: the one type whose stored weights are signed).
// kFinite (here and in DecQ4_5): every scale of the matrix is known finite (half4).
template <bool kFinite = false>
struct DecQ8_0 {
  static constexpr int kSub = 1, kBytes = 34;
  static constexpr Kind kKind = Kind::Signed;
  const uint8_t* p;
  float s;
  void prepare(const uint8_t* b) { p = b; s = half(b); }
  W32 w(int) const { return load_s32(p + 2); }
  float d(int) const { return s; }
#if QKV_QDOT_WASM
  static void group_scales(const uint8_t* blk, v128_t* d, v128_t*) { *d = half4<kFinite>(blk, kBytes); }
#endif
};

// Q4_0, Q4_1, Q5_0, Q5_1: f16 d, [f16 m], [u32 fifth bits], 16 bytes of nibbles. The unsigned
// codes are multiplied (cheaper than moving signs onto the activations for every token); the
// stored m, or the offset -8 d / -16 d of the _0 types, is the min.
template <bool M, bool K5, bool kFinite = false>
struct DecQ4_5 {
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
#if QKV_QDOT_RELAXED
  B32 w8(int) const {
    const B32 codes = nibbles8(p + kBytes - 16);
    return K5 ? or8(codes, bits_to_16s8(u32_at(p + (M ? 4 : 2)))) : codes;
  }
#endif
#if QKV_QDOT_WASM
  static void group_scales(const uint8_t* blk, v128_t* d, v128_t* m) {
    *d = half4<kFinite>(blk, kBytes);
    *m = M ? half4<kFinite>(blk + 2, kBytes) : wasm_f32x4_mul(*d, wasm_f32x4_splat(K5 ? -16.0f : -8.0f));
  }
#endif
};

// Q4_K / Q5_K: 8 sub-blocks with 6-bit scales and mins, unpacked once per super-block.
template <bool K5>
struct DecQ45_K {
  static constexpr int kSub = 8, kBytes = K5 ? 176 : 144;
  static constexpr Kind kKind = Kind::UnsignedMin;
  const uint8_t* p;
#if QKV_QDOT_WASM
  // The same unpacking in SIMD, the scales kept as vectors: scalar code here (and a store of
  // words reloaded as bytes) cost as much per super-block as two sub-blocks' products.
  v128_t dv[2], mv[2];  // d * scale and -dmin * min of sub-blocks 0-3, 4-7
  // The 6-bit scales of sub-blocks 0-7 in bytes 0-7, their mins in bytes 8-15.
  static v128_t scales_mins(const uint8_t* b) {
    const v128_t a = wasm_v128_load(b + 4);  // words a0 a1 a2 as in the scalar code (then 4 bytes of quants)
    const v128_t lo = wasm_i32x4_shuffle(a, wasm_u32x4_shr(a, 4), 0, 2, 1, 6);        // a0, a2, a1, a2 >> 4
    const v128_t hi = wasm_i32x4_shuffle(a, wasm_i32x4_splat(0), 4, 0, 4, 1);         // 0, a0, 0, a1
    return wasm_v128_or(wasm_v128_and(lo, wasm_i32x4_make(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f)),
                        wasm_i32x4_shl(wasm_v128_and(wasm_u32x4_shr(hi, 6), wasm_i32x4_splat(0x03030303)), 4));
  }
  void prepare(const uint8_t* b) {
    p = b;
    const v128_t dd = f16_lanes(wasm_u32x4_extend_low_u16x8(wasm_v128_load32_zero(b)));  // d, dmin
    const v128_t d = wasm_i32x4_shuffle(dd, dd, 0, 0, 0, 0), mneg = wasm_f32x4_neg(wasm_i32x4_shuffle(dd, dd, 1, 1, 1, 1));
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
#else
  float ds[8], ms[8];
  void prepare(const uint8_t* b) {
    p = b;
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
#endif
  W32 w(int j) const {
    const W32 q = load_w32(p + (K5 ? 48 : 16) + 32 * (j / 2));
    const W32 lo = j % 2 ? high4(q) : low4(q);
    if (!K5) return lo;
    return or8(lo, bits_at(load_w32(p + 16), j - 4, 0x10));  // bit j to bit 4
  }
#if QKV_QDOT_WASM
  // Sub-blocks j and j + 1 (j even): the low and high nibbles of one load.
  void wpair(int j, W32* a, W32* b) const {
    const W32 q = load_w32(p + (K5 ? 48 : 16) + 32 * (j / 2));
    *a = low4(q);
    *b = high4(q);
    if (K5) {
      const W32 qh = load_w32(p + 16);
      *a = or8(*a, bits_at(qh, j - 4, 0x10));
      *b = or8(*b, bits_at(qh, j - 3, 0x10));
    }
  }
#endif
#if QKV_QDOT_RELAXED
  // Against super-block activations (ktile): the scales and mins as i16 lanes, d and dmin.
  v128_t ksc, kmn;
  float kd, kdmin;
  void prepare_k(const uint8_t* b) {
    p = b;
    kd = half(b);
    kdmin = half(b + 2);
    const v128_t v = scales_mins(b);
    ksc = wasm_u16x8_extend_low_u8x16(v);
    kmn = wasm_u16x8_extend_high_u8x16(v);
  }
  // Sub-block j's products times its scale: the pair sums (at most 2 * 2 * 127 * 31) in i16,
  // multiplied by the scale (at most 63) in the one i32x4.dot_i16x8.
  I32 kdot(int j, const B32& w, const X8& x) const {
    return wasm_i32x4_dot_i16x8(wasm_i16x8_add(rdot(x.lo, w.lo), rdot(x.hi, w.hi)), splat16(ksc, j));
  }
  // acc + the super-block's two terms in lanes 0 and 1 (fsum adds them): d * dx * isum and
  // -dmin * dx * sum_j min_j * sum32_j.
  // The two integer totals are reduced exactly before they are converted.
  F kfinish(I32 isum, const BlockQ8K& x, F acc) const {
    const v128_t msum = wasm_i32x4_dot_i16x8(kmn, wasm_v128_load(x.sum32));
    const v128_t a = wasm_i32x4_add(wasm_i32x4_shuffle(isum, msum, 0, 4, 1, 5), wasm_i32x4_shuffle(isum, msum, 2, 6, 3, 7));
    const v128_t t = wasm_i32x4_add(a, wasm_i32x4_shuffle(a, a, 2, 3, 0, 1));  // [I, M, I, M]
    const v128_t f = wasm_f32x4_make(kd * x.d, -kdmin * x.d, 0.0f, 0.0f);
    return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(t), f));
  }
  void wpair8(int j, B32* a, B32* b) const {
    const uint8_t* q = p + (K5 ? 48 : 16) + 32 * (j / 2);
    const v128_t q0 = opaque(wasm_v128_load(q)), q1 = opaque(wasm_v128_load(q + 16));
    *a = {wasm_v128_and(q0, bmask(0x0f)), wasm_v128_and(q1, bmask(0x0f))};
    *b = {bits8(q0, 4, 0x0f), bits8(q1, 4, 0x0f)};
    if (K5) {
      const v128_t h0 = opaque(wasm_v128_load(p + 16)), h1 = opaque(wasm_v128_load(p + 32));
      *a = or8(*a, B32{bits8(h0, j - 4, 0x10), bits8(h1, j - 4, 0x10)});
      *b = or8(*b, B32{bits8(h0, j - 3, 0x10), bits8(h1, j - 3, 0x10)});
    }
  }
#endif
};

// Q6_K: 8 sub-blocks of 32 in two halves of 128; an int8 scale per 16 elements.
struct DecQ6_K {
  static constexpr int kSub = 8, kBytes = 210;
  static constexpr Kind kKind = Kind::Signed16;
  const uint8_t* p;
  float s;
  void prepare(const uint8_t* b) {
    p = b;
    s = half(b + 208);
#if QKV_QDOT_RELAXED
    sc[0] = wasm_i16x8_load8x8(b + 192);
    sc[1] = wasm_i16x8_load8x8(b + 200);
#endif
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
#if QKV_QDOT_WASM
  void group_scales(int, v128_t* d, v128_t*) const { *d = wasm_f32x4_splat(s); }
  // Sub-blocks j and j + 1 (j even) from one load of their shared high bits.
  void wpair(int j, W32* a, W32* b) const {
    const int h = j / 4, c = j % 4;
    const W32 qh = load_w32(p + 128 + 32 * h);
    const W32 q0 = load_w32(p + 64 * h), q1 = load_w32(p + 64 * h + 32);
    *a = sub8(or8(c < 2 ? low4(q0) : high4(q0), bits_at(qh, 2 * c - 4, 0x30)), 32);
    *b = sub8(or8(c < 2 ? low4(q1) : high4(q1), bits_at(qh, 2 * c - 2, 0x30)), 32);
  }
#endif
#if QKV_QDOT_RELAXED
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
  // acc + the super-block's sum in lane 0: d * dx * (isum - 32 * sum_g sc_g * sum16_g). The
  // lanes of isum can be past 2^24 where they cancel across lanes, so the total is reduced
  // exactly before it is converted.
  F kfinish(I32 isum, const BlockQ8K& x, F acc) const {
    const v128_t off = wasm_i32x4_add(wasm_i32x4_dot_i16x8(sc[0], wasm_v128_load(x.sum16)),
                                      wasm_i32x4_dot_i16x8(sc[1], wasm_v128_load(x.sum16 + 8)));
    v128_t t = wasm_i32x4_sub(isum, wasm_i32x4_shl(off, 5));
    t = wasm_i32x4_add(t, wasm_i32x4_shuffle(t, t, 2, 3, 0, 1));
    t = wasm_i32x4_add(t, wasm_i32x4_shuffle(t, t, 1, 0, 3, 2));
    return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(t), wasm_f32x4_make(kd * x.d, 0.0f, 0.0f, 0.0f)));
  }
#endif
};

// a * b + c rounded the same way in every tile shape: with hardware FMA always fused (the
// compiler would otherwise contract some instantiations and not others), else never.
inline float fma_s(float a, float b, float c) {
#if defined(__FMA__)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

#if defined(__clang__)
#define QKV_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define QKV_UNROLL _Pragma("GCC unroll 8")
#else
#define QKV_UNROLL
#endif

// ---- the register-blocked kernel -----------------------------------------------------------

#if !QKV_QDOT_WASM
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
#endif

#if QKV_QDOT_WASM
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

// Whether type D runs the relaxed 8-bit products (every type but Q8_0 in the relaxed builds).
template <class D>
constexpr bool kRelaxed8 =
#if QKV_QDOT_RELAXED
    D::kKind != Kind::Signed;
#else
    false;
#endif

#if QKV_QDOT_RELAXED
template <class D>
inline I32 block_dot(const D&, int, const B32& w, const XS& x) { return dot_sign(w, x); }
template <class D>
inline I32 block_dot(const D& dec, int j, const B32& w, const X8& x) {
  if constexpr (D::kKind == Kind::Signed16) return dot_u8_16(w, x, dec.scale16(j, 0), dec.scale16(j, 1));
  else return dot_u8(w, x);
}
#endif
// The activations of one block and the weights of a sub-block (pair), as type D multiplies them.
template <class D, class Q>
inline auto load_act(const Q* q) {
#if QKV_QDOT_RELAXED
  if constexpr (std::is_same_v<Q, uint8_t>) return load_xs(q);  // BlockQ8S (BlockQ8A's q is signed)
  else if constexpr (kRelaxed8<D>) return load_x8(q);
  else
#endif
    return load_x32(q);
}
template <class D, class XB>
inline auto weights(const D& dec) {
#if QKV_QDOT_RELAXED
  if constexpr (std::is_same_v<XB, BlockQ8S>) {  // Q8_0's 32 signed bytes after its f16 d, as stored
    static_assert(D::kKind == Kind::Signed && D::kBytes == 34, "split activations are for Q8_0");
    return B32{wasm_v128_load(dec.p + 2), wasm_v128_load(dec.p + 18)};
  } else if constexpr (kRelaxed8<D>) return dec.w8(0);
  else
#endif
    return dec.w(0);
}
template <class D>
inline auto weight_pair(const D& dec, int j) {
#if QKV_QDOT_RELAXED
  if constexpr (kRelaxed8<D>) {
    B32 a, b;
    dec.wpair8(j, &a, &b);
    return std::make_pair(a, b);
  } else
#endif
  {
    W32 a, b;
    dec.wpair(j, &a, &b);
    return std::make_pair(a, b);
  }
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
#endif

#if QKV_QDOT_RELAXED
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
#endif

// The tile the target runs: out[r * NT + t] = row r . token t.
template <class D, int NR, int NT, class XB = BlockQ8A>
inline void tile(const uint8_t* const* rows, const XB* const* xs, int nb, float* out) {
#if QKV_QDOT_WASM
  dot_tile_grouped<D, NR, NT, XB>(rows, xs, nb, out);
#else
  dot_tile<D, NR, NT>(rows, xs, nb, out);
#endif
}

// Weight rows per decode tile. WASM: 4 for the one-block types (Q8_0 and Q4_0 decode 12-18%
// faster than with 2 in Chromium 156, once the block sums are pinned), 2 for the K types (4
// measured slower, Q4_K 33 against 36 GFLOP/s, also with each row's unpacked scales kept in
// memory rather than in registers, so it is not their decoder state). Native decode streams at
// the memory bound with 2.
#if QKV_QDOT_WASM
template <class D>
constexpr int kDecodeRows = D::kSub == 1 ? 4 : 2;
#else
template <class D>
constexpr int kDecodeRows = 2;
#endif

// The tile kinds the drivers below run: Tl::run<NR, NT>(rows, xs, out) puts row r . token t
// in out[r * NT + t].
template <class D, class XB>
struct BlockTile {  // 32-blocks (BlockQ8A, or BlockQ8S for relaxed Q8_0 decode)
  int nb;
  template <int NR, int NT>
  void run(const uint8_t* const* rows, const XB* const* xs, float* out) const { tile<D, NR, NT, XB>(rows, xs, nb, out); }
};

// Decode: NR rows at a time share each activation load; the rows come from NR equal parts of
// the range, so the weight streams are far apart (adjacent rows read in lockstep defeat the
// hardware prefetcher: 3x slower from DRAM for Q8_0). The rest go one at a time.
template <int NR, class XB, class Tl>
void decode_tiles(const Tl& tl, float* Y, const XB* X, const uint8_t* W, size_t rb, int r0, int r1) {
  float out[NR];
  const int h = (r1 - r0) / NR;
  for (int i = 0; i < h; i++) {
    const uint8_t* rows[NR];
    for (int k = 0; k < NR; k++) rows[k] = W + (size_t)(r0 + k * h + i) * rb;
    tl.template run<NR, 1>(rows, &X, out);
    for (int k = 0; k < NR; k++) Y[r0 + k * h + i] = out[k];
  }
  for (int r = r0 + NR * h; r < r1; r++) {
    const uint8_t* rows[1] = {W + (size_t)r * rb};
    tl.template run<1, 1>(rows, &X, out);
    Y[r] = out[0];
  }
}

// Prefill: 2 rows x 4 tokens per tile (token t's activations at X + t * per_token); a short
// last group repeats its last token.
template <class XB, class Tl>
void prefill_tiles(const Tl& tl, float* Y, int64_t ldy, const XB* X, size_t per_token, const uint8_t* W, size_t rb,
                   int T, int r0, int r1) {
  constexpr int NT = 4;
  float out[2 * NT];
  for (int r = r0; r < r1; r += 2) {
    const int nr = r1 - r < 2 ? 1 : 2;
    const uint8_t* rows[2] = {W + (size_t)r * rb, W + (size_t)(r + nr - 1) * rb};
    for (int t = 0; t < T; t += NT) {
      const XB* xs[NT];
      for (int i = 0; i < NT; i++) xs[i] = X + (size_t)(t + i < T ? t + i : T - 1) * per_token;
      if (nr == 2) tl.template run<2, NT>(rows, xs, out);
      else tl.template run<1, NT>(rows, xs, out);
      for (int i = 0; i < NT && t + i < T; i++)
        for (int k = 0; k < nr; k++) Y[(t + i) * ldy + r + k] = out[k * NT + i];
    }
  }
}

#if QKV_QDOT_RELAXED
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
    const v128_t a0 = wasm_i8x16_abs(v0), a1 = wasm_i8x16_abs(v1), m0 = wasm_i8x16_shr(v0, 7), m1 = wasm_i8x16_shr(v1, 7);
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
#endif

template <class D>
void matmul_typed(float* Y, int64_t ldy, const BlockQ8A* X, const uint8_t* W, int T, int n, int r0, int r1) {
  const int nb = n / 32;
  const size_t rb = (size_t)(nb / D::kSub) * D::kBytes;
  if (T > 1) return prefill_tiles(BlockTile<D, BlockQ8A>{nb}, Y, ldy, X, (size_t)nb, W, rb, T, r0, r1);
#if QKV_QDOT_RELAXED
  if constexpr (!kRelaxed8<D>) {
    thread_local std::vector<BlockQ8S> split;
    sign_split_activations(X, nb, &split);
    return decode_tiles<kDecodeRows<D>>(BlockTile<D, BlockQ8S>{nb}, Y, split.data(), W, rb, r0, r1);
  }
#endif
  decode_tiles<kDecodeRows<D>>(BlockTile<D, BlockQ8A>{nb}, Y, X, W, rb, r0, r1);
}

#if QKV_QDOT_RELAXED
template <class D>
struct SuperTile {  // the K types against BlockQ8K
  int nsb;
  template <int NR, int NT>
  void run(const uint8_t* const* rows, const BlockQ8K* const* xs, float* out) const { ktile<D, NR, NT>(rows, xs, nsb, out); }
};

// Decode 2 rows per tile (4 measured 8-15% slower in Chromium 156).
template <class D>
void matmul_k(float* Y, int64_t ldy, const BlockQ8K* X, const uint8_t* W, int T, int n, int r0, int r1) {
  const int nsb = n / 256;
  const size_t rb = (size_t)nsb * D::kBytes;
  if (T > 1) return prefill_tiles(SuperTile<D>{nsb}, Y, ldy, X, (size_t)nsb, W, rb, T, r0, r1);
  decode_tiles<2>(SuperTile<D>{nsb}, Y, X, W, rb, r0, r1);
}
#endif

// The one-block types, with or without the finite-scale conversion.
template <bool F>
void matmul_one_block(QType t, float* Y, int64_t ldy, const BlockQ8A* X, const uint8_t* w, int T, int n, int r0, int r1) {
  switch (t) {
    case QType::Q8_0: return matmul_typed<DecQ8_0<F>>(Y, ldy, X, w, T, n, r0, r1);
    case QType::Q4_0: return matmul_typed<DecQ4_5<false, false, F>>(Y, ldy, X, w, T, n, r0, r1);
    case QType::Q4_1: return matmul_typed<DecQ4_5<true, false, F>>(Y, ldy, X, w, T, n, r0, r1);
    case QType::Q5_0: return matmul_typed<DecQ4_5<false, true, F>>(Y, ldy, X, w, T, n, r0, r1);
    default: return matmul_typed<DecQ4_5<true, true, F>>(Y, ldy, X, w, T, n, r0, r1);
  }
}

}  // namespace

bool qdot_scales_finite(QType t, const void* W, int64_t rows, int n) {
  // The one-block types: blocks of 32 that start with f16 d (and m for Q4_1 / Q5_1).
  if (!qtype_int_dot(t) || qtype_block(t) != 32 || rows < 0 || n <= 0 || n % 32) return false;
  const size_t bytes = qtype_row_bytes(t, 32);
  const int n_f16 = t == QType::Q4_1 || t == QType::Q5_1 ? 2 : 1;
  const uint8_t* p = static_cast<const uint8_t*>(W);
  const int64_t blocks = rows * (n / 32);
  for (int64_t b = 0; b < blocks; b++, p += bytes)
    for (int i = 0; i < n_f16; i++)
      if ((u16_at(p + 2 * i) & 0x7c00u) == 0x7c00u) return false;
  return true;
}

bool qdot_uses_finite_scales() {
#if QKV_QDOT_WASM
  return true;
#else
  return false;
#endif
}

void matmul_q8_simd(QType t, float* Y, int64_t ldy, const BlockQ8A* X, const void* W, int T, int n, int r0, int r1,
                    bool finite_scales) {
  const uint8_t* w = static_cast<const uint8_t*>(W);
  switch (t) {
    case QType::Q8_0: case QType::Q4_0: case QType::Q4_1: case QType::Q5_0: case QType::Q5_1:
#if QKV_QDOT_WASM
      if (finite_scales) return matmul_one_block<true>(t, Y, ldy, X, w, T, n, r0, r1);
#else
      (void)finite_scales;  // scales convert in one instruction (F16C) or a scalar fast path here
#endif
      return matmul_one_block<false>(t, Y, ldy, X, w, T, n, r0, r1);
    case QType::Q4_K: return matmul_typed<DecQ45_K<false>>(Y, ldy, X, w, T, n, r0, r1);
    case QType::Q5_K: return matmul_typed<DecQ45_K<true>>(Y, ldy, X, w, T, n, r0, r1);
    case QType::Q6_K: return matmul_typed<DecQ6_K>(Y, ldy, X, w, T, n, r0, r1);
    default: fail(ErrorCode::Internal, "matmul_q8_simd: weight type has no integer dot product");
  }
}

bool qdot_k_super_blocks() {
#if QKV_QDOT_RELAXED
  return true;
#else
  return false;
#endif
}

void matmul_q8k_simd(QType t, float* Y, int64_t ldy, const BlockQ8K* X, const void* W, int T, int n, int r0, int r1) {
  if (!qtype_k_super(t)) fail(ErrorCode::Internal, "matmul_q8k_simd: not a K type");
  const uint8_t* w = static_cast<const uint8_t*>(W);
#if QKV_QDOT_RELAXED
  switch (t) {
    case QType::Q4_K: return matmul_k<DecQ45_K<false>>(Y, ldy, X, w, T, n, r0, r1);
    case QType::Q5_K: return matmul_k<DecQ45_K<true>>(Y, ldy, X, w, T, n, r0, r1);
    default: return matmul_k<DecQ6_K>(Y, ldy, X, w, T, n, r0, r1);
  }
#else
  const size_t rb = qtype_row_bytes(t, n);
  for (int r = r0; r < r1; r++)
    for (int tok = 0; tok < T; tok++) Y[tok * ldy + r] = dot_q8k_ref(t, w + (size_t)r * rb, X + (size_t)tok * (n / 256), n);
#endif
}

const char* qdot_impl_name() { return kImpl; }

}  // namespace qkv
