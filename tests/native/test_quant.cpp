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
    case QType::Q4_1: quantize_row_q4_1(x.data(), p, n); break;
    case QType::Q5_0: quantize_row_q5_0(x.data(), p, n); break;
    case QType::Q5_1: quantize_row_q5_1(x.data(), p, n); break;
    default: {  // K-quants: random blocks with small half scales
      std::mt19937 rng(n + offset);
      const size_t bb = qtype_row_bytes(t, 256);
      for (size_t i = 0; i < qtype_row_bytes(t, n); i++) p[i] = (uint8_t)rng();
      for (int b = 0; b < n / 256; b++) {
        uint8_t* blk = p + b * bb;
        const uint16_t d = f32_to_f16(0.001f * (1 + rng() % 50)), dm = f32_to_f16(0.0005f * (rng() % 50));
        if (t == QType::Q6_K) std::memcpy(blk + 208, &d, 2);
        else { std::memcpy(blk, &d, 2); std::memcpy(blk + 2, &dm, 2); }
      }
    }
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

// One hand-built block per K type, decoded by the layout documented in quant.h.
TEST(QuantK, DocumentedLayoutDecodes) {
  std::vector<uint8_t> q4k(144, 0);
  uint16_t one = f32_to_f16(1.0f), half = f32_to_f16(0.5f);
  std::memcpy(q4k.data(), &one, 2);
  std::memcpy(q4k.data() + 2, &half, 2);
  uint8_t* sc = q4k.data() + 4;
  sc[0] = 3;      // sub-block 0: scale 3
  sc[4] = 2;      //              min 2
  sc[8] = 0x21;   // sub-block 4: scale 1 (low nibble), min 2 (high nibble)
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
  q6k[192] = 2;            // scale of elements 0..15
  q6k[192 + 2] = (uint8_t)-1;  // scale of elements 32..47
  q6k[0] = 0x0F;           // low 4 bits of element 0 (and 64's are 0)
  q6k[128] = 0x03;         // top 2 bits of element 0 = 3; of 32, 64, 96 = 0
  q6k[32] = 0x01;          // element 32's low bits
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
      std::vector<float> X = randn(T * n, 9), Y(T * d, -1.0f), scratch(n);
      matmul_q_simd(t, Y.data(), d, X.data(), n, W.data(), T, n, 3, d, scratch.data());
      for (int tok = 0; tok < T; tok++)
        for (int r = 0; r < d; r++) {
          if (r < 3) { ASSERT_EQ(Y[tok * d + r], -1.0f) << "row outside the range was written"; continue; }
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
