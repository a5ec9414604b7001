// The training tests' shared checks: random vectors, float64 central differences, gradient
// comparison with the worst element reported, and a float64 causal GQA attention.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/simd.h"

namespace qkv_test {

using qkv::kLanes;

inline std::vector<float> randv(std::mt19937& g, size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// Central differences in float64 of L(x) = sum_i f(x)_i * r_i, for every element of x.
inline std::vector<double> fd_grad(std::vector<double> x, const std::function<double(const std::vector<double>&)>& L,
                                   double h = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); i++) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double lp = L(x);
    x[i] = x0 - h;
    const double lm = L(x);
    x[i] = x0;
    g[i] = (lp - lm) / (2 * h);
  }
  return g;
}

// |got - want| <= rel * max|want| + abs, element by element, with the worst reported.
inline ::testing::AssertionResult GradNear(const std::string& what, const std::vector<float>& got,
                                           const std::vector<double>& want, double rel = 2e-3, double abs = 1e-6) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << what << ": size mismatch";
  double scale = 0.0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  size_t worst = 0;
  double worst_d = -1.0;
  int bad = 0;
  for (size_t i = 0; i < got.size(); i++) {
    const double d = std::fabs(got[i] - want[i]);
    if (d > rel * scale + abs) bad++;
    if (d > worst_d) worst_d = d, worst = i;
  }
  if (scale == 0.0)
    return ::testing::AssertionFailure() << what << ": the expected gradient is all zero (test is vacuous)";
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << bad << " of " << got.size() << " elements off; worst ["
                                       << worst << "] got " << got[worst] << " want " << want[worst] << " (scale "
                                       << scale << ")";
}

inline ::testing::AssertionResult SameWithin(const std::string& what, const std::vector<float>& a,
                                             const std::vector<float>& b, double rel = 1e-5, double abs = 1e-6) {
  double scale = 0.0;
  for (float x : b) scale = std::max(scale, (double)std::fabs(x));
  for (size_t i = 0; i < a.size(); i++)
    if (!(std::fabs(a[i] - b[i]) <= rel * scale + abs))
      return ::testing::AssertionFailure()
             << what << ": [" << i << "] " << a[i] << " vs " << b[i] << " (scale " << scale << ")";
  return ::testing::AssertionSuccess();
}

inline std::vector<double> to_d(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// Sizes around the vector width, and larger odd ones.
inline std::vector<int> sizes() { return {1, 3, kLanes - 1, kLanes, kLanes + 1, 2 * kLanes + 3, 4 * kLanes + 5, 67}; }

// Causal GQA attention of one sequence in float64: out (n, heads*hd).
inline std::vector<double> attention_d(const std::vector<double>& q, const std::vector<double>& k,
                                       const std::vector<double>& v, int n, int H, int KVH, int hd) {
  std::vector<double> out((size_t)n * H * hd, 0.0);
  const double scale = 1.0 / std::sqrt((double)hd);
  for (int h = 0; h < H; h++) {
    const int gk = h / (H / KVH);
    for (int i = 0; i < n; i++) {
      std::vector<double> s(i + 1);
      double mx = -1e300;
      for (int j = 0; j <= i; j++) {
        double d = 0;
        for (int e = 0; e < hd; e++) d += q[(i * H + h) * hd + e] * k[(j * KVH + gk) * hd + e];
        s[j] = d * scale;
        mx = std::max(mx, s[j]);
      }
      double z = 0;
      for (int j = 0; j <= i; j++) z += (s[j] = std::exp(s[j] - mx));
      for (int j = 0; j <= i; j++)
        for (int e = 0; e < hd; e++) out[(i * H + h) * hd + e] += s[j] / z * v[(j * KVH + gk) * hd + e];
    }
  }
  return out;
}

}  // namespace qkv_test
