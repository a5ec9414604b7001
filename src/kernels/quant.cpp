// Stored-type weights: scalar references and xsimd versions.
#include "quant.h"

#include <cmath>
#include <cstring>

#include "matmul.h"
#include "simd.h"
#if defined(__F16C__)
#include <immintrin.h>
#elif defined(__wasm_simd128__)
#include <wasm_simd128.h>
#endif

namespace qkv {

// Bytes per block and elements per block of each type.
static void layout(QType t, int* block, int* bytes) {
  switch (t) {
    case QType::F32:
      *block = 1;
      *bytes = 4;
      return;
    case QType::F16:
    case QType::BF16:
      *block = 1;
      *bytes = 2;
      return;
    case QType::Q8_0:
      *block = 32;
      *bytes = 34;
      return;
    case QType::Q4_0:
      *block = 32;
      *bytes = 18;
      return;
    case QType::Q4_1:
      *block = 32;
      *bytes = 20;
      return;
    case QType::Q5_0:
      *block = 32;
      *bytes = 22;
      return;
    case QType::Q5_1:
      *block = 32;
      *bytes = 24;
      return;
    case QType::Q4_K:
      *block = 256;
      *bytes = 144;
      return;
    case QType::Q5_K:
      *block = 256;
      *bytes = 176;
      return;
    case QType::Q6_K:
      *block = 256;
      *bytes = 210;
      return;
  }
  *block = 1;
  *bytes = 4;
}
size_t qtype_row_bytes(QType t, int n) {
  int b, s;
  layout(t, &b, &s);
  return (size_t)n / b * s;
}
const char* qtype_name(QType t) {
  switch (t) {
    case QType::F32: return "f32";
    case QType::F16: return "f16";
    case QType::BF16: return "bf16";
    case QType::Q8_0: return "q8_0";
    case QType::Q4_0: return "q4_0";
    case QType::Q4_1: return "q4_1";
    case QType::Q5_0: return "q5_0";
    case QType::Q5_1: return "q5_1";
    case QType::Q4_K: return "q4_k";
    case QType::Q5_K: return "q5_k";
    case QType::Q6_K: return "q6_k";
  }
  return "?";
}

int qtype_block(QType t) {
  int b, s;
  layout(t, &b, &s);
  return b;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) bits = sign;
    else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        exp--;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000 | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {  // round to nearest even
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
  if (exp >= 31) return (uint16_t)(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10) return (uint16_t)sign;
    mant |= 0x800000;
    const int shift = 14 - exp;
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)exp << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

float bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

static inline uint16_t u16_at(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

static void decode_scaled(QType t, const uint8_t* p, float* out);

void dequantize_row_ref(QType t, const void* row, float* dst, int n) {
  const uint8_t* p = static_cast<const uint8_t*>(row);
  switch (t) {
    case QType::F32: std::memcpy(dst, row, (size_t)n * 4); return;
    case QType::F16:
      for (int i = 0; i < n; i++) dst[i] = f16_to_f32(u16_at(p + 2 * i));
      return;
    case QType::BF16:
      for (int i = 0; i < n; i++) dst[i] = bf16_to_f32(u16_at(p + 2 * i));
      return;
    case QType::Q8_0:
      for (int b = 0; b < n / 32; b++, p += 34) {
        const float d = f16_to_f32(u16_at(p));
        for (int j = 0; j < 32; j++) dst[b * 32 + j] = d * (float)(int8_t)p[2 + j];
      }
      return;
    default: {
      int block, bytes;
      layout(t, &block, &bytes);
      for (int b = 0; b < n / block; b++, p += bytes) decode_scaled(t, p, dst + (size_t)b * block);
      return;
    }
  }
}

float dot_row_ref(QType t, const void* row, const float* x, int n) {
  const uint8_t* p = static_cast<const uint8_t*>(row);
  float s = 0.0f;
  switch (t) {
    case QType::F32: {
      const float* w = static_cast<const float*>(row);
      for (int i = 0; i < n; i++) s += w[i] * x[i];
      return s;
    }
    case QType::F16:
      for (int i = 0; i < n; i++) s += f16_to_f32(u16_at(p + 2 * i)) * x[i];
      return s;
    case QType::BF16:
      for (int i = 0; i < n; i++) s += bf16_to_f32(u16_at(p + 2 * i)) * x[i];
      return s;
    case QType::Q8_0:
      for (int b = 0; b < n / 32; b++, p += 34) {
        float bs = 0.0f;
        for (int j = 0; j < 32; j++) bs += (float)(int8_t)p[2 + j] * x[b * 32 + j];
        s += f16_to_f32(u16_at(p)) * bs;
      }
      return s;
    case QType::Q4_0:
      for (int b = 0; b < n / 32; b++, p += 18) {
        float bs = 0.0f;
        for (int j = 0; j < 16; j++)
          bs += (float)((p[2 + j] & 0x0f) - 8) * x[b * 32 + j] + (float)((p[2 + j] >> 4) - 8) * x[b * 32 + j + 16];
        s += f16_to_f32(u16_at(p)) * bs;
      }
      return s;
    default: {
      int block, bytes;
      layout(t, &block, &bytes);
      float buf[256];
      for (int b = 0; b < n / block; b++, p += bytes) {
        decode_scaled(t, p, buf);
        for (int j = 0; j < block; j++) s += buf[j] * x[b * block + j];
      }
      return s;
    }
  }
  return s;
}

// Decodes one whole block of any block type into `out` (qtype_block(t) values, scaled).
static void decode_scaled(QType t, const uint8_t* p, float* out) {
  switch (t) {
    case QType::Q8_0: {
      const float d = f16_to_f32(u16_at(p));
      for (int j = 0; j < 32; j++) out[j] = d * (float)(int8_t)p[2 + j];
      return;
    }
    case QType::Q4_0: {
      const float d = f16_to_f32(u16_at(p));
      for (int j = 0; j < 16; j++) {
        out[j] = d * (float)((p[2 + j] & 0x0f) - 8);
        out[j + 16] = d * (float)((p[2 + j] >> 4) - 8);
      }
      return;
    }
    case QType::Q4_1: {
      const float d = f16_to_f32(u16_at(p)), m = f16_to_f32(u16_at(p + 2));
      for (int j = 0; j < 16; j++) {
        out[j] = d * (float)(p[4 + j] & 0x0f) + m;
        out[j + 16] = d * (float)(p[4 + j] >> 4) + m;
      }
      return;
    }
    case QType::Q5_0:
    case QType::Q5_1: {
      const bool q51 = t == QType::Q5_1;
      const float d = f16_to_f32(u16_at(p)), m = q51 ? f16_to_f32(u16_at(p + 2)) : 0.0f;
      uint32_t qh;
      std::memcpy(&qh, p + (q51 ? 4 : 2), 4);
      const uint8_t* qs = p + (q51 ? 8 : 6);
      const int off = q51 ? 0 : 16;
      for (int j = 0; j < 16; j++) {
        const int lo = (qs[j] & 0x0f) | (((qh >> j) & 1) << 4);
        const int hi = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
        out[j] = d * (float)(lo - off) + m;
        out[j + 16] = d * (float)(hi - off) + m;
      }
      return;
    }
    case QType::Q4_K:
    case QType::Q5_K: {
      const bool k5 = t == QType::Q5_K;
      const float d = f16_to_f32(u16_at(p)), dmin = f16_to_f32(u16_at(p + 2));
      const uint8_t* scales = p + 4;
      const uint8_t* qh = p + 16;
      const uint8_t* q = p + (k5 ? 48 : 16);
      for (int c = 0; c < 4; c++) {  // 4 chunks of 64: two sub-blocks sharing 32 bytes
        int sc0, m0, sc1, m1;
        kquant_scale_min(2 * c, scales, &sc0, &m0);
        kquant_scale_min(2 * c + 1, scales, &sc1, &m1);
        const float d0 = d * sc0, d1 = d * sc1, mm0 = dmin * m0, mm1 = dmin * m1;
        for (int l = 0; l < 32; l++) {
          int a = q[l] & 0x0f, b = q[l] >> 4;
          if (k5) {
            a += ((qh[l] >> (2 * c)) & 1) << 4;
            b += ((qh[l] >> (2 * c + 1)) & 1) << 4;
          }
          out[64 * c + l] = d0 * (float)a - mm0;
          out[64 * c + 32 + l] = d1 * (float)b - mm1;
        }
        q += 32;
      }
      return;
    }
    case QType::Q6_K: {
      const uint8_t* ql = p;
      const uint8_t* qh = p + 128;
      const int8_t* sc = reinterpret_cast<const int8_t*>(p + 192);
      const float d = f16_to_f32(u16_at(p + 208));
      for (int h = 0; h < 2; h++) {  // two halves of 128
        for (int l = 0; l < 32; l++) {
          const int s = l / 16;
          const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
          const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
          const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
          const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
          out[128 * h + l] = d * sc[s] * q1;
          out[128 * h + l + 32] = d * sc[s + 2] * q2;
          out[128 * h + l + 64] = d * sc[s + 4] * q3;
          out[128 * h + l + 96] = d * sc[s + 6] * q4;
        }
        ql += 64;
        qh += 32;
        sc += 8;
      }
      return;
    }
    default: return;
  }
}

// Decodes 32 values of one Q block into f32 (a stack buffer the SIMD loop then reads).
static inline void decode_block(QType t, const uint8_t* p, float* out) {
  if (t == QType::Q8_0) {
    for (int j = 0; j < 32; j++) out[j] = (float)(int8_t)p[2 + j];
  } else {
    for (int j = 0; j < 16; j++) {
      out[j] = (float)((p[2 + j] & 0x0f) - 8);
      out[j + 16] = (float)((p[2 + j] >> 4) - 8);
    }
  }
}

// f16 -> f32 for n values. F16C converts in hardware where the CPU has it. Otherwise,
// branch-free in SIMD: the 15 magnitude bits shifted into an f32's exponent/mantissa and scaled
// by 2^112 give every normal and subnormal exactly; Inf/NaN (exponent 31) are patched; the sign
// is or-ed back. WASM widens 8 halves at a time with one instruction; other targets gather.
using ubatch = xsimd::batch<uint32_t>;
static inline fbatch halves_to_floats(ubatch h) {
  const ubatch mag = h & ubatch(0x7fffu);
  fbatch f = xsimd::bitwise_cast<float>(mag << 13) * fbatch(0x1p112f);
  const auto special = mag >= ubatch(0x7c00u);  // Inf or NaN
  f = xsimd::select(xsimd::batch_bool_cast<float>(special),
                    xsimd::bitwise_cast<float>((mag << 13) | ubatch(0x7f800000u)), f);
  return f | xsimd::bitwise_cast<float>((h & ubatch(0x8000u)) << 16);
}

static void f16_to_f32_simd(const uint8_t* src, float* dst, int n) {
  int i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i))));
#elif defined(__wasm_simd128__)
  // The same arithmetic in raw SIMD128, its constants splatted from values the compiler cannot
  // see (kHalfBits): as literals LLVM rematerialises every v128.const inside the loop and V8
  // emits each as several instructions (0.85 ns per half instead of 0.2).
  static volatile uint32_t kHalfBits[4] = {0x7fffu, 0x7c00u, 0x7f800000u, 0x77800000u /* 2^112 */};
  const v128_t mag_mask = wasm_i32x4_splat((int32_t)kHalfBits[0]), inf = wasm_i32x4_splat((int32_t)kHalfBits[1]);
  const v128_t exp_all = wasm_i32x4_splat((int32_t)kHalfBits[2]), scale = wasm_i32x4_splat((int32_t)kHalfBits[3]);
  auto convert = [&](v128_t h) {  // h: 4 halves, zero-extended
    const v128_t mag = wasm_v128_and(h, mag_mask), shifted = wasm_i32x4_shl(mag, 13);
    const v128_t f =
        wasm_v128_bitselect(wasm_v128_or(shifted, exp_all), wasm_f32x4_mul(shifted, scale), wasm_i32x4_ge(mag, inf));
    return wasm_v128_or(f, wasm_i32x4_shl(wasm_v128_xor(h, mag), 16));  // h ^ mag: the sign bit alone
  };
  for (; i + 8 <= n; i += 8) {
    const v128_t h = wasm_v128_load(src + 2 * i);
    wasm_v128_store(dst + i, convert(wasm_u32x4_extend_low_u16x8(h)));
    wasm_v128_store(dst + i + 4, convert(wasm_u32x4_extend_high_u16x8(h)));
  }
#else
  alignas(64) uint32_t wide[kLanes];
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; j++) wide[j] = u16_at(src + 2 * (i + j));
    halves_to_floats(ubatch::load_aligned(wide)).store_unaligned(dst + i);
  }
#endif
  for (; i < n; i++) dst[i] = f16_to_f32(u16_at(src + 2 * i));
}

// sum_k f16(w[k]) * x[k]: with F16C the halves are converted in registers, four independent
// accumulators, so decode streams the f16 row as fast as memory delivers it.
static float dot_f16(const uint8_t* w, const float* x, int n) {
  int k = 0;
  float s = 0.0f;
#if defined(__F16C__) && defined(__FMA__)
  auto half8 = [&](int i) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i))); };
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (; k + 32 <= n; k += 32) {
    a0 = _mm256_fmadd_ps(half8(k), _mm256_loadu_ps(x + k), a0);
    a1 = _mm256_fmadd_ps(half8(k + 8), _mm256_loadu_ps(x + k + 8), a1);
    a2 = _mm256_fmadd_ps(half8(k + 16), _mm256_loadu_ps(x + k + 16), a2);
    a3 = _mm256_fmadd_ps(half8(k + 24), _mm256_loadu_ps(x + k + 24), a3);
  }
  for (; k + 8 <= n; k += 8) a0 = _mm256_fmadd_ps(half8(k), _mm256_loadu_ps(x + k), a0);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (float v : lanes) s += v;
#else
  alignas(64) float buf[64];
  fbatch acc(0.0f);
  for (; k + 64 <= n; k += 64) {
    f16_to_f32_simd(w + 2 * k, buf, 64);
    for (int j = 0; j < 64; j += kLanes)
      acc = madd(fbatch::load_aligned(buf + j), fbatch::load_unaligned(x + k + j), acc);
  }
  s = xsimd::reduce_add(acc);
#endif
  for (; k < n; k++) s += f16_to_f32(u16_at(w + 2 * k)) * x[k];
  return s;
}

void dequantize_row_simd(QType t, const void* row, float* dst, int n) {
  if (t == QType::F16) return f16_to_f32_simd(static_cast<const uint8_t*>(row), dst, n);
  if (t != QType::Q8_0 && t != QType::Q4_0) return dequantize_row_ref(t, row, dst, n);  // decoded scalar, stored once
  const uint8_t* p = static_cast<const uint8_t*>(row);
  const int stride = t == QType::Q8_0 ? 34 : 18;
  alignas(64) float blk[32];
  for (int b = 0; b < n / 32; b++, p += stride) {
    decode_block(t, p, blk);
    const fbatch d(f16_to_f32(u16_at(p)));
    for (int j = 0; j + kLanes <= 32; j += kLanes)
      (fbatch::load_aligned(blk + j) * d).store_unaligned(dst + b * 32 + j);
    for (int j = 32 / kLanes * kLanes; j < 32; j++) dst[b * 32 + j] = blk[j] * f16_to_f32(u16_at(p));
  }
}

float dot_row_simd(QType t, const void* row, const float* x, int n) {
  const uint8_t* p = static_cast<const uint8_t*>(row);
  alignas(64) float buf[64];
  if (t == QType::F32) {
    const float* w = static_cast<const float*>(row);
    fbatch acc(0.0f);
    int k = 0;
    for (; k + kLanes <= n; k += kLanes) acc = madd(fbatch::load_unaligned(w + k), fbatch::load_unaligned(x + k), acc);
    float s = xsimd::reduce_add(acc);
    for (; k < n; k++) s += w[k] * x[k];
    return s;
  }
  if (t == QType::F16) return dot_f16(p, x, n);
  if (t == QType::BF16) {
    fbatch acc(0.0f);
    float tail = 0.0f;
    for (int k0 = 0; k0 < n; k0 += 64) {
      const int m = n - k0 < 64 ? n - k0 : 64;
      dequantize_row_ref(t, p + 2 * k0, buf, m);
      int k = 0;
      for (; k + kLanes <= m; k += kLanes)
        acc = madd(fbatch::load_aligned(buf + k), fbatch::load_unaligned(x + k0 + k), acc);
      for (; k < m; k++) tail += buf[k] * x[k0 + k];
    }
    return xsimd::reduce_add(acc) + tail;
  }
  if (t != QType::Q8_0 && t != QType::Q4_0) {  // other block types: decode scaled, then a SIMD dot
    int block, bytes;
    layout(t, &block, &bytes);
    alignas(64) float blk[256];
    fbatch acc(0.0f);
    float tail = 0.0f;
    for (int b = 0; b < n / block; b++, p += bytes) {
      decode_scaled(t, p, blk);
      int j = 0;
      for (; j + kLanes <= block; j += kLanes)
        acc = madd(fbatch::load_aligned(blk + j), fbatch::load_unaligned(x + b * block + j), acc);
      for (; j < block; j++) tail += blk[j] * x[b * block + j];
    }
    return xsimd::reduce_add(acc) + tail;
  }
  const int stride = t == QType::Q8_0 ? 34 : 18;
  float s = 0.0f;
  for (int b = 0; b < n / 32; b++, p += stride) {
    decode_block(t, p, buf);
    fbatch acc(0.0f);
    int j = 0;
    for (; j + kLanes <= 32; j += kLanes)
      acc = madd(fbatch::load_aligned(buf + j), fbatch::load_unaligned(x + b * 32 + j), acc);
    float bs = xsimd::reduce_add(acc);
    for (; j < 32; j++) bs += buf[j] * x[b * 32 + j];
    s += f16_to_f32(u16_at(p)) * bs;
  }
  return s;
}

void quantize_row_q8_0(const float* x, void* dst, int n) {
  uint8_t* p = static_cast<uint8_t*>(dst);
  for (int b = 0; b < n / 32; b++, p += 34) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = std::fmax(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = f32_to_f16(d);
    std::memcpy(p, &dh, 2);
    for (int j = 0; j < 32; j++) p[2 + j] = (uint8_t)(int8_t)std::lround(x[b * 32 + j] * id);
  }
}

void quantize_row_q4_0(const float* x, void* dst, int n) {
  uint8_t* p = static_cast<uint8_t*>(dst);
  for (int b = 0; b < n / 32; b++, p += 18) {
    float amax = 0.0f, maxv = 0.0f;  // the value of largest magnitude, with its sign
    for (int j = 0; j < 32; j++)
      if (std::fabs(x[b * 32 + j]) > amax) {
        amax = std::fabs(x[b * 32 + j]);
        maxv = x[b * 32 + j];
      }
    const float d = maxv / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = f32_to_f16(d);
    std::memcpy(p, &dh, 2);
    for (int j = 0; j < 16; j++) {
      int lo = (int)std::floor(x[b * 32 + j] * id + 8.5f), hi = (int)std::floor(x[b * 32 + j + 16] * id + 8.5f);
      lo = lo < 0 ? 0 : lo > 15 ? 15 : lo;
      hi = hi < 0 ? 0 : hi > 15 ? 15 : hi;
      p[2 + j] = (uint8_t)(lo | (hi << 4));
    }
  }
}

void quantize_row_q4_1(const float* x, void* dst, int n) {
  uint8_t* p = static_cast<uint8_t*>(dst);
  for (int b = 0; b < n / 32; b++, p += 20) {
    float lo = x[b * 32], hi = x[b * 32];
    for (int j = 1; j < 32; j++) {
      lo = std::fmin(lo, x[b * 32 + j]);
      hi = std::fmax(hi, x[b * 32 + j]);
    }
    const float d = (hi - lo) / 15.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = f32_to_f16(d), mh = f32_to_f16(lo);
    std::memcpy(p, &dh, 2);
    std::memcpy(p + 2, &mh, 2);
    for (int j = 0; j < 16; j++) {
      int a = (int)std::floor((x[b * 32 + j] - lo) * id + 0.5f),
          c = (int)std::floor((x[b * 32 + j + 16] - lo) * id + 0.5f);
      a = a < 0 ? 0 : a > 15 ? 15 : a;
      c = c < 0 ? 0 : c > 15 ? 15 : c;
      p[4 + j] = (uint8_t)(a | (c << 4));
    }
  }
}

static void quantize_q5(const float* x, void* dst, int n, bool q51) {
  uint8_t* p = static_cast<uint8_t*>(dst);
  const int bytes = q51 ? 24 : 22;
  for (int b = 0; b < n / 32; b++, p += bytes) {
    const float* v = x + b * 32;
    float d, m = 0.0f;
    if (q51) {
      float lo = v[0], hi = v[0];
      for (int j = 1; j < 32; j++) {
        lo = std::fmin(lo, v[j]);
        hi = std::fmax(hi, v[j]);
      }
      d = (hi - lo) / 31.0f;
      m = lo;
    } else {
      float amax = 0.0f, maxv = 0.0f;
      for (int j = 0; j < 32; j++)
        if (std::fabs(v[j]) > amax) {
          amax = std::fabs(v[j]);
          maxv = v[j];
        }
      d = maxv / -16.0f;
    }
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = f32_to_f16(d), mh = f32_to_f16(m);
    std::memcpy(p, &dh, 2);
    if (q51) std::memcpy(p + 2, &mh, 2);
    uint32_t qh = 0;
    uint8_t* qs = p + (q51 ? 8 : 6);
    for (int j = 0; j < 16; j++) {
      int a = (int)std::floor((q51 ? (v[j] - m) * id + 0.5f : v[j] * id + 16.5f));
      int c = (int)std::floor((q51 ? (v[j + 16] - m) * id + 0.5f : v[j + 16] * id + 16.5f));
      a = a < 0 ? 0 : a > 31 ? 31 : a;
      c = c < 0 ? 0 : c > 31 ? 31 : c;
      qs[j] = (uint8_t)((a & 0x0f) | ((c & 0x0f) << 4));
      qh |= (uint32_t)((a >> 4) & 1) << j;
      qh |= (uint32_t)((c >> 4) & 1) << (j + 16);
    }
    std::memcpy(p + (q51 ? 4 : 2), &qh, 4);
  }
}
void quantize_row_q5_0(const float* x, void* dst, int n) { quantize_q5(x, dst, n, false); }
void quantize_row_q5_1(const float* x, void* dst, int n) { quantize_q5(x, dst, n, true); }

// Least-squares fit of v[k] ~= scale * q[k] - offset (q in 0..nmax, offset >= 0) over one
// sub-block, weighted towards large values; tries several rounding grids, keeps the best.
static void fit_scale_offset(const float* v, int n, int nmax, float* scale, float* offset) {
  float lo = 0.0f, hi = v[0], sum2 = 0.0f;
  for (int k = 0; k < n; k++) {
    lo = std::fmin(lo, v[k]);
    hi = std::fmax(hi, v[k]);
    sum2 += v[k] * v[k];
  }
  *scale = 0.0f;
  *offset = -lo;
  if (hi <= lo) return;
  const float av = std::sqrt(sum2 / n);
  float best = INFINITY;
  for (int step = -10; step <= 10; step++) {
    const float iscale = ((float)nmax + 0.1f * step) / (hi - lo);
    double sw = 0, sq = 0, sqq = 0, sx = 0, sqx = 0;
    int q[256];
    for (int k = 0; k < n; k++) {
      const int l = (int)std::lround(iscale * (v[k] - lo));
      q[k] = l < 0 ? 0 : l > nmax ? nmax : l;
      const double w = av + std::fabs(v[k]);
      sw += w, sq += w * q[k], sqq += w * q[k] * q[k], sx += w * v[k], sqx += w * q[k] * v[k];
    }
    const double det = sw * sqq - sq * sq;
    if (det <= 0) continue;
    double s = (sw * sqx - sq * sx) / det, m = (sqq * sx - sq * sqx) / det;
    if (m > 0) {  // the offset may only lower values (it is stored as a non-negative min)
      m = 0;
      s = sqx / sqq;
    }
    if (s <= 0) continue;
    double err = 0;
    for (int k = 0; k < n; k++) {
      const double e = s * q[k] + m - v[k];
      err += (av + std::fabs(v[k])) * e * e;
    }
    if (err < best) {
      best = (float)err;
      *scale = (float)s;
      *offset = (float)-m;
    }
  }
  if (!(best < INFINITY)) *scale = (hi - lo) / nmax;  // no fit: the plain min-max grid
}

static inline int clamp_round(float v, int lo, int hi) {
  const int q = (int)std::lround(v);
  return q < lo ? lo : q > hi ? hi : q;
}

// Q4_K (4-bit, 144 bytes per 256) and Q5_K (5-bit, 176 bytes: the fifth bits in 32 bytes
// before the nibbles) share the fit: per sub-block of 32 a scale and a min, quantized to 6 bits
// under f16 super-scales.
static void quantize_row_kquant(const float* x, void* dst, int n, bool k5) {
  const int nmax = k5 ? 31 : 15;
  uint8_t* p = static_cast<uint8_t*>(dst);
  for (int b = 0; b < n / 256; b++, p += k5 ? 176 : 144) {
    const float* v = x + (size_t)b * 256;
    float sc[8], off[8], max_sc = 0.0f, max_off = 0.0f;
    for (int j = 0; j < 8; j++) {
      fit_scale_offset(v + 32 * j, 32, nmax, &sc[j], &off[j]);
      max_sc = std::fmax(max_sc, sc[j]);
      max_off = std::fmax(max_off, off[j]);
    }
    const uint16_t dh = f32_to_f16(max_sc / 63.0f), mh = f32_to_f16(max_off / 63.0f);
    std::memcpy(p, &dh, 2);
    std::memcpy(p + 2, &mh, 2);
    const float d = f16_to_f32(dh), dmin = f16_to_f32(mh);
    uint8_t* scales = p + 4;
    std::memset(scales, 0, 12);
    int ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
      ls[j] = d > 0.0f ? clamp_round(sc[j] / d, 0, 63) : 0;
      lm[j] = dmin > 0.0f ? clamp_round(off[j] / dmin, 0, 63) : 0;
      if (j < 4) {  // the packing kquant_scale_min reads
        scales[j] |= (uint8_t)ls[j];
        scales[j + 4] |= (uint8_t)lm[j];
      } else {
        scales[j + 4] = (uint8_t)((ls[j] & 0x0f) | ((lm[j] & 0x0f) << 4));
        scales[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
        scales[j] |= (uint8_t)((lm[j] >> 4) << 6);
      }
    }
    uint8_t* qh = p + 16;  // Q5_K only: bit j of qh[k] is the fifth bit of sub-block j's element k
    uint8_t* qs = p + (k5 ? 48 : 16);
    if (k5) std::memset(qh, 0, 32);
    for (int j = 0; j < 8; j++) {
      const float s = d * ls[j], m = dmin * lm[j];
      for (int k = 0; k < 32; k++) {
        const int q = s > 0.0f ? clamp_round((v[32 * j + k] + m) / s, 0, nmax) : 0;
        uint8_t& byte = qs[32 * (j / 2) + k];
        byte = j % 2 ? (uint8_t)((byte & 0x0f) | ((q & 0x0f) << 4)) : (uint8_t)(q & 0x0f);
        if (k5) qh[k] |= (uint8_t)((q >> 4) << j);
      }
    }
  }
}

void quantize_row_q4_k(const float* x, void* dst, int n) { quantize_row_kquant(x, dst, n, false); }
void quantize_row_q5_k(const float* x, void* dst, int n) { quantize_row_kquant(x, dst, n, true); }

void quantize_row_q6_k(const float* x, void* dst, int n) {
  uint8_t* p = static_cast<uint8_t*>(dst);
  for (int b = 0; b < n / 256; b++, p += 210) {
    const float* v = x + (size_t)b * 256;
    float sc[16], max_sc = 0.0f;  // per 16: the value of largest magnitude maps to q = -32
    for (int j = 0; j < 16; j++) {
      float amax = 0.0f, maxv = 0.0f;
      for (int k = 0; k < 16; k++)
        if (std::fabs(v[16 * j + k]) > amax) {
          amax = std::fabs(v[16 * j + k]);
          maxv = v[16 * j + k];
        }
      sc[j] = maxv / -32.0f;
      if (std::fabs(sc[j]) > std::fabs(max_sc)) max_sc = sc[j];
    }
    const float iscale = max_sc != 0.0f ? -128.0f / max_sc : 0.0f;
    const uint16_t dh = f32_to_f16(iscale != 0.0f ? 1.0f / iscale : 0.0f);
    std::memcpy(p + 208, &dh, 2);
    const float d = f16_to_f32(dh);
    uint8_t* ql = p;
    uint8_t* qh = p + 128;
    std::memset(p, 0, 192);
    for (int j = 0; j < 16; j++) {
      const int s = clamp_round(iscale * sc[j], -128, 127);
      p[192 + j] = (uint8_t)(int8_t)s;
      const float step = d * s;
      for (int k = 0; k < 16; k++) {
        const int e = 16 * j + k, h = e / 128, c = (e % 128) / 32, l = e % 32;
        const int q = (step != 0.0f ? clamp_round(v[e] / step, -32, 31) : 0) + 32;
        ql[64 * h + 32 * (c % 2) + l] |= (uint8_t)((q & 0x0f) << (c < 2 ? 0 : 4));
        qh[32 * h + l] |= (uint8_t)((q >> 4) << (2 * c));
      }
    }
  }
}

void matmul_q_simd(QType t, float* Y, int64_t ldy, const float* X, int64_t ldx, const void* W, int T, int n, int r0,
                   int r1, float* scratch, const float* Xp) {
  const size_t rb = qtype_row_bytes(t, n);
  const uint8_t* base = static_cast<const uint8_t*>(W);
  if (T == 1) {
    for (int r = r0; r < r1; r++) Y[r] = dot_row_simd(t, base + (size_t)r * rb, X, n);
    return;
  }
  // Prefill: a panel of rows decoded once, then the register-blocked f32 kernel over all tokens,
  // which are laid out for it once per call (a few tokens go straight to matmul_f32_simd).
  const bool packed = T >= kXPackMinTokens;
  if (packed && !Xp) Xp = xpack_f32_thread(X, ldx, T, n);
  for (int r = r0; r < r1; r += kQPanelRows) {
    const int rows = r1 - r < kQPanelRows ? r1 - r : kQPanelRows;
    for (int i = 0; i < rows; i++) dequantize_row_simd(t, base + (size_t)(r + i) * rb, scratch + (size_t)i * n, n);
    if (packed) matmul_f32_xpacked(Y + r, ldy, Xp, scratch, n, T, n, 0, rows, false);
    else matmul_f32_simd(Y + r, ldy, X, ldx, scratch, T, n, 0, rows);
  }
}

}  // namespace qkv
