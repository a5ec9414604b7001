// ProductInput's integer products across threads: one packed copy of the activations
// (qdot_pack_prefill) shared by the threads' chunks of rows gives every token what decoding it
// alone gives, bit for bit, and stays within float rounding of the scalar reference.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "../kernels/quant_rows.h"
#include "kernels/qdot.h"
#include "model/products.h"

using namespace qkv;

TEST(Products, IntegerPrefillOnTwoThreadsEqualsDecode) {
  const int n = 256, d1 = 48, d2 = 40;
  // Two types per section (Q8_0 and a nibble type read different packed layouts in the relaxed
  // WASM build), token counts below and above the packed kernels' thresholds.
  for (QType second : {QType::Q4_1, QType::Q6_K, QType::Q8_0})
    for (int T : {1, 5, 8, 40}) {
      std::vector<uint8_t> W1, W2;
      for (int r = 0; r < d1; r++) {
        std::vector<uint8_t> row = stored_row(QType::Q8_0, randn(n, 100 + r, 0.1f), 0);
        W1.insert(W1.end(), row.begin(), row.end());
      }
      for (int r = 0; r < d2; r++) {
        std::vector<uint8_t> row = stored_row(second, randn(n, 300 + r, 0.1f), 0);
        W2.insert(W2.end(), row.begin(), row.end());
      }
      const Tensor w1{QType::Q8_0, W1.data(), d1, n}, w2{second, W2.data(), d2, n};
      const std::vector<float> x = randn(T * n, 7 + T);
      std::vector<float> y1(T * d1, -1.0f), y2(T * d2, -1.0f);
      ThreadPool pool(2);
      ProductInput in;
      stacked_products(pool, in, x.data(), n, T, {{y1.data(), d1, &w1}, {y2.data(), d2, &w2}});
      for (int t = 0; t < T; t++) {
        std::vector<BlockQ8A> xq(n / 32);
        quantize_act_q8_simd(x.data() + t * n, xq.data(), n);
        for (int part = 0; part < 2; part++) {
          const Tensor& w = part ? w2 : w1;
          const int d = (int)w.rows;
          const float* y = (part ? y2.data() : y1.data()) + t * d;
          std::vector<float> one(d, -1.0f);
          matmul_q8_simd(w.type, one.data(), d, xq.data(), w.data, 1, n, 0, d);
          for (int r = 0; r < d; r++) {
            ASSERT_EQ(y[r], one[r]) << "part " << part << " T " << T << " token " << t << " row " << r;
            double mag = 0;
            const float want = dot_q8_ref(w.type, w.row(r), xq.data(), n, &mag);
            ASSERT_NEAR(y[r], want, (2.0 * (n / 32) + 16) * std::ldexp(1.0, -24) * mag + 1e-30);
          }
        }
      }
    }
}
