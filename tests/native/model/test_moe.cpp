// Mixture-of-experts feed-forwards: moe_ffn against a float64 transcription of llama.cpp's
// build_moe_ffn (softmax router, top-k, optional renormalisation, SwiGLU experts, weighted sum),
// unchosen experts never read, and the qwen3moe / olmoe / granitemoe rows loaded from their
// GGUF keys, batched prefill against one-token decode, thread counts, stored types and refusals.
// llama.cpp conformance of the same models: tests/js/wllama.test.mjs (qwen3moe, olmoe, ...).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "common.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "formats/loader.h"
#include "formats/quantize.h"
#include "kernels/quant.h"
#include "model/blocks.h"
#include "model/transformer.h"
#include "test_models.h"

using namespace qkv;

namespace {

std::shared_ptr<const Blob> blob_of(std::vector<uint8_t> v) { return std::make_shared<VectorBlob>(std::move(v)); }

struct MoeCase {
  ModelConfig c;
  std::vector<float> router, gate, up, down;
  LayerWeights L;
  MoeCase(int dim, int hid, int E, int K, bool norm, uint32_t seed) {
    c.dim = dim;
    c.hidden_dim = hid;
    c.n_experts = E;
    c.n_experts_used = K;
    c.expert_norm_topk = norm;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> U(-1.0f, 1.0f);
    auto fill = [&](std::vector<float>& v, size_t n, float a) {
      v.resize(n);
      for (float& x : v) x = a * U(rng);
    };
    fill(router, (size_t)E * dim, 1.5f);
    fill(gate, (size_t)E * hid * dim, 0.4f);
    fill(up, (size_t)E * hid * dim, 0.4f);
    fill(down, (size_t)E * dim * hid, 0.4f);
    L.router = Tensor{QType::F32, router.data(), E, dim};
    L.gate_exps = Tensor{QType::F32, gate.data(), (int64_t)E * hid, dim};
    L.up_exps = Tensor{QType::F32, up.data(), (int64_t)E * hid, dim};
    L.down_exps = Tensor{QType::F32, down.data(), (int64_t)E * dim, hid};
  }
  // The definition in double, token by token.
  std::vector<double> oracle(const std::vector<float>& x, int n) const {
    const int D = c.dim, H = c.hidden_dim, E = c.n_experts, K = c.n_experts_used;
    std::vector<double> out((size_t)n * D, 0.0);
    for (int t = 0; t < n; t++) {
      const float* xt = x.data() + (size_t)t * D;
      std::vector<double> p(E);
      double mx = -INFINITY;
      for (int e = 0; e < E; e++) {
        double s = 0;
        for (int i = 0; i < D; i++) s += (double)router[(size_t)e * D + i] * xt[i];
        p[e] = s;
        mx = std::max(mx, s);
      }
      double z = 0;
      for (double& v : p) z += (v = std::exp(v - mx));
      for (double& v : p) v /= z;
      std::vector<int> idx(E);
      std::iota(idx.begin(), idx.end(), 0);
      std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return p[a] > p[b]; });
      double wsum = 0;
      for (int k = 0; k < K; k++) wsum += p[idx[k]];
      for (int k = 0; k < K; k++) {
        const int e = idx[k];
        const double w = c.expert_norm_topk ? p[e] / wsum : p[e];
        std::vector<double> h(H);
        for (int j = 0; j < H; j++) {
          double g = 0, u = 0;
          for (int i = 0; i < D; i++) {
            g += (double)gate[((size_t)e * H + j) * D + i] * xt[i];
            u += (double)up[((size_t)e * H + j) * D + i] * xt[i];
          }
          h[j] = g / (1 + std::exp(-g)) * u;
        }
        for (int i = 0; i < D; i++) {
          double y = 0;
          for (int j = 0; j < H; j++) y += (double)down[((size_t)e * D + i) * H + j] * h[j];
          out[(size_t)t * D + i] += w * y;
        }
      }
    }
    return out;
  }
};

TEST(Moe, FeedForwardMatchesTheDefinition) {
  struct Shape {
    int dim, hid, E, K;
    bool norm;
    int n;
  };
  for (const Shape& s : {Shape{32, 24, 6, 2, true, 7}, Shape{32, 24, 6, 2, false, 7}, Shape{40, 16, 8, 3, true, 70},
                         Shape{16, 8, 4, 4, false, 1}, Shape{16, 8, 5, 1, true, 9}}) {
    SCOPED_TRACE(::testing::Message() << "dim " << s.dim << " E " << s.E << " K " << s.K << " norm " << s.norm << " n "
                                      << s.n);
    MoeCase m(s.dim, s.hid, s.E, s.K, s.norm, 7 + s.n);
    std::mt19937 rng(s.n);
    std::uniform_real_distribution<float> U(-1.0f, 1.0f);
    std::vector<float> x((size_t)s.n * s.dim);
    for (float& v : x) v = U(rng);
    const std::vector<double> want = m.oracle(x, s.n);
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      ProductInput in;
      MoeScratch scratch;
      std::vector<float> out((size_t)s.n * s.dim, NAN);
      moe_ffn(pool, in, m.c, m.L, x.data(), s.n, out.data(), scratch);
      double worst = 0, scale = 0;
      for (size_t i = 0; i < out.size(); i++) {
        worst = std::max(worst, std::abs(out[i] - want[i]));
        scale = std::max(scale, std::abs(want[i]));
      }
      EXPECT_GT(scale, 0.05);
      EXPECT_LE(worst, 1e-5 * (1 + scale)) << threads << " threads";
    }
  }
}

TEST(Moe, UnchosenExpertsAreNeverRead) {
  // Expert 3's router row scores every input far below the others: its matrices, filled with
  // NaN, must not reach the output (only the chosen experts' products run).
  MoeCase m(24, 16, 5, 2, true, 3);
  std::vector<float> x(4 * 24);
  for (size_t i = 0; i < x.size(); i++) x[i] = 0.1f + 0.01f * (float)(i % 7);  // positive inputs
  for (int i = 0; i < 24; i++) m.router[3 * 24 + i] = -50.0f;
  ThreadPool pool(1);
  ProductInput in;
  MoeScratch scratch;
  std::vector<float> before(x.size()), after(x.size());
  moe_ffn(pool, in, m.c, m.L, x.data(), 4, before.data(), scratch);
  const size_t H = 16, D = 24;
  std::fill(m.gate.begin() + 3 * H * D, m.gate.begin() + 4 * H * D, NAN);
  std::fill(m.up.begin() + 3 * H * D, m.up.begin() + 4 * H * D, NAN);
  std::fill(m.down.begin() + 3 * D * H, m.down.begin() + 4 * D * H, NAN);
  moe_ffn(pool, in, m.c, m.L, x.data(), 4, after.data(), scratch);
  EXPECT_EQ(before, after);
}

class MoeArch : public ::testing::TestWithParam<const char*> {};

TEST_P(MoeArch, LoadsItsKeysAndPrefillMatchesDecode) {
  TestModelSpec s;
  s.arch = GetParam();
  s.merges = 60;
  s.kv_heads = s.arch == "olmoe" ? s.heads : 2;
  const LoadedModel m = load_model(blob_of(write_test_model(s)));
  const ModelConfig& c = m.config;
  EXPECT_EQ(c.n_experts, 8);
  EXPECT_EQ(c.n_experts_used, 2);
  EXPECT_EQ(c.hidden_dim, s.arch == "qwen3moe" ? s.hidden / 2 : s.hidden) << "expert width";
  EXPECT_EQ(c.expert_norm_topk, s.arch != "olmoe");
  EXPECT_NE(c.describe().find("2 of 8 experts"), std::string::npos) << c.describe();
  const LayerWeights& L = m.weights.layers[1];
  EXPECT_TRUE(L.router && L.gate_exps && L.up_exps && L.down_exps && !L.w_up);
  EXPECT_EQ(L.down_exps.rows, 8 * c.dim);
  if (s.arch == "granitemoe") EXPECT_FLOAT_EQ(c.residual_scale, 0.6f);
  if (s.arch == "olmoe") EXPECT_TRUE(c.qk_norm_whole);
  std::vector<int> ids;
  for (int i = 0; i < 40; i++) ids.push_back(3 + (i * 31) % (c.vocab_size - 3));
  auto run = [&](int threads, bool batched) {
    Transformer t(m, 64, std::make_shared<ThreadPool>(threads));
    const float* l = nullptr;
    if (batched) l = t.forward(ids.data(), (int)ids.size(), 0);
    else
      for (size_t i = 0; i < ids.size(); i++) l = t.forward(&ids[i], 1, (int)i);
    return std::vector<float>(l, l + c.vocab_size);
  };
  const std::vector<float> prefill = run(1, true), decode = run(1, false), threaded = run(3, true);
  for (int i = 0; i < c.vocab_size; i++) {
    ASSERT_TRUE(std::isfinite(prefill[i]));
    ASSERT_NEAR(prefill[i], decode[i], 1e-4f * (1 + std::fabs(decode[i])))
        << "batched prefill and one-token decode agree";
    ASSERT_NEAR(prefill[i], threaded[i], 1e-4f * (1 + std::fabs(prefill[i]))) << "thread counts agree";
  }
}

TEST(Moe, RunsFromEveryStoredType) {
  // The router and experts stay in their stored type. F16 products take f32 activations: the
  // same model with those tensors decoded to f32 beforehand gives the same logits. The block
  // types take 8-bit activations, which may change which expert wins (Moe.ExpertsRunInTheirStoredType
  // checks them with a fixed routing); here their prefill and decode must agree.
  TestModelSpec s;
  s.arch = "qwen3moe";
  s.merges = 60;
  s.dim = 256;
  s.hidden = 512;
  const std::vector<uint8_t> f32 = write_test_model(s);
  const std::vector<int> ids = {5, 17, 3, 42, 8, 99, 23};
  for (QType q : {QType::F16, QType::Q8_0, QType::Q4_K}) {
    const LoadedModel mq = load_model(blob_of(quantize_gguf(GgufFile::parse(blob_of(f32)), q).bytes));
    EXPECT_NE(mq.weights.layers[0].up_exps.type, QType::F32);
    LoadedModel mf = mq;
    std::vector<std::vector<float>> keep;
    for (LayerWeights& L : mf.weights.layers)
      for (Tensor* t : {&L.router, &L.gate_exps, &L.up_exps, &L.down_exps}) {
        keep.emplace_back((size_t)t->rows * t->cols);
        for (int64_t r = 0; r < t->rows; r++)
          dequantize_row_simd(t->type, t->row(r), keep.back().data() + r * t->cols, (int)t->cols);
        *t = Tensor{QType::F32, keep.back().data(), t->rows, t->cols};
      }
    Transformer tq(mq, 32, nullptr), tf(mf, 32, nullptr), td(mq, 32, nullptr);
    const float* lq = tq.forward(ids.data(), (int)ids.size(), 0);
    const float* lf = tf.forward(ids.data(), (int)ids.size(), 0);
    const float* ld = nullptr;
    for (size_t i = 0; i < ids.size(); i++) ld = td.forward(&ids[i], 1, (int)i);
    for (int i = 0; i < mq.config.vocab_size; i++) {
      ASSERT_TRUE(std::isfinite(lq[i]));
      ASSERT_NEAR(lq[i], ld[i], 1e-3f * (1 + std::fabs(ld[i]))) << qtype_name(q) << ": prefill and decode agree";
      if (q == QType::F16)
        ASSERT_NEAR(lq[i], lf[i], 1e-4f * (1 + std::fabs(lf[i]))) << "f16 experts as their f32 decoding";
    }
  }
}

TEST(Moe, ExpertsRunInTheirStoredType) {
  // One routing (the f32 router), experts stored as Q8_0 and Q4_K against the same experts
  // decoded to f32: the outputs differ only by the 8-bit activations of the integer products.
  MoeCase m(256, 256, 4, 2, true, 11);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> U(-1.0f, 1.0f);
  const int n = 9;
  std::vector<float> x((size_t)n * 256);
  for (float& v : x) v = U(rng);
  ThreadPool pool(2);
  ProductInput in;
  MoeScratch scratch;
  for (QType q : {QType::Q8_0, QType::Q4_K}) {
    auto quant = q == QType::Q8_0 ? quantize_row_q8_0 : quantize_row_q4_k;
    std::vector<std::vector<uint8_t>> stored;
    std::vector<std::vector<float>> decoded;
    MoeCase d = m;
    LayerWeights Lq = m.L;
    const std::vector<float>* src[3] = {&m.gate, &m.up, &m.down};
    Tensor* tq[3] = {&Lq.gate_exps, &Lq.up_exps, &Lq.down_exps};
    Tensor* tf[3] = {&d.L.gate_exps, &d.L.up_exps, &d.L.down_exps};
    for (int k = 0; k < 3; k++) {
      const int64_t rows = tq[k]->rows, cols = tq[k]->cols;
      const size_t rb = qtype_row_bytes(q, (int)cols);
      stored.emplace_back(rows * rb);
      decoded.emplace_back(rows * cols);
      for (int64_t r = 0; r < rows; r++) {
        quant(src[k]->data() + r * cols, stored.back().data() + r * rb, (int)cols);
        dequantize_row_ref(q, stored.back().data() + r * rb, decoded.back().data() + r * cols, (int)cols);
      }
      *tq[k] = Tensor{q, stored.back().data(), rows, cols};
      *tf[k] = Tensor{QType::F32, decoded.back().data(), rows, cols};
    }
    d.L.router = m.L.router;
    std::vector<float> got((size_t)n * 256), want((size_t)n * 256);
    moe_ffn(pool, in, m.c, Lq, x.data(), n, got.data(), scratch);
    moe_ffn(pool, in, m.c, d.L, x.data(), n, want.data(), scratch);
    double err = 0, scale = 0;
    for (size_t i = 0; i < got.size(); i++) {
      err = std::max(err, (double)std::fabs(got[i] - want[i]));
      scale = std::max(scale, (double)std::fabs(want[i]));
    }
    EXPECT_GT(scale, 0.05);
    EXPECT_LT(err, 0.02 * scale) << qtype_name(q);
  }
}

INSTANTIATE_TEST_SUITE_P(Gguf, MoeArch, ::testing::Values("qwen3moe", "olmoe", "granitemoe"));

// Overwrites the first occurrence of `from` in the file with `to` (same length).
std::vector<uint8_t> patched(std::vector<uint8_t> v, const std::string& from, const std::string& to) {
  auto it = std::search(v.begin(), v.end(), from.begin(), from.end());
  EXPECT_NE(it, v.end()) << from;
  if (it != v.end()) std::copy(to.begin(), to.end(), it);
  return v;
}

void expect_load_error(std::vector<uint8_t> bytes, ErrorCode code, const std::string& needle) {
  try {
    load_model(blob_of(std::move(bytes)));
    ADD_FAILURE() << "loaded; expected an error naming '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(BadInputGguf, MixtureOfExpertsKeysAndTensorsAreChecked) {
  TestModelSpec s;
  s.arch = "qwen3moe";
  s.merges = 20;
  const std::vector<uint8_t> ok = write_test_model(s);
  expect_load_error(patched(ok, "qwen3moe.expert_count", "qwen3moe.expert_counx"), ErrorCode::BadModel,
                    "key qwen3moe.expert_count is missing");
  expect_load_error(patched(ok, "qwen3moe.expert_used_count", "qwen3moe.expert_used_counx"), ErrorCode::BadModel,
                    "key qwen3moe.expert_used_count is missing");
  expect_load_error(patched(ok, "blk.1.ffn_up_exps.weight", "blk.1.ffn_up_exps.weighx"), ErrorCode::BadModel,
                    "blk.1.ffn_up_exps.weight is missing");
  expect_load_error(patched(ok, "blk.0.ffn_gate_inp.weight", "blk.0.ffn_gate_inp.weighx"), ErrorCode::BadModel,
                    "blk.0.ffn_gate_inp.weight is missing");
  s.experts_used = 9;
  expect_load_error(write_test_model(s), ErrorCode::BadModel, "qwen3moe.expert_used_count = 9 (must be 1..8)");
}

}  // namespace
