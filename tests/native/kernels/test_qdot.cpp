// Integer dot products with Q8 activations: the quantizer SIMD vs scalar (bit-exact), the
// kernel SIMD vs its scalar reference (float rounding only), and the reference vs dequantize-
// then-f32 within the error the activation rounding allows (and exactly, up to float rounding,
// when the activations are representable).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common.h"
#include "kernels/qdot.h"
#include "quant_rows.h"

using namespace qkv;

namespace {

const char* name(QType t) {
  switch (t) {
    case QType::Q8_0: return "q8_0";
    case QType::Q4_0: return "q4_0";
    case QType::Q4_1: return "q4_1";
    case QType::Q5_0: return "q5_0";
    case QType::Q5_1: return "q5_1";
    case QType::Q4_K: return "q4_k";
    case QType::Q5_K: return "q5_k";
    case QType::Q6_K: return "q6_k";
    default: return "?";
  }
}

const QType kIntTypes[] = {QType::Q8_0, QType::Q4_0, QType::Q4_1, QType::Q5_0,
                           QType::Q5_1, QType::Q4_K, QType::Q5_K, QType::Q6_K};

std::vector<BlockQ8A> quantized(const std::vector<float>& x) {
  std::vector<BlockQ8A> q(x.size() / 32);
  quantize_act_q8_ref(x.data(), q.data(), (int)x.size());
  return q;
}

bool same_blocks(const BlockQ8A& a, const BlockQ8A& b) {
  if (std::memcmp(a.q, b.q, sizeof a.q) != 0 || a.h[0] != b.h[0] || a.h[1] != b.h[1]) return false;
  if (std::isnan(a.d)) return std::isnan(b.d) && std::isnan(a.s) && std::isnan(b.s);
  return a.d == b.d && a.s == b.s;
}

// SIMD float accumulation vs the double reference: each of the nb block terms is rounded a
// couple of times (scale product, multiply-add) and the lane sums add up to nb + 8 terms.
double fp_tol(int n, double mag) { return (2.0 * (n / 32) + 16) * std::ldexp(1.0, -24) * mag + 1e-30; }

TEST(QDotActivations, SimdEqualsReferenceBitForBitAndStaysWithinHalfAStep) {
  for (int n : {32, 64, 96, 768, 2048}) {
    for (float sigma : {1.0f, 1e-3f, 300.0f}) {
      std::vector<float> x = randn(n, 11 + n, sigma);
      x[0] = 0.0f;
      if (n >= 64)
        for (int k = 32; k < 64; k++) x[k] = 0.0f;  // an all-zero block: d = 0
      x[n - 1] = sigma * 40.0f;                     // an outlier dominating its block
      std::vector<BlockQ8A> a(n / 32), b(n / 32);
      quantize_act_q8_ref(x.data(), a.data(), n);
      quantize_act_q8_simd(x.data(), b.data(), n);
      for (int i = 0; i < n / 32; i++) {
        ASSERT_TRUE(same_blocks(a[i], b[i])) << "n " << n << " block " << i;
        int half[2] = {0, 0};
        for (int k = 0; k < 32; k++) {
          const float v = x[32 * i + k];
          ASSERT_LE(std::abs((int)a[i].q[k]), 127);
          // |x - d q| <= d / 2, plus the rounding of 127 / amax (a few ulps of amax).
          ASSERT_LE(std::fabs(v - a[i].d * a[i].q[k]), 0.5f * a[i].d + 127.0f * a[i].d * 3e-7f) << v;
          half[k / 16] += a[i].q[k];
        }
        ASSERT_EQ(a[i].h[0], half[0]);
        ASSERT_EQ(a[i].h[1], half[1]);
        ASSERT_EQ(a[i].d * (float)(half[0] + half[1]), a[i].s);
      }
    }
  }
}

TEST(QDotActivations, TiesRoundToEvenAndNonFiniteBlocksBecomeNaN) {
  std::vector<float> x(96, 0.0f);
  x[0] = 127.0f;  // amax 127: d = 1, q = x exactly, ties to even
  x[1] = 2.5f;
  x[2] = -3.5f;
  x[3] = 0.5f;
  x[32] = std::numeric_limits<float>::infinity();
  x[33] = 5.0f;
  x[64] = std::numeric_limits<float>::quiet_NaN();
  for (auto f : {quantize_act_q8_ref, quantize_act_q8_simd}) {
    std::vector<BlockQ8A> q(3);
    f(x.data(), q.data(), 96);
    EXPECT_EQ(q[0].d, 1.0f);
    EXPECT_EQ(q[0].q[1], 2);
    EXPECT_EQ(q[0].q[2], -4);
    EXPECT_EQ(q[0].q[3], 0);
    EXPECT_EQ(q[0].s, 127 + 2 - 4);
    EXPECT_TRUE(std::isnan(q[1].d));
    EXPECT_TRUE(std::isnan(q[2].d));
    EXPECT_EQ(q[1].q[1], 0);
  }
  // A NaN activation block makes the product NaN, as an f32 product would be.
  std::vector<uint8_t> row = stored_row(QType::Q8_0, randn(96, 5), 0);
  std::vector<BlockQ8A> q(3);
  quantize_act_q8_simd(x.data(), q.data(), 96);
  float y = 0.0f;
  matmul_q8_simd(QType::Q8_0, &y, 1, q.data(), row.data(), 1, 96, 0, 1);
  EXPECT_TRUE(std::isnan(y));
}

struct Case {
  QType t;
  int n;
  int offset;
};
class QDotKernel : public ::testing::TestWithParam<Case> {};

TEST_P(QDotKernel, SimdMatchesReferenceAndReferenceMatchesDequantizeThenF32) {
  const Case c = GetParam();
  std::vector<uint8_t> buf = stored_row(c.t, randn(c.n, 3 + c.n, 0.05f), c.offset);
  const uint8_t* row = buf.data() + c.offset;
  std::vector<float> w(c.n);
  dequantize_row_ref(c.t, row, w.data(), c.n);

  // Random activations: the reference differs from f32 by the activation rounding only.
  std::vector<float> x = randn(c.n, 9 + c.n);
  std::vector<BlockQ8A> xq = quantized(x);
  double mag = 0;
  const float ref = dot_q8_ref(c.t, row, xq.data(), c.n, &mag);
  float simd = 0;
  matmul_q8_simd(c.t, &simd, 1, xq.data(), row, 1, c.n, 0, 1);
  EXPECT_NEAR(simd, ref, fp_tol(c.n, mag)) << name(c.t);
  double exact = 0, bound = 0;
  for (int k = 0; k < c.n; k++) {
    exact += (double)w[k] * x[k];
    bound += 0.5 * xq[k / 32].d * (1 + 1e-4) * std::fabs(w[k]);
  }
  EXPECT_NEAR(ref, exact, bound + 1e-6 * mag + 1e-30) << name(c.t);
  EXPECT_GT(mag, 0.0);

  // Activations the quantizer represents exactly (integers -127..127 times a scale, each
  // block reaching 127): then only float rounding separates the integer and f32 products.
  std::mt19937 rng(c.n);
  for (int k = 0; k < c.n; k++) x[k] = (k % 32 == 5 ? 127 : (int)(rng() % 255) - 127) * 0.03125f;
  xq = quantized(x);
  const float ref2 = dot_q8_ref(c.t, row, xq.data(), c.n, &mag);
  exact = 0;
  for (int k = 0; k < c.n; k++) exact += (double)w[k] * x[k];
  EXPECT_NEAR(ref2, exact, 1e-6 * mag + 1e-30) << name(c.t);
  matmul_q8_simd(c.t, &simd, 1, xq.data(), row, 1, c.n, 0, 1);
  EXPECT_NEAR(simd, ref2, fp_tol(c.n, mag)) << name(c.t);
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (QType t : {QType::Q8_0, QType::Q4_0, QType::Q4_1, QType::Q5_0, QType::Q5_1})
    for (int n : {32, 64, 96, 768, 2048})
      for (int off : {0, 1, 3}) v.push_back({t, n, off});
  for (QType t : {QType::Q4_K, QType::Q5_K, QType::Q6_K})
    for (int n : {256, 512, 2048, 4096})
      for (int off : {0, 1}) v.push_back({t, n, off});
  return v;
}
INSTANTIATE_TEST_SUITE_P(Sweep, QDotKernel, ::testing::ValuesIn(cases()));

// Blocks at the edges of their ranges: every byte 0xff or 0x80 (Q8_0 weight -128, all nibbles
// and high bits set, K scales and mins 63, Q6_K scales -1 / -128), large and zero scales, and
// activations at +-127 (the largest products the 16-bit pair sums must hold).
TEST(QDotKernel, ExtremeBlocksMatchReference) {
  for (QType t : kIntTypes) {
    const int n = qtype_block(t) == 256 ? 512 : 64;
    const size_t bb = qtype_row_bytes(t, qtype_block(t));
    for (uint8_t fill : {0xff, 0x80, 0x00}) {
      for (float scale : {1.0f, 60000.0f, 0.0f}) {
        std::vector<uint8_t> row(qtype_row_bytes(t, n), fill);
        const uint16_t h = f32_to_f16(scale);
        for (size_t b = 0; b < row.size() / bb; b++) {
          uint8_t* p = row.data() + b * bb;
          if (t == QType::Q6_K) std::memcpy(p + 208, &h, 2);
          else std::memcpy(p, &h, 2);
          if (t == QType::Q4_1 || t == QType::Q5_1 || t == QType::Q4_K || t == QType::Q5_K) std::memcpy(p + 2, &h, 2);
        }
        std::vector<float> x(n);
        for (int k = 0; k < n; k++) x[k] = (k % 3 == 0 ? -1.0f : 1.0f) * (k % 7 == 0 ? 1e-3f : 1.0f);
        for (int k = 0; k < n; k += 32) x[k + 1] = 1.0f;  // each block reaches +-127
        std::vector<BlockQ8A> xq = quantized(x);
        double mag = 0;
        const float ref = dot_q8_ref(t, row.data(), xq.data(), n, &mag);
        float simd = 0;
        matmul_q8_simd(t, &simd, 1, xq.data(), row.data(), 1, n, 0, 1);
        ASSERT_NEAR(simd, ref, fp_tol(n, mag)) << name(t) << " fill " << (int)fill << " scale " << scale;
        std::vector<float> w(n);
        dequantize_row_ref(t, row.data(), w.data(), n);
        double exact = 0, bound = 0;
        for (int k = 0; k < n; k++) {
          exact += (double)w[k] * x[k];
          bound += 0.5 * xq[k / 32].d * (1 + 1e-4) * std::fabs(w[k]);
        }
        ASSERT_NEAR(ref, exact, bound + 1e-6 * mag + 1e-30) << name(t) << " fill " << (int)fill;
        if (scale == 0.0f) ASSERT_EQ(simd, 0.0f) << name(t);
      }
    }
  }
}

// Prefill tiles (2 rows x 4 tokens, on AVX-512 VNNI groups of 16 tokens, short last groups,
// an odd row count, a row range that starts inside the matrix) give each token exactly what decoding it alone gives. In
// the WASM builds, products of >= 8 tokens run either the grouped tile or the packed GEMM (wasm_gemm.h: whole groups of
// four blocks packed, the last nb % 4 blocks through the tile): both are forced in turn, over rows of 3 blocks (all
// tail), 9 (two groups and a tail) and 512 elements, and 130 tokens (past the 128 the GEMM takes per pass). The same
// with one packed copy of the activations shared by chunks of rows gives the same bits.
TEST(QDotMatmul, BatchedEqualsDecodeBitForBitAndReference) {
  const int d = 37;
  for (int kernel : {0, 1})
    for (QType t : kIntTypes)
      for (int n : qtype_block(t) == 256 ? std::vector<int>{512} : std::vector<int>{96, 288}) {
        qdot_force_prefill_kernel(kernel);
        std::vector<uint8_t> W;
        for (int r = 0; r < d; r++) {
          std::vector<uint8_t> row = stored_row(t, randn(n, 50 + r, 0.1f), 0);
          W.insert(W.end(), row.begin(), row.end());
        }
        // Both scale conversions of the WASM kernels (finite: the one models use once it is checked).
        for (bool finite : {false, qdot_scales_finite(t, W.data(), d, n)})
          for (int T : {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 35, 130}) {
            std::vector<BlockQ8A> X = quantized(randn(T * n, 9 + T));
            std::vector<float> Y(T * d, -1.0f);
            matmul_q8_simd(t, Y.data(), d, X.data(), W.data(), T, n, 3, d, finite);
            for (int tok = 0; tok < T; tok++) {
              std::vector<float> y1(d, -1.0f);
              matmul_q8_simd(t, y1.data(), d, X.data() + tok * (n / 32), W.data(), 1, n, 3, d, finite);
              for (int r = 0; r < d; r++) {
                const float got = Y[tok * d + r];
                if (r < 3) {
                  ASSERT_EQ(got, -1.0f) << "row outside the range was written";
                  continue;
                }
                ASSERT_EQ(got, y1[r]) << name(t) << " T " << T << " token " << tok << " row " << r;
                double mag = 0;
                const float want =
                    dot_q8_ref(t, W.data() + r * qtype_row_bytes(t, n), X.data() + tok * (n / 32), n, &mag);
                ASSERT_NEAR(got, want, fp_tol(n, mag)) << name(t) << " T " << T << " row " << r;
              }
            }
            // The same product from one packed copy (qdot_pack_prefill, as ProductInput makes it) read
            // by chunks of 16 rows as threads take them, packed beside the other layouts' types.
            const QType types[] = {QType::Q8_0, t, QType::Q4_1};
            QdotPacked pk;
            qdot_pack_prefill(pk, X.data(), T, n, types, 3);
            const std::string impl = qdot_impl_name();
            if ((impl == "avx512-vnni" && T > 1) || (impl.rfind("wasm", 0) == 0 && T >= 8))
              ASSERT_EQ(pk.T, T) << "this build's prefill kernel reads a packed copy";
            std::vector<float> Yp(T * d, -1.0f);
            for (int r0 = 3; r0 < d; r0 += 16)
              matmul_q8_simd(t, Yp.data(), d, X.data(), W.data(), T, n, r0, std::min(r0 + 16, d), finite, &pk);
            ASSERT_EQ(0, std::memcmp(Yp.data(), Y.data(), Y.size() * sizeof(float))) << name(t) << " T " << T;
            std::vector<float> R(T * d, -1.0f);
            matmul_q8_ref(t, R.data(), d, X.data(), W.data(), T, n, 3, d);
            for (int i = 0; i < T * d; i++) ASSERT_NEAR(R[i], Y[i], 1e-4 * (std::fabs(R[i]) + 1)) << name(t);
          }
      }
  qdot_force_prefill_kernel(-1);
}

// Prefill of the extreme blocks above (every byte 0xff or 0x80, activations at +-127, the
// largest integer sums) across 2 token groups equals decode bit for bit and the reference.
TEST(QDotMatmul, ExtremeBlocksBatchedEqualDecode) {
  const int d = 5, T = 19;
  for (QType t : kIntTypes) {
    const int n = qtype_block(t) == 256 ? 512 : 96;
    const size_t bb = qtype_row_bytes(t, qtype_block(t));
    for (uint8_t fill : {0xff, 0x80}) {
      std::vector<uint8_t> W(qtype_row_bytes(t, n) * d, fill);
      const uint16_t h = f32_to_f16(60000.0f);  // finite scales (0xffff is a NaN)
      for (size_t b = 0; b < W.size() / bb; b++) {
        uint8_t* p = W.data() + b * bb;
        std::memcpy(t == QType::Q6_K ? p + 208 : p, &h, 2);
        if (t == QType::Q4_1 || t == QType::Q5_1 || t == QType::Q4_K || t == QType::Q5_K) std::memcpy(p + 2, &h, 2);
      }
      std::vector<float> x(T * n);
      for (int k = 0; k < T * n; k++) x[k] = (k % 32 == 1 || (k + k / n) % 3 == 0) ? -1.0f : 1.0f;
      std::vector<BlockQ8A> X = quantized(x);
      std::vector<float> Y(T * d);
      matmul_q8_simd(t, Y.data(), d, X.data(), W.data(), T, n, 0, d);
      for (int tok = 0; tok < T; tok++)
        for (int r = 0; r < d; r++) {
          float y1 = 0;
          matmul_q8_simd(t, &y1, 1, X.data() + tok * (n / 32), W.data() + r * qtype_row_bytes(t, n), 1, n, 0, 1);
          ASSERT_EQ(Y[tok * d + r], y1) << name(t) << " fill " << (int)fill << " token " << tok;
          double mag = 0;
          const float want = dot_q8_ref(t, W.data() + r * qtype_row_bytes(t, n), X.data() + tok * (n / 32), n, &mag);
          ASSERT_NEAR(y1, want, fp_tol(n, mag)) << name(t);
        }
    }
  }
}

// qdot_scales_finite (the loader's check before the WASM kernels' faster scale conversion):
// true for quantized rows, false as soon as one block's d, or min for Q4_1 / Q5_1, is Inf or
// NaN, whichever block and row it is in; false for the K types and bad shapes.
TEST(QDotMatmul, ScalesFiniteCheckFindsEveryInfOrNaN) {
  const int n = 96, rows = 3;
  for (QType t : {QType::Q8_0, QType::Q4_0, QType::Q4_1, QType::Q5_0, QType::Q5_1}) {
    const size_t rb = qtype_row_bytes(t, n), bb = qtype_row_bytes(t, 32);
    std::vector<uint8_t> W;
    for (int r = 0; r < rows; r++) {
      const std::vector<uint8_t> row = stored_row(t, randn(n, 90 + r, r == 1 ? 1e-6f : 2.0f), 0);
      W.insert(W.end(), row.begin(), row.begin() + rb);
    }
    ASSERT_TRUE(qdot_scales_finite(t, W.data(), rows, n)) << name(t);
    EXPECT_FALSE(qdot_scales_finite(t, W.data(), rows, n + 1)) << name(t);
    const bool has_min = t == QType::Q4_1 || t == QType::Q5_1;
    for (uint16_t bad : {0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xffff})
      for (size_t b = 0; b < W.size() / bb; b++)
        for (int field = 0; field < (has_min ? 2 : 1); field++) {
          std::vector<uint8_t> v = W;
          std::memcpy(v.data() + b * bb + 2 * field, &bad, 2);
          EXPECT_FALSE(qdot_scales_finite(t, v.data(), rows, n)) << name(t) << " block " << b << " field " << field;
          EXPECT_TRUE(qdot_scales_finite(t, v.data(), (int64_t)(b / (rb / bb)), n)) << "rows before the bad one";
        }
  }
  const std::vector<uint8_t> k = stored_row(QType::Q4_K, randn(256, 5), 0);
  EXPECT_FALSE(qdot_scales_finite(QType::Q4_K, k.data(), 1, 256));
  EXPECT_FALSE(qdot_scales_finite(QType::F16, k.data(), 1, 32));
}

TEST(QDotMatmul, TypesWithoutIntegerDotAreRefused) {
  EXPECT_FALSE(qtype_int_dot(QType::F32));
  EXPECT_FALSE(qtype_int_dot(QType::F16));
  EXPECT_FALSE(qtype_int_dot(QType::BF16));
  for (QType t : kIntTypes) EXPECT_TRUE(qtype_int_dot(t));
  BlockQ8A x{};
  float y = 0;
  uint16_t w[32] = {};
  EXPECT_THROW(matmul_q8_simd(QType::F16, &y, 1, &x, w, 1, 32, 0, 1), Error);
}

// ---- super-block activations (the K types in the relaxed-SIMD builds) -----------------------

const QType kSuperTypes[] = {QType::Q4_K, QType::Q5_K, QType::Q6_K};

std::vector<BlockQ8K> quantized_k(const std::vector<float>& x) {
  std::vector<BlockQ8K> q(x.size() / 256);
  quantize_act_q8k_ref(x.data(), q.data(), (int)x.size());
  return q;
}

TEST(QDotSuperActivations, SimdEqualsReferenceBitForBitWithSumsAndHalfAStep) {
  for (int n : {256, 768, 2048}) {
    for (float sigma : {1.0f, 1e-3f, 300.0f}) {
      std::vector<float> x = randn(n, 21 + n, sigma);
      if (n >= 512)
        for (int k = 256; k < 512; k++) x[k] = 0.0f;  // an all-zero block: d = 0
      x[n - 1] = sigma * 40.0f;                       // an outlier dominating its block
      std::vector<BlockQ8K> a(n / 256), b(n / 256);
      quantize_act_q8k_ref(x.data(), a.data(), n);
      quantize_act_q8k_simd(x.data(), b.data(), n);
      for (int i = 0; i < n / 256; i++) {
        ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof a[i]), 0) << "n " << n << " block " << i;
        float amax = 0.0f;
        for (int k = 0; k < 256; k++) amax = std::fmax(amax, std::fabs(x[256 * i + k]));
        ASSERT_EQ(a[i].d, amax / 127.0f);
        int s16[16] = {};
        for (int k = 0; k < 256; k++) {
          const float v = x[256 * i + k];
          ASSERT_LE(std::abs((int)a[i].q[k]), 127);
          ASSERT_LE(std::fabs(v - a[i].d * a[i].q[k]), 0.5f * a[i].d + 127.0f * a[i].d * 3e-7f) << v;
          s16[k / 16] += a[i].q[k];
        }
        for (int g = 0; g < 16; g++) ASSERT_EQ(a[i].sum16[g], s16[g]);
        for (int j = 0; j < 8; j++) ASSERT_EQ(a[i].sum32[j], s16[2 * j] + s16[2 * j + 1]);
      }
    }
  }
}

TEST(QDotSuperActivations, NonFiniteBlocksBecomeNaNAndTheirProductsToo) {
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> x = randn(512, 4);
    x[300] = bad;
    for (auto f : {quantize_act_q8k_ref, quantize_act_q8k_simd}) {
      std::vector<BlockQ8K> q(2);
      f(x.data(), q.data(), 512);
      EXPECT_FALSE(std::isnan(q[0].d));
      EXPECT_TRUE(std::isnan(q[1].d));
      for (int k = 0; k < 256; k++) ASSERT_EQ(q[1].q[k], 0);
      for (QType t : kSuperTypes) {
        const std::vector<uint8_t> row = stored_row(t, randn(512, 6), 0);
        float y = 0.0f;
        matmul_q8k_simd(t, &y, 1, q.data(), row.data(), 1, 512, 0, 1);
        EXPECT_TRUE(std::isnan(y)) << name(t);
        EXPECT_TRUE(std::isnan(dot_q8k_ref(t, row.data(), q.data(), 512))) << name(t);
      }
    }
  }
}

// The reference against dequantize-then-f32: within the activation rounding (d_256 / 2 per
// element) of the true product, and equal up to float rounding to the product with the
// dequantized activations. Rows of random bytes (every code, scale and min) and edge fills.
TEST(QDotSuperKernel, ReferenceMatchesDequantizeThenF32) {
  for (QType t : kSuperTypes) {
    for (int n : {256, 1024}) {
      for (int fill : {-1, 0xff, 0x80, 0x00}) {
        std::vector<uint8_t> row = stored_row(t, randn(n, 7 + n), 0);
        if (fill >= 0) {
          const size_t bb = qtype_row_bytes(t, 256);
          const uint16_t h = f32_to_f16(0.5f);
          for (size_t b = 0; b < row.size() / bb; b++) {
            uint8_t* p = row.data() + b * bb;
            std::memset(p, fill, bb);
            std::memcpy(t == QType::Q6_K ? p + 208 : p, &h, 2);
            if (t != QType::Q6_K) std::memcpy(p + 2, &h, 2);
          }
        }
        std::vector<float> w(n), x = randn(n, 8 + n);
        for (int k = 0; k < n; k += 97) x[k] *= 30.0f;  // outliers set d for their super-block
        dequantize_row_ref(t, row.data(), w.data(), n);
        const std::vector<BlockQ8K> xq = quantized_k(x);
        double mag = 0, exact = 0, bound = 0, dq = 0;
        const float ref = dot_q8k_ref(t, row.data(), xq.data(), n, &mag);
        for (int k = 0; k < n; k++) {
          exact += (double)w[k] * x[k];
          bound += 0.5 * xq[k / 256].d * (1 + 1e-4) * std::fabs(w[k]);
          dq += (double)w[k] * xq[k / 256].d * xq[k / 256].q[k % 256];
        }
        ASSERT_NEAR(ref, exact, bound + 1e-6 * mag + 1e-30) << name(t) << " fill " << fill;
        ASSERT_NEAR(ref, dq, 1e-6 * mag + 1e-30) << name(t) << " fill " << fill;
        float simd = 0;
        matmul_q8k_simd(t, &simd, 1, xq.data(), row.data(), 1, n, 0, 1);
        ASSERT_NEAR(simd, ref, fp_tol(n, mag)) << name(t) << " fill " << fill;
      }
    }
  }
  BlockQ8K x{};
  float y = 0;
  uint8_t w[34] = {};
  EXPECT_THROW(matmul_q8k_simd(QType::Q8_0, &y, 1, &x, w, 1, 32, 0, 1), Error);
}

}  // namespace
