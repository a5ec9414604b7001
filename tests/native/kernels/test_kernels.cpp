// Every SIMD kernel against its scalar reference (and, for attention and rope_angles, against an
// independent double-precision oracle written from the header contracts).
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
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/rope.h"
#include "kernels/simd.h"
#include "kernels/softmax.h"
#include "kernels/trial.h"
#include "threadpool.h"

namespace {

using qkv::kLanes;

// ---- Tolerances -----------------------------------------------------------------------------
// Dot products (matvec, matmul): the SIMD form sums in a different order (lane-wise FMA, then a
// horizontal reduction), so the bound scales with the sum of the absolute terms:
//   |simd - ref| <= kDotRel * sum_k |w_k x_k| + kDotAbs
constexpr double kDotRel = 1e-5;
constexpr double kDotAbs = 1e-6;
// exp/tanh-based kernels (softmax, silu, swiglu, gelu): relative to |ref|. kExpAbs only lets an
// exact underflow to 0 on one side and ~1e-37 on the other pass (e.g. silu(-88.7)).
constexpr double kExpRel = 1e-5;
constexpr double kExpAbs = 1e-30;
// RMSNorm / LayerNorm: relative to the output's scale; LayerNorm's scale also includes |mean|
// because x - mean cancels.
constexpr double kNormRel = 1e-5;
constexpr double kNormAbs = 1e-6;
// RoPE: two-term rotations, |simd - ref| <= kRopeRel * (|v0 c| + |v1 s| + |v0 s| + |v1 c|).
constexpr double kRopeRel = 1e-6;
constexpr double kRopeAbs = 1e-30;
// rope_angles: cos/sin of the documented float recipe to kTrigAbs; against the ideal
// double-precision angle to kAngleRel * |angle| + kTrigAbs (float rounding of a large angle).
constexpr double kTrigAbs = 2e-6;
constexpr double kAngleRel = 1e-6;
// Attention output: |a - b| <= kAttnRel * sum_j p_j |v_jd| + kAttnAbs.
constexpr double kAttnRel = 1e-5;
constexpr double kAttnAbs = 1e-6;
// Attention probabilities: |a - b| <= kProbRel * p + kProbAbs.
constexpr double kProbRel = 1e-5;
constexpr double kProbAbs = 1e-8;
// Softmax rows / probability rows sum to 1 within this (summed in double).
constexpr double kRowSumTol = 1e-5;

constexpr uint32_t kSentinelBits = 0x7fc0dead;  // a NaN payload no kernel computes

float sentinel() {
  float f;
  std::memcpy(&f, &kSentinelBits, sizeof f);
  return f;
}
bool is_sentinel(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b == kSentinelBits;
}

// n floats starting `off` floats past a 64-byte boundary, with sentinel guard zones either side.
class Buf {
 public:
  static constexpr size_t kGuard = 32;  // floats; a multiple of 16 keeps off = 0 aligned to 64 B
  Buf(size_t n, int off) : n_(n), store_(n + 2 * kGuard + 16 + (size_t)off, sentinel()) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(store_.data());
    const size_t skip = ((64 - a % 64) % 64) / sizeof(float);
    p_ = store_.data() + skip + kGuard + off;
  }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;

  float* data() { return p_; }
  const float* data() const { return p_; }
  size_t size() const { return n_; }
  float& operator[](size_t i) { return p_[i]; }
  float operator[](size_t i) const { return p_[i]; }
  void fill(float v) { std::fill(p_, p_ + n_, v); }
  void fill_sentinel() { fill(sentinel()); }
  void copy_from(const float* src) { std::copy(src, src + n_, p_); }
  std::vector<float> vec() const { return std::vector<float>(p_, p_ + n_); }

  // Everything outside [p_, p_ + n_) still holds the sentinel.
  bool guards_intact() const {
    for (const float* q = store_.data(); q < p_; q++)
      if (!is_sentinel(*q)) return false;
    for (const float* q = p_ + n_; q < store_.data() + store_.size(); q++)
      if (!is_sentinel(*q)) return false;
    return true;
  }
  uintptr_t address() const { return reinterpret_cast<uintptr_t>(p_); }

 private:
  size_t n_;
  std::vector<float> store_;
  float* p_;
};

void fill_uniform(std::mt19937& rng, float* p, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  for (size_t i = 0; i < n; i++) p[i] = dist(rng);
}

uint32_t seed_of(std::initializer_list<int> xs) {
  uint32_t s = 0x5eed1234u;
  for (int x : xs) s = s * 1000003u + (uint32_t)x;
  return s;
}

bool any_nonzero(const float* p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0.0f) return true;
  return false;
}

// got[i] vs want[i] within tol(i) for every i (tol = 0 means exactly equal; -0 == +0). Reports
// the count of violations, the largest |diff| and the element worst relative to its tolerance.
template <class Tol>
::testing::AssertionResult AllNear(const std::string& what, const float* got, const float* want,
                                   size_t n, Tol tol) {
  size_t bad = 0, worst = 0, max_i = 0;
  double worst_ratio = -1.0, max_diff = 0.0;
  for (size_t i = 0; i < n; i++) {
    const double g = got[i], w = want[i];
    double diff = (std::isnan(g) && std::isnan(w)) ? 0.0 : std::fabs(g - w);
    if (std::isnan(diff)) diff = INFINITY;
    if (diff > max_diff) {
      max_diff = diff;
      max_i = i;
    }
    const double t = tol(i);
    if (!(diff <= t)) {
      bad++;
      const double r = t > 0.0 ? diff / t : INFINITY;
      if (r > worst_ratio) {
        worst_ratio = r;
        worst = i;
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os << std::setprecision(9) << what << ": " << bad << " of " << n
     << " elements out of tolerance; max |diff| = " << max_diff << " at [" << max_i << "] (got "
     << got[max_i] << ", want " << want[max_i] << "); worst vs tolerance at [" << worst
     << "]: got " << got[worst] << ", want " << want[worst] << ", |diff| "
     << std::fabs((double)got[worst] - (double)want[worst]) << " > tol " << tol(worst);
  return ::testing::AssertionFailure() << os.str();
}

::testing::AssertionResult AllEqual(const std::string& what, const float* got, const float* want,
                                    size_t n) {
  return AllNear(what, got, want, n, [](size_t) { return 0.0; });
}

std::vector<int> vector_sizes() {
  std::vector<int> s = {1, 2, 3, kLanes - 1, kLanes, kLanes + 1, 2 * kLanes + 3, 67, 255, 769};
  s.erase(std::remove_if(s.begin(), s.end(), [](int v) { return v < 1; }), s.end());
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}
const std::vector<int> kOffsets = {0, 1};

using SizeOff = std::tuple<int, int>;  // (n, misalignment in floats)
std::string SizeOffName(const ::testing::TestParamInfo<SizeOff>& info) {
  return "n" + std::to_string(std::get<0>(info.param)) + "_off" + std::to_string(std::get<1>(info.param));
}
#define QKV_SIZE_OFF_PARAMS \
  ::testing::Combine(::testing::ValuesIn(vector_sizes()), ::testing::ValuesIn(kOffsets)), SizeOffName

TEST(KernelSetup, VectorWidthAndAlignment) {
  EXPECT_GE(kLanes, 1);
  EXPECT_EQ(kLanes, (int)qkv::fbatch::size);
  std::cout << "[          ] kernels compiled for " << qkv::simd_arch_name() << ", kLanes = " << kLanes
            << "\n";
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
    for (auto [r0, r1] : ranges) {
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
      for (auto [r0, r1] : ranges) {
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

INSTANTIATE_TEST_SUITE_P(
    Shapes, MatmulKernel,
    // T: dot products below one vector of tokens; then whole two-vector tiles of the packed
    // kernel and a last one of one or two vectors, for 4, 8 and 16 lanes. n: vector_sizes()
    // and past one depth block (1024).
    ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 7, 13, 20, 40, 50), ::testing::ValuesIn(matmul_sizes()),
                       ::testing::ValuesIn(kOffsets)),
    [](const ::testing::TestParamInfo<MatmulParam>& info) {
      return "T" + std::to_string(std::get<0>(info.param)) + "_n" + std::to_string(std::get<1>(info.param)) +
             "_off" + std::to_string(std::get<2>(info.param));
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

  qkv::Trial shared;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++)
    threads.emplace_back([&shared] { feed_trial(shared, [](int which, int) { return which == 1 ? 0.001 : 0.003; }, 5000); });
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
        const double scale = std::fabs(w[i]) * inv * (std::fabs(x[i] - mean) + std::fabs(mean)) +
                             (bias ? std::fabs(bias[i]) : 0.0);
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
    EXPECT_TRUE(AllNear("softmax", x.data(), ref.data(), n,
                        [&](size_t i) { return kExpRel * std::fabs(ref[i]) + kExpAbs; }));
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
enum Act { kSilu, kGelu, kRelu, kSwiglu, kGeglu, kScale };
const char* act_name(int a) {
  switch (a) {
    case kSilu: return "Silu";
    case kGelu: return "Gelu";
    case kRelu: return "Relu";
    case kGeglu: return "Geglu";
    case kScale: return "Scale";
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
  const float specials[] = {0.0f, -0.0f, 1e-3f, -1e-3f, 5.0f,  -5.0f,  10.0f, -10.0f,
                            20.0f, -20.0f, 50.0f, -50.0f, 88.0f, -88.7f, 100.0f, -100.0f};
  const int ns = sizeof specials / sizeof specials[0];
  for (int i = 0; i < n; i++)
    if (i % 3 == 0) x[i] = specials[(i / 3) % ns];
  const std::vector<float> in = x.vec();
  std::vector<float> ref = in;
  switch (act) {
    case kSilu: qkv::silu_ref(ref.data(), n); qkv::silu_simd(x.data(), n); break;
    case kGelu: qkv::gelu_ref(ref.data(), n); qkv::gelu_simd(x.data(), n); break;
    case kRelu: qkv::relu_ref(ref.data(), n); qkv::relu_simd(x.data(), n); break;
    case kSwiglu: qkv::swiglu_ref(ref.data(), up.data(), n); qkv::swiglu_simd(x.data(), up.data(), n); break;
    case kGeglu: qkv::geglu_ref(ref.data(), up.data(), n); qkv::geglu_simd(x.data(), up.data(), n); break;
    case kScale: qkv::scale_ref(ref.data(), 45.25f, n); qkv::scale_simd(x.data(), 45.25f, n); break;
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

INSTANTIATE_TEST_SUITE_P(
    Sizes, ActivationKernel,
    ::testing::Combine(::testing::Values((int)kSilu, (int)kGelu, (int)kRelu, (int)kSwiglu, (int)kGeglu, (int)kScale),
                       ::testing::ValuesIn(vector_sizes()), ::testing::ValuesIn(kOffsets)),
    [](const ::testing::TestParamInfo<ActParam>& info) {
      return std::string(act_name(std::get<0>(info.param))) + "_n" + std::to_string(std::get<1>(info.param)) +
             "_off" + std::to_string(std::get<2>(info.param));
    });

// ---- RoPE -----------------------------------------------------------------------------------
TEST(RopeKernel, AnglesMatchFormula) {
  for (int n_rot : {2, 4, 6, 32, 64, 128, 130})
    for (int pos : {0, 1, 17, 4095})
      for (float theta : {10000.0f, 1000000.0f})
        for (float fs : {1.0f, 0.5f}) {
          SCOPED_TRACE("n_rot=" + std::to_string(n_rot) + " pos=" + std::to_string(pos) +
                       " theta=" + std::to_string(theta) + " freq_scale=" + std::to_string(fs));
          const int half = n_rot / 2;
          Buf c(half, 1), s(half, 1);
          c.fill_sentinel();
          s.fill_sentinel();
          qkv::rope_angles(c.data(), s.data(), n_rot, pos, theta, fs);
          EXPECT_TRUE(c.guards_intact());
          EXPECT_TRUE(s.guards_intact());
          for (int p = 0; p < half; p++) {
            // The documented float recipe (llama2.c's).
            const float freq = 1.0f / std::pow(theta, (float)(2 * p) / (float)n_rot);
            const float val = (float)pos * fs * freq;
            EXPECT_NEAR(c[p], std::cos((double)val), kTrigAbs) << "p=" << p;
            EXPECT_NEAR(s[p], std::sin((double)val), kTrigAbs) << "p=" << p;
            // The ideal angle, in double.
            const double ideal = (double)pos * fs * std::pow((double)theta, -2.0 * p / n_rot);
            const double atol = kAngleRel * std::fabs(ideal) + kTrigAbs;
            EXPECT_NEAR(c[p], std::cos(ideal), atol) << "p=" << p;
            EXPECT_NEAR(s[p], std::sin(ideal), atol) << "p=" << p;
          }
          if (half > 0) {
            EXPECT_NEAR(c[0], std::cos((double)pos * fs), kAngleRel * pos + kTrigAbs);  // p = 0: freq 1
            if (pos == 0) {
              EXPECT_EQ(c[half - 1], 1.0f);
              EXPECT_EQ(s[half - 1], 0.0f);
            }
          }
        }
}

// YaRN's correction range, worked by hand from d(b) = n_rot ln(orig / (2 pi b)) / (2 ln theta):
// - n_rot 16, theta 1e6, orig 2048: d(32) = 16 ln(10.186) / 27.631 = 1.344 -> floor 1;
//   d(1) = 16 ln(325.95) / 27.631 = 3.351 -> ceil 4.
// - n_rot 128, theta 1e4, orig 4096 (Llama 2 shape): d(32) = 128 ln(20.372) / 18.421 = 20.94 ->
//   20; d(1) = 128 ln(651.90) / 18.421 = 45.03 -> 46.
// - orig 64, theta 1e4, n_rot 16: d(32) < 0 -> clamped to 0; orig 1e9: d(1) = 16 ln(1.59e8) /
//   18.421 = 16.4 -> clamped to n_rot - 1 = 15.
TEST(RopeKernel, YarnRangeMatchesWorkedValues) {
  auto r = qkv::rope_yarn_range(16, 2048, 1e6f, 32.0f, 1.0f);
  EXPECT_EQ(r.lo, 1.0f);
  EXPECT_EQ(r.hi, 4.0f);
  r = qkv::rope_yarn_range(128, 4096, 1e4f, 32.0f, 1.0f);
  EXPECT_EQ(r.lo, 20.0f);
  EXPECT_EQ(r.hi, 46.0f);
  EXPECT_EQ(qkv::rope_yarn_range(16, 64, 1e4f, 32.0f, 1.0f).lo, 0.0f);
  EXPECT_EQ(qkv::rope_yarn_range(16, 1000000000, 1e4f, 32.0f, 1.0f).hi, 15.0f);
}

// Below the range a pair keeps its unscaled angle, from hi on it takes the scaled one, between
// the two blend linearly in the pair index; every cos and sin carries mscale (1 + 0.1 ln(1/fs)).
TEST(RopeKernel, YarnBlendsScaledAndUnscaledAngles) {
  const int n_rot = 16, half = n_rot / 2;
  const float theta = 1e6f, fs = 0.25f, attn = 1.2f;
  const qkv::RopeYarn y = qkv::rope_yarn_range(n_rot, 2048, theta, 32.0f, 1.0f);  // [1, 4]
  const double mscale = attn * (1.0 + 0.1 * std::log(4.0));
  for (int pos : {0, 1, 9, 50, 300}) {
    std::vector<float> c(half), s(half), lin_c(half), lin_s(half);
    qkv::rope_angles(c.data(), s.data(), n_rot, pos, theta, fs, nullptr, attn, &y);
    qkv::rope_angles(lin_c.data(), lin_s.data(), n_rot, pos, theta, fs, nullptr, attn);
    for (int p = 0; p < half; p++) {
      SCOPED_TRACE("pos=" + std::to_string(pos) + " p=" + std::to_string(p));
      const double freq = std::pow((double)theta, -2.0 * p / n_rot);
      const double scaled = pos * fs * freq, unscaled = pos * freq;
      const double w = p <= 1 ? 1.0 : p >= 4 ? 0.0 : (4.0 - p) / 3.0;  // weight of the unscaled angle
      const double a = w * unscaled + (1 - w) * scaled;
      const double atol = mscale * (kAngleRel * std::fabs(a) + kTrigAbs);
      EXPECT_NEAR(c[p], mscale * std::cos(a), atol);
      EXPECT_NEAR(s[p], mscale * std::sin(a), atol);
      // Without YaRN: linear scaling of every pair and no extra magnitude.
      EXPECT_NEAR(lin_c[p], attn * std::cos(scaled), attn * (kAngleRel * scaled + kTrigAbs));
    }
  }
}

struct RopeShape {
  int n_heads, head_dim, n_rot;
};
std::vector<RopeShape> rope_shapes() {
  std::vector<RopeShape> all = {{1, 2, 2},
          {3, 6, 6},
          {2, kLanes, kLanes},
          {3, kLanes + 2, kLanes - 2},          // adjacent: SIMD body then pair tail
          {3, kLanes + 2, kLanes + 2},
          {2, 2 * kLanes - 2, 2 * kLanes - 2},  // halves: half = kLanes - 1
          {2, 2 * kLanes, 2 * kLanes},
          {5, 2 * kLanes + 2, 2 * kLanes + 2},
          {4, 34, 34},
          {2, 64, 64},
          {2, 64, 32},     // partial rotation (n_rot < head_dim)
          {3, 128, 64},
          {2, 4 * kLanes + 1, 4 * kLanes - 2},  // halves: half = 2 * kLanes - 1, odd head_dim
          {2, 80, 24},
          {1, 96, 2},
          {3, 67, 66},     // odd head_dim: later heads start misaligned
          {3, 67, 40},
          {2, 1040, 1040}, // wider than the SIMD adjacent kernel's 512-entry table
          {1, 520, 514}};
  std::vector<RopeShape> unique;  // narrower vectors (kLanes = 4) make some shapes coincide
  for (const RopeShape& r : all)
    if (std::none_of(unique.begin(), unique.end(), [&](const RopeShape& u) {
          return u.n_heads == r.n_heads && u.head_dim == r.head_dim && u.n_rot == r.n_rot;
        }))
      unique.push_back(r);
  return unique;
}
using RopeParam = std::tuple<int, int, int>;  // (layout 0 = adjacent / 1 = halves, shape index, off)
class RopeKernel : public ::testing::TestWithParam<RopeParam> {};

TEST_P(RopeKernel, SimdMatchesRef) {
  const bool halves = std::get<0>(GetParam()) == 1;
  const RopeShape sh = rope_shapes()[std::get<1>(GetParam())];
  const int off = std::get<2>(GetParam());
  const int n = sh.n_heads * sh.head_dim, half = sh.n_rot / 2;
  struct Angles {
    int pos;
    float theta, fs;
  };
  for (Angles ang : {Angles{0, 10000.0f, 1.0f}, Angles{1, 10000.0f, 1.0f}, Angles{7, 10000.0f, 1.0f},
                     Angles{4095, 500000.0f, 1.0f}, Angles{333, 1000000.0f, 0.25f}}) {
    SCOPED_TRACE("pos=" + std::to_string(ang.pos) + " theta=" + std::to_string(ang.theta));
    std::mt19937 rng(seed_of({9, (int)halves, std::get<1>(GetParam()), off, ang.pos}));
    Buf c(half, off), s(half, off), x(n, off);
    qkv::rope_angles(c.data(), s.data(), sh.n_rot, ang.pos, ang.theta, ang.fs);
    fill_uniform(rng, x.data(), n, -3.0f, 3.0f);
    const std::vector<float> in = x.vec();
    std::vector<float> ref = in;
    if (halves) {
      qkv::rope_halves_ref(ref.data(), sh.n_heads, sh.head_dim, sh.n_rot, c.data(), s.data());
      qkv::rope_halves_simd(x.data(), sh.n_heads, sh.head_dim, sh.n_rot, c.data(), s.data());
    } else {
      qkv::rope_adjacent_ref(ref.data(), sh.n_heads, sh.head_dim, sh.n_rot, c.data(), s.data());
      qkv::rope_adjacent_simd(x.data(), sh.n_heads, sh.head_dim, sh.n_rot, c.data(), s.data());
    }
    // Tolerance from the pair (v0, v1) that produced element i; dims >= n_rot must not change.
    auto tol = [&](size_t i) -> double {
      const int h = (int)i / sh.head_dim, e = (int)i % sh.head_dim;
      if (e >= sh.n_rot) return 0.0;
      int e0, e1, p;
      if (halves) {
        p = e % half;
        e0 = p;
        e1 = p + half;
      } else {
        p = e / 2;
        e0 = 2 * p;
        e1 = 2 * p + 1;
      }
      const float* v = in.data() + h * sh.head_dim;
      return kRopeRel * (std::fabs(v[e0] * c[p]) + std::fabs(v[e1] * s[p]) + std::fabs(v[e0] * s[p]) +
                         std::fabs(v[e1] * c[p])) +
             kRopeAbs;
    };
    EXPECT_TRUE(AllNear(halves ? "rope halves" : "rope adjacent", x.data(), ref.data(), n, tol));
    int changed = 0, unrotated_changed = 0;
    for (int i = 0; i < n; i++) {
      if (i % sh.head_dim >= sh.n_rot) {
        if (std::memcmp(&x[i], &in[i], sizeof(float)) != 0) unrotated_changed++;
      } else if (std::fabs(ref[i] - in[i]) > 1e-3f) {
        changed++;
      }
    }
    EXPECT_EQ(unrotated_changed, 0) << "dims at or past n_rot must stay untouched";
    if (ang.pos == 0)
      EXPECT_TRUE(AllEqual("pos 0 is the identity", x.data(), in.data(), n));
    else
      EXPECT_GT(changed, 0) << "sanity: the reference must rotate something";
    EXPECT_TRUE(x.guards_intact());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, RopeKernel,
    ::testing::Combine(::testing::Values(0, 1), ::testing::Range(0, (int)rope_shapes().size()),
                       ::testing::ValuesIn(kOffsets)),
    [](const ::testing::TestParamInfo<RopeParam>& info) {
      const RopeShape sh = rope_shapes()[std::get<1>(info.param)];
      return std::string(std::get<0>(info.param) ? "Halves" : "Adjacent") + "_h" + std::to_string(sh.n_heads) +
             "_hd" + std::to_string(sh.head_dim) + "_rot" + std::to_string(sh.n_rot) + "_off" +
             std::to_string(std::get<2>(info.param));
    });

// ---- attention ------------------------------------------------------------------------------
enum KeyMask { kNoMask, kRandomMask, kFirstKeyMasked, kSecondTileMasked, kAllMasked };

struct AttnCase {
  const char* name;
  int n_q, n_kv, n_heads, n_kv_heads, head_dim, q_pos0;
  bool causal;
  int window;
  KeyMask mask;
  int stride_pad;       // extra floats at the end of each q / kv / out row (NaN in the inputs)
  float scale_mul = 1;  // scale = scale_mul / sqrt(head_dim); large values make peaked softmaxes
  float softcap = 0;    // > 0: scores softcap * tanh(s / softcap) (Gemma 2)
};

std::vector<AttnCase> attn_cases() {
  const int L = kLanes;
  return {
      {"decode", 1, 37, 4, 4, 16, 36, true, 0, kNoMask, 0},
      {"decode_gqa_long", 1, 1000, 8, 2, 64, 999, true, 0, kNoMask, 3},
      {"decode_hd128", 1, 300, 2, 2, 128, 299, true, 0, kNoMask, 0},
      {"prefill", 20, 20, 4, 4, 16, 0, true, 0, kNoMask, 0},
      {"prefill_continue", 13, 43, 4, 2, L + 3, 30, true, 0, kNoMask, 3},
      {"prefill_continue_long", 17, 1000, 4, 1, 32, 983, true, 0, kNoMask, 0},
      {"prefill_cache_past_queries", 9, 500, 2, 2, 16, 100, true, 0, kNoMask, 0},  // keys > qpos hidden
      {"prefill_129", 129, 129, 2, 1, 8, 0, true, 0, kNoMask, 1},
      {"gqa_odd_dim", 11, 11, 6, 3, 2 * L + 3, 0, true, 0, kNoMask, 1},
      {"mqa_hd1", 10, 10, 3, 1, 1, 0, true, 0, kNoMask, 0},
      {"hd3", 5, 70, 2, 1, 3, 65, true, 0, kNoMask, 2},
      {"kv64_tile", 1, 64, 2, 2, 16, 63, true, 0, kNoMask, 0},
      {"kv65_tile", 2, 65, 2, 2, 16, 63, true, 0, kNoMask, 0},
      {"window", 20, 30, 4, 2, 16, 10, true, 5, kNoMask, 0},
      {"window1", 9, 9, 2, 2, 8, 0, true, 1, kNoMask, 0},
      {"window_long_decode", 3, 1000, 4, 4, 32, 997, true, 300, kNoMask, 0},
      {"window_long_prefill", 40, 1000, 2, 1, 16, 960, true, 130, kNoMask, 1},
      {"window_no_keys_in_cache", 2, 10, 2, 1, 8, 30, true, 5, kNoMask, 0},  // every query masked
      {"noncausal", 70, 70, 2, 2, 16, 0, false, 0, kNoMask, 0},
      {"noncausal_window", 30, 50, 2, 2, 16, 10, false, 10, kNoMask, 0},  // future keys visible
      {"padding_random", 12, 150, 4, 2, 16, 138, true, 0, kRandomMask, 0},
      {"padding_random_noncausal", 16, 100, 2, 1, 2 * L + 1, 0, false, 0, kRandomMask, 2},
      {"padding_first_key", 8, 8, 2, 2, 16, 0, true, 0, kFirstKeyMasked, 0},  // query 0 sees nothing
      {"padding_whole_tile", 3, 200, 2, 1, 16, 0, false, 0, kSecondTileMasked, 0},
      {"padding_whole_tile_causal_window", 10, 200, 2, 2, 16, 190, true, 150, kSecondTileMasked, 0},
      {"all_keys_masked", 5, 20, 2, 1, 8, 15, true, 0, kAllMasked, 0},
      {"peaked_scores", 6, 300, 2, 1, 32, 294, true, 0, kNoMask, 0, 12.0f},
      {"peaked_scores_window", 6, 300, 2, 1, 32, 294, true, 100, kRandomMask, 0, 12.0f},
      {"softcap_decode", 1, 300, 4, 2, 32, 299, true, 0, kNoMask, 0, 12.0f, 3.0f},
      {"softcap_prefill_window", 40, 200, 2, 1, 16, 160, true, 50, kRandomMask, 1, 6.0f, 2.0f},
  };
}

bool visible_by_contract(const AttnCase& c, const std::vector<uint8_t>& kv, int qpos, int j) {
  if (c.causal && j > qpos) return false;
  if (c.window > 0 && qpos - j >= c.window) return false;
  if (c.mask != kNoMask && !kv[j]) return false;
  return true;
}

using AttnParam = std::tuple<int, int>;  // (case index, off)
class AttentionKernel : public ::testing::TestWithParam<AttnParam> {};

TEST_P(AttentionKernel, FlashMatchesRefAndOracle) {
  const AttnCase c = attn_cases()[std::get<0>(GetParam())];
  const int off = std::get<1>(GetParam());
  const int H = c.n_heads, KVH = c.n_kv_heads, hd = c.head_dim, nq = c.n_q, nkv = c.n_kv;
  ASSERT_EQ(H % KVH, 0);
  const int64_t q_stride = (int64_t)H * hd + c.stride_pad, kv_stride = (int64_t)KVH * hd + c.stride_pad;
  const int64_t out_stride = (int64_t)H * hd + c.stride_pad;
  std::mt19937 rng(seed_of({10, std::get<0>(GetParam()), off}));

  Buf q((size_t)nq * q_stride, off), k((size_t)nkv * kv_stride, off), v((size_t)nkv * kv_stride, off);
  q.fill(NAN);  // stride padding must never be read
  k.fill(NAN);
  v.fill(NAN);
  for (int i = 0; i < nq; i++) fill_uniform(rng, q.data() + i * q_stride, (size_t)H * hd, -1.0f, 1.0f);
  for (int j = 0; j < nkv; j++) {
    fill_uniform(rng, k.data() + j * kv_stride, (size_t)KVH * hd, -1.0f, 1.0f);
    fill_uniform(rng, v.data() + j * kv_stride, (size_t)KVH * hd, -1.0f, 1.0f);
  }
  std::vector<uint8_t> key_valid(nkv, 1);
  switch (c.mask) {
    case kNoMask: break;
    case kRandomMask: {
      std::bernoulli_distribution masked(0.25);
      for (int j = 0; j < nkv; j++) key_valid[j] = masked(rng) ? 0 : 1;
      key_valid[nkv - 1] = 1;
      break;
    }
    case kFirstKeyMasked: key_valid[0] = 0; break;
    case kSecondTileMasked:
      for (int j = 64; j < 128 && j < nkv; j++) key_valid[j] = 0;
      break;
    case kAllMasked: std::fill(key_valid.begin(), key_valid.end(), 0); break;
  }

  qkv::AttentionArgs a;
  a.n_q = nq;
  a.n_kv = nkv;
  a.n_heads = H;
  a.n_kv_heads = KVH;
  a.head_dim = hd;
  a.q = q.data();
  a.q_stride = q_stride;
  a.k = k.data();
  a.v = v.data();
  a.kv_stride = kv_stride;
  a.out_stride = out_stride;
  a.scale = c.scale_mul / std::sqrt((float)hd);
  a.q_pos0 = c.q_pos0;
  a.causal = c.causal;
  a.window = c.window;
  a.softcap = c.softcap;
  a.key_valid = c.mask == kNoMask ? nullptr : key_valid.data();

  // Double-precision oracle written from the header's contract.
  const size_t n_out = (size_t)nq * out_stride, n_probs = (size_t)H * nq * nkv;
  // o_or holds the sentinel in the out stride padding, which the kernels must leave untouched.
  std::vector<float> p_or(n_probs, 0.0f), o_or(n_out, sentinel());
  std::vector<double> o_bound(n_out, 0.0);  // kAttnRel * sum_j p_j |v_jd| + kAttnAbs
  std::vector<char> row_visible((size_t)H * nq, 0);
  int n_visible_rows = 0, n_masked_rows = 0;
  {
    std::vector<double> sc(nkv), od(hd), ob(hd);
    for (int h = 0; h < H; h++) {
      const int g = h / (H / KVH);
      for (int i = 0; i < nq; i++) {
        const float* qr = q.data() + i * q_stride + h * hd;
        double mx = -INFINITY;
        bool any = false;
        for (int j = 0; j < nkv; j++) {
          if (!visible_by_contract(c, key_valid, c.q_pos0 + i, j)) {
            sc[j] = -INFINITY;
            continue;
          }
          any = true;
          const float* kr = k.data() + j * kv_stride + g * hd;
          double s = 0.0;
          for (int d = 0; d < hd; d++) s += (double)qr[d] * kr[d];
          sc[j] = s * a.scale;
          if (c.softcap > 0) sc[j] = c.softcap * std::tanh(sc[j] / c.softcap);
          mx = std::max(mx, sc[j]);
        }
        row_visible[(size_t)h * nq + i] = any;
        (any ? n_visible_rows : n_masked_rows)++;
        std::fill(od.begin(), od.end(), 0.0);
        std::fill(ob.begin(), ob.end(), 0.0);
        if (any) {
          double sum = 0.0;
          for (int j = 0; j < nkv; j++) sum += sc[j] == -INFINITY ? 0.0 : std::exp(sc[j] - mx);
          for (int j = 0; j < nkv; j++) {
            const double p = sc[j] == -INFINITY ? 0.0 : std::exp(sc[j] - mx) / sum;
            p_or[((size_t)h * nq + i) * nkv + j] = (float)p;
            if (p == 0.0) continue;
            const float* vr = v.data() + j * kv_stride + g * hd;
            for (int d = 0; d < hd; d++) {
              od[d] += p * vr[d];
              ob[d] += p * std::fabs(vr[d]);
            }
          }
        }
        for (int d = 0; d < hd; d++) {
          o_or[i * out_stride + h * hd + d] = (float)od[d];
          o_bound[i * out_stride + h * hd + d] = kAttnRel * ob[d] + kAttnAbs;
        }
      }
    }
  }
  // Output columns that belong to a head (not the stride padding).
  auto is_head_col = [&](size_t idx) { return (int64_t)(idx % out_stride) < (int64_t)H * hd; };
  auto out_tol = [&](size_t idx) { return is_head_col(idx) ? o_bound[idx] : 0.0; };
  auto prob_tol = [&](const std::vector<float>& want) {
    return [&want](size_t idx) { return kProbRel * std::fabs(want[idx]) + kProbAbs; };
  };

  // Checks shared by the reference and the flash kernel.
  auto check_semantics = [&](const char* who, const Buf& out, const Buf& probs) {
    SCOPED_TRACE(who);
    EXPECT_TRUE(out.guards_intact()) << "write outside out";
    EXPECT_TRUE(probs.guards_intact()) << "write outside probs";
    int pad_written = 0, masked_nonzero = 0, masked_out_nonzero = 0, bad_sums = 0;
    double worst_sum = 0.0;
    for (size_t idx = 0; idx < n_out; idx++)
      if (!is_head_col(idx) && !is_sentinel(out[idx])) pad_written++;
    EXPECT_EQ(pad_written, 0) << "out stride padding was written";
    for (int h = 0; h < H; h++)
      for (int i = 0; i < nq; i++) {
        const float* pr = probs.data() + ((size_t)h * nq + i) * nkv;
        double sum = 0.0;
        for (int j = 0; j < nkv; j++) {
          sum += pr[j];
          if (!visible_by_contract(c, key_valid, c.q_pos0 + i, j) && pr[j] != 0.0f) masked_nonzero++;
        }
        if (row_visible[(size_t)h * nq + i]) {
          if (!(std::fabs(sum - 1.0) <= kRowSumTol)) bad_sums++;
          worst_sum = std::max(worst_sum, std::fabs(sum - 1.0));
        } else {
          for (int d = 0; d < hd; d++)
            if (out[i * out_stride + h * hd + d] != 0.0f) masked_out_nonzero++;
        }
      }
    EXPECT_EQ(masked_nonzero, 0) << "masked keys must get probability exactly 0";
    EXPECT_EQ(masked_out_nonzero, 0) << "queries with no visible key must output exactly 0";
    EXPECT_EQ(bad_sums, 0) << "probability rows must sum to 1; worst |sum - 1| = " << worst_sum;
    EXPECT_TRUE(AllNear("out vs double oracle", out.data(), o_or.data(), n_out, out_tol));
    EXPECT_TRUE(AllNear("probs vs double oracle", probs.data(), p_or.data(), n_probs, prob_tol(p_or)));
  };

  // Reference.
  Buf out_ref(n_out, off), probs_ref(n_probs, off);
  out_ref.fill_sentinel();
  probs_ref.fill_sentinel();
  a.out = out_ref.data();
  a.probs = probs_ref.data();
  qkv::attention_ref(a);
  check_semantics("attention_ref", out_ref, probs_ref);

  // Flash over all heads, with probabilities.
  Buf out_fl(n_out, off), probs_fl(n_probs, off);
  out_fl.fill_sentinel();
  probs_fl.fill_sentinel();
  a.out = out_fl.data();
  a.probs = probs_fl.data();
  qkv::attention_flash(a, 0, H);
  check_semantics("attention_flash", out_fl, probs_fl);
  EXPECT_TRUE(AllNear("flash out vs ref out", out_fl.data(), out_ref.data(), n_out, out_tol));
  const std::vector<float> pref = probs_ref.vec();
  EXPECT_TRUE(AllNear("flash probs vs ref probs", probs_fl.data(), pref.data(), n_probs, prob_tol(pref)));

  // Sanity: the comparison is not between two all-zero outputs.
  if (n_visible_rows > 0) {
    bool nz = false;
    for (size_t idx = 0; idx < n_out; idx++) nz |= is_head_col(idx) && out_ref[idx] != 0.0f;
    EXPECT_TRUE(nz) << "reference output is all zero although some queries see keys";
  }
  if (c.mask == kAllMasked || std::string(c.name) == "window_no_keys_in_cache") {
    EXPECT_EQ(n_visible_rows, 0);
  }
  if (c.mask == kFirstKeyMasked) {
    EXPECT_GT(n_masked_rows, 0);
  }

  // Flash without probs: the same output, bit for bit (probs is inspection only).
  Buf out_np(n_out, off);
  out_np.fill_sentinel();
  a.out = out_np.data();
  a.probs = nullptr;
  qkv::attention_flash(a, 0, H);
  EXPECT_TRUE(AllEqual("flash out without probs vs with probs", out_np.data(), out_fl.data(), n_out));
  EXPECT_TRUE(out_np.guards_intact());

  // Flash over a head sub-range leaves the other heads untouched; two ranges give the full result.
  if (H > 1) {
    const int hs = H / 2;
    Buf out_sp(n_out, off), probs_sp(n_probs, off);
    out_sp.fill_sentinel();
    probs_sp.fill_sentinel();
    a.out = out_sp.data();
    a.probs = probs_sp.data();
    qkv::attention_flash(a, hs, H);
    int touched = 0;
    for (int i = 0; i < nq; i++)
      for (int e = 0; e < hs * hd; e++) touched += !is_sentinel(out_sp[i * out_stride + e]);
    for (size_t idx = 0; idx < (size_t)hs * nq * nkv; idx++) touched += !is_sentinel(probs_sp[idx]);
    EXPECT_EQ(touched, 0) << "heads outside [h0, h1) were written";
    qkv::attention_flash(a, 0, hs);
    EXPECT_TRUE(AllEqual("flash split heads out", out_sp.data(), out_fl.data(), n_out));
    EXPECT_TRUE(AllEqual("flash split heads probs", probs_sp.data(), probs_fl.data(), n_probs));
    EXPECT_TRUE(out_sp.guards_intact());
    EXPECT_TRUE(probs_sp.guards_intact());
  }
}

TEST(AttentionKernelEdge, EmptyCacheGivesZeroOutput) {
  // n_kv = 0: no query sees a key, so both kernels write zeros (and nothing past the heads).
  const int H = 2, hd = kLanes + 1, nq = 3;
  const int64_t stride = H * hd + 1;
  Buf q(nq * stride, 1), kv(1, 1), out_ref(nq * stride, 1), out_fl(nq * stride, 1);
  q.fill(1.0f);
  kv.fill(1.0f);
  qkv::AttentionArgs a;
  a.n_q = nq;
  a.n_kv = 0;
  a.n_heads = H;
  a.n_kv_heads = 1;
  a.head_dim = hd;
  a.q = q.data();
  a.q_stride = stride;
  a.k = a.v = kv.data();
  a.kv_stride = hd;
  a.out_stride = stride;
  a.q_pos0 = 5;
  for (Buf* out : {&out_ref, &out_fl}) {
    out->fill_sentinel();
    a.out = out->data();
    if (out == &out_ref) {
      qkv::attention_ref(a);
    } else {
      qkv::attention_flash(a, 0, H);
    }
    for (int i = 0; i < nq; i++)
      for (int e = 0; e < stride; e++) {
        if (e < H * hd) {
          EXPECT_EQ((*out)[i * stride + e], 0.0f) << (out == &out_ref ? "ref" : "flash") << " row " << i;
        } else {
          EXPECT_TRUE(is_sentinel((*out)[i * stride + e])) << "padding written";
        }
      }
    EXPECT_TRUE(out->guards_intact());
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionKernel,
                         ::testing::Combine(::testing::Range(0, (int)attn_cases().size()),
                                            ::testing::ValuesIn(kOffsets)),
                         [](const ::testing::TestParamInfo<AttnParam>& info) {
                           return std::string(attn_cases()[std::get<0>(info.param)].name) + "_off" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace

// ---- linear attention -----------------------------------------------------------------------
// attention_linear (recurrent state where the masks allow, direct weights otherwise) and
// attention_linear_ref against a double-precision transcription of the definition:
// out_i = sum_j phi(q_i).phi(k_j) v_j / sum_j phi(q_i).phi(k_j), phi = elu + 1, j visible.
TEST(LinearAttention, MatchesTheDefinitionUnderEveryMask) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> U(-2.0f, 2.0f);
  struct Shape { int H, KH, hd, nq, nkv, pos0; bool causal; int window; bool padding; };
  const Shape shapes[] = {
      {4, 2, 16, 7, 7, 0, true, 0, false},     {2, 1, 33, 1, 50, 49, true, 0, false},
      {6, 3, 64, 20, 90, 70, true, 0, false},  {3, 3, 5, 9, 9, 0, false, 0, false},
      {4, 1, 16, 12, 40, 28, true, 6, false},  {2, 2, 32, 10, 10, 0, true, 0, true},
      {8, 2, 80, 3, 130, 127, true, 0, false}, {1, 1, 128, 64, 64, 0, true, 0, false},
  };
  auto phi = [](double x) { return x > 0 ? x + 1.0 : std::exp(x); };
  for (const Shape& s : shapes) {
    SCOPED_TRACE(::testing::Message() << "H " << s.H << "/" << s.KH << " hd " << s.hd << " nq " << s.nq << " nkv "
                                      << s.nkv << " causal " << s.causal << " window " << s.window << " pad " << s.padding);
    const int qd = s.H * s.hd, kvd = s.KH * s.hd;
    std::vector<float> q(s.nq * qd), k(s.nkv * kvd), v(s.nkv * kvd);
    for (auto* x : {&q, &k, &v})
      for (float& f : *x) f = U(rng);
    std::vector<uint8_t> valid(s.nkv, 1);
    if (s.padding)
      for (int j = 0; j < s.nkv; j += 3) valid[j] = 0;
    qkv::AttentionArgs a;
    a.n_q = s.nq;
    a.n_kv = s.nkv;
    a.n_heads = s.H;
    a.n_kv_heads = s.KH;
    a.head_dim = s.hd;
    a.q = q.data();
    a.q_stride = qd;
    a.k = k.data();
    a.v = v.data();
    a.kv_stride = kvd;
    a.out_stride = qd;
    a.q_pos0 = s.pos0;
    a.causal = s.causal;
    a.window = s.window;
    a.key_valid = s.padding ? valid.data() : nullptr;
    // The definition, in double.
    std::vector<double> want(s.nq * qd, 0.0), wantp((size_t)s.H * s.nq * s.nkv, 0.0);
    for (int h = 0; h < s.H; h++) {
      const int g = h / (s.H / s.KH);
      for (int i = 0; i < s.nq; i++) {
        const int qp = s.pos0 + i;
        double den = 0;
        std::vector<double> w(s.nkv, 0.0);
        for (int j = 0; j < s.nkv; j++) {
          if ((s.causal && j > qp) || (s.window > 0 && qp - j >= s.window) || !valid[j]) continue;
          for (int d = 0; d < s.hd; d++) w[j] += phi(q[i * qd + h * s.hd + d]) * phi(k[j * kvd + g * s.hd + d]);
          den += w[j];
        }
        for (int j = 0; j < s.nkv; j++) {
          wantp[((size_t)h * s.nq + i) * s.nkv + j] = den > 0 ? w[j] / den : 0.0;
          for (int d = 0; d < s.hd; d++) want[i * qd + h * s.hd + d] += (den > 0 ? w[j] / den : 0.0) * v[j * kvd + g * s.hd + d];
        }
      }
    }
    auto close = [&](const char* who, const std::vector<float>& got, const std::vector<double>& ref, double tol) {
      double worst = 0;
      for (size_t x = 0; x < ref.size(); x++) worst = std::max(worst, std::fabs(got[x] - ref[x]));
      EXPECT_LE(worst, tol) << who << ": max |got - definition| = " << worst;
    };
    std::vector<float> out_ref(want.size()), p_ref(wantp.size()), out_rec(want.size()), out_dir(want.size()),
        p_dir(wantp.size());
    a.out = out_ref.data();
    a.probs = p_ref.data();
    qkv::attention_linear_ref(a);
    close("ref out", out_ref, want, 1e-5);
    close("ref probs", p_ref, wantp, 1e-6);
    a.out = out_rec.data();
    a.probs = nullptr;  // recurrent form when causal without window/padding
    qkv::attention_linear(a, 0, s.H);
    close("simd out", out_rec, want, 2e-5);
    a.out = out_dir.data();
    a.probs = p_dir.data();  // probabilities force the direct form
    qkv::attention_linear(a, 0, s.H);
    close("simd direct out", out_dir, want, 2e-5);
    close("simd direct probs", p_dir, wantp, 1e-6);
    // Not trivially zero: the inputs reach the output.
    double mag = 0;
    for (double x : want) mag = std::max(mag, std::fabs(x));
    EXPECT_GT(mag, 0.05);
  }
}

// ---- thread pool -----------------------------------------------------------------------------

TEST(ThreadPool, VisitsEveryIndexOnceInGrainAlignedChunks) {
  for (int threads : {1, 2, 3, 5}) {
    qkv::ThreadPool pool(threads);
    for (int n : {1, 7, 16, 100, 2304, 4099})
      for (int grain : {1, 16, 64}) {
        std::vector<std::atomic<int>> seen(n);
        std::atomic<bool> aligned{true}, thread_ok{true};
        pool.parallel_for(n, grain, [&](int b, int e, int t) {
          if (b % grain != 0 || (e % grain != 0 && e != n) || b >= e) aligned = false;
          if (t < 0 || t >= pool.size()) thread_ok = false;
          for (int i = b; i < e; i++) seen[i]++;
        });
        for (int i = 0; i < n; i++) ASSERT_EQ(seen[i].load(), 1) << threads << " threads, n " << n << ", index " << i;
        EXPECT_TRUE(aligned) << threads << " threads, n " << n << ", grain " << grain;
        EXPECT_TRUE(thread_ok);
      }
  }
}

// Workers spin for a while after a section, then sleep; the next section must wake them. Each
// section here is two blocks, and the calling thread's block waits (up to 5 s) until a worker
// has started the other, so a sleeping worker that is never woken fails instead of hanging.
TEST(ThreadPool, WakesWorkersThatWentToSleep) {
  qkv::ThreadPool pool(2);
  for (int round = 0; round < 6; round++) {
    // Past the workers' spin time (2 ms) on every other round; no gap on the others.
    if (round % 2) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    std::atomic<bool> worker_ran{false}, waited_out{false};
    pool.parallel_for(2, 1, [&](int, int, int t) {
      if (t != 0) {
        worker_ran = true;
        return;
      }
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!worker_ran)
        if (std::chrono::steady_clock::now() > give_up) {
          waited_out = true;
          return;
        }
    });
    // (2 blocks on 2 threads are claimed one at a time, so while the calling thread waits in
    // its block the other is left to a worker.)
    ASSERT_FALSE(waited_out) << "round " << round << ": no worker took the second block within 5 s";
    ASSERT_TRUE(worker_ran);
  }
}

// Threads of equal speed (a block per time unit), each claiming the next chunk when it is free:
// the time the last one finishes, and the number of claims.
static std::pair<int64_t, int> guided_span(int blocks, int threads) {
  std::vector<int64_t> free_at(threads, 0);
  int claims = 0;
  for (int64_t next = 0; next < blocks; claims++) {
    const int size = qkv::ThreadPool::claim_size(blocks - next, threads);
    auto t = std::min_element(free_at.begin(), free_at.end());
    *t += std::min<int64_t>(size, blocks - next);
    next += size;
  }
  return {*std::max_element(free_at.begin(), free_at.end()), claims};
}

TEST(ThreadPool, ClaimsShrinkSoThreadsFinishTogether) {
  for (int threads = 2; threads <= 8; threads++)
    for (int blocks = 1; blocks <= 2000; blocks++) {
      const auto [span, claims] = guided_span(blocks, threads);
      const int64_t ideal = (blocks + threads - 1) / threads;
      ASSERT_LE(span, ideal + 1) << blocks << " blocks, " << threads << " threads";
      // Few claims: each takes 1/(2 threads) of what is left until single blocks remain.
      ASSERT_LE(claims, 2 * threads * (2 + std::log((double)blocks))) << blocks << " blocks, " << threads << " threads";
    }
  // q, k and v of the 110M shape are 36 heads: fixed chunks of 5 heads would keep one of 2
  // threads busy for 20 while the other does 16.
  EXPECT_EQ(guided_span(36, 2).first, 18);
}
