// Additive and block-sparse attention: the xsimd kernels against their scalar references and
// both against double-precision oracles written from the header contracts; the additive backward
// against central finite differences in double; the sparse kernel against dense attention with
// the pattern's mask; the pattern's properties (own block, global tokens, linear tile count).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention_additive.h"
#include "kernels/attention_backward.h"
#include "kernels/attention_sparse.h"
#include "common.h"
#include "kernels/simd.h"

namespace {

using qkv::kLanes;

// Tolerances. Float kernels against double oracles: probabilities to kProbRel * p + kProbAbs
// (a score off by e moves p by about p * 2e; the additive score sums d_att tanh terms, each within
// a few ulp, so e stays below 1e-6 * sum|v| for the sizes here); outputs to
// kOutRel * sum_j p_j |x_jd| + kOutAbs (a weighted sum of float terms).
constexpr double kProbRel = 2e-5;
constexpr double kProbAbs = 1e-7;
constexpr double kOutRel = 2e-5;
constexpr double kOutAbs = 1e-6;
// Float backward against double central differences (h = 1e-5, truncation error ~h^2): each
// gradient entry to kGradRel * |fd| + kGradAbs * max|fd| over its tensor (float accumulation).
constexpr double kGradRel = 1e-4;
constexpr double kGradAbs = 2e-5;

std::vector<float> randv(std::mt19937& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

// ---- additive attention ---------------------------------------------------------------------

struct AddCase {
  const char* name;
  int n_q, n_kv, d_q, d_k, d_att, d_v, q_pos0;
  bool causal;
  bool padding;  // mask every third key
  int pad = 0;   // extra floats at the end of each q / k / values / out row
};

struct AddData {
  AddCase c;
  std::vector<float> q, k, values, w_q, w_k, v;
  std::vector<uint8_t> valid;
  AddData(const AddCase& c_, uint32_t seed) : c(c_) {
    std::mt19937 rng(seed);
    q = randv(rng, (size_t)c.n_q * (c.d_q + c.pad));
    k = randv(rng, (size_t)c.n_kv * (c.d_k + c.pad));
    values = randv(rng, (size_t)c.n_kv * (c.d_v + c.pad));
    w_q = randv(rng, (size_t)c.d_att * c.d_q, 1.0f / std::sqrt((float)c.d_q));
    w_k = randv(rng, (size_t)c.d_att * c.d_k, 1.0f / std::sqrt((float)c.d_k));
    v = randv(rng, c.d_att, 2.0f / std::sqrt((float)c.d_att));
    valid.assign(c.n_kv, 1);
    if (c.padding)
      for (int j = 0; j < c.n_kv; j += 3) valid[j] = 0;
  }
  qkv::AdditiveAttentionArgs args(float* out, float* probs) const {
    qkv::AdditiveAttentionArgs a;
    a.n_q = c.n_q, a.n_kv = c.n_kv, a.d_q = c.d_q, a.d_k = c.d_k, a.d_att = c.d_att, a.d_v = c.d_v;
    a.q = q.data(), a.q_stride = c.d_q + c.pad;
    a.k = k.data(), a.k_stride = c.d_k + c.pad;
    a.values = values.data(), a.values_stride = c.d_v + c.pad;
    a.w_q = w_q.data(), a.w_k = w_k.data(), a.v = v.data();
    a.out = out, a.out_stride = c.d_v + c.pad;
    a.q_pos0 = c.q_pos0, a.causal = c.causal;
    a.key_valid = c.padding ? valid.data() : nullptr;
    a.probs = probs;
    return a;
  }
  bool visible(int i, int j) const { return !(c.causal && j > c.q_pos0 + i) && valid[j]; }
};

// The definition in double, on (possibly perturbed) double copies of the parameters.
struct AddParams {
  std::vector<double> q, k, values, w_q, w_k, v;
};
AddParams to_double(const AddData& d) {
  auto cv = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
  return {cv(d.q), cv(d.k), cv(d.values), cv(d.w_q), cv(d.w_k), cv(d.v)};
}
void additive_oracle(const AddData& d, const AddParams& P, std::vector<double>& out, std::vector<double>& probs) {
  const AddCase& c = d.c;
  const int qs = c.d_q + c.pad, ks = c.d_k + c.pad, vs = c.d_v + c.pad;
  out.assign((size_t)c.n_q * c.d_v, 0.0);
  probs.assign((size_t)c.n_q * c.n_kv, 0.0);
  for (int i = 0; i < c.n_q; i++) {
    std::vector<double> s(c.n_kv, -INFINITY);
    double mx = -INFINITY;
    for (int j = 0; j < c.n_kv; j++) {
      if (!d.visible(i, j)) continue;
      double sc = 0.0;
      for (int t = 0; t < c.d_att; t++) {
        double u = 0.0;
        for (int x = 0; x < c.d_q; x++) u += P.w_q[(size_t)t * c.d_q + x] * P.q[(size_t)i * qs + x];
        for (int x = 0; x < c.d_k; x++) u += P.w_k[(size_t)t * c.d_k + x] * P.k[(size_t)j * ks + x];
        sc += P.v[t] * std::tanh(u);
      }
      s[j] = sc;
      mx = std::max(mx, sc);
    }
    double sum = 0.0;
    for (int j = 0; j < c.n_kv; j++) sum += s[j] == -INFINITY ? 0.0 : std::exp(s[j] - mx);
    for (int j = 0; j < c.n_kv; j++) {
      const double p = s[j] == -INFINITY ? 0.0 : std::exp(s[j] - mx) / sum;
      probs[(size_t)i * c.n_kv + j] = p;
      for (int e = 0; e < c.d_v; e++) out[(size_t)i * c.d_v + e] += p * P.values[(size_t)j * vs + e];
    }
  }
}

std::vector<AddCase> add_cases() {
  const int L = kLanes;
  return {
      {"one", 1, 1, 1, 1, 1, 1, 0, false, false},
      {"cross_odd", 7, 11, 5, 3, L + 1, 9, 0, false, false},
      {"cross_lanes", 3, 5, L, L - 1, L, L + 3, 0, false, false, 2},
      {"cross_padding", 6, 13, 4, 6, 2 * L + 3, 5, 0, false, true, 1},
      {"self_causal", 9, 9, 8, 8, 17, 8, 0, true, false},
      {"self_causal_continue", 5, 12, 6, 6, L - 1, 7, 7, true, true, 3},
      {"all_masked_first", 4, 6, 3, 3, 3, 3, 0, true, true},  // query 0 sees only key 0, which is padding
      {"longer", 33, 67, 16, 16, 32, 16, 0, false, false},
  };
}

class AttentionKindsAdditive : public ::testing::TestWithParam<AddCase> {};

TEST_P(AttentionKindsAdditive, ForwardMatchesDefinition) {
  const AddCase c = GetParam();
  const AddData d(c, 1234);
  std::vector<double> out_o, probs_o;
  additive_oracle(d, to_double(d), out_o, probs_o);
  const int os = c.d_v + c.pad;
  for (int simd = 0; simd < 2; simd++) {
    SCOPED_TRACE(simd ? "attention_additive_simd" : "attention_additive_ref");
    std::vector<float> out((size_t)c.n_q * os, -7.0f), probs((size_t)c.n_q * c.n_kv, -7.0f);
    const auto a = d.args(out.data(), probs.data());
    simd ? qkv::attention_additive_simd(a) : qkv::attention_additive_ref(a);
    for (int i = 0; i < c.n_q; i++) {
      for (int j = 0; j < c.n_kv; j++) {
        const double p = probs_o[(size_t)i * c.n_kv + j];
        ASSERT_NEAR(probs[(size_t)i * c.n_kv + j], p, kProbRel * p + kProbAbs) << "i=" << i << " j=" << j;
      }
      for (int e = 0; e < c.d_v; e++) {
        double mag = 0.0;
        for (int j = 0; j < c.n_kv; j++)
          mag += probs_o[(size_t)i * c.n_kv + j] * std::fabs(d.values[(size_t)j * (c.d_v + c.pad) + e]);
        ASSERT_NEAR(out[(size_t)i * os + e], out_o[(size_t)i * c.d_v + e], kOutRel * mag + kOutAbs)
            << "i=" << i << " e=" << e;
      }
      for (int e = c.d_v; e < os; e++) ASSERT_EQ(out[(size_t)i * os + e], -7.0f) << "padding written";
    }
  }
  if (c.causal && c.padding && c.q_pos0 == 0) {  // the query with no visible key: zero row, zero output
    std::vector<float> out((size_t)c.n_q * os), probs((size_t)c.n_q * c.n_kv);
    qkv::attention_additive_simd(d.args(out.data(), probs.data()));
    for (int e = 0; e < c.d_v; e++) EXPECT_EQ(out[e], 0.0f);
    for (int j = 0; j < c.n_kv; j++) EXPECT_EQ(probs[j], 0.0f);
  }
}

// Loss L = sum_ie R_ie out_ie; every gradient against central differences of the double oracle.
TEST_P(AttentionKindsAdditive, BackwardMatchesFiniteDifferences) {
  const AddCase c = GetParam();
  if ((int64_t)c.n_q * c.n_kv * c.d_att > 20000) return;  // too slow here: BackwardSimdMatchesRef covers it
  AddData d(c, 99);
  std::mt19937 rng(7);
  const int os = c.d_v + c.pad;
  const std::vector<float> r = randv(rng, (size_t)c.n_q * os);
  std::vector<float> out((size_t)c.n_q * os), probs((size_t)c.n_q * c.n_kv);
  qkv::attention_additive_ref(d.args(out.data(), probs.data()));

  const AddParams base = to_double(d);
  auto loss = [&](const AddParams& P) {
    std::vector<double> o, p;
    additive_oracle(d, P, o, p);
    double L = 0.0;
    for (int i = 0; i < c.n_q; i++)
      for (int e = 0; e < c.d_v; e++) L += (double)r[(size_t)i * os + e] * o[(size_t)i * c.d_v + e];
    return L;
  };
  struct Tensor {
    const char* name;
    std::vector<double> AddParams::*field;
    int rows, cols;
    int64_t stride;
  };
  const std::vector<Tensor> tensors = {
      {"q", &AddParams::q, c.n_q, c.d_q, c.d_q + c.pad},
      {"k", &AddParams::k, c.n_kv, c.d_k, c.d_k + c.pad},
      {"values", &AddParams::values, c.n_kv, c.d_v, c.d_v + c.pad},
      {"w_q", &AddParams::w_q, c.d_att, c.d_q, c.d_q},
      {"w_k", &AddParams::w_k, c.d_att, c.d_k, c.d_k},
      {"v", &AddParams::v, 1, c.d_att, c.d_att},
  };
  std::vector<std::vector<double>> fd;
  for (const Tensor& t : tensors) {
    std::vector<double> g((size_t)t.rows * t.stride, 0.0);
    for (int x = 0; x < t.rows; x++)
      for (int y = 0; y < t.cols; y++) {
        const size_t at = (size_t)x * t.stride + y;
        const double h = 1e-5;
        AddParams P = base;
        (P.*t.field)[at] = (base.*t.field)[at] + h;
        const double lp = loss(P);
        (P.*t.field)[at] = (base.*t.field)[at] - h;
        g[at] = (lp - loss(P)) / (2 * h);
      }
    fd.push_back(std::move(g));
  }

  for (int simd = 0; simd < 2; simd++) {
    SCOPED_TRACE(simd ? "attention_additive_backward_simd" : "attention_additive_backward_ref");
    const float nanv = std::nanf("");
    std::vector<float> dq(d.q.size(), nanv), dk(d.k.size(), nanv), dvalues(d.values.size(), nanv);
    std::vector<float> dw_q(d.w_q.size(), nanv), dw_k(d.w_k.size(), nanv), dv(d.v.size(), nanv);
    qkv::AdditiveAttentionGrads g;
    g.probs = probs.data(), g.out = out.data(), g.dout = r.data();
    g.dq = dq.data(), g.dk = dk.data(), g.dvalues = dvalues.data();
    g.dw_q = dw_q.data(), g.dw_k = dw_k.data(), g.dv = dv.data();
    const auto a = d.args(nullptr, nullptr);
    simd ? qkv::attention_additive_backward_simd(a, g) : qkv::attention_additive_backward_ref(a, g);
    const std::vector<const std::vector<float>*> got = {&dq, &dk, &dvalues, &dw_q, &dw_k, &dv};
    for (size_t t = 0; t < tensors.size(); t++) {
      double mx = 0.0;
      for (double x : fd[t]) mx = std::max(mx, std::fabs(x));
      for (int x = 0; x < tensors[t].rows; x++)
        for (int y = 0; y < tensors[t].cols; y++) {
          const size_t at = (size_t)x * tensors[t].stride + y;
          ASSERT_NEAR((*got[t])[at], fd[t][at], kGradRel * std::fabs(fd[t][at]) + kGradAbs * mx)
              << "d" << tensors[t].name << "[" << x << "][" << y << "]";
        }
    }
  }
}

// Every case, the large ones included: the xsimd backward against the scalar one (the same
// formulas, summed in another order), to kGradRel * |ref| + kGradAbs * max|ref| per tensor.
TEST_P(AttentionKindsAdditive, BackwardSimdMatchesRef) {
  const AddCase c = GetParam();
  AddData d(c, 3);
  std::mt19937 rng(8);
  const int os = c.d_v + c.pad;
  const std::vector<float> r = randv(rng, (size_t)c.n_q * os);
  std::vector<float> out((size_t)c.n_q * os), probs((size_t)c.n_q * c.n_kv);
  qkv::attention_additive_simd(d.args(out.data(), probs.data()));
  std::vector<std::vector<float>> got[2];
  for (int simd = 0; simd < 2; simd++) {
    auto& t = got[simd];
    t = {std::vector<float>(d.q.size()),   std::vector<float>(d.k.size()),   std::vector<float>(d.values.size()),
         std::vector<float>(d.w_q.size()), std::vector<float>(d.w_k.size()), std::vector<float>(d.v.size())};
    qkv::AdditiveAttentionGrads g;
    g.probs = probs.data(), g.out = out.data(), g.dout = r.data();
    g.dq = t[0].data(), g.dk = t[1].data(), g.dvalues = t[2].data(), g.dw_q = t[3].data(), g.dw_k = t[4].data(),
    g.dv = t[5].data();
    const auto a = d.args(nullptr, nullptr);
    simd ? qkv::attention_additive_backward_simd(a, g) : qkv::attention_additive_backward_ref(a, g);
  }
  const char* names[] = {"dq", "dk", "dvalues", "dw_q", "dw_k", "dv"};
  for (int t = 0; t < 6; t++) {
    double mx = 0.0;
    for (float x : got[0][t]) mx = std::max(mx, (double)std::fabs(x));
    if (c.n_kv > 1) ASSERT_GT(mx, 0.0) << names[t];  // one key: the scores get no gradient
    for (size_t e = 0; e < got[0][t].size(); e++)
      ASSERT_NEAR(got[1][t][e], got[0][t][e], kGradRel * std::fabs(got[0][t][e]) + kGradAbs * mx)
          << names[t] << "[" << e << "]";
  }
}

INSTANTIATE_TEST_SUITE_P(AttentionKinds, AttentionKindsAdditive, ::testing::ValuesIn(add_cases()),
                         [](const ::testing::TestParamInfo<AddCase>& i) { return std::string(i.param.name); });

// ---- block-sparse attention -----------------------------------------------------------------

struct SparseCase {
  const char* name;
  int n_q, n_kv, n_heads, n_kv_heads, head_dim, q_pos0;
  bool causal;
  bool padding;
  qkv::BlockSparsePattern p;
};

qkv::BlockSparsePattern pat(int block, int window, int global, int random, uint64_t seed) {
  qkv::BlockSparsePattern p;
  p.block = block, p.window_blocks = window, p.global_tokens = global, p.random_blocks = random, p.seed = seed;
  return p;
}

std::vector<SparseCase> sparse_cases() {
  const int L = kLanes;
  return {
      {"bidir", 37, 37, 2, 2, 9, 0, false, false, pat(4, 1, 3, 2, 11)},
      {"causal", 37, 37, 4, 2, L + 1, 0, true, false, pat(4, 1, 3, 2, 11)},
      {"causal_continue", 17, 53, 2, 1, 2 * L + 3, 36, true, false, pat(8, 0, 5, 1, 5)},
      {"padding_gqa", 40, 40, 6, 3, 8, 0, false, true, pat(5, 1, 0, 3, 3)},
      {"window_only", 64, 64, 1, 1, 16, 0, true, false, pat(16, 1, 0, 0, 0)},
      {"block1", 13, 13, 2, 2, 3, 0, false, false, pat(1, 2, 1, 2, 9)},
      {"globals_span_blocks", 50, 50, 2, 2, 5, 0, true, false, pat(4, 0, 9, 1, 21)},
      {"long", 300, 300, 2, 1, 32, 0, true, false, pat(16, 1, 16, 2, 42)},
  };
}

class AttentionKindsSparse : public ::testing::TestWithParam<SparseCase> {};

TEST_P(AttentionKindsSparse, MatchesDenseWithMask) {
  const SparseCase c = GetParam();
  std::mt19937 rng(17);
  const int qw = c.n_heads * c.head_dim, kw = c.n_kv_heads * c.head_dim;
  const auto q = randv(rng, (size_t)c.n_q * qw), k = randv(rng, (size_t)c.n_kv * kw),
             v = randv(rng, (size_t)c.n_kv * kw);
  std::vector<uint8_t> valid(c.n_kv, 1);
  if (c.padding)
    for (int j = 1; j < c.n_kv; j += 4) valid[j] = 0;
  const float scale = 1.0f / std::sqrt((float)c.head_dim);
  // The oracle: dense softmax attention in double with the mask from the pattern's definition.
  auto vis = [&](int qpos, int j) {
    return (!c.causal || j <= qpos) && valid[j] && c.p.visible(qpos, j, c.n_kv, c.causal);
  };
  const int group = c.n_heads / c.n_kv_heads;
  std::vector<double> out_o((size_t)c.n_q * qw, 0.0), probs_o((size_t)c.n_heads * c.n_q * c.n_kv, 0.0);
  for (int h = 0; h < c.n_heads; h++)
    for (int i = 0; i < c.n_q; i++) {
      std::vector<double> s(c.n_kv, -INFINITY);
      double mx = -INFINITY, sum = 0.0;
      for (int j = 0; j < c.n_kv; j++) {
        if (!vis(c.q_pos0 + i, j)) continue;
        double x = 0.0;
        for (int e = 0; e < c.head_dim; e++)
          x += (double)q[(size_t)i * qw + h * c.head_dim + e] * k[(size_t)j * kw + (h / group) * c.head_dim + e];
        s[j] = x * scale;
        mx = std::max(mx, s[j]);
      }
      for (int j = 0; j < c.n_kv; j++) sum += s[j] == -INFINITY ? 0.0 : std::exp(s[j] - mx);
      for (int j = 0; j < c.n_kv; j++) {
        const double p = s[j] == -INFINITY ? 0.0 : std::exp(s[j] - mx) / sum;
        probs_o[((size_t)h * c.n_q + i) * c.n_kv + j] = p;
        for (int e = 0; e < c.head_dim; e++)
          out_o[(size_t)i * qw + h * c.head_dim + e] += p * v[(size_t)j * kw + (h / group) * c.head_dim + e];
      }
    }
  for (int kernel = 0; kernel < 2; kernel++) {
    SCOPED_TRACE(kernel ? "attention_block_sparse" : "attention_block_sparse_ref");
    std::vector<float> out((size_t)c.n_q * qw, -7.0f), probs(probs_o.size(), -7.0f);
    qkv::AttentionArgs a;
    a.n_q = c.n_q, a.n_kv = c.n_kv, a.n_heads = c.n_heads, a.n_kv_heads = c.n_kv_heads, a.head_dim = c.head_dim;
    a.q = q.data(), a.q_stride = qw, a.k = k.data(), a.v = v.data(), a.kv_stride = kw;
    a.out = out.data(), a.out_stride = qw, a.scale = scale, a.q_pos0 = c.q_pos0, a.causal = c.causal;
    a.key_valid = c.padding ? valid.data() : nullptr;
    a.probs = probs.data();
    if (kernel) {
      // Split the heads in two calls: the split must not change anything.
      qkv::attention_block_sparse(a, c.p, 0, c.n_heads / 2);
      qkv::attention_block_sparse(a, c.p, c.n_heads / 2, c.n_heads);
    } else {
      qkv::attention_block_sparse_ref(a, c.p);
    }
    for (int h = 0; h < c.n_heads; h++)
      for (int i = 0; i < c.n_q; i++) {
        double rs = 0.0;
        for (int j = 0; j < c.n_kv; j++) {
          const size_t at = ((size_t)h * c.n_q + i) * c.n_kv + j;
          ASSERT_NEAR(probs[at], probs_o[at], kProbRel * probs_o[at] + kProbAbs)
              << "h=" << h << " i=" << i << " j=" << j;
          rs += probs[at];
        }
        for (int e = 0; e < c.head_dim; e++) {
          double mag = 0.0;
          for (int j = 0; j < c.n_kv; j++)
            mag += probs_o[((size_t)h * c.n_q + i) * c.n_kv + j] *
                   std::fabs(v[(size_t)j * kw + (h / group) * c.head_dim + e]);
          const size_t at = (size_t)i * qw + h * c.head_dim + e;
          ASSERT_NEAR(out[at], out_o[at], kOutRel * mag + kOutAbs) << "h=" << h << " i=" << i << " e=" << e;
        }
      }
  }
}

INSTANTIATE_TEST_SUITE_P(AttentionKinds, AttentionKindsSparse, ::testing::ValuesIn(sparse_cases()),
                         [](const ::testing::TestParamInfo<SparseCase>& i) { return std::string(i.param.name); });

// The sparse backward (probabilities recomputed per tile) against the dense attention_backward_ref
// fed with the probabilities of attention_block_sparse_ref (0 outside the pattern), kv heads
// split over two calls; to kGradRel * |ref| + kGradAbs * max|ref| per tensor.
TEST(AttentionKindsSparsePattern, BackwardMatchesDenseBackwardWithMask) {
  struct Case {
    int n, H, G, hd;
    bool causal;
    qkv::BlockSparsePattern p;
  };
  const int L = kLanes;
  for (const Case& c : {Case{37, 2, 2, 9, false, pat(4, 1, 3, 2, 11)}, Case{37, 4, 2, L + 1, true, pat(4, 1, 3, 2, 11)},
                        Case{50, 2, 1, 5, true, pat(4, 0, 9, 1, 21)}, Case{13, 2, 2, 3, false, pat(1, 2, 1, 2, 9)},
                        Case{130, 2, 2, 2 * L + 3, true, pat(16, 1, 16, 2, 42)}}) {
    SCOPED_TRACE("n " + std::to_string(c.n) + " block " + std::to_string(c.p.block) + (c.causal ? " causal" : ""));
    std::mt19937 rng(c.n);
    const int qw = c.H * c.hd, kw = c.G * c.hd;
    const auto q = randv(rng, (size_t)c.n * qw), k = randv(rng, (size_t)c.n * kw), v = randv(rng, (size_t)c.n * kw);
    const auto dout = randv(rng, (size_t)c.n * qw);
    std::vector<float> out((size_t)c.n * qw), probs((size_t)c.H * c.n * c.n);
    qkv::AttentionArgs f;
    f.n_q = f.n_kv = c.n, f.n_heads = c.H, f.n_kv_heads = c.G, f.head_dim = c.hd;
    f.q = q.data(), f.q_stride = qw, f.k = k.data(), f.v = v.data(), f.kv_stride = kw;
    f.out = out.data(), f.out_stride = qw, f.scale = 1.0f / std::sqrt((float)c.hd), f.causal = c.causal,
    f.probs = probs.data();
    qkv::attention_block_sparse_ref(f, c.p);
    std::vector<float> grads[2][3];
    for (int sparse = 0; sparse < 2; sparse++) {
      auto& g = grads[sparse];
      g[0].assign(q.size(), std::nanf("")), g[1].assign(k.size(), std::nanf("")), g[2].assign(v.size(), std::nanf(""));
      qkv::AttentionBackwardArgs b;
      b.n = c.n, b.n_heads = c.H, b.n_kv_heads = c.G, b.head_dim = c.hd;
      b.q = q.data(), b.q_stride = qw, b.k = k.data(), b.v = v.data(), b.kv_stride = kw;
      b.probs = sparse ? nullptr : probs.data(), b.out = out.data(), b.dout = dout.data(), b.out_stride = qw;
      b.dq = g[0].data(), b.dk = g[1].data(), b.dv = g[2].data(), b.scale = f.scale, b.causal = c.causal;
      if (sparse) {
        qkv::attention_block_sparse_backward(b, c.p, 0, c.G / 2);
        qkv::attention_block_sparse_backward(b, c.p, c.G / 2, c.G);
      } else {
        qkv::attention_backward_ref(b);
      }
    }
    const char* names[] = {"dq", "dk", "dv"};
    for (int t = 0; t < 3; t++) {
      double mx = 0.0;
      for (float x : grads[0][t]) mx = std::max(mx, (double)std::fabs(x));
      ASSERT_GT(mx, 0.0) << names[t];
      for (size_t e = 0; e < grads[0][t].size(); e++)
        ASSERT_NEAR(grads[1][t][e], grads[0][t][e], kGradRel * std::fabs(grads[0][t][e]) + kGradAbs * mx)
            << names[t] << "[" << e << "]";
    }
  }
}

TEST(AttentionKindsSparsePattern, BadPatternIsBadArgument) {
  std::vector<float> x(16, 0.5f), out(16);
  qkv::AttentionArgs a;
  a.n_q = a.n_kv = 16, a.n_heads = a.n_kv_heads = 1, a.head_dim = 1;
  a.q = x.data(), a.q_stride = 1, a.k = x.data(), a.v = x.data(), a.kv_stride = 1, a.out = out.data(), a.out_stride = 1;
  const std::pair<qkv::BlockSparsePattern, const char*> bad[] = {{pat(0, 1, 0, 0, 0), "block"},
                                                                 {pat(-4, 1, 0, 0, 0), "block"},
                                                                 {pat(4, -1, 0, 0, 0), "window_blocks"},
                                                                 {pat(4, 1, -2, 0, 0), "global_tokens"},
                                                                 {pat(4, 1, 0, -3, 0), "random_blocks"}};
  for (const auto& [p, field] : bad) {
    for (int kernel = 0; kernel < 2; kernel++) {
      try {
        kernel ? (void)qkv::attention_block_sparse(a, p, 0, 1) : qkv::attention_block_sparse_ref(a, p);
        ADD_FAILURE() << "no error for bad " << field;
      } catch (const qkv::Error& e) {
        EXPECT_EQ(e.code(), qkv::ErrorCode::BadArgument);
        EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
      }
    }
  }
}

// A pattern whose window covers every block is dense attention: the sparse kernel must agree
// with attention_ref (the engine's dense reference) on the same arguments.
TEST(AttentionKindsSparsePattern, FullWindowIsDenseAttention) {
  std::mt19937 rng(5);
  const int n = 45, H = 2, hd = 12;
  const auto q = randv(rng, (size_t)n * H * hd), k = randv(rng, (size_t)n * H * hd), v = randv(rng, (size_t)n * H * hd);
  for (bool causal : {false, true}) {
    std::vector<float> o_dense((size_t)n * H * hd), o_sparse(o_dense.size()), p_dense((size_t)H * n * n),
        p_sparse(p_dense.size());
    qkv::AttentionArgs a;
    a.n_q = a.n_kv = n, a.n_heads = a.n_kv_heads = H, a.head_dim = hd;
    a.q = q.data(), a.q_stride = H * hd, a.k = k.data(), a.v = v.data(), a.kv_stride = H * hd;
    a.out_stride = H * hd, a.scale = 0.3f, a.causal = causal;
    a.out = o_dense.data(), a.probs = p_dense.data();
    qkv::attention_ref(a);
    a.out = o_sparse.data(), a.probs = p_sparse.data();
    qkv::attention_block_sparse(a, pat(8, 100, 0, 0, 0), 0, H);
    for (size_t t = 0; t < p_dense.size(); t++) ASSERT_NEAR(p_sparse[t], p_dense[t], kProbRel * p_dense[t] + kProbAbs);
    for (size_t t = 0; t < o_dense.size(); t++) ASSERT_NEAR(o_sparse[t], o_dense[t], kOutRel * 4 + kOutAbs);
  }
}

// The blocks listed for a query block are exactly the ones its queries see (bidirectional), with
// `whole` false exactly where only the global queries see all of the block and the others its
// global keys.
TEST(AttentionKindsSparsePattern, KeyBlocksMatchDefinition) {
  for (const auto& p : {pat(4, 1, 3, 2, 11), pat(5, 0, 12, 3, 1), pat(1, 2, 1, 2, 9), pat(8, 2, 0, 4, 77)}) {
    for (int n : {1, 7, 40, 101}) {
      std::vector<qkv::SparseKeyBlock> kb;
      const int nb = (n + p.block - 1) / p.block;
      for (int qb = 0; qb < nb; qb++) {
        p.key_blocks(qb, n, false, kb);
        for (int qpos = qb * p.block; qpos < std::min(n, (qb + 1) * p.block); qpos++)
          for (int j = 0; j < n; j++) {
            auto it = std::find_if(kb.begin(), kb.end(),
                                   [&](const qkv::SparseKeyBlock& b) { return b.block == j / p.block; });
            const bool listed = it != kb.end() && (it->whole || qpos < p.global_tokens || j < p.global_tokens);
            ASSERT_EQ(p.visible(qpos, j, n, false), listed)
                << "block " << p.block << " n " << n << " qpos " << qpos << " j " << j;
          }
        for (size_t t = 1; t < kb.size(); t++) ASSERT_LT(kb[t - 1].block, kb[t].block);
      }
    }
  }
}

TEST(AttentionKindsSparsePattern, OwnBlockGlobalsAndRandomBlocks) {
  const auto p = pat(4, 1, 6, 3, 123);
  const int n = 97, nb = (n + 3) / 4;
  for (bool causal : {false, true}) {
    std::vector<qkv::SparseKeyBlock> kb;
    std::vector<int> rnd, rnd2;
    for (int qb = 0; qb < nb; qb++) {
      p.key_blocks(qb, n, causal, kb);
      EXPECT_TRUE(
          std::any_of(kb.begin(), kb.end(), [&](const qkv::SparseKeyBlock& b) { return b.block == qb && b.whole; }))
          << "query block " << qb << " must attend its own block";
      p.random_of(qb, n, causal, rnd);
      p.random_of(qb, n, causal, rnd2);
      EXPECT_EQ(rnd, rnd2) << "random blocks depend on the seed and the block only";
      const int hi = causal ? qb : nb - 1, lo = p.global_tokens / p.block;
      const int candidates = std::max(0, hi - lo + 1) - std::max(0, std::min(hi, qb + 1) - std::max(lo, qb - 1) + 1);
      EXPECT_EQ((int)rnd.size(), std::min(p.random_blocks, std::max(0, candidates))) << "qb " << qb;
      for (size_t t = 0; t < rnd.size(); t++) {
        EXPECT_TRUE(rnd[t] >= lo && rnd[t] <= hi && std::abs(rnd[t] - qb) > p.window_blocks) << rnd[t];
        if (t) EXPECT_LT(rnd[t - 1], rnd[t]);
      }
    }
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        if (causal && j > i) {
          EXPECT_FALSE(p.visible(i, j, n, causal));
          continue;
        }
        if (i < p.global_tokens || j < p.global_tokens) EXPECT_TRUE(p.visible(i, j, n, causal)) << i << " " << j;
        if (i / p.block == j / p.block) EXPECT_TRUE(p.visible(i, j, n, causal)) << i << " " << j;
      }
  }
  // Another seed draws other blocks somewhere.
  auto p2 = p;
  p2.seed = 124;
  std::vector<int> r1, r2;
  bool differ = false;
  for (int qb = 0; qb < nb && !differ; qb++) {
    p.random_of(qb, n, false, r1);
    p2.random_of(qb, n, false, r2);
    differ = r1 != r2;
  }
  EXPECT_TRUE(differ);
}

// For a fixed pattern the tiles visited grow linearly with length: at most
// (2 window + 1 + random + global key blocks) per query block, plus every block for the query
// blocks holding global tokens. The kernel visits exactly the listed tiles.
TEST(AttentionKindsSparsePattern, TileCountLinearInLength) {
  const auto p = pat(64, 1, 64, 2, 3);
  const int gblocks = 1, per_block = 2 * p.window_blocks + 1 + p.random_blocks + gblocks;
  std::vector<int64_t> totals;
  for (int n : {2048, 4096, 8192, 16384}) {
    const int nb = n / p.block;
    int64_t total = 0;
    std::vector<qkv::SparseKeyBlock> kb;
    for (int qb = 0; qb < nb; qb++) {
      p.key_blocks(qb, n, true, kb);
      total += (int64_t)kb.size();
    }
    EXPECT_LE(total, (int64_t)nb * per_block + (int64_t)gblocks * nb) << "n=" << n;
    EXPECT_GE(total, (int64_t)nb * (p.window_blocks + 1 + p.random_blocks) - 16) << "n=" << n;
    totals.push_back(total);
  }
  // Doubling the length at most doubles the count, up to the blocks near the sequence start
  // (the dense causal count would grow fourfold).
  for (size_t t = 1; t < totals.size(); t++) EXPECT_LE(totals[t], 2 * totals[t - 1] + 2 * per_block) << t;

  // The kernel's own count, on a small problem (head_dim 1 keeps it quick).
  const int n = 1024;
  std::vector<float> q(n, 0.1f), k(n, 0.2f), v(n, 1.0f), out(n);
  qkv::AttentionArgs a;
  a.n_q = a.n_kv = n, a.n_heads = a.n_kv_heads = 1, a.head_dim = 1;
  a.q = q.data(), a.q_stride = 1, a.k = k.data(), a.v = v.data(), a.kv_stride = 1, a.out = out.data(), a.out_stride = 1;
  a.causal = true;
  int64_t listed = 0;
  std::vector<qkv::SparseKeyBlock> kb;
  for (int qb = 0; qb < n / p.block; qb++) {
    p.key_blocks(qb, n, true, kb);
    listed += (int64_t)kb.size();
  }
  EXPECT_EQ(qkv::attention_block_sparse(a, p, 0, 1), listed);
  for (float x : out) ASSERT_NEAR(x, 1.0f, 1e-6);  // every value is 1: any convex mix is 1
}

}  // namespace
