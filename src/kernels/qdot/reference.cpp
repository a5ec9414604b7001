// The scalar references of the integer dot products, which every SIMD kernel is tested against.
#include <cstdlib>

#include "common.h"

namespace qkv {
using namespace qdot_detail;

std::atomic<int> qdot_detail::g_prefill_forced{-1};
void qdot_force_prefill_kernel(int which) { g_prefill_forced.store(which == 0 || which == 1 ? which : -1); }

bool qtype_int_dot(QType t) {
  switch (t) {
    case QType::Q8_0:
    case QType::Q4_0:
    case QType::Q4_1:
    case QType::Q5_0:
    case QType::Q5_1:
    case QType::Q4_K:
    case QType::Q5_K:
    case QType::Q6_K: return true;
    default: return false;
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
    case QType::Q4_0:
    case QType::Q4_1: {
      const bool q41 = t == QType::Q4_1;
      const uint8_t* qs = p + (q41 ? 4 : 2);
      r.d = f16_to_f32(u16_at(p));
      if (q41) r.m = f16_to_f32(u16_at(p + 2));
      for (int k = 0; k < 32; k++) r.w[k] = (k < 16 ? qs[k] & 0x0f : qs[k - 16] >> 4) - (q41 ? 0 : 8);
      break;
    }
    case QType::Q5_0:
    case QType::Q5_1: {
      const bool q51 = t == QType::Q5_1;
      const uint32_t qh = u32_at(p + (q51 ? 4 : 2));
      const uint8_t* qs = p + (q51 ? 8 : 6);
      r.d = f16_to_f32(u16_at(p));
      if (q51) r.m = f16_to_f32(u16_at(p + 2));
      for (int k = 0; k < 32; k++)
        r.w[k] = ((k < 16 ? qs[k] & 0x0f : qs[k - 16] >> 4) | (int)(((qh >> k) & 1) << 4)) - (q51 ? 0 : 16);
      break;
    }
    case QType::Q4_K:
    case QType::Q5_K: {
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
  *a +=
      std::fabs((double)w.d * dx) * (double)(std::abs(w.sa) * alo + std::abs(w.sb) * ahi) + std::fabs((double)w.m * xs);
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

bool qtype_k_super(QType t) { return t == QType::Q4_K || t == QType::Q5_K || t == QType::Q6_K; }

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

namespace qdot_detail {
void matmul_q8k_by_ref(QType t, float* Y, int64_t ldy, const BlockQ8K* X, const uint8_t* W, int T, int n, int r0,
                       int r1) {
  const size_t rb = qtype_row_bytes(t, n);
  for (int r = r0; r < r1; r++)
    for (int tok = 0; tok < T; tok++)
      Y[tok * ldy + r] = dot_q8k_ref(t, W + (size_t)r * rb, X + (size_t)tok * (n / 256), n);
}
}  // namespace qdot_detail

}  // namespace qkv
