// Encoders: Transformer::encode (packed texts, bidirectional attention, post- and pre-norm,
// learned / sinusoidal / rotary positions) against a direct per-text computation written here
// from the formulas; embed's pooling and normalisation; the WordPiece tokenizer on a small
// vocabulary with hand-derived ids; and bad input to all of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "common.h"
#include "engine/embed.h"
#include "formats/file.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "formats/quantize.h"
#include "formats/loader.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/wordpiece.h"
#include "test_models.h"

using namespace qkv;

namespace {

std::shared_ptr<const Blob> blob_of(std::vector<uint8_t> v) { return std::make_shared<VectorBlob>(std::move(v)); }

// ---- the reference: one text, every formula spelled out, double accumulation ---------------

using Mat = std::vector<double>;  // (rows, cols) row-major

Mat linear(const Mat& x, int n, const Tensor& w, const float* b) {  // x (n, cols) -> (n, rows)
  const int rows = (int)w.rows, cols = (int)w.cols;
  Mat y((size_t)n * rows);
  for (int t = 0; t < n; t++)
    for (int r = 0; r < rows; r++) {
      double s = b ? b[r] : 0.0;
      const float* wr = w.f32() + (size_t)r * cols;
      for (int k = 0; k < cols; k++) s += wr[k] * x[(size_t)t * cols + k];
      y[(size_t)t * rows + r] = s;
    }
  return y;
}

Mat normed(const ModelConfig& c, const Mat& x, int n, const float* w, const float* b) {
  Mat y(x.size());
  const int D = c.dim;
  for (int t = 0; t < n; t++) {
    const double* v = &x[(size_t)t * D];
    double mean = 0, var = 0;
    if (c.norm == NormKind::LayerNorm) {
      for (int d = 0; d < D; d++) mean += v[d];
      mean /= D;
    }
    for (int d = 0; d < D; d++) var += (v[d] - mean) * (v[d] - mean);
    var /= D;
    for (int d = 0; d < D; d++)
      y[(size_t)t * D + d] = (v[d] - mean) / std::sqrt(var + c.norm_eps) * w[d] + (b ? b[d] : 0.0);
  }
  return y;
}

// RoPE, NeoX halves: pair (i, i + rot/2) rotated by pos * theta^(-2i/rot).
void rope_halves(const ModelConfig& c, double* v, int n_heads, int pos) {
  const int hd = c.head_dim, half = c.rot_dims() / 2;
  for (int h = 0; h < n_heads; h++)
    for (int i = 0; i < half; i++) {
      const double a = pos * std::pow((double)c.rope_theta, -2.0 * i / c.rot_dims());
      double& x0 = v[h * hd + i];
      double& x1 = v[h * hd + i + half];
      const double r0 = x0 * std::cos(a) - x1 * std::sin(a), r1 = x0 * std::sin(a) + x1 * std::cos(a);
      x0 = r0;
      x1 = r1;
    }
}

// Final states of one text, (n, dim).
Mat reference_encode(const LoadedModel& m, const std::vector<int>& ids) {
  const ModelConfig& c = m.config;
  const ModelWeights& W = m.weights;
  const int n = (int)ids.size(), D = c.dim, hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim();
  Mat x((size_t)n * D);
  for (int t = 0; t < n; t++)
    for (int d = 0; d < D; d++) {
      double v = W.tok_embed.f32()[(size_t)ids[t] * D + d];
      if (W.type_embed) v += W.type_embed[d];
      if (c.pos == PosKind::Learned) v += W.pos_embed[(size_t)t * D + d];
      if (c.pos == PosKind::Sinusoidal) {  // PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(...)
        const double a = t / std::pow(10000.0, (double)(d - d % 2) / D);
        v += d % 2 == 0 ? std::sin(a) : std::cos(a);
      }
      x[(size_t)t * D + d] = v;
    }
  if (W.embed_norm) x = normed(c, x, n, W.embed_norm, W.embed_norm_b);
  for (int l = 0; l < c.n_layers; l++) {
    const LayerWeights& L = W.layers[l];
    Mat in = c.post_norm ? x : normed(c, x, n, L.attn_norm, L.attn_norm_b);
    Mat q = linear(in, n, L.wq, L.bq), k = linear(in, n, L.wk, L.bk), v = linear(in, n, L.wv, L.bv);
    if (c.pos == PosKind::RopeHalves)
      for (int t = 0; t < n; t++) {
        rope_halves(c, &q[(size_t)t * qd], c.n_heads, t);
        rope_halves(c, &k[(size_t)t * kvd], c.n_kv_heads, t);
      }
    Mat att((size_t)n * qd, 0.0);
    const int group = c.n_heads / c.n_kv_heads;
    for (int h = 0; h < c.n_heads; h++)
      for (int i = 0; i < n; i++) {
        const int visible = c.causal ? i + 1 : n;
        std::vector<double> s(visible);
        double mx = -1e300, sum = 0;
        for (int j = 0; j < visible; j++) {
          double dot = 0;
          for (int e = 0; e < hd; e++)
            dot += q[(size_t)i * qd + h * hd + e] * k[(size_t)j * kvd + (h / group) * hd + e];
          s[j] = dot / std::sqrt((double)hd);
          mx = std::max(mx, s[j]);
        }
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int j = 0; j < visible; j++)
          for (int e = 0; e < hd; e++)
            att[(size_t)i * qd + h * hd + e] += s[j] / sum * v[(size_t)j * kvd + (h / group) * hd + e];
      }
    Mat o = linear(att, n, L.wo, L.bo);
    for (size_t i = 0; i < x.size(); i++) x[i] += o[i];
    if (c.post_norm) x = normed(c, x, n, L.attn_norm, L.attn_norm_b);
    in = c.post_norm ? x : normed(c, x, n, L.ffn_norm, L.ffn_norm_b);
    Mat up = linear(in, n, L.w_up, L.b_up);
    if (c.ffn == FfnKind::SwiGLU) {
      Mat g = linear(in, n, L.w_gate, nullptr);
      for (size_t i = 0; i < up.size(); i++) up[i] *= g[i] / (1.0 + std::exp(-g[i]));
    } else {
      for (double& u : up)
        u = c.ffn == FfnKind::ReLU ? std::max(u, 0.0)
                                   : 0.5 * u * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (u + 0.044715 * u * u * u)));
    }
    Mat down = linear(up, n, L.w_down, L.b_down);
    for (size_t i = 0; i < x.size(); i++) x[i] += down[i];
    if (c.post_norm) x = normed(c, x, n, L.ffn_norm, L.ffn_norm_b);
  }
  if (W.final_norm) x = normed(c, x, n, W.final_norm, W.final_norm_b);
  return x;
}

// encode() on texts packed together must give each text's reference states.
void expect_matches_reference(const LoadedModel& m, const std::vector<std::vector<int>>& texts, int threads) {
  Transformer t(m, 0, std::make_shared<ThreadPool>(threads));
  std::vector<int> tokens, lens;
  for (const auto& s : texts) {
    tokens.insert(tokens.end(), s.begin(), s.end());
    lens.push_back((int)s.size());
  }
  const float* h = t.encode(tokens.data(), nullptr, lens.data(), (int)lens.size());
  const int D = m.config.dim;
  size_t row = 0;
  double worst = 0;
  for (const auto& s : texts) {
    const Mat ref = reference_encode(m, s);
    for (size_t i = 0; i < ref.size(); i++) {
      worst = std::max(worst, std::fabs(ref[i] - h[row * D + i]));
      ASSERT_NEAR(h[row * D + i], ref[i], 2e-4)
          << m.config.describe() << ": text of " << s.size() << " tokens, element " << i;
    }
    row += s.size();
  }
  ::testing::Test::RecordProperty("max_abs_diff", std::to_string(worst));
}

std::vector<std::vector<int>> random_texts(int vocab, std::initializer_list<int> lens, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int>> out;
  for (int n : lens) {
    std::vector<int> s(n);
    for (int& id : s) id = (int)(rng() % vocab);
    out.push_back(s);
  }
  return out;
}

// A model built in memory from the options table: weights owned here, views in LoadedModel.
struct HandModel {
  std::vector<std::vector<float>> store;
  LoadedModel m;
  std::mt19937 rng{5};
  const float* vec(size_t n, float center, float spread) {
    std::uniform_real_distribution<float> u(center - spread, center + spread);
    store.emplace_back(n);
    for (float& v : store.back()) v = u(rng);
    return store.back().data();
  }
  Tensor mat(int rows, int cols, float gain = 1.0f) {
    Tensor t;
    t.rows = rows;
    t.cols = cols;
    t.data = vec((size_t)rows * cols, 0.0f, gain * 1.7f / std::sqrt((float)cols));
    return t;
  }
  explicit HandModel(ModelConfig c) {
    c.validate();
    m.config = c;
    ModelWeights& w = m.weights;
    w.tok_embed = mat(c.vocab_size, c.dim);
    w.tok_embed.data = vec((size_t)c.vocab_size * c.dim, 0.0f, 0.5f);
    if (c.pos == PosKind::Learned) w.pos_embed = vec((size_t)c.seq_len * c.dim, 0.0f, 0.5f);
    const bool ln = c.norm == NormKind::LayerNorm;
    w.layers.resize(c.n_layers);
    for (LayerWeights& L : w.layers) {
      L.attn_norm = vec(c.dim, 1.0f, 0.2f);
      L.attn_norm_b = ln ? vec(c.dim, 0.0f, 0.1f) : nullptr;
      L.wq = mat(c.q_dim(), c.dim, 2.0f);
      L.wk = mat(c.kv_dim(), c.dim, 2.0f);
      L.wv = mat(c.kv_dim(), c.dim);
      L.bq = vec(c.q_dim(), 0.0f, 0.2f);
      L.wo = mat(c.dim, c.q_dim(), 3.0f);
      L.ffn_norm = vec(c.dim, 1.0f, 0.2f);
      L.ffn_norm_b = ln ? vec(c.dim, 0.0f, 0.1f) : nullptr;
      if (c.ffn == FfnKind::SwiGLU) L.w_gate = mat(c.hidden_dim, c.dim);
      L.w_up = mat(c.hidden_dim, c.dim);
      L.b_up = c.ffn == FfnKind::SwiGLU ? nullptr : vec(c.hidden_dim, 0.0f, 0.2f);
      L.w_down = mat(c.dim, c.hidden_dim, 3.0f);
    }
    if (!c.post_norm) {  // pre-norm stacks end with a norm
      w.final_norm = vec(c.dim, 1.0f, 0.2f);
      w.final_norm_b = ln ? vec(c.dim, 0.0f, 0.1f) : nullptr;
    }
  }
};

ModelConfig encoder_config(bool post_norm, PosKind pos, FfnKind ffn, NormKind norm) {
  ModelConfig c;
  c.arch = "hand";
  c.dim = 48;
  c.hidden_dim = 80;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 12;
  c.vocab_size = 50;
  c.seq_len = 96;
  c.norm = norm;
  c.pos = pos;
  c.ffn = ffn;
  c.causal = false;
  c.post_norm = post_norm;
  c.rope_theta = 1000.0f;
  return c;
}

LoadedModel gguf_encoder(const char* arch, int pooling = 1) {
  TestModelSpec s;
  s.arch = arch;
  s.pooling = pooling;
  s.kv_heads = s.heads;
  s.context = 96;
  return load_model(blob_of(write_test_model(s)));
}

}  // namespace

// ---- encoder forward ------------------------------------------------------------------------

TEST(Encoder, BertGgufMatchesTheDirectComputationPerPackedText) {
  LoadedModel m = gguf_encoder("bert");
  const ModelConfig& c = m.config;
  EXPECT_FALSE(c.causal);
  EXPECT_TRUE(c.post_norm && c.embed_norm);
  EXPECT_EQ(c.n_token_types, 2);
  EXPECT_EQ(c.pooling, PoolKind::Mean);
  EXPECT_NE(c.describe().find("bidirectional encoder, post-norm"), std::string::npos) << c.describe();
  const auto texts = random_texts(c.vocab_size, {7, 1, 70, 13}, 1);  // 70: more than one 64-key tile
  expect_matches_reference(m, texts, 1);
  expect_matches_reference(m, texts, 3);  // (text, head) pairs split over threads
}

TEST(Encoder, NomicBertGgufMatchesTheDirectComputation) {
  LoadedModel m = gguf_encoder("nomic-bert", 2);
  EXPECT_EQ(m.config.pos, PosKind::RopeHalves);
  EXPECT_EQ(m.config.ffn, FfnKind::SwiGLU);
  EXPECT_EQ(m.config.pooling, PoolKind::Cls);
  expect_matches_reference(m, random_texts(m.config.vocab_size, {5, 33, 2}, 2), 2);
}

TEST(Encoder, OptionRowsMatchTheDirectComputation) {
  struct Row {
    bool post;
    PosKind pos;
    FfnKind ffn;
    NormKind norm;
  };
  const Row rows[] = {
      {true, PosKind::Sinusoidal, FfnKind::ReLU, NormKind::LayerNorm},   // the original Transformer encoder
      {false, PosKind::Sinusoidal, FfnKind::ReLU, NormKind::LayerNorm},  // its pre-norm variant
      {false, PosKind::Learned, FfnKind::GELU, NormKind::LayerNorm},
      {true, PosKind::RopeHalves, FfnKind::SwiGLU, NormKind::RMSNorm},
  };
  for (const Row& r : rows) {
    HandModel hm(encoder_config(r.post, r.pos, r.ffn, r.norm));
    expect_matches_reference(hm.m, random_texts(50, {9, 40, 3}, 3), 2);
    if (HasFatalFailure()) return;
  }
  // causal = true: each token sees its own text up to itself (a decoder stack run by encode).
  ModelConfig c = encoder_config(false, PosKind::RopeHalves, FfnKind::SwiGLU, NormKind::RMSNorm);
  c.causal = true;
  HandModel hm(c);
  expect_matches_reference(hm.m, random_texts(50, {9, 40, 3}, 4), 1);
}

TEST(Encoder, TokenTypesSelectTheirRow) {
  LoadedModel m = gguf_encoder("bert");
  Transformer t(m, 0, nullptr);
  std::vector<int> ids{101, 200, 201, 102}, lens{4}, types0(4, 0), types1{0, 0, 1, 1};
  const float* p = t.encode(ids.data(), nullptr, lens.data(), 1);
  const std::vector<float> a(p, p + 4 * m.config.dim);
  const float* b = t.encode(ids.data(), types0.data(), lens.data(), 1);
  for (size_t i = 0; i < a.size(); i++) ASSERT_EQ(a[i], b[i]) << "type 0 is the default";
  b = t.encode(ids.data(), types1.data(), lens.data(), 1);
  double diff = 0;
  for (size_t i = 0; i < a.size(); i++) diff += std::fabs(a[i] - b[i]);
  EXPECT_GT(diff, 1e-3) << "type 1 adds a different row";
  types1[3] = 2;
  EXPECT_THROW(t.encode(ids.data(), types1.data(), lens.data(), 1), Error);
}

// ---- embeddings -----------------------------------------------------------------------------

TEST(Embed, PoolsAndNormalisesTheReferenceStates) {
  LoadedModel m = gguf_encoder("bert");
  const int D = m.config.dim;
  Transformer t(m, 0, std::make_shared<ThreadPool>(2));
  const auto texts = random_texts(m.config.vocab_size, {6, 11, 1, 30}, 9);
  for (PoolKind pool : {PoolKind::Mean, PoolKind::Cls, PoolKind::Last}) {
    for (bool normalize : {true, false}) {
      EmbedOptions o;
      o.pooling = pool;
      o.normalize = normalize;
      o.max_batch_tokens = 40;  // forces several passes
      const std::vector<float> e = embed_ids(t, texts, o);
      ASSERT_EQ(e.size(), texts.size() * D);
      for (size_t i = 0; i < texts.size(); i++) {
        const Mat ref = reference_encode(m, texts[i]);
        const int n = (int)texts[i].size();
        std::vector<double> want(D, 0.0);
        for (int d = 0; d < D; d++) {
          if (pool == PoolKind::Mean) {
            for (int r = 0; r < n; r++) want[d] += ref[(size_t)r * D + d] / n;
          } else {
            want[d] = ref[(size_t)(pool == PoolKind::Cls ? 0 : n - 1) * D + d];
          }
        }
        double norm = 0;
        for (double v : want) norm += v * v;
        for (int d = 0; d < D; d++)
          ASSERT_NEAR(e[i * D + d], normalize ? want[d] / std::sqrt(norm) : want[d], 2e-4)
              << pool_kind_name(pool) << " text " << i << " element " << d;
      }
    }
  }
  EXPECT_EQ(embed_pooling(t, EmbedOptions{}), PoolKind::Mean) << "the model's pooling_type";
}

TEST(Embed, BadInputGetsTypedErrors) {
  LoadedModel m = gguf_encoder("bert");
  Transformer t(m, 0, nullptr);
  auto expect_error = [](auto&& f, ErrorCode code, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one naming '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { embed_ids(t, {}, {}); }, ErrorCode::BadArgument, "at least one text");
  expect_error([&] { embed_ids(t, {{1, 2}, {}}, {}); }, ErrorCode::BadArgument, "text 1 has no tokens");
  expect_error(
      [&] {
        embed_ids(t, {{1}, std::vector<int>(97, 5)}, {});
      },
      ErrorCode::BadArgument, "text 1 is 97 tokens long");
  expect_error([&] { embed_ids(t, {{1, -3}}, {}); }, ErrorCode::BadArgument, "token id -3");
  expect_error([&] { embed_ids(t, {{1, m.config.vocab_size}}, {}); }, ErrorCode::BadArgument, "outside the vocabulary");
  // truncate: the first context - 1 tokens and the last one, the same as those ids given directly.
  std::vector<int> longer(100);
  for (int i = 0; i < 100; i++) longer[i] = 104 + i;
  std::vector<int> kept(longer.begin(), longer.begin() + 95);
  kept.push_back(longer.back());
  EmbedOptions tr;
  tr.truncate = true;
  EXPECT_EQ(embed_ids(t, {{1, 2}, longer}, tr), embed_ids(t, {{1, 2}, kept}, {}));
  expect_error([&] { parse_pooling("max"); }, ErrorCode::BadArgument, "pooling 'max'");
  int tok = 5;
  expect_error([&] { t.forward(&tok, 1, 0); }, ErrorCode::Unsupported, "encoder without a language-model head");
  std::vector<int> lens{0};
  expect_error([&] { t.encode(&tok, nullptr, lens.data(), 1); }, ErrorCode::BadArgument, "has no tokens");
  expect_error([&] { t.encode(&tok, nullptr, lens.data(), 0); }, ErrorCode::BadArgument, "at least one text");
}

TEST(Embed, BadEncoderFilesAreRefusedByName) {
  TestModelSpec s;
  s.arch = "bert";
  s.pooling = 7;
  try {
    load_model(blob_of(write_test_model(s)));
    ADD_FAILURE() << "pooling_type 7 loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::BadModel);
    EXPECT_NE(std::string(e.what()).find("pooling_type = 7"), std::string::npos) << e.what();
  }
  // Random corruption of the header never crashes.
  s.pooling = 1;
  const std::vector<uint8_t> full = write_test_model(s);
  std::mt19937 rng(99);
  for (int it = 0; it < 150; it++) {
    std::vector<uint8_t> b = full;
    for (int f = 0, n = 1 + rng() % 4; f < n; f++) b[rng() % 6000] = (uint8_t)rng();
    try {
      auto bb = blob_of(std::move(b));
      LoadedModel m = load_model(bb);
      auto tok = embedded_tokenizer(bb);
      Transformer t(m, 16, nullptr);
      std::vector<int> ids = tok->encode("the cat, 123 [SEP] caf\xC3\xA9", true, true, true);
      for (int& id : ids) id = ((id % m.config.vocab_size) + m.config.vocab_size) % m.config.vocab_size;
      ids.resize(std::min<size_t>(ids.size(), 16));
      embed_ids(t, {ids}, {});
    } catch (const Error&) {
    }
  }
}

// Rerankers: llama.cpp's pair layout for a WordPiece vocabulary ([CLS] query [SEP] document),
// and the score as the head's formula on the reference [CLS] state: out(tanh(cls x + b)) + b'.
TEST(Rerank, PairsAndScoresMatchTheDirectComputation) {
  for (bool with_out : {true, false}) {
    TestModelSpec s;
    s.arch = "bert";
    s.pooling = 4;
    s.rank_out = with_out;
    s.kv_heads = s.heads;
    s.context = 96;
    auto blob = blob_of(write_test_model(s));
    LoadedModel m = load_model(blob);
    auto tok = embedded_tokenizer(blob);
    ASSERT_EQ(m.config.pooling, PoolKind::Rank);
    const std::vector<int> q = tok->encode("the cat", false, false), d = tok->encode("sat on the mat", false, false);
    std::vector<int> want = {tok->bos_id()};
    want.insert(want.end(), q.begin(), q.end());
    want.push_back(tok->eos_id());
    want.insert(want.end(), d.begin(), d.end());
    EXPECT_EQ(rerank_pair(*tok, "the cat", "sat on the mat"), want);
    EXPECT_EQ(tok->piece(want[0]), "[CLS]");
    EXPECT_EQ(tok->piece(want[q.size() + 1]), "[SEP]");
    EXPECT_EQ(tok->sep_id(), tok->eos_id());
    EXPECT_TRUE(tok->add_sep());
    // A [SEP] written in a text is text, not the separator.
    const std::vector<int> lit = rerank_pair(*tok, "[SEP]", "x");
    EXPECT_EQ(std::count(lit.begin(), lit.end(), tok->eos_id()), 1);

    const std::vector<std::vector<int>> pairs = {want, rerank_pair(*tok, "a", ""),
                                                 rerank_pair(*tok, "caf\xC3\xA9", "dog dog dog")};
    Transformer t(m, 0, nullptr);
    const std::vector<float> got = rerank_ids(t, pairs);
    const ModelWeights::RankHead& h = m.weights.rank_head;
    ASSERT_TRUE(h.cls);
    EXPECT_EQ((bool)h.out, with_out);
    for (size_t i = 0; i < pairs.size(); i++) {
      const Mat states = reference_encode(m, pairs[i]);
      Mat x(states.begin(), states.begin() + m.config.dim);
      x = linear(x, 1, h.cls, h.cls_b);
      for (double& v : x) v = std::tanh(v);
      if (with_out) x = linear(x, 1, h.out, h.out_b);
      EXPECT_NEAR(got[i], x[0], 1e-4 * std::max(1.0, std::fabs(x[0])))
          << "pair " << i << (with_out ? "" : " (no cls.output)");
    }
    // Scores depend on the pair (the comparison above is not of constants).
    EXPECT_GT(std::fabs(got[0] - got[2]), 1e-3);
    EXPECT_THROW(rerank_ids(t, {}), Error);
    std::vector<int> longer(200, want[1]);
    try {
      rerank_ids(t, {want, longer});
      ADD_FAILURE() << "a pair longer than the context was scored";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::BadArgument);
      EXPECT_NE(std::string(e.what()).find("document 1"), std::string::npos) << e.what();
    }
  }
  // Other tokenizers: BOS query EOS SEP document EOS, each where the tokenizer adds it (llama.cpp's
  // layout; XLM-RoBERTa rerankers: <s> q </s></s> d </s>).
  {
    auto tb = map_file(std::string(QKV_SHARED_DIR) + "/models/aidreams-tok512.bin");
    Tokenizer spm = Tokenizer::from_llama2c(tb->data(), tb->size(), 512);
    const std::vector<int> q = spm.encode("the cat", false, false), d = spm.encode("a dog", false, false);
    auto cat = [](std::initializer_list<std::vector<int>> parts) {
      std::vector<int> o;
      for (const auto& p : parts) o.insert(o.end(), p.begin(), p.end());
      return o;
    };
    EXPECT_EQ(rerank_pair(spm, "the cat", "a dog"), cat({{1}, q, d}));  // BOS only (llama2.c)
    spm.set_specials(1, 2, true, true, {2});
    spm.set_separator(2, true);
    EXPECT_EQ(rerank_pair(spm, "the cat", "a dog"), cat({{1}, q, {2, 2}, d, {2}}));
    spm.set_separator(3, false);
    EXPECT_EQ(rerank_pair(spm, "the cat", "a dog"), cat({{1}, q, {2}, d, {2}}));
  }
  // Not a reranker: refused by name; rank pooling without a head: a bad model.
  LoadedModel plain = gguf_encoder("bert");
  Transformer tp(plain, 0, nullptr);
  try {
    rerank_ids(tp, {{101, 5, 102}});
    ADD_FAILURE() << "a mean-pooling encoder reranked";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
  }
  TestModelSpec s;
  s.arch = "bert";
  s.pooling = 4;
  std::vector<uint8_t> bytes = write_test_model(s);
  const std::string name = "cls.weight";  // renamed: the head is gone
  for (size_t i = 0; i + name.size() < bytes.size(); i++)
    if (std::equal(name.begin(), name.end(), bytes.begin() + i)) bytes[i] = 'x';
  const std::string out = "cls.output.weight";
  for (size_t i = 0; i + out.size() < bytes.size(); i++)
    if (std::equal(out.begin(), out.end(), bytes.begin() + i)) bytes[i] = 'x';
  try {
    load_model(blob_of(bytes));
    ADD_FAILURE() << "a reranker without a head loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::BadModel);
    EXPECT_NE(std::string(e.what()).find("classification head"), std::string::npos) << e.what();
  }
}

TEST(Embed, Q8QuantizedBertKeepsItsTablesAndItsVectors) {
  TestModelSpec s;
  s.arch = "bert";
  s.kv_heads = s.heads;
  s.context = 96;
  auto f32 = blob_of(write_test_model(s));
  QuantizeResult q = quantize_gguf(GgufFile::parse(f32), QType::Q8_0);
  LoadedModel mf = load_model(f32), mq = load_model(blob_of(std::move(q.bytes)));
  EXPECT_EQ(mq.weights.layers[0].wq.type, QType::Q8_0);
  ASSERT_TRUE(mq.weights.pos_embed && mq.weights.type_embed) << "position and token-type tables stay F32";
  EXPECT_EQ(mq.weights.pos_embed[5], mf.weights.pos_embed[5]);
  Transformer tf(mf, 0, nullptr), tq(mq, 0, nullptr);
  const auto texts = random_texts(mf.config.vocab_size, {12, 5}, 4);
  const std::vector<float> a = embed_ids(tf, texts, {}), b = embed_ids(tq, texts, {});
  for (size_t i = 0; i < texts.size(); i++) {
    double dot = 0;
    for (int d = 0; d < mf.config.dim; d++) dot += (double)a[i * mf.config.dim + d] * b[i * mf.config.dim + d];
    EXPECT_GT(dot, 0.99) << "text " << i << ": Q8_0 weights change the unit vector little";
  }
}

// ---- WordPiece --------------------------------------------------------------------------------

TEST(WordPiece, NormalisesAndSplitsAsLlamaCpp) {
  EXPECT_EQ(wordpiece_nfd_first(0xE9), (uint32_t)'e');  // e-acute -> e
  EXPECT_EQ(wordpiece_nfd_first(0xD55C), 0x1112u);      // Hangul syllable -> leading jamo
  EXPECT_EQ(wordpiece_lower('Q'), (uint32_t)'q');
  EXPECT_EQ(wordpiece_lower(0x0416), 0x0436u);  // Cyrillic ZHE
  EXPECT_TRUE(wordpiece_is_control(0x200B) && wordpiece_is_control(0x7F) && !wordpiece_is_control('a'));
  EXPECT_TRUE(wordpiece_is_cjk(0x4E16) && !wordpiece_is_cjk(0x3042));  // 世 yes, hiragana a no
  const std::vector<std::string> want{
      "hello", ",", "cafe", "na", "$", "5", "\xE4\xB8\x96", "\xE7\x95\x8C", "x", "\xE3\x81\x82\xE3\x81\x84"};
  EXPECT_EQ(
      wordpiece_words("  HeLLo,Caf\xC3\xA9\tna$5\xE4\xB8\x96\xE7\x95\x8Cx\xE2\x80\x8B \xE3\x81\x82\xE3\x81\x84\n"),
      want);
  EXPECT_TRUE(wordpiece_words(" \t\n ").empty());
}

TEST(WordPiece, LongestPiecesFromTheLeftAndUnknownWords) {
  const std::string M = "\xE2\x96\x81";
  //                               0        1        2        3         4          5           6       7       8       9
  std::vector<std::string> pieces{"[PAD]",     "[UNK]", "[CLS]", "[SEP]", M + "un",
                                  M + "unaff", "able",  "aff",   "ab",    M + "!"};
  std::vector<int> types{3, 2, 3, 3, 1, 1, 1, 1, 1, 1};
  Tokenizer t = Tokenizer::from_wordpiece(pieces, types, 2, 3, 1, true, true);
  EXPECT_TRUE(t.is_wordpiece());
  // "unaffable": the longest start piece (unaff), then "able".
  EXPECT_EQ(t.encode("Unaffable", true, true), (std::vector<int>{2, 5, 6, 3}));
  // "unaffab": unaff + ab; "unx": un, then nothing matches "x": the whole word is [UNK].
  EXPECT_EQ(t.encode("unaffab unx!", false, false), (std::vector<int>{5, 8, 1, 9}));
  // Special tokens in the text when asked.
  EXPECT_EQ(t.encode("un[SEP]un", false, false, true), (std::vector<int>{4, 3, 4}));
  EXPECT_EQ(t.decode(2, 5) + t.decode(5, 6), "unaffable");
  EXPECT_THROW(Tokenizer::from_wordpiece({}, {}, -1, -1, -1, false, false), Error);
}
