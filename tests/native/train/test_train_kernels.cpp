// Training kernels: every backward kernel against float64 central differences of its forward and
// its SIMD form against the scalar reference (matmul, norms, activations, SwiGLU, RoPE, attention,
// cross-entropy, AdamW).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common.h"
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
#include "threadpool.h"
#include "train/model.h"
#include "grad_checks.h"

namespace {

using namespace qkv;
using namespace qkv_test;

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
      (simd ? layernorm_backward_simd : layernorm_backward_ref)(dx.data(), dw.data(), db.data(), R.data(), x.data(),
                                                                w.data(), n, eps);
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
  for (auto [H, KVH, hd, n] :
       std::vector<std::tuple<int, int, int, int>>{{2, 2, 4, 5}, {4, 2, kLanes + 2, 6}, {3, 1, 3, 4}}) {
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

}  // namespace
