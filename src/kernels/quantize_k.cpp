// Q4_K quantizer. Layout (decoded by quant.cpp): f16 d, f16 dmin, 12 bytes of 6-bit sub-block
// scales and mins, 128 bytes of nibbles; in each 64-value chunk c, byte l holds value 64c + l
// in its low nibble and value 64c + 32 + l in its high nibble; x = d * sc * q - dmin * m.
#include "quantize_k.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant.h"

namespace qkv {

namespace {

inline int nearest(float v) { return (int)std::lrintf(v); }

// Fits x ~ scale * q + mn with q in 0..nmax and mn <= 0, weighting errors by w. Tries the
// plain min/max grid and a few stretched ones, refitting scale and min by least squares for
// each assignment; keeps the best. Returns scale, and -mn in *neg_min.
float fit_scale_min(const float* x, const float* w, int n, int nmax, float* neg_min) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; i++) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  lo = std::min(lo, 0.0f);
  if (hi <= lo) {
    *neg_min = -lo;
    return 0.0f;
  }
  auto error = [&](float scale, float mn) {
    double e = 0;
    for (int i = 0; i < n; i++) {
      const int q = std::clamp(nearest((x[i] - mn) / scale), 0, nmax);
      const double d = scale * q + mn - x[i];
      e += w[i] * d * d;
    }
    return e;
  };
  float best_scale = (hi - lo) / nmax, best_min = lo;
  double best = error(best_scale, best_min);
  for (int step = 0; step <= 20; step++) {
    const float iscale = (nmax - 1.0f + 0.1f * step) / (hi - lo);
    double sw = 0, sl = 0, sl2 = 0, sx = 0, sxl = 0;
    for (int i = 0; i < n; i++) {
      const int q = std::clamp(nearest(iscale * (x[i] - lo)), 0, nmax);
      sw += w[i], sl += w[i] * q, sl2 += w[i] * q * q, sx += w[i] * x[i], sxl += w[i] * x[i] * q;
    }
    const double det = sw * sl2 - sl * sl;
    if (det <= 0) continue;
    double scale = (sw * sxl - sx * sl) / det, mn = (sl2 * sx - sl * sxl) / det;
    if (mn > 0) mn = 0, scale = sl2 > 0 ? sxl / sl2 : 0;
    if (!(scale > 0)) continue;
    const double e = error((float)scale, (float)mn);
    if (e < best) best = e, best_scale = (float)scale, best_min = (float)mn;
  }
  *neg_min = -best_min;
  return best_scale;
}

}  // namespace

void quantize_row_q4_k(const float* x, void* dst, int n) {
  uint8_t* out = static_cast<uint8_t*>(dst);
  for (int b = 0; b < n / 256; b++, x += 256, out += 144) {
    float scales[8], mins[8], w[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
      const float* s = x + 32 * j;
      // Weight large values more (they matter more in a dot product), as llama.cpp does.
      float sum2 = 0;
      for (int i = 0; i < 32; i++) sum2 += s[i] * s[i];
      const float av = std::sqrt(sum2 / 32);
      for (int i = 0; i < 32; i++) w[i] = av + std::fabs(s[i]);
      scales[j] = fit_scale_min(s, w, 32, 15, &mins[j]);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    const float d = max_scale / 63, dmin = max_min / 63;
    const uint16_t dh = f32_to_f16(d), mh = f32_to_f16(dmin);
    std::memcpy(out, &dh, 2);
    std::memcpy(out + 2, &mh, 2);
    // Scales and mins as 6-bit multiples of the f16-rounded d and dmin actually stored.
    const float d16 = f16_to_f32(dh), m16 = f16_to_f32(mh);
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
      ls[j] = (uint8_t)(d16 > 0 ? std::clamp(nearest(scales[j] / d16), 0, 63) : 0);
      lm[j] = (uint8_t)(m16 > 0 ? std::clamp(nearest(mins[j] / m16), 0, 63) : 0);
    }
    uint8_t* sc = out + 4;
    std::memset(sc, 0, 12);
    for (int j = 0; j < 8; j++) {
      if (j < 4) {
        sc[j] = ls[j];
        sc[j + 4] = lm[j];
      } else {
        sc[j + 4] = (uint8_t)((ls[j] & 0x0f) | ((lm[j] & 0x0f) << 4));
        sc[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
        sc[j] |= (uint8_t)((lm[j] >> 4) << 6);
      }
    }
    uint8_t q[256];
    for (int j = 0; j < 8; j++) {
      const float step = d16 * ls[j], mn = m16 * lm[j];
      for (int i = 0; i < 32; i++)
        q[32 * j + i] = (uint8_t)(step > 0 ? std::clamp(nearest((x[32 * j + i] + mn) / step), 0, 15) : 0);
    }
    uint8_t* qs = out + 16;
    for (int c = 0; c < 4; c++)
      for (int l = 0; l < 32; l++) qs[32 * c + l] = (uint8_t)(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
  }
}

}  // namespace qkv
