// Stored-type kernels: SIMD against scalar references over sizes and misaligned rows, half
// conversions against exact arithmetic, quantizers within their error bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/quant.h"

using namespace qkv;

namespace {

std::vector<float> randn(int n, unsigned seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// A row of `type` holding quantized random values, stored at a byte offset (rows of Q4_0 are
// 18-byte blocks and never aligned in real files).
std::vector<uint8_t> stored_row(QType t, const std::vector<float>& x, int offset) {
  const int n = (int)x.size();
  std::vector<uint8_t> buf(offset + qtype_row_bytes(t, n));
  uint8_t* p = buf.data() + offset;
  switch (t) {
    case QType::F32: std::memcpy(p, x.data(), n * 4); break;
    case QType::F16: for (int i = 0; i < n; i++) { uint16_t h = f32_to_f16(x[i]); std::memcpy(p + 2 * i, &h, 2); } break;
    case QType::BF16: for (int i = 0; i < n; i++) { uint32_t b; std::memcpy(&b, &x[i], 4); uint16_t h = b >> 16; std::memcpy(p + 2 * i, &h, 2); } break;
    case QType::Q8_0: quantize_row_q8_0(x.data(), p, n); break;
    case QType::Q4_0: quantize_row_q4_0(x.data(), p, n); break;
  }
  return buf;
}

struct Case { QType t; int n; int offset; };

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
  for (int i = 0; i < c.n; i++) { mag += std::fabs(a[i] * x[i]); direct += (double)a[i] * x[i]; }
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
  for (QType t : {QType::Q8_0, QType::Q4_0})
    for (int n : {32, 64, 96, 768, 2048})
      for (int off : {0, 1, 3}) v.push_back({t, n, off});
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

TEST(QuantMatmul, BatchedEqualsRowByRow) {
  const int d = 37, n = 96;
  for (QType t : {QType::F16, QType::BF16, QType::Q8_0, QType::Q4_0}) {
    std::vector<uint8_t> W;
    for (int r = 0; r < d; r++) {
      std::vector<uint8_t> row = stored_row(t, randn(n, 50 + r, 0.1f), 0);
      W.insert(W.end(), row.begin(), row.end());
    }
    for (int T : {1, 2, 5}) {
      std::vector<float> X = randn(T * n, 9), Y(T * d, -1.0f), scratch(n);
      matmul_q_simd(t, Y.data(), d, X.data(), n, W.data(), T, n, 3, d, scratch.data());
      for (int tok = 0; tok < T; tok++)
        for (int r = 0; r < d; r++) {
          if (r < 3) { ASSERT_EQ(Y[tok * d + r], -1.0f) << "row outside the range was written"; continue; }
          const float want = dot_row_ref(t, W.data() + r * qtype_row_bytes(t, n), X.data() + tok * n, n);
          ASSERT_NEAR(Y[tok * d + r], want, 1e-4f) << "type " << (int)t << " T " << T << " row " << r;
        }
    }
  }
}

}  // namespace
