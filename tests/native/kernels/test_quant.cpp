// Stored-type kernels: SIMD against scalar references over sizes and misaligned rows, half
// conversions against exact arithmetic, quantizers within their error bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/quant.h"
#include "quant_rows.h"

using namespace qkv;

namespace {

struct Case {
  QType t;
  int n;
  int offset;
};

class QuantKernel : public ::testing::TestWithParam<Case> {};

TEST_P(QuantKernel, SimdMatchesReferenceAndDequantizeThenDot) {
  const Case c = GetParam();
  std::vector<float> w = randn(c.n, 1 + c.n, 0.05f), x = randn(c.n, 7 + c.n);
  std::vector<uint8_t> buf = stored_row(c.t, w, c.offset);
  const uint8_t* row = buf.data() + c.offset;
  std::vector<float> a(c.n), b(c.n);
  dequantize_row_ref(c.t, row, a.data(), c.n);
  dequantize_row_simd(c.t, row, b.data(), c.n);
  for (int i = 0; i < c.n; i++) ASSERT_EQ(a[i], b[i]) << "element " << i;
  double mag = 0, direct = 0;
  for (int i = 0; i < c.n; i++) {
    mag += std::fabs(a[i] * x[i]);
    direct += (double)a[i] * x[i];
  }
  const double tol = 1e-5 * mag + 1e-6;
  EXPECT_NEAR(dot_row_ref(c.t, row, x.data(), c.n), direct, tol);
  EXPECT_NEAR(dot_row_simd(c.t, row, x.data(), c.n), direct, tol);
  EXPECT_GT(mag, 0.0);
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (QType t : {QType::F32, QType::F16, QType::BF16})
    for (int n : {1, 3, 15, 16, 17, 63, 64, 65, 200, 769})
      for (int off : {0, 2}) v.push_back({t, n, off});
  for (QType t : {QType::Q8_0, QType::Q4_0, QType::Q4_1, QType::Q5_0, QType::Q5_1})
    for (int n : {32, 64, 96, 768, 2048})
      for (int off : {0, 1, 3}) v.push_back({t, n, off});
  for (QType t : {QType::Q4_K, QType::Q5_K, QType::Q6_K})
    for (int n : {256, 512, 2048})
      for (int off : {0, 1}) v.push_back({t, n, off});
  return v;
}
INSTANTIATE_TEST_SUITE_P(Sweep, QuantKernel, ::testing::ValuesIn(cases()));

TEST(QuantHalf, EveryF16RoundTripsAndConversionIsExactlyRounded) {
  for (uint32_t h = 0; h < 65536; h++) {
    const float f = f16_to_f32((uint16_t)h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), (uint16_t)h) << std::hex << h;
  }
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(f16_to_f32(f32_to_f16(1e6f))));
  // Nearest-even rounding against exact arithmetic on random normals.
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-60000.0f, 60000.0f);
  for (int i = 0; i < 20000; i++) {
    const float f = i % 2 ? u(rng) : u(rng) * 1e-4f;
    const float r = f16_to_f32(f32_to_f16(f));
    // No other half is closer.
    const uint16_t h = f32_to_f16(f);
    for (int d : {-1, 1}) {
      const float other = f16_to_f32((uint16_t)(h + d));
      if (!std::isnan(other)) ASSERT_LE(std::fabs(r - f), std::fabs(other - f)) << f;
    }
  }
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  // The SIMD conversion equals the scalar one on every half (NaNs stay NaN).
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; h++) all[h] = (uint16_t)h;
  std::vector<float> fast(65536);
  dequantize_row_simd(QType::F16, all.data(), fast.data(), 65536);
  for (uint32_t h = 0; h < 65536; h++) {
    const float want = f16_to_f32((uint16_t)h);
    if (std::isnan(want)) ASSERT_TRUE(std::isnan(fast[h])) << std::hex << h;
    else ASSERT_EQ(std::memcmp(&fast[h], &want, 4), 0) << std::hex << h << ": " << fast[h] << " vs " << want;
  }
}

TEST(QuantBlocks, QuantizersStayWithinHalfAStep) {
  for (int seed = 0; seed < 20; seed++) {
    std::vector<float> x = randn(256, 100 + seed, seed % 2 ? 0.02f : 3.0f), y(256);
    std::vector<uint8_t> q8(qtype_row_bytes(QType::Q8_0, 256)), q4(qtype_row_bytes(QType::Q4_0, 256));
    quantize_row_q8_0(x.data(), q8.data(), 256);
    dequantize_row_ref(QType::Q8_0, q8.data(), y.data(), 256);
    for (int b = 0; b < 8; b++) {
      float amax = 0;
      for (int j = 0; j < 32; j++) amax = std::fmax(amax, std::fabs(x[b * 32 + j]));
      for (int j = 0; j < 32; j++)  // step amax/127, plus the f16 rounding of the scale
        ASSERT_LE(std::fabs(x[b * 32 + j] - y[b * 32 + j]), amax / 127 * 0.5f + amax * 1e-3f) << b << "," << j;
    }
    quantize_row_q4_0(x.data(), q4.data(), 256);
    dequantize_row_ref(QType::Q4_0, q4.data(), y.data(), 256);
    for (int b = 0; b < 8; b++) {
      float amax = 0;
      for (int j = 0; j < 32; j++) amax = std::fmax(amax, std::fabs(x[b * 32 + j]));
      for (int j = 0; j < 32; j++)  // step amax/8; the far end of the range clips to one step
        ASSERT_LE(std::fabs(x[b * 32 + j] - y[b * 32 + j]), amax / 8 * 1.0f + amax * 1e-3f) << b << "," << j;
    }
  }
}

double rms_error(QType t, const std::vector<float>& x) {
  const int n = (int)x.size();
  std::vector<uint8_t> q(qtype_row_bytes(t, n));
  std::vector<float> y(n);
  switch (t) {
    case QType::Q4_0: quantize_row_q4_0(x.data(), q.data(), n); break;
    case QType::Q4_1: quantize_row_q4_1(x.data(), q.data(), n); break;
    case QType::Q4_K: quantize_row_q4_k(x.data(), q.data(), n); break;
    case QType::Q6_K: quantize_row_q6_k(x.data(), q.data(), n); break;
    default: ADD_FAILURE();
  }
  dequantize_row_ref(t, q.data(), y.data(), n);
  double e = 0;
  for (int i = 0; i < n; i++) e += (double)(x[i] - y[i]) * (x[i] - y[i]);
  return std::sqrt(e / n);
}

// Q4_K: every value is the nearest point of its sub-block's grid d*sc*q - dmin*m (q 0..15),
// read back through the documented layout; the fitted grids beat Q4_0's and Q4_1's.
// Q6_K: within one step of its 16-value sub-block (the far end clips like Q4_0), and several
// times more accurate than the 4-bit types.
TEST(QuantK, QuantizersFitTheirGridsAndBeatTheBlockTypes) {
  for (int seed = 0; seed < 12; seed++) {
    const int n = 256 * (1 + seed % 3);
    std::vector<float> x = randn(n, 300 + seed, seed % 2 ? 0.02f : 2.0f);
    if (seed % 4 == 1)
      for (int i = 0; i < n; i++) x[i] = std::fabs(x[i]) + 0.01f;  // all positive: offsets 0
    if (seed == 4)
      for (int i = 32; i < 64; i++) x[i] = 0.0f;  // a constant sub-block
    std::vector<uint8_t> q(qtype_row_bytes(QType::Q4_K, n));
    std::vector<float> y(n);
    quantize_row_q4_k(x.data(), q.data(), n);
    dequantize_row_ref(QType::Q4_K, q.data(), y.data(), n);
    for (int b = 0; b < n / 256; b++) {
      const uint8_t* blk = q.data() + 144 * b;
      const float d = f16_to_f32((uint16_t)(blk[0] | blk[1] << 8)), dmin = f16_to_f32((uint16_t)(blk[2] | blk[3] << 8));
      for (int j = 0; j < 8; j++) {
        int sc, m;
        kquant_scale_min(j, blk + 4, &sc, &m);
        const float step = d * sc, lo = -dmin * m, hi = step * 15 + lo;
        for (int k = 0; k < 32; k++) {
          const int i = 256 * b + 32 * j + k;
          const float c = std::fmin(std::fmax(x[i], lo), hi);  // the grid's range
          ASSERT_LE(std::fabs(y[i] - c), 0.5f * step * (1 + 1e-5f) + 1e-6f * std::fabs(lo)) << i;
          ASSERT_LE(std::fabs(x[i] - y[i]), 4 * step + std::fabs(lo) + 1e-6f) << i;
        }
      }
    }
    // Quality on zero-mean data (the K formats only lower values: all-positive blocks lose
    // the range below 0 that Q4_1's free min keeps).
    const bool centred = seed % 4 != 1;
    const double e4k = rms_error(QType::Q4_K, x);
    if (centred) EXPECT_LT(e4k, rms_error(QType::Q4_0, x)) << seed;
    if (centred) EXPECT_LT(e4k, rms_error(QType::Q4_1, x)) << seed;

    std::vector<uint8_t> q6(qtype_row_bytes(QType::Q6_K, n));
    quantize_row_q6_k(x.data(), q6.data(), n);
    dequantize_row_ref(QType::Q6_K, q6.data(), y.data(), n);
    for (int b = 0; b < n / 256; b++) {
      const uint8_t* blk = q6.data() + 210 * b;
      const float d = f16_to_f32((uint16_t)(blk[208] | blk[209] << 8));
      for (int j = 0; j < 16; j++) {
        const float step = std::fabs(d * (int8_t)blk[192 + j]);
        float amax = 0;
        for (int k = 0; k < 16; k++) amax = std::fmax(amax, std::fabs(x[256 * b + 16 * j + k]));
        for (int k = 0; k < 16; k++) {  // one step, plus the int8 rounding of the scale (<= d/2 per step)
          const int i = 256 * b + 16 * j + k;
          ASSERT_LE(std::fabs(x[i] - y[i]), step + 32 * 0.5f * std::fabs(d) + amax * 1e-3f) << i;
        }
      }
    }
    if (centred) EXPECT_LT(rms_error(QType::Q6_K, x), 0.4 * e4k) << seed;
  }
}

// One hand-built block per K type, decoded by the layout documented in quant.h.
TEST(QuantK, DocumentedLayoutDecodes) {
  std::vector<uint8_t> q4k(144, 0);
  uint16_t one = f32_to_f16(1.0f), half = f32_to_f16(0.5f);
  std::memcpy(q4k.data(), &one, 2);
  std::memcpy(q4k.data() + 2, &half, 2);
  uint8_t* sc = q4k.data() + 4;
  sc[0] = 3;     // sub-block 0: scale 3
  sc[4] = 2;     //              min 2
  sc[8] = 0x21;  // sub-block 4: scale 1 (low nibble), min 2 (high nibble)
  uint8_t* qs = q4k.data() + 16;
  qs[0] = 0x5A;   // element 0 (sub-block 0) = 10; element 32 (sub-block 1, scale 0) = 5
  qs[64] = 0x07;  // element 128 (sub-block 4) = 7
  std::vector<float> y(256);
  dequantize_row_ref(QType::Q4_K, q4k.data(), y.data(), 256);
  EXPECT_EQ(y[0], 3 * 10 - 0.5f * 2);
  EXPECT_EQ(y[32], 0.0f);
  EXPECT_EQ(y[128], 1 * 7 - 0.5f * 2);
  EXPECT_EQ(y[1], -1.0f);  // q = 0 in sub-block 0: just the min

  std::vector<uint8_t> q6k(210, 0);
  std::memcpy(q6k.data() + 208, &half, 2);
  q6k[192] = 2;                // scale of elements 0..15
  q6k[192 + 2] = (uint8_t)-1;  // scale of elements 32..47
  q6k[0] = 0x0F;               // low 4 bits of element 0 (and 64's are 0)
  q6k[128] = 0x03;             // top 2 bits of element 0 = 3; of 32, 64, 96 = 0
  q6k[32] = 0x01;              // element 32's low bits
  dequantize_row_ref(QType::Q6_K, q6k.data(), y.data(), 256);
  EXPECT_EQ(y[0], 0.5f * 2 * (63 - 32));
  EXPECT_EQ(y[32], 0.5f * -1 * (1 - 32));
  EXPECT_EQ(y[64], 0.5f * 0 * (0 - 32));
}

TEST(QuantMatmul, BatchedEqualsRowByRow) {
  const int d = 37, n = 256;
  for (QType t : {QType::F16, QType::BF16, QType::Q8_0, QType::Q4_0, QType::Q4_1, QType::Q5_0, QType::Q5_1, QType::Q4_K,
                  QType::Q5_K, QType::Q6_K}) {
    std::vector<uint8_t> W;
    for (int r = 0; r < d; r++) {
      std::vector<uint8_t> row = stored_row(t, randn(n, 50 + r, 0.1f), r % 2);
      row.erase(row.begin(), row.begin() + r % 2);
      W.insert(W.end(), row.begin(), row.end());
    }
    for (int T : {1, 2, 5}) {
      std::vector<float> X = randn(T * n, 9), Y(T * d, -1.0f), scratch((size_t)kQPanelRows * n);
      matmul_q_simd(t, Y.data(), d, X.data(), n, W.data(), T, n, 3, d, scratch.data());
      for (int tok = 0; tok < T; tok++)
        for (int r = 0; r < d; r++) {
          if (r < 3) {
            ASSERT_EQ(Y[tok * d + r], -1.0f) << "row outside the range was written";
            continue;
          }
          const uint8_t* row = W.data() + r * qtype_row_bytes(t, n);
          const float want = dot_row_ref(t, row, X.data() + tok * n, n);
          std::vector<float> wr(n);
          dequantize_row_ref(t, row, wr.data(), n);
          double mag = 0;
          for (int k = 0; k < n; k++) mag += std::fabs(wr[k] * X[tok * n + k]);
          ASSERT_NEAR(Y[tok * d + r], want, 1e-5 * mag + 1e-6) << "type " << (int)t << " T " << T << " row " << r;
        }
    }
  }
}

}  // namespace
