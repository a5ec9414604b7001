// Stored-type weights: scalar references and xsimd versions.
#include "quant.h"

#include <cmath>
#include <cstring>

#include "simd.h"

namespace qkv {

size_t qtype_row_bytes(QType t, int n) {
  switch (t) {
    case QType::F32: return (size_t)n * 4;
    case QType::F16: case QType::BF16: return (size_t)n * 2;
    case QType::Q8_0: return (size_t)n / 32 * 34;
    case QType::Q4_0: return (size_t)n / 32 * 18;
  }
  return 0;
}
int qtype_block(QType t) { return (t == QType::Q8_0 || t == QType::Q4_0) ? 32 : 1; }

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) bits = sign;
    else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) { mant <<= 1; exp--; }
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

void dequantize_row_ref(QType t, const void* row, float* dst, int n) {
  const uint8_t* p = static_cast<const uint8_t*>(row);
  switch (t) {
    case QType::F32: std::memcpy(dst, row, (size_t)n * 4); return;
    case QType::F16: for (int i = 0; i < n; i++) dst[i] = f16_to_f32(u16_at(p + 2 * i)); return;
    case QType::BF16: for (int i = 0; i < n; i++) dst[i] = bf16_to_f32(u16_at(p + 2 * i)); return;
    case QType::Q8_0:
      for (int b = 0; b < n / 32; b++, p += 34) {
        const float d = f16_to_f32(u16_at(p));
        for (int j = 0; j < 32; j++) dst[b * 32 + j] = d * (float)(int8_t)p[2 + j];
      }
      return;
    case QType::Q4_0:
      for (int b = 0; b < n / 32; b++, p += 18) {
        const float d = f16_to_f32(u16_at(p));
        for (int j = 0; j < 16; j++) {
          dst[b * 32 + j] = d * (float)((p[2 + j] & 0x0f) - 8);
          dst[b * 32 + j + 16] = d * (float)((p[2 + j] >> 4) - 8);
        }
      }
      return;
  }
}

float dot_row_ref(QType t, const void* row, const float* x, int n) {
  const uint8_t* p = static_cast<const uint8_t*>(row);
  float s = 0.0f;
  switch (t) {
    case QType::F32: { const float* w = static_cast<const float*>(row); for (int i = 0; i < n; i++) s += w[i] * x[i]; return s; }
    case QType::F16: for (int i = 0; i < n; i++) s += f16_to_f32(u16_at(p + 2 * i)) * x[i]; return s;
    case QType::BF16: for (int i = 0; i < n; i++) s += bf16_to_f32(u16_at(p + 2 * i)) * x[i]; return s;
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
  }
  return s;
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

void dequantize_row_simd(QType t, const void* row, float* dst, int n) {
  if (t != QType::Q8_0 && t != QType::Q4_0) return dequantize_row_ref(t, row, dst, n);
  const uint8_t* p = static_cast<const uint8_t*>(row);
  const int stride = t == QType::Q8_0 ? 34 : 18;
  alignas(64) float blk[32];
  for (int b = 0; b < n / 32; b++, p += stride) {
    decode_block(t, p, blk);
    const fbatch d(f16_to_f32(u16_at(p)));
    for (int j = 0; j + kLanes <= 32; j += kLanes) (fbatch::load_aligned(blk + j) * d).store_unaligned(dst + b * 32 + j);
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
    for (; k + kLanes <= n; k += kLanes) acc = xsimd::fma(fbatch::load_unaligned(w + k), fbatch::load_unaligned(x + k), acc);
    float s = xsimd::reduce_add(acc);
    for (; k < n; k++) s += w[k] * x[k];
    return s;
  }
  if (t == QType::F16 || t == QType::BF16) {
    fbatch acc(0.0f);
    float tail = 0.0f;
    for (int k0 = 0; k0 < n; k0 += 64) {
      const int m = n - k0 < 64 ? n - k0 : 64;
      dequantize_row_ref(t, p + 2 * k0, buf, m);
      int k = 0;
      for (; k + kLanes <= m; k += kLanes) acc = xsimd::fma(fbatch::load_aligned(buf + k), fbatch::load_unaligned(x + k0 + k), acc);
      for (; k < m; k++) tail += buf[k] * x[k0 + k];
    }
    return xsimd::reduce_add(acc) + tail;
  }
  const int stride = t == QType::Q8_0 ? 34 : 18;
  float s = 0.0f;
  for (int b = 0; b < n / 32; b++, p += stride) {
    decode_block(t, p, buf);
    fbatch acc(0.0f);
    int j = 0;
    for (; j + kLanes <= 32; j += kLanes) acc = xsimd::fma(fbatch::load_aligned(buf + j), fbatch::load_unaligned(x + b * 32 + j), acc);
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
      if (std::fabs(x[b * 32 + j]) > amax) { amax = std::fabs(x[b * 32 + j]); maxv = x[b * 32 + j]; }
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

void matmul_q_simd(QType t, float* Y, int64_t ldy, const float* X, int64_t ldx, const void* W, int T, int n, int r0,
                   int r1, float* scratch) {
  const size_t rb = qtype_row_bytes(t, n);
  const uint8_t* base = static_cast<const uint8_t*>(W);
  for (int r = r0; r < r1; r++) {
    const uint8_t* row = base + (size_t)r * rb;
    if (T == 1) {
      Y[r] = dot_row_simd(t, row, X, n);
      continue;
    }
    dequantize_row_simd(t, row, scratch, n);
    for (int tok = 0; tok < T; tok++) Y[tok * ldy + r] = dot_row_simd(QType::F32, scratch, X + tok * ldx, n);
  }
}

}  // namespace qkv
