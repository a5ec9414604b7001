// The kernel tests' shared checks: tolerances, guarded misaligned buffers, element-wise
// comparison with a report of the worst element, and the sizes every vector kernel is swept over.
#pragma once
#include <gtest/gtest.h>

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

#include "kernels/simd.h"

namespace qkv_test {

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

inline float sentinel() {
  float f;
  std::memcpy(&f, &kSentinelBits, sizeof f);
  return f;
}
inline bool is_sentinel(float f) {
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

inline void fill_uniform(std::mt19937& rng, float* p, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  for (size_t i = 0; i < n; i++) p[i] = dist(rng);
}

inline uint32_t seed_of(std::initializer_list<int> xs) {
  uint32_t s = 0x5eed1234u;
  for (int x : xs) s = s * 1000003u + (uint32_t)x;
  return s;
}

inline bool any_nonzero(const float* p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0.0f) return true;
  return false;
}

// got[i] vs want[i] within tol(i) for every i (tol = 0 means exactly equal; -0 == +0). Reports
// the count of violations, the largest |diff| and the element worst relative to its tolerance.
template <class Tol>
inline ::testing::AssertionResult AllNear(const std::string& what, const float* got, const float* want, size_t n,
                                          Tol tol) {
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
     << " elements out of tolerance; max |diff| = " << max_diff << " at [" << max_i << "] (got " << got[max_i]
     << ", want " << want[max_i] << "); worst vs tolerance at [" << worst << "]: got " << got[worst] << ", want "
     << want[worst] << ", |diff| " << std::fabs((double)got[worst] - (double)want[worst]) << " > tol " << tol(worst);
  return ::testing::AssertionFailure() << os.str();
}

inline ::testing::AssertionResult AllEqual(const std::string& what, const float* got, const float* want, size_t n) {
  return AllNear(what, got, want, n, [](size_t) { return 0.0; });
}

inline std::vector<int> vector_sizes() {
  std::vector<int> s = {1, 2, 3, kLanes - 1, kLanes, kLanes + 1, 2 * kLanes + 3, 67, 255, 769};
  s.erase(std::remove_if(s.begin(), s.end(), [](int v) { return v < 1; }), s.end());
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}
inline const std::vector<int> kOffsets = {0, 1};

using SizeOff = std::tuple<int, int>;  // (n, misalignment in floats)
inline std::string SizeOffName(const ::testing::TestParamInfo<SizeOff>& info) {
  return "n" + std::to_string(std::get<0>(info.param)) + "_off" + std::to_string(std::get<1>(info.param));
}
#define QKV_SIZE_OFF_PARAMS \
  ::testing::Combine(::testing::ValuesIn(vector_sizes()), ::testing::ValuesIn(kOffsets)), SizeOffName

}  // namespace qkv_test
