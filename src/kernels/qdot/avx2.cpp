// The integer dot products on x86 AVX2 (maddubs / madd, which xsimd has no equivalent for), and
// AVX-512 VNNI where the target has it (vnni.h).
#include "common.h"

#if QKV_QDOT_AVX2
#include <immintrin.h>

namespace qkv {
namespace qdot_detail {
namespace {

// W32: 32 weight integers (unsigned 0..63 or signed -128..127); X32: 32 activations;
// I32: partial integer sums whose lanes add up to a dot product; F: float accumulator lanes.
using W32 = __m256i;
using X32 = __m256i;
using I32 = __m256i;
using F = __m256;

inline __m256i bytes(int v) { return _mm256_set1_epi8((char)v); }
inline W32 load_w32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline W32 load_s32(const uint8_t* p) { return load_w32(p); }  // the signed products read the same bytes
inline X32 load_x32(const q8a_t* q) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)); }
// Elements 0..15 = low nibbles of p[0..16), 16..31 = their high nibbles (Q4_0/Q4_1/Q5 order).
inline W32 nibbles16(const uint8_t* p) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), m = _mm_set1_epi8(0x0f);
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(b, m)), _mm_and_si128(_mm_srli_epi16(b, 4), m),
                                 1);
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
  const __m256i s =
      _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16((short)sa)), _mm_set1_epi16((short)sb), 1);
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

}  // namespace
}  // namespace qdot_detail
}  // namespace qkv

// AVX-512 VNNI (vpdpbusd) where the compiler targets it: vnni.h's tiles, through native.h.
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512F__)
#define QKV_QDOT_VNNI 1
#else
#define QKV_QDOT_VNNI 0
#endif

#include "native.h"

const char* qkv::qdot_impl_name() { return QKV_QDOT_VNNI ? "avx512-vnni" : "avx2"; }

#endif
