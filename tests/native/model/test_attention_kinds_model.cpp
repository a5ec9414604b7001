// Additive and block-sparse attention layers in a decoder (docs/attention-kinds.md): a llama test
// model with one layer of each kind against a float64 forward written from the definitions
// (sparse: dense attention under the pattern's mask), the KV-cache path, the captured
// probabilities, and the GGUF keys and tensors refused when wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "cli/inspect.h"
#include "common.h"
#include "formats/loader.h"
#include "model/transformer.h"
#include "test_models.h"

using namespace qkv;

namespace {

using Vec = std::vector<double>;

std::shared_ptr<const Blob> blob_of(std::vector<uint8_t> v) { return std::make_shared<VectorBlob>(std::move(v)); }

TestModelSpec kinds_spec() {
  TestModelSpec s;
  s.arch = "llama";
  s.layers = 3;
  s.layer_kinds = {"block_sparse", "additive", "softmax"};
  return s;
}

// Row-major (rows, cols) f32 matrix times x.
Vec matvec(const float* w, int64_t rows, int64_t cols, const Vec& x) {
  Vec y(rows, 0.0);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) y[r] += (double)w[r * cols + c] * x[c];
  return y;
}

Vec rmsnorm(const Vec& x, const float* w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double r = 1.0 / std::sqrt(ss / x.size() + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); i++) y[i] = x[i] * r * w[i];
  return y;
}

// The llama forward (RMSNorm, adjacent-pair RoPE, SwiGLU, tied classifier) in double, every
// attention kind from its definition; logits of every position.
std::vector<Vec> reference_logits(const LoadedModel& m, const std::vector<int>& toks) {
  const ModelConfig& c = m.config;
  const ModelWeights& W = m.weights;
  const int n = (int)toks.size(), D = c.dim, hd = c.head_dim, H = c.n_heads, group = H / c.n_kv_heads;
  std::vector<Vec> x(n);
  for (int t = 0; t < n; t++) {
    const float* e = static_cast<const float*>(W.tok_embed.row(toks[t]));
    x[t].assign(e, e + D);
  }
  auto rope = [&](Vec& v, int pos) {
    for (int h = 0; h < (int)v.size() / hd; h++)
      for (int i = 0; i < hd / 2; i++) {
        const double a = pos * std::pow((double)c.rope_theta, -2.0 * i / hd);
        const double x0 = v[h * hd + 2 * i], x1 = v[h * hd + 2 * i + 1];
        v[h * hd + 2 * i] = x0 * std::cos(a) - x1 * std::sin(a);
        v[h * hd + 2 * i + 1] = x0 * std::sin(a) + x1 * std::cos(a);
      }
  };
  for (int l = 0; l < c.n_layers; l++) {
    const LayerWeights& L = W.layers[l];
    const AttnKind kind = c.attn_of(l);
    std::vector<Vec> q(n), k(n), v(n);
    for (int t = 0; t < n; t++) {
      const Vec h = rmsnorm(x[t], L.attn_norm, c.norm_eps);
      q[t] = matvec(L.wq.f32(), c.q_dim(), D, h);
      k[t] = matvec(L.wk.f32(), c.kv_dim(), D, h);
      v[t] = matvec(L.wv.f32(), c.kv_dim(), D, h);
      rope(q[t], t);
      rope(k[t], t);
    }
    for (int t = 0; t < n; t++) {
      Vec att(c.q_dim(), 0.0);
      for (int h = 0; h < H; h++) {
        const int g = h / group;
        Vec s(t + 1, -INFINITY);
        for (int j = 0; j <= t; j++) {
          if (kind == AttnKind::BlockSparse && !c.sparse.visible(t, j, n, true)) continue;
          double sc = 0;
          if (kind == AttnKind::Additive) {
            const int da = c.additive_dim;
            const float *wq = L.additive.wq + (int64_t)h * da * hd, *wk = L.additive.wk + (int64_t)h * da * hd;
            for (int a = 0; a < da; a++) {
              double u = 0;
              for (int i = 0; i < hd; i++) u += wq[a * hd + i] * q[t][h * hd + i] + wk[a * hd + i] * k[j][g * hd + i];
              sc += L.additive.v[h * da + a] * std::tanh(u);
            }
          } else {
            for (int i = 0; i < hd; i++) sc += q[t][h * hd + i] * k[j][g * hd + i];
            sc /= std::sqrt((double)hd);
          }
          s[j] = sc;
        }
        double mx = -INFINITY, z = 0;
        for (double e : s) mx = std::max(mx, e);
        for (double& e : s) z += (e = std::exp(e - mx));
        for (int j = 0; j <= t; j++)
          for (int i = 0; i < hd; i++) att[h * hd + i] += s[j] / z * v[j][g * hd + i];
      }
      const Vec o = matvec(L.wo.f32(), D, c.q_dim(), att);
      for (int i = 0; i < D; i++) x[t][i] += o[i];
      const Vec h = rmsnorm(x[t], L.ffn_norm, c.norm_eps);
      const Vec gt = matvec(L.w_gate.f32(), c.hidden_dim, D, h), up = matvec(L.w_up.f32(), c.hidden_dim, D, h);
      Vec act(c.hidden_dim);
      for (int i = 0; i < c.hidden_dim; i++) act[i] = gt[i] / (1.0 + std::exp(-gt[i])) * up[i];
      const Vec dn = matvec(L.w_down.f32(), D, c.hidden_dim, act);
      for (int i = 0; i < D; i++) x[t][i] += dn[i];
    }
  }
  std::vector<Vec> logits(n);
  for (int t = 0; t < n; t++)
    logits[t] = matvec(W.classifier.f32(), c.vocab_size, D, rmsnorm(x[t], W.final_norm, c.norm_eps));
  return logits;
}

double max_rel_diff(const float* a, const Vec& b) {
  double scale = 0, diff = 0;
  for (size_t i = 0; i < b.size(); i++) {
    scale = std::max(scale, std::fabs(b[i]));
    diff = std::max(diff, std::fabs(a[i] - b[i]));
  }
  return diff / scale;
}

std::vector<int> some_tokens(int n, int vocab) {
  std::vector<int> t(n);
  for (int i = 0; i < n; i++) t[i] = 1 + (i * 37 + 5) % (vocab - 1);
  return t;
}

constexpr double kTol = 1e-4;  // float32 model vs float64 definitions, relative to the largest logit

TEST(AttentionKindsModel, LoadsTheKindsAndTheirParameters) {
  const LoadedModel m = load_model(blob_of(write_test_model(kinds_spec())));
  const ModelConfig& c = m.config;
  ASSERT_EQ(c.layer_attn.size(), 3u);
  EXPECT_EQ(c.attn_of(0), AttnKind::BlockSparse);
  EXPECT_EQ(c.attn_of(1), AttnKind::Additive);
  EXPECT_EQ(c.attn_of(2), AttnKind::Softmax);
  EXPECT_STREQ(attn_kind_name(c.attn_of(0)), "block_sparse");
  EXPECT_EQ(c.additive_dim, 8);
  EXPECT_EQ(c.sparse.block, 4);
  EXPECT_EQ(c.sparse.window_blocks, 1);
  EXPECT_EQ(c.sparse.global_tokens, 2);
  EXPECT_EQ(c.sparse.random_blocks, 1);
  EXPECT_EQ(c.sparse.seed, 7u);
  EXPECT_NE(m.weights.layers[1].additive.wq, nullptr);
  EXPECT_EQ(m.weights.layers[0].additive.wq, nullptr);
}

// `qkv info` (both CLIs) lists the kinds where the file has them.
TEST(AttentionKindsModel, InfoListsTheKinds) {
  const std::string info = model_info_json(blob_of(write_test_model(kinds_spec())), nullptr);
  EXPECT_NE(info.find("\"attentionKinds\": [\"block_sparse\", \"additive\", \"softmax\"]"), std::string::npos) << info;
  TestModelSpec plain = kinds_spec();
  plain.layer_kinds.clear();
  EXPECT_EQ(model_info_json(blob_of(write_test_model(plain)), nullptr).find("attentionKinds"), std::string::npos);
}

// Batched prefill (chunks of 64), then the KV-cache path (a continued prefill and single tokens),
// all against the float64 forward.
TEST(AttentionKindsModel, LogitsMatchTheDefinitions) {
  const LoadedModel m = load_model(blob_of(write_test_model(kinds_spec())));
  const int n = 75, V = m.config.vocab_size;
  const std::vector<int> toks = some_tokens(n, V);
  int masked = 0;
  for (int p = 0; p < n; p++)
    for (int j = 0; j <= p; j++) masked += !m.config.sparse.visible(p, j, n, true);
  ASSERT_GT(masked, n * n / 8) << "the pattern must hide keys at this length";
  const std::vector<Vec> want = reference_logits(m, toks);

  Transformer batched(m, 0, std::make_shared<ThreadPool>(2));
  batched.forward(toks.data(), n, 0, true);
  for (int p = 0; p < n; p++) EXPECT_LE(max_rel_diff(batched.logits() + (size_t)p * V, want[p]), kTol) << "pos " << p;

  Transformer stepwise(m, 0, nullptr);
  stepwise.forward(toks.data(), 30, 0, true);
  for (int p = 0; p < 30; p++) EXPECT_LE(max_rel_diff(stepwise.logits() + (size_t)p * V, want[p]), kTol) << "pos " << p;
  for (int p = 30; p < n; p++) {
    const float* lg = stepwise.forward(&toks[p], 1, p);
    EXPECT_LE(max_rel_diff(lg, want[p]), kTol) << "decode pos " << p;
  }

  // The kinds matter: the same weights with every layer softmax give other logits.
  LoadedModel dense = m;
  dense.config.layer_attn.clear();
  Transformer d(dense, 0, nullptr);
  EXPECT_GT(max_rel_diff(d.forward(toks.data(), n, 0), want[n - 1]), 1e-3);
}

// Captured probabilities: rows are distributions, zero exactly where the sparse pattern hides a
// key, and the logits of a captured run are those of an uncaptured one.
TEST(AttentionKindsModel, CaptureFollowsThePattern) {
  const LoadedModel m = load_model(blob_of(write_test_model(kinds_spec())));
  const ModelConfig& c = m.config;
  const int n = 40, V = c.vocab_size;
  const std::vector<int> toks = some_tokens(n, V);
  Transformer plain(m, 0, nullptr), cap(m, 0, nullptr);
  std::vector<float> a(plain.forward(toks.data(), n, 0), plain.forward(toks.data(), n, 0) + V);
  cap.set_capture_attention(true);
  const float* b = cap.forward(toks.data(), n, 0);
  for (int i = 0; i < V; i++) ASSERT_NEAR(a[i], b[i], 1e-5f * (1 + std::fabs(a[i])));
  const auto& P = cap.attention();
  ASSERT_EQ(P.size(), (size_t)c.n_layers * c.n_heads * n * n);
  for (int l = 0; l < c.n_layers; l++)
    for (int h = 0; h < c.n_heads; h++)
      for (int i = 0; i < n; i++) {
        const float* row = P.data() + (((size_t)l * c.n_heads + h) * n + i) * n;
        double sum = 0;
        for (int j = 0; j < n; j++) {
          sum += row[j];
          if (j > i) ASSERT_EQ(row[j], 0.0f);
          if (l == 0 && !c.sparse.visible(i, j, n, true)) ASSERT_EQ(row[j], 0.0f) << "hidden key " << j << " of " << i;
        }
        ASSERT_NEAR(sum, 1.0, 1e-4) << "layer " << l << " head " << h << " query " << i;
      }
}

std::vector<uint8_t> replaced(std::vector<uint8_t> v, const std::string& from, const std::string& to) {
  EXPECT_EQ(from.size(), to.size());
  auto it = std::search(v.begin(), v.end(), from.begin(), from.end());
  EXPECT_NE(it, v.end()) << from;
  if (it != v.end()) std::copy(to.begin(), to.end(), it);
  return v;
}

void expect_load_error(const std::vector<uint8_t>& bytes, ErrorCode code, const std::string& needle) {
  try {
    load_model(blob_of(bytes));
    ADD_FAILURE() << "loaded; expected an error containing: " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(AttentionKindsModel, BadKindsAndParametersAreRefusedByName) {
  const std::vector<uint8_t> good = write_test_model(kinds_spec());
  expect_load_error(replaced(good, "block_sparse", "block_spars_"), ErrorCode::Unsupported,
                    "llama.attention.layer_kinds[0] = 'block_spars_' is not an attention kind");
  expect_load_error(replaced(good, "attention.additive.length", "attention.additive.lengtx"), ErrorCode::BadModel,
                    "key llama.attention.additive.length is missing");
  expect_load_error(replaced(good, "attention.sparse.block_size", "attention.sparse.block_sizx"), ErrorCode::BadModel,
                    "key llama.attention.sparse.block_size is missing");
  expect_load_error(replaced(good, "blk.1.attn_add_k.weight", "blk.1.attn_add_x.weight"), ErrorCode::BadModel,
                    "tensor blk.1.attn_add_k.weight is missing");
  // Additive parameters under a layer of another kind.
  TestModelSpec s = kinds_spec();
  s.layer_kinds = {"softmax", "additive", "softmax"};
  expect_load_error(replaced(write_test_model(s), "blk.1.attn_add_v", "blk.0.attn_add_v"), ErrorCode::BadModel,
                    "tensor blk.0.attn_add_v.weight belongs to additive attention");
  // A model built in code that names a layer additive without its parameters.
  LoadedModel no_params = load_model(blob_of(write_test_model(kinds_spec())));
  no_params.weights.layers[2].additive = {};
  no_params.config.layer_attn[2] = AttnKind::Additive;
  EXPECT_THROW(Transformer(no_params, 0, nullptr), Error);
  // A width of zero and a zero block size fail the options table's checks.
  s = kinds_spec();
  s.additive_len = 0;
  expect_load_error(write_test_model(s), ErrorCode::BadModel, "additive attention width = 0");
  s = kinds_spec();
  s.sparse_block = 0;
  expect_load_error(write_test_model(s), ErrorCode::BadModel, "sparse block size = 0");
}

}  // namespace
