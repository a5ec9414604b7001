// Every matrix and row-wise SIMD kernel (matvec, matmul and its tile trial, add, norms, softmax,
// activations) against its scalar reference; RoPE and attention are in test_attention.cpp.
//
// Each vector kernel runs on sizes around the vector width (1, 2, 3, kLanes-1, kLanes, kLanes+1,
// 2*kLanes+3) and on larger odd sizes (67, 255, 769), with every buffer either 64-byte aligned or
// starting one float past an aligned address. Buffers carry guard zones filled with a sentinel
// bit pattern before and after the data, so out-of-bounds writes fail the test; strided inputs
// carry NaN in their padding, so out-of-bounds reads poison the result and fail the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "kernels/activation.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/simd.h"
#include "kernels/softmax.h"
#include "kernels/trial.h"
#include "kernel_checks.h"

using namespace qkv_test;

namespace {

TEST(KernelSetup, VectorWidthAndAlignment) {
  EXPECT_GE(kLanes, 1);
  EXPECT_EQ(kLanes, (int)qkv::fbatch::size);
  std::cout << "[          ] kernels compiled for " << qkv::simd_arch_name() << ", kLanes = " << kLanes << "\n";
  Buf a(8, 0), b(8, 1);
  EXPECT_EQ(a.address() % 64, 0u);
  EXPECT_EQ(b.address() % 64, sizeof(float));
  EXPECT_TRUE(a.guards_intact());
  a[8] = 0.0f;  // one past the end: the guard must notice
  EXPECT_FALSE(a.guards_intact());
}

// ---- matvec ---------------------------------------------------------------------------------
class MatvecKernel : public ::testing::TestWithParam<SizeOff> {};

TEST_P(MatvecKernel, SimdMatchesRefOnRowRanges) {
  const int n = std::get<0>(GetParam()), off = std::get<1>(GetParam());
  for (int d : {1, 2, 3, 4, 5, 7, 13, 37}) {
    SCOPED_TRACE("d=" + std::to_string(d));
    std::mt19937 rng(seed_of({1, n, off, d}));
    Buf W((size_t)d * n, off), x(n, off), y(d, off);
    fill_uniform(rng, W.data(), W.size(), -1.0f, 1.0f);
    fill_uniform(rng, x.data(), x.size(), -1.0f, 1.0f);
    std::vector<float> ref(d);
    qkv::matvec_f32_ref(ref.data(), W.data(), x.data(), d, n);
    ASSERT_TRUE(any_nonzero(ref.data(), d));
    std::vector<double> bound(d);
    for (int i = 0; i < d; i++) {
      double s = 0.0;
      for (int k = 0; k < n; k++) s += std::fabs((double)W[(size_t)i * n + k] * x[k]);
      bound[i] = kDotRel * s + kDotAbs;
    }
    const std::vector<std::pair<int, int>> ranges = {
        {0, d}, {1, d}, {0, d - 1}, {d / 3, d - d / 3}, {2, std::min(d, 7)}, {d - 1, d}, {d / 2, d / 2}};
    for (const auto& range : ranges) {
      const int r0 = range.first, r1 = range.second;  // clang 14 (Emscripten) cannot capture bindings
      if (r0 < 0 || r1 > d || r0 > r1) continue;
      SCOPED_TRACE("rows [" + std::to_string(r0) + "," + std::to_string(r1) + ")");
      y.fill_sentinel();
      qkv::matvec_f32_simd(y.data(), W.data(), x.data(), n, r0, r1);
      EXPECT_TRUE(AllNear("matvec rows in range", y.data() + r0, ref.data() + r0, r1 - r0,
                          [&](size_t i) { return bound[r0 + i]; }));
      for (int i = 0; i < d; i++)
        if (i < r0 || i >= r1) {
          EXPECT_TRUE(is_sentinel(y[i])) << "row " << i << " outside the range was written";
        }
      EXPECT_TRUE(y.guards_intact()) << "write outside y";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, MatvecKernel, QKV_SIZE_OFF_PARAMS);

// ---- matmul ---------------------------------------------------------------------------------
using MatmulParam = std::tuple<int, int, int>;  // (T, n, off)
std::vector<int> matmul_sizes() {
  std::vector<int> s = vector_sizes();
  s.push_back(1100);
  return s;
}
class MatmulKernel : public ::testing::TestWithParam<MatmulParam> {};

TEST_P(MatmulKernel, SimdMatchesRefWithStridesAndRowRanges) {
  const int T = std::get<0>(GetParam()), n = std::get<1>(GetParam()), off = std::get<2>(GetParam());
  // 67 rows: whole tiles of the packed kernel (4 or 6 rows) and a partial one, with any lane count.
  for (int d : {1, 3, 6, 13, 23, 67}) {
    std::mt19937 rng(seed_of({2, T, n, off, d}));
    Buf W((size_t)d * n, off);
    fill_uniform(rng, W.data(), W.size(), -1.0f, 1.0f);
    for (int pad : {0, 3}) {  // ldx = n + pad, ldy = d + 2 * pad + 1 (or d when pad = 0)
      const int64_t ldx = n + pad, ldy = pad ? d + 2 * pad + 1 : d;
      SCOPED_TRACE("d=" + std::to_string(d) + " ldx=" + std::to_string(ldx) + " ldy=" + std::to_string(ldy));
      Buf X((size_t)T * ldx, off), Y((size_t)T * ldy, off);
      X.fill(NAN);  // padding between rows must never be read
      for (int t = 0; t < T; t++) fill_uniform(rng, X.data() + t * ldx, n, -1.0f, 1.0f);
      std::vector<float> ref((size_t)T * d);
      std::vector<float> xt((size_t)T * n);  // the reference gets X without padding
      for (int t = 0; t < T; t++) std::copy(X.data() + t * ldx, X.data() + t * ldx + n, xt.data() + (size_t)t * n);
      qkv::matmul_f32_ref(ref.data(), d, xt.data(), n, W.data(), T, d, n);
      ASSERT_TRUE(any_nonzero(ref.data(), ref.size()));
      std::vector<double> bound((size_t)T * d);
      for (int t = 0; t < T; t++)
        for (int i = 0; i < d; i++) {
          double s = 0.0;
          for (int k = 0; k < n; k++) s += std::fabs((double)W[(size_t)i * n + k] * xt[(size_t)t * n + k]);
          bound[(size_t)t * d + i] = kDotRel * s + kDotAbs;
        }
      const std::vector<std::pair<int, int>> ranges = {
          {0, d}, {1, d}, {0, d - 1}, {d / 3, d - d / 3}, {2, std::min(d, 7)}, {d - 1, d}, {d / 2, d / 2}};
      for (const auto& range : ranges) {
        const int r0 = range.first, r1 = range.second;
        if (r0 < 0 || r1 > d || r0 > r1) continue;
        SCOPED_TRACE("rows [" + std::to_string(r0) + "," + std::to_string(r1) + ")");
        Y.fill_sentinel();
        qkv::matmul_f32_simd(Y.data(), ldy, X.data(), ldx, W.data(), T, n, r0, r1);
        int untouched_violations = 0;
        for (int t = 0; t < T; t++) {
          EXPECT_TRUE(AllNear("matmul token " + std::to_string(t), Y.data() + t * ldy + r0,
                              ref.data() + (size_t)t * d + r0, r1 - r0,
                              [&](size_t i) { return bound[(size_t)t * d + r0 + i]; }));
          for (int c = 0; c < ldy; c++)
            if ((c < r0 || c >= r1) && !is_sentinel(Y[t * ldy + c])) untouched_violations++;
        }
        EXPECT_EQ(untouched_violations, 0) << "outputs outside rows [r0,r1) or in the ldy padding were written";
        EXPECT_TRUE(Y.guards_intact()) << "write outside Y";

        // Y += X W^T: starts from each output's value (the training backward accumulates).
        std::vector<float> y0((size_t)T * d), want((size_t)T * d);
        fill_uniform(rng, y0.data(), y0.size(), -4.0f, 4.0f);
        Y.fill_sentinel();
        for (int t = 0; t < T; t++)
          for (int i = r0; i < r1; i++) Y[t * ldy + i] = y0[(size_t)t * d + i];
        std::copy(y0.begin(), y0.end(), want.begin());
        qkv::matmul_f32_acc_ref(want.data(), d, xt.data(), n, W.data(), T, d, n);
        qkv::matmul_f32_acc_simd(Y.data(), ldy, X.data(), ldx, W.data(), T, n, r0, r1);
        untouched_violations = 0;
        for (int t = 0; t < T; t++) {
          EXPECT_TRUE(AllNear("accumulating matmul token " + std::to_string(t), Y.data() + t * ldy + r0,
                              want.data() + (size_t)t * d + r0, r1 - r0, [&](size_t i) {
                                return bound[(size_t)t * d + r0 + i] + kDotRel * std::fabs(y0[(size_t)t * d + r0 + i]);
                              }));
          for (int c = 0; c < ldy; c++)
            if ((c < r0 || c >= r1) && !is_sentinel(Y[t * ldy + c])) untouched_violations++;
        }
        EXPECT_EQ(untouched_violations, 0) << "accumulating: outputs outside rows [r0,r1) were written";
        EXPECT_TRUE(Y.guards_intact()) << "accumulating: write outside Y";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatmulKernel,
                         // T: dot products below one vector of tokens; then whole two-vector tiles of the packed
                         // kernel and a last one of one or two vectors, for 4, 8 and 16 lanes. n: vector_sizes()
                         // and past one depth block (1024).
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 7, 13, 20, 40, 50),
                                            ::testing::ValuesIn(matmul_sizes()), ::testing::ValuesIn(kOffsets)),
                         [](const ::testing::TestParamInfo<MatmulParam>& info) {
                           return "T" + std::to_string(std::get<0>(info.param)) + "_n" +
                                  std::to_string(std::get<1>(info.param)) + "_off" +
                                  std::to_string(std::get<2>(info.param));
                         });

TEST(MatmulKernelEdge, ZeroTokensWriteNothing) {
  Buf W(5 * 7, 0), X(7, 0), Y(5, 0);
  W.fill(1.0f);
  X.fill(1.0f);
  Y.fill_sentinel();
  qkv::matmul_f32_simd(Y.data(), 5, X.data(), 7, W.data(), 0, 7, 0, 5);
  for (int i = 0; i < 5; i++) EXPECT_TRUE(is_sentinel(Y[i]));
  EXPECT_TRUE(Y.guards_intact());
}

TEST(MatmulKernelEdge, OneTokenEqualsMatvec) {
  // T = 1 must give the same numbers as matvec (same blocking of the reduction is not required,
  // so compare with the dot-product bound).
  const int d = 11, n = 3 * kLanes + 5;
  std::mt19937 rng(seed_of({3}));
  Buf W((size_t)d * n, 0), x(n, 0), y1(d, 0), y2(d, 0);
  fill_uniform(rng, W.data(), W.size(), -1.0f, 1.0f);
  fill_uniform(rng, x.data(), x.size(), -1.0f, 1.0f);
  qkv::matvec_f32_simd(y1.data(), W.data(), x.data(), n, 0, d);
  qkv::matmul_f32_simd(y2.data(), d, x.data(), n, W.data(), 1, n, 0, d);
  ASSERT_TRUE(any_nonzero(y1.data(), d));
  EXPECT_TRUE(AllNear("matmul T=1 vs matvec", y2.data(), y1.data(), d, [&](size_t i) {
    double s = 0.0;
    for (int k = 0; k < n; k++) s += std::fabs((double)W[i * n + k] * x[k]);
    return kDotRel * s + kDotAbs;
  }));
}

TEST(MatmulKernelEdge, TileHeightsGiveTheSameBits) {
  // The relaxed-SIMD WASM builds run whichever tile height the engine runs faster
  // (src/kernels/trial.h): 4 and 6 rows must sum every output identically. Rows in whole and
  // partial tiles of both heights, one- and two-vector token tiles, a second depth block.
  struct Restore {
    ~Restore() { qkv::matmul_f32_force_tile_rows(0); }
  } restore;
  for (int T : {kLanes, kLanes + 1, 2 * kLanes + 3, 5 * kLanes}) {
    for (int n : {7, 64, 1100}) {
      for (int d : {5, 12, 25}) {
        SCOPED_TRACE("T=" + std::to_string(T) + " n=" + std::to_string(n) + " d=" + std::to_string(d));
        std::mt19937 rng(seed_of({4, T, n, d}));
        std::vector<float> W((size_t)d * n), X((size_t)T * n), y4((size_t)T * d), y6((size_t)T * d);
        fill_uniform(rng, W.data(), W.size(), -1.0f, 1.0f);
        fill_uniform(rng, X.data(), X.size(), -1.0f, 1.0f);
        qkv::matmul_f32_force_tile_rows(4);
        ASSERT_EQ(qkv::matmul_f32_tile_rows(), 4);
        qkv::matmul_f32_simd(y4.data(), d, X.data(), n, W.data(), T, n, 0, d);
        qkv::matmul_f32_force_tile_rows(6);
        ASSERT_EQ(qkv::matmul_f32_tile_rows(), 6);
        qkv::matmul_f32_simd(y6.data(), d, X.data(), n, W.data(), T, n, 0, d);
        ASSERT_TRUE(any_nonzero(y4.data(), y4.size()));
        EXPECT_EQ(std::memcmp(y4.data(), y6.data(), y4.size() * sizeof(float)), 0);
      }
    }
  }
}

// Feeds `trial` calls of one unit of work that take seconds_of(which, i) (i: the call's index)
// until it decides, at most max_calls; returns the calls made.
template <class F>
int feed_trial(qkv::Trial& trial, F seconds_of, int max_calls = 100000) {
  int i = 0;
  for (; i < max_calls && trial.decided() < 0; i++) {
    const int which = trial.pick();
    trial.report(which, 1.0, seconds_of(which, i));
  }
  return i;
}

TEST(TileTrial, KeepsTheFasterPerUnitOfWork) {
  for (int faster : {0, 1}) {
    qkv::Trial trial;
    EXPECT_EQ(trial.decided(), -1);
    int calls = 0;
    while (trial.decided() < 0 && calls < 10000) {
      const int which = trial.pick();
      // The slower side does half the work in the same time; call sizes vary.
      const double work = 1000.0 * (1 + calls % 3);
      trial.report(which, which == faster ? work : work / 2, 0.002 * (1 + calls % 3));
      calls++;
    }
    EXPECT_EQ(trial.decided(), faster);
    // 0.002-0.006 s per call: the warm-up is 26 calls (8 of each and 102 ms >= 100 ms); then
    // every call fills a group, and kMin (> kGroups) counted calls of each decide.
    EXPECT_EQ(calls, 26 + 2 * qkv::Trial::kMin);
    EXPECT_EQ(trial.pick(), faster);
  }
}

TEST(TileTrial, AlternatesAndLeavesOutTheWarmUp) {
  qkv::Trial trial;
  int last = -1;
  for (int i = 0; i < 2 * qkv::Trial::kWarm; i++) {
    const int which = trial.pick();
    EXPECT_NE(which, last);
    last = which;
    // Warm-up calls: side 0 slow as baseline code would be, side 1 fast.
    trial.report(which, 1.0, which == 0 ? 1.0 : 0.001);
  }
  // Counted calls: side 0 is the faster one.
  feed_trial(trial, [](int which, int) { return which == 0 ? 0.005 : 0.01; });
  EXPECT_EQ(trial.decided(), 0);
}

TEST(TileTrial, WarmUpLastsLongEnoughForTheEngineToTierUp) {
  // Calls of 1 ms; side 0 runs baseline code (3x slower) for the first 80 ms, as an engine whose
  // optimised code arrives late. Eight calls of each would count those slow calls and keep side
  // 1; the 100 ms warm-up leaves them out and side 0 is kept.
  qkv::Trial trial;
  double clock = 0;
  feed_trial(trial, [&](int which, int) {
    const double seconds = which == 1 ? 0.001 : clock < 0.08 ? 0.003 : 0.0008;
    clock += seconds;
    return seconds;
  });
  EXPECT_EQ(trial.decided(), 0);
}

TEST(TileTrial, APauseInOneGroupDoesNotDecide) {
  // Side 0 is 20% faster, but two of its counted calls take 60 ms (a garbage collection): its
  // sum of seconds is the larger, its median group the smaller (the warm-up ends after 38 calls).
  qkv::Trial trial;
  int counted0 = 0;
  feed_trial(trial, [&](int which, int i) {
    if (i >= 40 && which == 0 && (++counted0 == 3 || counted0 == 7)) return 0.06;
    return which == 0 ? 0.0025 : 0.003;
  });
  EXPECT_EQ(trial.decided(), 0);
}

TEST(TileTrial, WaitsForEnoughTimeButNotForever) {
  // Calls of 1-2 us: the warm-up never reaches 100 ms and ends after 2 x kMax calls; kMin counted
  // calls of each fill no group of 2 ms, and kMax counted calls of each decide all the same.
  qkv::Trial trial;
  auto tiny = [](int which, int) { return which == 1 ? 1e-6 : 2e-6; };
  int calls = feed_trial(trial, tiny, 4 * (qkv::Trial::kWarm + qkv::Trial::kMin));
  EXPECT_EQ(trial.decided(), -1);
  calls += feed_trial(trial, tiny);
  EXPECT_EQ(trial.decided(), 1);
  EXPECT_EQ(calls, 4 * qkv::Trial::kMax);
}

TEST(TileTrial, FixedAndResetAndSharedByThreads) {
  qkv::Trial fixed(1);
  EXPECT_EQ(fixed.decided(), 1);
  fixed.report(0, 1.0, 1e-9);  // reports change nothing once decided
  EXPECT_EQ(fixed.pick(), 1);
  fixed.reset();
  EXPECT_EQ(fixed.decided(), -1);
  fixed.reset(0);
  EXPECT_EQ(fixed.decided(), 0);

#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
  GTEST_SKIP() << "no threads in a single-thread WASM build";
#endif
  qkv::Trial shared;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++)
    threads.emplace_back([&shared] {
      feed_trial(
          shared, [](int which, int) { return which == 1 ? 0.001 : 0.003; }, 5000);
    });
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(shared.decided(), 1);
}

// ---- add ------------------------------------------------------------------------------------
class AddKernel : public ::testing::TestWithParam<SizeOff> {};

TEST_P(AddKernel, SimdMatchesRefExactly) {
  const int n = std::get<0>(GetParam()), off = std::get<1>(GetParam());
  std::mt19937 rng(seed_of({4, n, off}));
  Buf y(n, off), b(n, off);
  fill_uniform(rng, y.data(), n, -10.0f, 10.0f);
  fill_uniform(rng, b.data(), n, -10.0f, 10.0f);
  std::vector<float> ref = y.vec();
  qkv::add_f32_ref(ref.data(), b.data(), n);
  ASSERT_FALSE(AllEqual("ref changed y", ref.data(), y.data(), n));
  qkv::add_f32_simd(y.data(), b.data(), n);
  EXPECT_TRUE(AllEqual("add", y.data(), ref.data(), n));
  EXPECT_TRUE(y.guards_intact());
}

INSTANTIATE_TEST_SUITE_P(Sizes, AddKernel, QKV_SIZE_OFF_PARAMS);

// ---- norms ----------------------------------------------------------------------------------
class NormKernel : public ::testing::TestWithParam<SizeOff> {};

TEST_P(NormKernel, RmsnormSimdMatchesRef) {
  const int n = std::get<0>(GetParam()), off = std::get<1>(GetParam());
  for (float scale : {1.0f, 1e-3f, 100.0f}) {  // 1e-3: eps is not negligible against mean(x^2)
    for (float eps : {1e-5f, 1e-6f}) {
      SCOPED_TRACE("scale=" + std::to_string(scale) + " eps=" + std::to_string(eps));
      std::mt19937 rng(seed_of({5, n, off, (int)(scale * 1000)}));
      Buf x(n, off), w(n, off), y(n, off);
      fill_uniform(rng, x.data(), n, -2.0f * scale, 2.0f * scale);
      fill_uniform(rng, w.data(), n, 0.5f, 1.5f);
      std::vector<float> ref(n);
      qkv::rmsnorm_ref(ref.data(), x.data(), w.data(), n, eps);
      ASSERT_TRUE(any_nonzero(ref.data(), n));
      auto tol = [&](size_t i) { return kNormRel * std::fabs(ref[i]) + kNormAbs; };
      y.fill_sentinel();
      qkv::rmsnorm_simd(y.data(), x.data(), w.data(), n, eps);
      EXPECT_TRUE(AllNear("rmsnorm", y.data(), ref.data(), n, tol));
      EXPECT_TRUE(y.guards_intact());
      // In place (y aliases x), as the header allows.
      y.copy_from(x.data());
      qkv::rmsnorm_simd(y.data(), y.data(), w.data(), n, eps);
      EXPECT_TRUE(AllNear("rmsnorm in place", y.data(), ref.data(), n, tol));
      EXPECT_TRUE(y.guards_intact());
    }
  }
}

TEST_P(NormKernel, LayernormSimdMatchesRefWithAndWithoutBias) {
  const int n = std::get<0>(GetParam()), off = std::get<1>(GetParam());
  for (float mean_shift : {0.0f, 3.0f, 100.0f}) {
    SCOPED_TRACE("mean_shift=" + std::to_string(mean_shift));
    std::mt19937 rng(seed_of({6, n, off, (int)mean_shift}));
    Buf x(n, off), w(n, off), b(n, off), y(n, off);
    fill_uniform(rng, x.data(), n, mean_shift - 2.0f, mean_shift + 2.0f);
    fill_uniform(rng, w.data(), n, 0.5f, 1.5f);
    fill_uniform(rng, b.data(), n, -1.0f, 1.0f);
    const float eps = 1e-5f;
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < n; i++) mean += x[i];
    mean /= n;
    for (int i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= n;
    const double inv = 1.0 / std::sqrt(var + eps);
    for (const float* bias : {(const float*)b.data(), (const float*)nullptr}) {
      SCOPED_TRACE(bias ? "with bias" : "without bias");
      std::vector<float> ref(n);
      qkv::layernorm_ref(ref.data(), x.data(), w.data(), bias, n, eps);
      if (n > 1 || bias) {
        ASSERT_TRUE(any_nonzero(ref.data(), n));
      }
      y.fill_sentinel();
      qkv::layernorm_simd(y.data(), x.data(), w.data(), bias, n, eps);
      EXPECT_TRUE(AllNear("layernorm", y.data(), ref.data(), n, [&](size_t i) {
        const double scale =
            std::fabs(w[i]) * inv * (std::fabs(x[i] - mean) + std::fabs(mean)) + (bias ? std::fabs(bias[i]) : 0.0);
        return kNormRel * scale + kNormAbs;
      }));
      EXPECT_TRUE(y.guards_intact());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, NormKernel, QKV_SIZE_OFF_PARAMS);

// ---- softmax --------------------------------------------------------------------------------
class SoftmaxKernel : public ::testing::TestWithParam<SizeOff> {};

TEST_P(SoftmaxKernel, SimdMatchesRef) {
  const int n = std::get<0>(GetParam()), off = std::get<1>(GetParam());
  enum Data { kUniform, kLargePositive, kLargeNegative, kWithNegInf, kConstant };
  for (int data : {kUniform, kLargePositive, kLargeNegative, kWithNegInf, kConstant}) {
    SCOPED_TRACE("data=" + std::to_string(data));
    std::mt19937 rng(seed_of({7, n, off, data}));
    Buf x(n, off);
    switch (data) {
      case kUniform: fill_uniform(rng, x.data(), n, -10.0f, 10.0f); break;
      case kLargePositive: fill_uniform(rng, x.data(), n, 80.0f, 95.0f); break;  // exp would overflow
      case kLargeNegative: fill_uniform(rng, x.data(), n, -1000.0f, -990.0f); break;
      case kWithNegInf:
        fill_uniform(rng, x.data(), n, -5.0f, 5.0f);
        for (int i = 0; i < n; i++)
          if (i % 3 == 1) x[i] = -INFINITY;  // x[0] stays finite
        break;
      case kConstant: x.fill(0.25f); break;
    }
    std::vector<float> in = x.vec(), ref = x.vec();
    qkv::softmax_ref(ref.data(), n);
    qkv::softmax_simd(x.data(), n);
    EXPECT_TRUE(
        AllNear("softmax", x.data(), ref.data(), n, [&](size_t i) { return kExpRel * std::fabs(ref[i]) + kExpAbs; }));
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
      sum += x[i];
      if (in[i] == -INFINITY) {
        EXPECT_EQ(x[i], 0.0f) << "-inf entry " << i << " must become 0";
      }
      EXPECT_TRUE(std::isfinite(x[i]) && x[i] >= 0.0f) << "entry " << i << " = " << x[i];
    }
    EXPECT_NEAR(sum, 1.0, kRowSumTol);
    if (data == kConstant) {
      for (int i = 0; i < n; i++) EXPECT_NEAR(x[i], 1.0 / n, kExpRel / n);
    }
    EXPECT_TRUE(x.guards_intact());
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, SoftmaxKernel, QKV_SIZE_OFF_PARAMS);

// ---- activations ----------------------------------------------------------------------------
enum Act { kSilu, kGelu, kRelu, kSwiglu, kGeglu, kScale, kQuickGelu };
const char* act_name(int a) {
  switch (a) {
    case kSilu: return "Silu";
    case kGelu: return "Gelu";
    case kRelu: return "Relu";
    case kGeglu: return "Geglu";
    case kScale: return "Scale";
    case kQuickGelu: return "QuickGelu";
    default: return "Swiglu";
  }
}
using ActParam = std::tuple<int, int, int>;  // (activation, n, off)
class ActivationKernel : public ::testing::TestWithParam<ActParam> {};

TEST_P(ActivationKernel, SimdMatchesRef) {
  const int act = std::get<0>(GetParam()), n = std::get<1>(GetParam()), off = std::get<2>(GetParam());
  std::mt19937 rng(seed_of({8, act, n, off}));
  Buf x(n, off), up(n, off);
  fill_uniform(rng, x.data(), n, -8.0f, 8.0f);
  fill_uniform(rng, up.data(), n, -2.0f, 2.0f);
  // Special values spread over the SIMD body and the scalar tail.
  const float specials[] = {0.0f,  -0.0f,  1e-3f, -1e-3f, 5.0f,  -5.0f,  10.0f,  -10.0f,
                            20.0f, -20.0f, 50.0f, -50.0f, 88.0f, -88.7f, 100.0f, -100.0f};
  const int ns = sizeof specials / sizeof specials[0];
  for (int i = 0; i < n; i++)
    if (i % 3 == 0) x[i] = specials[(i / 3) % ns];
  const std::vector<float> in = x.vec();
  std::vector<float> ref = in;
  switch (act) {
    case kSilu:
      qkv::silu_ref(ref.data(), n);
      qkv::silu_simd(x.data(), n);
      break;
    case kGelu:
      qkv::gelu_ref(ref.data(), n);
      qkv::gelu_simd(x.data(), n);
      break;
    case kRelu:
      qkv::relu_ref(ref.data(), n);
      qkv::relu_simd(x.data(), n);
      break;
    case kSwiglu:
      qkv::swiglu_ref(ref.data(), up.data(), n);
      qkv::swiglu_simd(x.data(), up.data(), n);
      break;
    case kGeglu:
      qkv::geglu_ref(ref.data(), up.data(), n);
      qkv::geglu_simd(x.data(), up.data(), n);
      break;
    case kQuickGelu:
      qkv::quick_gelu_ref(ref.data(), n);
      qkv::quick_gelu_simd(x.data(), n);
      break;
    case kScale:
      qkv::scale_ref(ref.data(), 45.25f, n);
      qkv::scale_simd(x.data(), 45.25f, n);
      break;
  }
  // Sanity: a non-trivial reference (n == 1 has x = 0; relu of all-negative input is all zero).
  const bool any_positive = std::any_of(in.begin(), in.end(), [](float v) { return v > 0.0f; });
  if (n > 1 && (act != kRelu || any_positive)) {
    ASSERT_TRUE(any_nonzero(ref.data(), n));
  }
  auto tol = [&](size_t i) -> double {
    if (act == kRelu || act == kScale) return 0.0;  // one rounded product either way
    return kExpRel * std::fabs(ref[i]) + kExpAbs;
  };
  EXPECT_TRUE(AllNear(act_name(act), x.data(), ref.data(), n, tol));
  for (int i = 0; i < n; i++) EXPECT_FALSE(std::isnan(x[i])) << "NaN at " << i << " for input " << in[i];
  EXPECT_TRUE(x.guards_intact());
  EXPECT_TRUE(up.guards_intact());
}

INSTANTIATE_TEST_SUITE_P(Sizes, ActivationKernel,
                         ::testing::Combine(::testing::Values((int)kSilu, (int)kGelu, (int)kRelu, (int)kSwiglu,
                                                              (int)kGeglu, (int)kScale, (int)kQuickGelu),
                                            ::testing::ValuesIn(vector_sizes()), ::testing::ValuesIn(kOffsets)),
                         [](const ::testing::TestParamInfo<ActParam>& info) {
                           return std::string(act_name(std::get<0>(info.param))) + "_n" +
                                  std::to_string(std::get<1>(info.param)) + "_off" +
                                  std::to_string(std::get<2>(info.param));
                         });

}  // namespace
