// Training: every backward kernel against float64 central differences of its forward and its
// SIMD form against the scalar reference; the whole model's loss gradient against central
// differences of an independent float64 forward; a short training run whose loss must fall;
// determinism and exact resume; checkpoints that load and generate; the BPE tokenizer learner.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "common.h"
#include "engine/generate.h"
#include "formats/file.h"
#include "formats/gguf.h"
#include "formats/gguf_model.h"
#include "formats/gguf_writer.h"
#include "formats/loader.h"
#include "kernels/activation_backward.h"
#include "kernels/attention.h"
#include "kernels/attention_backward.h"
#include "kernels/matmul.h"
#include "kernels/matmul_backward.h"
#include "kernels/norm_backward.h"
#include "kernels/optim.h"
#include "kernels/rope.h"
#include "kernels/rope_backward.h"
#include "kernels/simd.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"
#include "train/bpe.h"
#include "train/model.h"
#include "train/trainer.h"

namespace {

using namespace qkv;

std::vector<float> randv(std::mt19937& g, size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// Central differences in float64 of L(x) = sum_i f(x)_i * r_i, for every element of x.
std::vector<double> fd_grad(std::vector<double> x, const std::function<double(const std::vector<double>&)>& L,
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
::testing::AssertionResult GradNear(const std::string& what, const std::vector<float>& got,
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
  if (scale == 0.0) return ::testing::AssertionFailure() << what << ": the expected gradient is all zero (test is vacuous)";
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << bad << " of " << got.size() << " elements off; worst [" << worst
                                       << "] got " << got[worst] << " want " << want[worst] << " (scale " << scale << ")";
}

::testing::AssertionResult SameWithin(const std::string& what, const std::vector<float>& a, const std::vector<float>& b,
                                      double rel = 1e-5, double abs = 1e-6) {
  double scale = 0.0;
  for (float x : b) scale = std::max(scale, (double)std::fabs(x));
  for (size_t i = 0; i < a.size(); i++)
    if (!(std::fabs(a[i] - b[i]) <= rel * scale + abs))
      return ::testing::AssertionFailure() << what << ": [" << i << "] " << a[i] << " vs " << b[i] << " (scale " << scale << ")";
  return ::testing::AssertionSuccess();
}

std::vector<double> to_d(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// Sizes around the vector width, and larger odd ones.
std::vector<int> sizes() { return {1, 3, kLanes - 1, kLanes, kLanes + 1, 2 * kLanes + 3, 4 * kLanes + 5, 67}; }

// ---- matmul gradients --------------------------------------------------------------------

TEST(TrainKernels, MatmulDxDwMatchFiniteDifferences) {
  std::mt19937 g(1);
  const int T = 3, d = 5, n = kLanes + 3;
  auto X = randv(g, T * n), W = randv(g, d * n), R = randv(g, T * d);
  // L = sum_t,r R[t,r] * (X W^T)[t,r]
  auto L = [&](const std::vector<double>& x, const std::vector<double>& w) {
    double s = 0;
    for (int t = 0; t < T; t++)
      for (int r = 0; r < d; r++) {
        double y = 0;
        for (int k = 0; k < n; k++) y += x[t * n + k] * w[r * n + k];
        s += R[t * d + r] * y;
      }
    return s;
  };
  auto fdx = fd_grad(to_d(X), [&](const std::vector<double>& x) { return L(x, to_d(W)); });
  auto fdw = fd_grad(to_d(W), [&](const std::vector<double>& w) { return L(to_d(X), w); });
  std::vector<float> dx(T * n, 0.0f), dw(d * n, 0.0f), dx2(T * n, 0.0f), dw2(d * n, 0.0f);
  matmul_dx_ref(dx.data(), n, R.data(), d, W.data(), T, d, n, false);
  matmul_dw_ref(dw.data(), R.data(), d, X.data(), n, T, d, n);
  ThreadPool pool(1);
  LinearScratch scratch;
  linear_backward(&pool, scratch, dx2.data(), false, R.data(), X.data(), W.data(), dw2.data(), d, n, T);
  EXPECT_TRUE(GradNear("dX ref", dx, fdx));
  EXPECT_TRUE(GradNear("dW ref", dw, fdw));
  EXPECT_TRUE(GradNear("dX simd", dx2, fdx));
  EXPECT_TRUE(GradNear("dW simd", dw2, fdw));
}

// linear_backward (the packed f32 kernel on transposed operands, token blocks of 256) and
// linear_forward against the scalar references, across sizes, thread counts and accumulation.
TEST(TrainKernels, LinearForwardBackwardMatchRefOnAwkwardSizes) {
  std::mt19937 g(2);
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    LinearScratch scratch;
    for (int n : sizes())
      for (int d : {1, 4, 7, 33, 70})
        for (int T : {1, 5, 9, 300}) {
          SCOPED_TRACE("threads=" + std::to_string(threads) + " T=" + std::to_string(T) + " d=" + std::to_string(d) +
                       " n=" + std::to_string(n));
          auto X = randv(g, T * n), W = randv(g, d * n), dY = randv(g, T * d);
          std::vector<float> y(T * d), yref(T * d);
          linear_forward(&pool, scratch, y.data(), X.data(), W.data(), d, n, T);
          matmul_f32_ref(yref.data(), d, X.data(), n, W.data(), T, d, n);
          ASSERT_TRUE(SameWithin("Y", yref, y));
          for (bool acc : {false, true}) {
            auto a = randv(g, T * n), b = a;
            auto wa = randv(g, d * n), wb = wa;
            matmul_dx_ref(a.data(), n, dY.data(), d, W.data(), T, d, n, acc);
            matmul_dw_ref(wa.data(), dY.data(), d, X.data(), n, T, d, n);
            linear_backward(&pool, scratch, b.data(), acc, dY.data(), X.data(), W.data(), wb.data(), d, n, T);
            ASSERT_TRUE(SameWithin("dX", a, b));
            ASSERT_TRUE(SameWithin("dW", wa, wb));
          }
        }
  }
}

// Training is deterministic for a thread count; the products are also the same for any.
TEST(TrainKernels, LinearBackwardIsIdenticalForAnyThreadCount) {
  std::mt19937 g(3);
  const int T = 523, d = 70, n = 3 * kLanes + 1;
  auto W = randv(g, d * n), dY = randv(g, T * d), X = randv(g, T * n);
  std::vector<std::vector<float>> dx, dw;
  for (int threads : {1, 2, 5}) {
    ThreadPool pool(threads);
    LinearScratch scratch;
    std::vector<float> a(T * n), wa(d * n, 0.5f);
    linear_backward(&pool, scratch, a.data(), false, dY.data(), X.data(), W.data(), wa.data(), d, n, T);
    dx.push_back(a);
    dw.push_back(wa);
  }
  EXPECT_EQ(dx[0], dx[1]);
  EXPECT_EQ(dx[0], dx[2]);
  EXPECT_EQ(dw[0], dw[1]);
  EXPECT_EQ(dw[0], dw[2]);
}

TEST(TrainKernels, RmsnormBackwardMatchesFiniteDifferences) {
  std::mt19937 g(4);
  for (int n : sizes()) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const float eps = 1e-5f;
    auto x = randv(g, n), w = randv(g, n, 0.5f, 1.5f), R = randv(g, n);
    auto L = [&](const std::vector<double>& xx, const std::vector<double>& ww) {
      double ss = 0;
      for (int i = 0; i < n; i++) ss += xx[i] * xx[i];
      const double r = 1.0 / std::sqrt(ss / n + eps);
      double s = 0;
      for (int i = 0; i < n; i++) s += R[i] * ww[i] * xx[i] * r;
      return s;
    };
    auto fdx = fd_grad(to_d(x), [&](const std::vector<double>& xx) { return L(xx, to_d(w)); });
    auto fdw = fd_grad(to_d(w), [&](const std::vector<double>& ww) { return L(to_d(x), ww); });
    std::vector<float> dx(n, 0.0f), dw(n, 0.0f), dx2(n, 0.0f), dw2(n, 0.0f);
    rmsnorm_backward_ref(dx.data(), dw.data(), R.data(), x.data(), w.data(), n, eps);
    rmsnorm_backward_simd(dx2.data(), dw2.data(), R.data(), x.data(), w.data(), n, eps);
    EXPECT_TRUE(GradNear("dx ref", dx, fdx));
    EXPECT_TRUE(GradNear("dw ref", dw, fdw));
    EXPECT_TRUE(GradNear("dx simd", dx2, fdx));
    EXPECT_TRUE(GradNear("dw simd", dw2, fdw));
    EXPECT_TRUE(SameWithin("dx simd vs ref", dx2, dx));
  }
}

TEST(TrainKernels, LayernormBackwardMatchesFiniteDifferences) {
  std::mt19937 g(14);
  for (int n : sizes()) {
    if (n == 1) continue;  // one element: LayerNorm's output is the bias alone
    SCOPED_TRACE("n=" + std::to_string(n));
    const float eps = 1e-5f;
    auto x = randv(g, n, -2, 3), w = randv(g, n, 0.5f, 1.5f), R = randv(g, n);
    auto L = [&](const std::vector<double>& xx, const std::vector<double>& ww, const std::vector<double>& bb) {
      double mean = 0, var = 0;
      for (double v : xx) mean += v / n;
      for (double v : xx) var += (v - mean) * (v - mean) / n;
      double s = 0;
      for (int i = 0; i < n; i++) s += R[i] * (ww[i] * (xx[i] - mean) / std::sqrt(var + eps) + bb[i]);
      return s;
    };
    const std::vector<double> b0(n, 0.25);
    auto fdx = fd_grad(to_d(x), [&](const std::vector<double>& v) { return L(v, to_d(w), b0); });
    auto fdw = fd_grad(to_d(w), [&](const std::vector<double>& v) { return L(to_d(x), v, b0); });
    auto fdb = fd_grad(b0, [&](const std::vector<double>& v) { return L(to_d(x), to_d(w), v); });
    for (int simd = 0; simd < 2; simd++) {
      std::vector<float> dx(n, 0.0f), dw(n, 0.0f), db(n, 0.0f);
      (simd ? layernorm_backward_simd : layernorm_backward_ref)(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), n, eps);
      EXPECT_TRUE(GradNear(simd ? "dx simd" : "dx ref", dx, fdx));
      EXPECT_TRUE(GradNear(simd ? "dw simd" : "dw ref", dw, fdw));
      EXPECT_TRUE(GradNear(simd ? "db simd" : "db ref", db, fdb));
    }
  }
}

TEST(TrainKernels, GeluAndReluBackwardMatchFiniteDifferences) {
  std::mt19937 g(15);
  for (int n : sizes()) {
    SCOPED_TRACE("n=" + std::to_string(n));
    auto x = randv(g, n, -4, 4), R = randv(g, n);
    for (float& v : x)
      if (std::fabs(v) < 1e-3f) v = 0.5f;  // keep ReLU's kink out of the difference quotient
    auto gelu = [&](const std::vector<double>& xx) {
      double s = 0;
      for (int i = 0; i < n; i++)
        s += R[i] * 0.5 * xx[i] * (1 + std::tanh(0.7978845608028654 * (xx[i] + 0.044715 * xx[i] * xx[i] * xx[i])));
      return s;
    };
    auto relu = [&](const std::vector<double>& xx) {
      double s = 0;
      for (int i = 0; i < n; i++) s += R[i] * (xx[i] > 0 ? xx[i] : 0.0);
      return s;
    };
    auto fg = fd_grad(to_d(x), gelu), fr = fd_grad(to_d(x), relu);
    std::vector<float> a(n), b(n), c(n), d(n);
    gelu_backward_ref(a.data(), R.data(), x.data(), n);
    gelu_backward_simd(b.data(), R.data(), x.data(), n);
    relu_backward_ref(c.data(), R.data(), x.data(), n);
    relu_backward_simd(d.data(), R.data(), x.data(), n);
    EXPECT_TRUE(GradNear("gelu ref", a, fg));
    EXPECT_TRUE(GradNear("gelu simd", b, fg));
    if (std::count_if(x.begin(), x.end(), [](float v) { return v > 0; }) > 0) {
      EXPECT_TRUE(GradNear("relu ref", c, fr));
      EXPECT_TRUE(GradNear("relu simd", d, fr));
    }
  }
}

// ---- SwiGLU ------------------------------------------------------------------------------

TEST(TrainKernels, SwigluBackwardMatchesFiniteDifferences) {
  std::mt19937 g(5);
  for (int n : sizes()) {
    SCOPED_TRACE("n=" + std::to_string(n));
    auto gate = randv(g, n, -4, 4), up = randv(g, n, -2, 2), R = randv(g, n);
    auto L = [&](const std::vector<double>& gg, const std::vector<double>& uu) {
      double s = 0;
      for (int i = 0; i < n; i++) s += R[i] * gg[i] / (1 + std::exp(-gg[i])) * uu[i];
      return s;
    };
    auto fdg = fd_grad(to_d(gate), [&](const std::vector<double>& v) { return L(v, to_d(up)); });
    auto fdu = fd_grad(to_d(up), [&](const std::vector<double>& v) { return L(to_d(gate), v); });
    std::vector<float> dg(n), du(n), dg2(n), du2(n);
    swiglu_backward_ref(dg.data(), du.data(), R.data(), gate.data(), up.data(), n);
    swiglu_backward_simd(dg2.data(), du2.data(), R.data(), gate.data(), up.data(), n);
    EXPECT_TRUE(GradNear("dgate ref", dg, fdg));
    EXPECT_TRUE(GradNear("dup ref", du, fdu));
    EXPECT_TRUE(GradNear("dgate simd", dg2, fdg));
    EXPECT_TRUE(GradNear("dup simd", du2, fdu));
  }
}

// ---- RoPE --------------------------------------------------------------------------------

TEST(TrainKernels, RopeBackwardMatchesFiniteDifferences) {
  std::mt19937 g(6);
  for (int hd : {2, 8, 2 * kLanes, 2 * kLanes + 6})
    for (int n_rot : {hd, hd / 2 * 2 >= 4 ? hd - 2 : hd}) {
      if (n_rot % 2) continue;
      SCOPED_TRACE("head_dim=" + std::to_string(hd) + " n_rot=" + std::to_string(n_rot));
      const int heads = 3, n = heads * hd, half = n_rot / 2;
      std::vector<float> c(half), s(half);
      rope_angles(c.data(), s.data(), n_rot, 7, 10000.0f, 1.0f);
      auto x = randv(g, n), R = randv(g, n);
      auto L = [&](const std::vector<double>& xx) {
        double sum = 0;
        for (int h = 0; h < heads; h++)
          for (int i = 0; i < hd; i++) {
            const double* v = &xx[h * hd];
            double y = v[i];
            if (i < n_rot) {
              const int p = i / 2;
              y = (i % 2 == 0) ? v[2 * p] * c[p] - v[2 * p + 1] * s[p] : v[2 * p] * s[p] + v[2 * p + 1] * c[p];
            }
            sum += R[h * hd + i] * y;
          }
        return sum;
      };
      auto fd = fd_grad(to_d(x), L);
      auto a = R, b = R;
      rope_adjacent_backward_ref(a.data(), heads, hd, n_rot, c.data(), s.data());
      rope_adjacent_backward_simd(b.data(), heads, hd, n_rot, c.data(), s.data());
      EXPECT_TRUE(GradNear("ref", a, fd));
      EXPECT_TRUE(GradNear("simd", b, fd));
    }
}

// ---- attention ---------------------------------------------------------------------------

// Causal GQA attention of one sequence in float64: out (n, heads*hd).
std::vector<double> attention_d(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                                int n, int H, int KVH, int hd) {
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

void attention_fwd(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v, int n, int H,
                   int KVH, int hd, std::vector<float>& out, std::vector<float>& probs) {
  AttentionArgs a;
  a.n_q = a.n_kv = n;
  a.n_heads = H;
  a.n_kv_heads = KVH;
  a.head_dim = hd;
  a.q = q.data();
  a.q_stride = H * hd;
  a.k = k.data();
  a.v = v.data();
  a.kv_stride = KVH * hd;
  out.assign((size_t)n * H * hd, 0.0f);
  probs.assign((size_t)H * n * n, 0.0f);
  a.out = out.data();
  a.out_stride = H * hd;
  a.scale = 1.0f / std::sqrt((float)hd);
  a.probs = probs.data();
  attention_flash(a, 0, H);
}

TEST(TrainKernels, AttentionBackwardMatchesFiniteDifferencesWithGqa) {
  std::mt19937 g(7);
  for (auto [H, KVH, hd, n] : std::vector<std::tuple<int, int, int, int>>{{2, 2, 4, 5}, {4, 2, kLanes + 2, 6}, {3, 1, 3, 4}}) {
    SCOPED_TRACE("heads " + std::to_string(H) + "/" + std::to_string(KVH) + " hd " + std::to_string(hd));
    auto q = randv(g, n * H * hd), k = randv(g, n * KVH * hd), v = randv(g, n * KVH * hd), R = randv(g, n * H * hd);
    auto L = [&](const std::vector<double>& qq, const std::vector<double>& kk, const std::vector<double>& vv) {
      auto o = attention_d(qq, kk, vv, n, H, KVH, hd);
      double s = 0;
      for (size_t i = 0; i < o.size(); i++) s += R[i] * o[i];
      return s;
    };
    auto fq = fd_grad(to_d(q), [&](const std::vector<double>& x) { return L(x, to_d(k), to_d(v)); });
    auto fk = fd_grad(to_d(k), [&](const std::vector<double>& x) { return L(to_d(q), x, to_d(v)); });
    auto fv = fd_grad(to_d(v), [&](const std::vector<double>& x) { return L(to_d(q), to_d(k), x); });
    std::vector<float> out, probs;
    attention_fwd(q, k, v, n, H, KVH, hd, out, probs);
    for (int simd = 0; simd < 2; simd++) {
      std::vector<float> dq(q.size(), 9.0f), dk(k.size(), 9.0f), dv(v.size(), 9.0f);  // overwritten
      AttentionBackwardArgs a;
      a.n = n;
      a.n_heads = H;
      a.n_kv_heads = KVH;
      a.head_dim = hd;
      a.q = q.data();
      a.q_stride = H * hd;
      a.k = k.data();
      a.v = v.data();
      a.kv_stride = KVH * hd;
      a.probs = probs.data();
      a.out = out.data();
      a.dout = R.data();
      a.out_stride = H * hd;
      a.dq = dq.data();
      a.dk = dk.data();
      a.dv = dv.data();
      a.scale = 1.0f / std::sqrt((float)hd);
      if (simd) {
        for (int gk = 0; gk < KVH; gk++) attention_backward_simd(a, gk, gk + 1);
      } else {
        attention_backward_ref(a);
      }
      const std::string tag = simd ? " simd" : " ref";
      EXPECT_TRUE(GradNear("dq" + tag, dq, fq));
      EXPECT_TRUE(GradNear("dk" + tag, dk, fk));
      EXPECT_TRUE(GradNear("dv" + tag, dv, fv));
    }
  }
}

// ---- cross-entropy and AdamW -------------------------------------------------------------

TEST(TrainKernels, CrossEntropyMatchesFiniteDifferences) {
  std::mt19937 g(8);
  for (int n : sizes()) {
    if (n == 1) continue;  // one class: loss and gradient are identically 0
    SCOPED_TRACE("n=" + std::to_string(n));
    auto x = randv(g, n, -5, 5);
    const int target = n / 2;
    auto L = [&](const std::vector<double>& xx) {
      double mx = -1e300, z = 0;
      for (double v : xx) mx = std::max(mx, v);
      for (double v : xx) z += std::exp(v - mx);
      return std::log(z) + mx - xx[target];
    };
    const double want = L(to_d(x));
    auto fd = fd_grad(to_d(x), L);
    for (double& v : fd) v *= 0.5;  // scale
    auto a = x, b = x;
    EXPECT_NEAR(cross_entropy_ref(a.data(), n, target, 0.5f), want, 1e-5);
    EXPECT_NEAR(cross_entropy_simd(b.data(), n, target, 0.5f), want, 1e-5);
    EXPECT_TRUE(GradNear("ref", a, fd));
    EXPECT_TRUE(GradNear("simd", b, fd));
  }
}

TEST(TrainKernels, AdamwSimdMatchesRefAndTheFormula) {
  std::mt19937 g(9);
  for (int n : sizes()) {
    auto p = randv(g, n), gr = randv(g, n), m = randv(g, n, -0.1f, 0.1f), v = randv(g, n, 0.0f, 0.1f);
    auto p2 = p, m2 = m, v2 = v;
    AdamWParams h;
    h.lr = 0.01f;
    h.weight_decay = 0.1f;
    h.step = 3;
    adamw_ref(p.data(), gr.data(), m.data(), v.data(), n, h);
    adamw_simd(p2.data(), gr.data(), m2.data(), v2.data(), n, h);
    EXPECT_TRUE(SameWithin("p", p2, p, 1e-6));
    EXPECT_TRUE(SameWithin("m", m2, m, 1e-6));
    EXPECT_TRUE(SameWithin("v", v2, v, 1e-6));
  }
  // One element by hand: step 1, m = v = 0: the update is lr * (sign(g) + wd p).
  float p = 2.0f, gg = -3.0f, m = 0.0f, v = 0.0f;
  AdamWParams h;
  h.lr = 0.1f;
  h.weight_decay = 0.5f;
  h.eps = 0.0f;
  adamw_simd(&p, &gg, &m, &v, 1, h);
  EXPECT_NEAR(p, 2.0f - 0.1f * (-1.0f + 0.5f * 2.0f), 1e-6);
}

// ---- the whole model ---------------------------------------------------------------------

ModelConfig tiny_config(int vocab = 23) {
  ModelConfig c;
  c.dim = 16;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 4;
  c.hidden_dim = 20;
  c.vocab_size = vocab;
  c.seq_len = 8;
  return c;
}

// The model's mean cross-entropy in float64, written from the formulas (not from the kernels).
double ref_loss(const ModelConfig& c, const ParamLayout& lay, const std::vector<double>& P, const std::vector<int>& in,
                const std::vector<int>& tg, int B, int T) {
  const int D = c.dim, H = c.hidden_dim, qd = c.q_dim(), kvd = c.kv_dim(), hd = c.head_dim, V = c.vocab_size;
  auto rms = [&](const double* x, int64_t w) {
    std::vector<double> y(D);
    double ss = 0;
    for (int i = 0; i < D; i++) ss += x[i] * x[i];
    const double r = 1.0 / std::sqrt(ss / D + c.norm_eps);
    for (int i = 0; i < D; i++) y[i] = P[w + i] * x[i] * r;
    return y;
  };
  auto mv = [&](const std::vector<double>& x, int64_t w, int rows, int cols) {
    std::vector<double> y(rows, 0.0);
    for (int r = 0; r < rows; r++)
      for (int k = 0; k < cols; k++) y[r] += P[w + (int64_t)r * cols + k] * x[k];
    return y;
  };
  auto rope = [&](double* v, int heads, int pos) {
    for (int h = 0; h < heads; h++)
      for (int p = 0; p < hd / 2; p++) {
        const double a = pos / std::pow((double)c.rope_theta, 2.0 * p / hd);
        double* x = v + h * hd + 2 * p;
        const double x0 = x[0], x1 = x[1];
        x[0] = x0 * std::cos(a) - x1 * std::sin(a);
        x[1] = x0 * std::sin(a) + x1 * std::cos(a);
      }
  };
  double total = 0;
  for (int b = 0; b < B; b++) {
    std::vector<std::vector<double>> x(T);
    for (int t = 0; t < T; t++) x[t].assign(&P[lay.tok_embed + (int64_t)in[b * T + t] * D], &P[lay.tok_embed + (int64_t)in[b * T + t] * D] + D);
    for (const auto& L : lay.layers) {
      std::vector<double> q(T * qd), k(T * kvd), v(T * kvd);
      for (int t = 0; t < T; t++) {
        auto xn = rms(x[t].data(), L.attn_norm);
        auto qq = mv(xn, L.wq, qd, D), kk = mv(xn, L.wk, kvd, D), vv = mv(xn, L.wv, kvd, D);
        rope(qq.data(), c.n_heads, t);
        rope(kk.data(), c.n_kv_heads, t);
        std::copy(qq.begin(), qq.end(), q.begin() + t * qd);
        std::copy(kk.begin(), kk.end(), k.begin() + t * kvd);
        std::copy(vv.begin(), vv.end(), v.begin() + t * kvd);
      }
      auto att = attention_d(q, k, v, T, c.n_heads, c.n_kv_heads, hd);
      for (int t = 0; t < T; t++) {
        auto o = mv(std::vector<double>(att.begin() + t * qd, att.begin() + (t + 1) * qd), L.wo, D, qd);
        for (int i = 0; i < D; i++) x[t][i] += o[i];
        auto xn = rms(x[t].data(), L.ffn_norm);
        auto gg = mv(xn, L.w_gate, H, D), uu = mv(xn, L.w_up, H, D);
        for (int i = 0; i < H; i++) gg[i] = gg[i] / (1 + std::exp(-gg[i])) * uu[i];
        auto dn = mv(gg, L.w_down, D, H);
        for (int i = 0; i < D; i++) x[t][i] += dn[i];
      }
    }
    for (int t = 0; t < T; t++) {
      auto xf = rms(x[t].data(), lay.final_norm);
      auto lg = mv(xf, lay.tok_embed, V, D);
      double mx = -1e300, z = 0;
      for (double l : lg) mx = std::max(mx, l);
      for (double l : lg) z += std::exp(l - mx);
      total += std::log(z) + mx - lg[tg[b * T + t]];
    }
  }
  return total / (B * T);
}

TEST(TrainModel, LossGradientMatchesFiniteDifferencesOfAFloat64Forward) {
  ModelConfig c = tiny_config();
  ThreadPool pool(2);
  qkv::TrainModel m(c, &pool);
  m.init(5);
  // Larger weights than the init, and non-unit norms, so every path carries real gradient.
  std::mt19937 g(10);
  for (auto& p : m.params()) p *= 12.0f;
  for (auto [b, e] : m.layout().norms)
    for (int64_t i = b; i < e; i++) m.params()[i] = 0.5f + (float)(g() % 1000) / 1000.0f;
  const int B = 2, T = 6;
  std::vector<int> in(B * T), tg(B * T);
  for (auto& t : in) t = (int)(g() % c.vocab_size);
  for (auto& t : tg) t = (int)(g() % c.vocab_size);
  in[1] = in[4];  // a repeated token: its embedding gradient sums two rows

  m.zero_grads();
  const double loss = m.forward(in.data(), tg.data(), B, T);
  m.backward();
  const double want_loss = ref_loss(c, m.layout(), to_d(m.params()), in, tg, B, T);
  EXPECT_NEAR(loss, want_loss, 1e-4 * std::fabs(want_loss));
  auto fd = fd_grad(to_d(m.params()), [&](const std::vector<double>& p) { return ref_loss(c, m.layout(), p, in, tg, B, T); });
  const auto& lay = m.layout();
  auto part = [&](const std::string& what, int64_t off, int64_t n) {
    std::vector<float> a(m.grads().begin() + off, m.grads().begin() + off + n);
    std::vector<double> f(fd.begin() + off, fd.begin() + off + n);
    EXPECT_TRUE(GradNear(what, a, f, 5e-3, 1e-6));
  };
  const int64_t d = c.dim, q = c.q_dim(), kv = c.kv_dim(), h = c.hidden_dim;
  part("token embedding (tied classifier)", lay.tok_embed, c.vocab_size * d);
  for (int l = 0; l < c.n_layers; l++) {
    const auto& L = lay.layers[l];
    const std::string p = "layer " + std::to_string(l) + " ";
    part(p + "attn_norm", L.attn_norm, d);
    part(p + "wq", L.wq, q * d);
    part(p + "wk", L.wk, kv * d);
    part(p + "wv", L.wv, kv * d);
    part(p + "wo", L.wo, d * q);
    part(p + "ffn_norm", L.ffn_norm, d);
    part(p + "w_gate", L.w_gate, h * d);
    part(p + "w_down", L.w_down, d * h);
    part(p + "w_up", L.w_up, h * d);
  }
  part("final_norm", lay.final_norm, d);
}

TEST(TrainModel, RefusesWhatItCannotTrain) {
  ThreadPool pool(1);
  ModelConfig c = tiny_config();
  c.ffn = FfnKind::GELU;
  EXPECT_THROW(qkv::TrainModel(c, &pool), Error);
  c = tiny_config();
  c.norm = NormKind::LayerNorm;
  EXPECT_THROW(qkv::TrainModel(c, &pool), Error);
  c = tiny_config();
  qkv::TrainModel m(c, &pool);
  std::vector<int> bad = {0, 1, 99}, ok = {0, 1, 2};
  EXPECT_THROW(m.forward(bad.data(), ok.data(), 1, 3), Error);
  std::vector<int> long_in(20, 0);
  EXPECT_THROW(m.forward(long_in.data(), long_in.data(), 1, 20), Error);  // > seq_len
}

// ---- export: the checkpoint is the same function for the inference engine ---------------

Tokenizer toy_tokenizer(int vocab) {
  std::string text;
  for (int i = 0; i < 200; i++) text += "in the beginning was the word and the word was with god. ";
  return bpe_tokenizer(train_bpe(text, vocab));
}

TEST(TrainExport, GgufCheckpointGivesTheSameLossThroughTheInferenceEngine) {
  Tokenizer tok = toy_tokenizer(300);
  ModelConfig c = tiny_config(tok.vocab_size());
  ThreadPool pool(2);
  qkv::TrainModel m(c, &pool);
  m.init(3);
  for (auto& p : m.params()) p *= 10.0f;  // a sharper function than the init's
  const int T = 7;
  std::mt19937 g(11);
  std::vector<int> in(T), tg(T);
  for (int t = 0; t < T; t++) in[t] = (int)(g() % c.vocab_size);
  for (int t = 0; t + 1 < T; t++) tg[t] = in[t + 1];
  tg[T - 1] = 5;
  const double loss = m.forward(in.data(), tg.data(), 1, T);
  for (QType type : {QType::F32, QType::F16}) {
    std::vector<uint8_t> bytes = llama2c_to_gguf(m.view(), tok, "test", type);
    auto blob = std::make_shared<VectorBlob>(bytes);
    auto tr = std::make_unique<Transformer>(load_model(blob), 0, std::make_shared<ThreadPool>(1));
    auto etok = embedded_tokenizer(blob);
    ASSERT_TRUE(etok);
    EXPECT_EQ(etok->encode("the word was god", true, false), tok.encode("the word was god", true, false));
    tr->forward(in.data(), T, 0, true);
    double l = 0;
    for (int t = 0; t < T; t++) {
      std::vector<float> row(tr->logits() + (size_t)t * c.vocab_size, tr->logits() + (size_t)(t + 1) * c.vocab_size);
      l += cross_entropy_ref(row.data(), c.vocab_size, tg[t], 1.0f);
    }
    l /= T;
    EXPECT_NEAR(l, loss, type == QType::F32 ? 1e-4 * loss : 2e-2 * loss) << (type == QType::F32 ? "f32" : "f16");
  }
}

// ---- the trainer -------------------------------------------------------------------------

// ctest runs each test in its own process, several at once, and they share TempDir(): the file
// is written under a name of this process's and renamed into place, so no test ever reads one
// that another is in the middle of rewriting (same content either way).
std::string write_temp(const std::string& name, const std::string& content) {
  const std::string path = ::testing::TempDir() + name, tmp = path + "." + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    f << content;
  }
  std::rename(tmp.c_str(), path.c_str());
  return path;
}

// Short sentences in a seeded random order: structure a small model learns in a few dozen steps.
std::string toy_corpus() {
  const char* s[] = {"the cat sat on the mat.", "the dog ran to the park.", "a bird sang in the tree.",
                     "the sun rose over the hill.", "we walked along the river.", "she read a book by the fire."};
  std::mt19937 g(12);
  std::string text;
  for (int i = 0; i < 1500; i++) {
    text += s[g() % 6];
    text += (i % 8 == 7) ? "\n\n" : " ";
  }
  return text;
}

TrainConfig toy_train_config(const std::string& tag) {
  static const std::string data = write_temp("qkv_train_corpus.txt", toy_corpus());
  std::string conf = "dim = 32\nn_layers = 2\nn_heads = 4\nn_kv_heads = 2\nhidden_dim = 64\nseq_len = 32\n"
                     "vocab = 300\nbatch = 4\nsteps = 40\nwarmup = 5\nlr = 1e-2\neval_interval = 20\n"
                     "eval_batches = 2\nseed = 7\nquiet = true\nval_fraction = 0.1\n";
  return parse_train_config(conf, {"data=" + data, "out=" + ::testing::TempDir() + "qkv_train_" + tag + ".gguf"});
}

TEST(Trainer, LossFallsOnAShortText) {
  TrainConfig c = toy_train_config("falls");
  c.threads = 2;
  TrainResult r = run_training(c);
  ASSERT_EQ(r.losses.size(), 40u);
  double last = 0;
  for (int i = 35; i < 40; i++) last += r.losses[i] / 5;
  EXPECT_LT(last, 0.7 * r.losses[0]) << "first " << r.losses[0] << " last five " << last;
  EXPECT_LT(r.val_loss, 0.7 * r.losses[0]);
  // The checkpoint loads through the normal loader and generates text.
  auto blob = map_file(c.out);
  Transformer tr(load_model(blob), 0, std::make_shared<ThreadPool>(1));
  auto tok = embedded_tokenizer(blob);
  ASSERT_TRUE(tok);
  RunOptions o;
  o.prompt = "the cat";
  o.steps = 20;
  o.sampler.temperature = 0.0f;
  std::string out;
  run_generate(tr, *tok, o, [&](const std::string& p) { out += p; });
  EXPECT_EQ(out.rfind("the cat", 0), 0u) << out;
  EXPECT_GT(out.size(), std::string("the cat").size() + 5) << out;
}

TEST(Trainer, SameSeedSameLossesForAnyThreadCount) {
  TrainConfig a = toy_train_config("det_a"), b = toy_train_config("det_b"), c1 = toy_train_config("det_c");
  a.steps = b.steps = c1.steps = 8;
  a.warmup = b.warmup = c1.warmup = 2;
  a.threads = b.threads = 2;
  c1.threads = 1;
  TrainResult ra = run_training(a), rb = run_training(b), rc = run_training(c1);
  EXPECT_EQ(ra.losses, rb.losses);
  EXPECT_EQ(ra.losses, rc.losses);
  TrainConfig d = toy_train_config("det_d");
  d.steps = 8;
  d.warmup = 2;
  d.seed = 8;
  EXPECT_NE(run_training(d).losses, ra.losses);
}

TEST(Trainer, ResumeContinuesExactly) {
  TrainConfig full = toy_train_config("resume_full");
  full.steps = 12;
  full.eval_interval = 0;
  TrainResult rf = run_training(full);
  TrainConfig part = toy_train_config("resume_part");
  part.steps = 12;
  part.eval_interval = 0;
  part.stop_at = 5;
  std::remove(part.state.c_str());
  TrainResult r1 = run_training(part);
  part.stop_at = 0;
  part.resume = true;
  TrainResult r2 = run_training(part);
  EXPECT_EQ(r1.end_step, 5);
  EXPECT_EQ(r2.start_step, 5);
  std::vector<double> joined = r1.losses;
  joined.insert(joined.end(), r2.losses.begin(), r2.losses.end());
  EXPECT_EQ(joined, rf.losses);
  EXPECT_EQ(r2.val_loss, rf.val_loss);
  // A state from another configuration is refused, not silently mixed in.
  TrainConfig other = part;
  other.model.hidden_dim = 48;
  EXPECT_THROW(run_training(other), Error);
}

TEST(Trainer, BadConfigsAreRefusedClearly) {
  auto msg = [](const std::string& text, std::vector<std::string> ov = {}) {
    try {
      parse_train_config(text, ov, "t.conf");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  const std::string ok = "dim=32\nn_layers=1\nn_heads=4\nhidden_dim=64\nseq_len=16\nvocab=300\ndata=x.txt\n";
  EXPECT_EQ(msg(ok), "(accepted)");
  EXPECT_NE(msg(ok + "dimm = 3\n").find("unknown key 'dimm'"), std::string::npos);
  EXPECT_NE(msg(ok + "lr = fast\n").find("t.conf line 8: lr = 'fast': not a number"), std::string::npos);
  EXPECT_NE(msg(ok + "n_heads = 5\n").find("not a multiple of n_heads"), std::string::npos);
  EXPECT_NE(msg(ok + "batch 4\n").find("expected key = value"), std::string::npos);
  EXPECT_NE(msg("n_layers=1\n").find("dim is missing"), std::string::npos);
  EXPECT_NE(msg(ok, {"steps=0"}).find("steps = '0': must be 1.."), std::string::npos);
  EXPECT_EQ(parse_train_config(ok, {"dim=64"}).model.dim, 64);  // overrides win
  TrainConfig c = parse_train_config(ok, {"data=/nonexistent/qkv.txt", "quiet=1"});
  EXPECT_THROW(run_training(c), Error);
}

// The step-wise Trainer fine-tuning a checkpoint: its starting point is the checkpoint's
// weights (the held-out loss equals the one the first run measured on its own parameters),
// states round-trip in memory, and what it cannot train is refused by name.
TEST(Trainer, FineTunesAGgufCheckpointAndRefusesQuantizedOnes) {
  TrainConfig c = toy_train_config("finetune");
  c.steps = 10;
  c.eval_interval = 0;
  c.threads = 2;
  const TrainResult r = run_training(c);  // ends with an evaluation of the final parameters
  std::ifstream f(c.data, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto blob = map_file(c.out);
  LoadedModel base = load_model(blob);
  auto pool = std::make_shared<ThreadPool>(2);
  TrainConfig ft = c;
  ft.steps = 4;
  ft.warmup = 0;
  Trainer t(ft, text, embedded_tokenizer(blob), &base, pool);
  EXPECT_EQ(t.model_config().dim, 32);
  EXPECT_EQ(t.model_config().vocab_size, base.config.vocab_size);
  EXPECT_DOUBLE_EQ(t.evaluate(), r.val_loss);  // f32 checkpoint: the same parameters exactly
  const double first = t.step().loss;
  EXPECT_TRUE(std::isfinite(first));
  const std::vector<uint8_t> state = t.save_state();
  const double second = t.step().loss;
  // A second trainer restored from the state takes the same step.
  Trainer u(ft, text, embedded_tokenizer(blob), &base, pool);
  u.load_state(state.data(), state.size());
  EXPECT_EQ(u.steps_done(), 1);
  EXPECT_EQ(u.step().loss, second);
  // Hostile states: truncated, or of another shape.
  EXPECT_THROW(u.load_state(state.data(), state.size() - 5), Error);
  std::vector<uint8_t> bad = state;
  bad[3] = 'X';
  EXPECT_THROW(u.load_state(bad.data(), bad.size()), Error);
  // Its checkpoint loads through the engine.
  std::vector<uint8_t> g = t.to_gguf("ft", QType::F16);
  EXPECT_EQ(load_model(std::make_shared<VectorBlob>(g)).config.dim, 32);
  // A quantized model is refused, naming the type.
  std::vector<uint8_t> q8 = llama2c_to_gguf(base, *embedded_tokenizer(blob), "q8", QType::Q8_0);
  auto qblob = std::make_shared<VectorBlob>(q8);
  LoadedModel qm = load_model(qblob);
  try {
    Trainer q(ft, text, embedded_tokenizer(qblob), &qm, pool);
    ADD_FAILURE() << "a q8_0 model was accepted for fine-tuning";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("q8_0"), std::string::npos) << e.what();
  }
  // Empty text and impossible options are refused.
  EXPECT_THROW(Trainer(ft, "", embedded_tokenizer(blob), &base, pool), Error);
  TrainConfig bad_cfg = ft;
  bad_cfg.warmup = 100;
  EXPECT_THROW(Trainer(bad_cfg, text, embedded_tokenizer(blob), &base, pool), Error);
}

// `init = MODEL.gguf` in a config fine-tunes through run_training (the CLI's path): it starts
// from the checkpoint's loss, not a fresh model's.
TEST(Trainer, ConfigInitFineTunesACheckpoint) {
  TrainConfig c = toy_train_config("init_base");
  c.steps = 30;
  c.eval_interval = 0;
  c.threads = 2;
  const TrainResult base = run_training(c);
  const std::string data = c.data;
  TrainConfig ft = parse_train_config("steps = 3\nwarmup = 0\nlr = 1e-4\nbatch = 4\nseq_len = 16\nquiet = true\nthreads = 2\n",
                                      {"data=" + data, "init=" + c.out, "out=" + ::testing::TempDir() + "qkv_train_init_ft.gguf"});
  const TrainResult r = run_training(ft);
  ASSERT_EQ(r.losses.size(), 3u);
  EXPECT_LT(r.losses[0], 0.8 * base.losses[0]) << "fresh " << base.losses[0] << ", fine-tune " << r.losses[0];
  EXPECT_EQ(load_model(map_file(ft.out)).config.seq_len, 32);  // the model keeps its context
  try {
    parse_train_config("dim = 32\n", {"data=" + data, "init=" + c.out});
    ADD_FAILURE() << "init with a shape was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("brings its own shape"), std::string::npos) << e.what();
  }
}

TEST(Trainer, ScheduleWarmsUpThenFollowsACosine) {
  TrainConfig c;
  c.lr = 1.0f;
  c.min_lr = 0.1f;
  c.warmup = 10;
  c.steps = 110;
  EXPECT_FLOAT_EQ(lr_at(c, 0), 0.1f);
  EXPECT_FLOAT_EQ(lr_at(c, 9), 1.0f);
  EXPECT_FLOAT_EQ(lr_at(c, 10), 1.0f);
  EXPECT_NEAR(lr_at(c, 60), 0.55f, 1e-6);
  EXPECT_NEAR(lr_at(c, 110), 0.1f, 1e-6);
}

// ---- BPE tokenizer learning --------------------------------------------------------------

std::string decode_all(const Tokenizer& t, const std::vector<int>& ids) {
  std::string s;
  for (size_t i = 1; i < ids.size(); i++) s += t.decode(ids[i - 1], ids[i]);
  return s;
}

// Valid UTF-8 of any script round-trips, through merged pieces, character pieces and byte
// fallback alike. (U+2581 itself is the space marker and decodes as a space, as in SentencePiece.)
TEST(Bpe, RoundTripsArbitraryUtf8) {
  Tokenizer t = toy_tokenizer(320);
  const std::vector<std::string> texts = {
      "the word was god", "  two  spaces  ", "tabs\tand\nnewlines\r\n", "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80",
      std::string("nul\0byte", 8), "\xFF\xFE invalid bytes", "<0x41> <s> </s> <unk>"};
  for (const auto& s : texts) EXPECT_EQ(decode_all(t, t.encode(s, true, false)), s) << s;
  std::mt19937 g(13);
  auto utf8 = [](uint32_t cp) {
    std::string o;
    if (cp < 0x80) o += (char)cp;
    else if (cp < 0x800) o += (char)(0xC0 | cp >> 6), o += (char)(0x80 | (cp & 63));
    else if (cp < 0x10000) o += (char)(0xE0 | cp >> 12), o += (char)(0x80 | (cp >> 6 & 63)), o += (char)(0x80 | (cp & 63));
    else o += (char)(0xF0 | cp >> 18), o += (char)(0x80 | (cp >> 12 & 63)), o += (char)(0x80 | (cp >> 6 & 63)), o += (char)(0x80 | (cp & 63));
    return o;
  };
  const uint32_t ranges[][2] = {{1, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFD}, {0x10000, 0x10FFFF}};
  for (int k = 0; k < 200; k++) {
    std::string s;
    for (int i = 0; i < 30; i++) {
      const auto& r = ranges[g() % 5];
      uint32_t cp = r[0] + g() % (r[1] - r[0] + 1);
      if (cp == 0x2581) cp = 'x';
      s += g() % 3 == 0 ? std::string("the ") : utf8(cp);
    }
    ASSERT_EQ(decode_all(t, t.encode(s, true, false)), s);
  }
}

TEST(Bpe, LearnedMergesShortenHeldOutTextAndReplayInScoreOrder) {
  const std::string text = toy_corpus();
  const std::string train = text.substr(0, text.size() * 3 / 4), held = text.substr(text.size() * 3 / 4);
  BpeVocab v = train_bpe(train, 400);  // the toy text runs out of repeated pairs before 400
  EXPECT_GT(v.n_merges, 50);
  EXPECT_EQ((int)v.pieces.size(), 259 + v.n_chars + v.n_merges);
  Tokenizer t = bpe_tokenizer(v);
  // Without merges every character (ASCII here: every byte) is a token; with them the held-out
  // text takes far fewer.
  const size_t tokens = t.encode(held, false, false).size();
  EXPECT_LT(tokens, held.size() / 3) << tokens << " tokens for " << held.size() << " characters";
  // Scores: minus the merge rank (later merges lower), every merge piece made of two pieces.
  const int first = 259 + v.n_chars;
  for (int i = first; i < (int)v.pieces.size(); i++) {
    EXPECT_EQ(v.scores[i], -(float)(i - first));
    bool split = false;
    for (size_t cut = 1; cut < v.pieces[i].size() && !split; cut++) {
      auto a = std::find(v.pieces.begin(), v.pieces.end(), v.pieces[i].substr(0, cut));
      auto b = std::find(v.pieces.begin(), v.pieces.end(), v.pieces[i].substr(cut));
      split = a != v.pieces.end() && b != v.pieces.end() && a - v.pieces.begin() < i && b - v.pieces.begin() < i;
    }
    EXPECT_TRUE(split) << v.pieces[i];
  }
  // The most frequent word of the text is one token.
  EXPECT_EQ(t.encode("the", false, false).size(), 1u);
}

TEST(Bpe, FilesLoadBackAsTheSameTokenizer) {
  BpeVocab v = train_bpe(toy_corpus(), 350);
  Tokenizer t = bpe_tokenizer(v);
  const std::string probe = "the dog sang over the river by the fire.";
  auto gg = std::make_shared<VectorBlob>(bpe_to_gguf(v, "tok"));
  Tokenizer from_gguf = load_gguf_tokenizer(GgufFile::parse(gg));
  EXPECT_EQ(from_gguf.encode(probe, true, false), t.encode(probe, true, false));
  std::vector<uint8_t> bin = bpe_to_llama2c(v);
  Tokenizer from_bin = Tokenizer::from_llama2c(bin.data(), bin.size(), (int)v.pieces.size());
  EXPECT_EQ(from_bin.encode(probe, true, false), t.encode(probe, true, false));
}

TEST(Bpe, RefusesImpossibleRequests) {
  EXPECT_THROW(train_bpe("", 300), Error);
  EXPECT_THROW(train_bpe("abc", 259), Error);
  EXPECT_THROW(train_bpe("abc", 70000), Error);
}

}  // namespace
