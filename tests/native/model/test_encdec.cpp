// The encoder-decoder forward (src/model/encdec.cpp) against a direct float64 implementation
// written here from the papers' formulas: the original Transformer configuration (post-norm
// LayerNorm, ReLU, sinusoidal positions, embeddings shared by encoder, decoder and classifier and
// scaled by sqrt(dim)) and T5's (RMSNorm pre-norm, relative position buckets, gated GELU,
// unscaled scores, untied classifier). The reference recomputes the whole target prefix at every
// step (no cache), so the engine's cached decoding is checked too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "common.h"
#include "engine/encdec_generate.h"
#include "formats/file.h"
#include "formats/gguf_encdec.h"
#include "formats/gguf_writer.h"
#include "formats/loader.h"
#include "model/encdec.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unigram.h"
#include "test_models.h"

using namespace qkv;

namespace {

using Vec = std::vector<double>;

// ---- Random weights, owned here, viewed by the engine --------------------------------------
struct Owned {
  std::vector<std::vector<float>> bufs;
  std::mt19937 rng{7};
  const float* fill(size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    bufs.emplace_back(n);
    for (float& x : bufs.back()) x = d(rng);
    return bufs.back().data();
  }
  Tensor mat(int rows, int cols, float gain = 1.0f) {
    const float a = gain * 1.7f / std::sqrt((float)cols);
    Tensor t;
    t.type = QType::F32;
    t.data = fill((size_t)rows * cols, -a, a);
    t.rows = rows;
    t.cols = cols;
    return t;
  }
  const float* norm_w(int n) { return fill(n, 0.8f, 1.2f); }
  const float* bias(int n) { return fill(n, -0.1f, 0.1f); }
};

struct Spec {
  bool vaswani = true;
  int dim = 32, hidden = 48, heads = 4, kv_heads = 4, enc_layers = 2, dec_layers = 3, vocab = 40, seq_len = 64;
};

EncDecModelData make_model(const Spec& s, Owned& o) {
  EncDecModelData m;
  ModelConfig& c = m.config;
  c.arch = s.vaswani ? "transformer" : "t5";
  c.dim = s.dim;
  c.hidden_dim = s.hidden;
  c.n_layers = s.enc_layers;
  c.n_heads = s.heads;
  c.n_kv_heads = s.kv_heads;
  c.head_dim = s.dim / s.heads;
  c.vocab_size = s.vocab;
  c.seq_len = s.seq_len;
  c.causal = false;
  if (s.vaswani) {
    c.norm = NormKind::LayerNorm;
    c.post_norm = true;
    c.pos = PosKind::Sinusoidal;
    c.ffn = FfnKind::ReLU;
    c.norm_eps = 1e-5f;
    c.embed_scale = std::sqrt((float)s.dim);
  } else {
    c.norm = NormKind::RMSNorm;
    c.pos = PosKind::RelativeBucket;
    c.rel_buckets = 8;        // few buckets and a short max distance: short sequences reach
    c.rel_max_distance = 12;  // the logarithmic and the last buckets
    c.ffn = FfnKind::GeGLU;
    c.norm_eps = 1e-6f;
    c.tied_classifier = false;
    c.attn_scale = 1.0f;
  }
  m.encdec.n_dec_layers = s.dec_layers;
  m.encdec.decoder_start_id = 0;
  const int d = s.dim, q = c.q_dim(), kv = c.kv_dim(), h = s.hidden;
  EncDecWeights& w = m.weights;
  {
    Tensor e;
    e.data = o.fill((size_t)s.vocab * d, -1.0f, 1.0f);
    e.rows = s.vocab;
    e.cols = d;
    w.tok_embed = e;
  }
  auto layer = [&](bool dec, int l) {
    EncDecLayerWeights L;
    const bool b = s.vaswani;
    L.attn_norm = o.norm_w(d);
    if (b) L.attn_norm_b = o.bias(d);
    L.wq = o.mat(q, d, 2.0f);
    L.wk = o.mat(kv, d, 2.0f);
    L.wv = o.mat(kv, d);
    L.wo = o.mat(d, q, 2.0f);
    if (b) L.bq = o.bias(q), L.bk = o.bias(kv), L.bv = o.bias(kv), L.bo = o.bias(d);
    if (!s.vaswani && l < 2)
      L.rel_bias = o.fill((size_t)c.rel_buckets * s.heads, -2.0f, 2.0f);  // layer 1's own; 2+ use layer 0's
    if (dec) {
      L.cross_norm = o.norm_w(d);
      if (b) L.cross_norm_b = o.bias(d);
      L.cq = o.mat(q, d, 2.0f);
      L.ck = o.mat(kv, d, 2.0f);
      L.cv = o.mat(kv, d);
      L.co = o.mat(d, q, 2.0f);
      if (b) L.cbq = o.bias(q), L.cbk = o.bias(kv), L.cbv = o.bias(kv), L.cbo = o.bias(d);
    }
    L.ffn_norm = o.norm_w(d);
    if (b) L.ffn_norm_b = o.bias(d);
    if (!s.vaswani) L.w_gate = o.mat(h, d);
    L.w_up = o.mat(h, d);
    L.w_down = o.mat(d, h, 2.0f);
    if (b) L.b_up = o.bias(h), L.b_down = o.bias(d);
    return L;
  };
  for (int l = 0; l < s.enc_layers; l++) w.enc.push_back(layer(false, l));
  for (int l = 0; l < s.dec_layers; l++) w.dec.push_back(layer(true, l));
  if (!s.vaswani) {
    w.enc_norm = o.norm_w(d);
    w.dec_norm = o.norm_w(d);
    w.classifier = o.mat(s.vocab, d);
  } else {
    w.classifier = w.tok_embed;
  }
  return m;
}

// ---- float64 reference ----------------------------------------------------------------------
struct Ref {
  const EncDecModelData& m;
  const ModelConfig& c = m.config;

  static double at(const float* p, size_t i) { return p ? (double)p[i] : 0.0; }
  // y = W x (+ b): W (rows, cols)
  Vec linear(const Tensor& W, const float* b, const Vec& x) const {
    Vec y(W.rows);
    for (int64_t r = 0; r < W.rows; r++) {
      double s = at(b, r);
      for (int64_t k = 0; k < W.cols; k++) s += (double)W.f32()[r * W.cols + k] * x[k];
      y[r] = s;
    }
    return y;
  }
  Vec normed(const Vec& x, const float* w, const float* b) const {
    const int n = (int)x.size();
    Vec y(n);
    if (c.norm == NormKind::RMSNorm) {
      double ss = 0;
      for (double v : x) ss += v * v;
      const double r = 1.0 / std::sqrt(ss / n + c.norm_eps);
      for (int i = 0; i < n; i++) y[i] = w[i] * x[i] * r;
    } else {
      double mean = 0, var = 0;
      for (double v : x) mean += v;
      mean /= n;
      for (double v : x) var += (v - mean) * (v - mean);
      var /= n;
      const double r = 1.0 / std::sqrt(var + c.norm_eps);
      for (int i = 0; i < n; i++) y[i] = w[i] * (x[i] - mean) * r + at(b, i);
    }
    return y;
  }
  // HF transformers' _relative_position_bucket, in double.
  int bucket(int rel, bool bidirectional) const {
    int nb = c.rel_buckets, out = 0;
    if (bidirectional) {
      nb /= 2;
      if (rel > 0) out += nb;
      rel = std::abs(rel);
    } else {
      rel = rel < 0 ? -rel : 0;
    }
    const int exact = nb / 2;
    if (rel < exact) return out + rel;
    int large =
        exact + (int)(std::log((double)rel / exact) / std::log((double)c.rel_max_distance / exact) * (nb - exact));
    return out + std::min(large, nb - 1);
  }
  // Multi-head attention of queries (rows at positions qpos0..) over keys/values.
  std::vector<Vec> attend(const std::vector<Vec>& Q, const std::vector<Vec>& K, const std::vector<Vec>& V, bool causal,
                          const float* rel, bool bidir) const {
    const int H = c.n_heads, hd = c.head_dim, group = c.n_heads / c.n_kv_heads;
    const double scale = m.config.attn_scale > 0 ? m.config.attn_scale : 1.0 / std::sqrt((double)hd);
    std::vector<Vec> out(Q.size(), Vec(c.q_dim(), 0.0));
    for (size_t i = 0; i < Q.size(); i++)
      for (int h = 0; h < H; h++) {
        const int kh = h / group;
        const size_t nk = causal ? i + 1 : K.size();
        Vec s(nk);
        double mx = -1e300;
        for (size_t j = 0; j < nk; j++) {
          double dot = 0;
          for (int e = 0; e < hd; e++) dot += Q[i][h * hd + e] * K[j][kh * hd + e];
          s[j] = scale * dot + (rel ? rel[bucket((int)j - (int)i, bidir) * H + h] : 0.0);
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double& v : s) sum += (v = std::exp(v - mx));
        for (size_t j = 0; j < nk; j++)
          for (int e = 0; e < hd; e++) out[i][h * hd + e] += s[j] / sum * V[j][kh * hd + e];
      }
    return out;
  }
  Vec embed(int tok, int pos) const {
    Vec x(c.dim);
    for (int i = 0; i < c.dim; i++)
      x[i] = m.weights.tok_embed.f32()[(size_t)tok * c.dim + i] * (double)m.config.embed_scale;
    if (c.pos == PosKind::Sinusoidal)
      for (int i = 0; i < c.dim; i += 2) {
        const double a = pos / std::pow(10000.0, (double)i / c.dim);
        x[i] += std::sin(a);
        if (i + 1 < c.dim) x[i + 1] += std::cos(a);
      }
    return x;
  }
  // x <- x + f(norm(x)) (pre-norm) or norm(x + f(x)) (post-norm), for every row.
  template <class F>
  void sublayer(std::vector<Vec>& X, const float* w, const float* b, F f) const {
    std::vector<Vec> in = X;
    if (!c.post_norm)
      for (Vec& r : in) r = normed(r, w, b);
    std::vector<Vec> out = f(in);
    for (size_t t = 0; t < X.size(); t++) {
      for (int i = 0; i < c.dim; i++) X[t][i] += out[t][i];
      if (c.post_norm) X[t] = normed(X[t], w, b);
    }
  }
  std::vector<Vec> ffn(const EncDecLayerWeights& L, const std::vector<Vec>& in) const {
    std::vector<Vec> out;
    for (const Vec& x : in) {
      Vec u = linear(L.w_up, L.b_up, x);
      if (c.ffn == FfnKind::GeGLU) {
        Vec g = linear(L.w_gate, nullptr, x);
        for (size_t i = 0; i < u.size(); i++) {
          const double gi = g[i];
          u[i] *= 0.5 * gi * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (gi + 0.044715 * gi * gi * gi)));
        }
      } else {
        for (double& v : u) v = std::max(v, 0.0);
      }
      out.push_back(linear(L.w_down, L.b_down, u));
    }
    return out;
  }
  template <class G>
  static std::vector<Vec> map(const std::vector<Vec>& X, G g) {
    std::vector<Vec> o;
    for (const Vec& x : X) o.push_back(g(x));
    return o;
  }
  std::vector<Vec> encoder(const std::vector<int>& src) const {
    std::vector<Vec> X;
    for (size_t t = 0; t < src.size(); t++) X.push_back(embed(src[t], (int)t));
    for (const EncDecLayerWeights& L : m.weights.enc) {
      const float* rel =
          c.pos == PosKind::RelativeBucket ? (L.rel_bias ? L.rel_bias : m.weights.enc[0].rel_bias) : nullptr;
      sublayer(X, L.attn_norm, L.attn_norm_b, [&](const std::vector<Vec>& in) {
        auto Q = map(in, [&](const Vec& x) { return linear(L.wq, L.bq, x); });
        auto K = map(in, [&](const Vec& x) { return linear(L.wk, L.bk, x); });
        auto V = map(in, [&](const Vec& x) { return linear(L.wv, L.bv, x); });
        return map(attend(Q, K, V, false, rel, true), [&](const Vec& a) { return linear(L.wo, L.bo, a); });
      });
      sublayer(X, L.ffn_norm, L.ffn_norm_b, [&](const std::vector<Vec>& in) { return ffn(L, in); });
    }
    if (m.weights.enc_norm)
      for (Vec& r : X) r = normed(r, m.weights.enc_norm, m.weights.enc_norm_b);
    return X;
  }
  // Logits after the last target token, the whole prefix recomputed.
  Vec decoder(const std::vector<Vec>& enc, const std::vector<int>& tgt) const {
    std::vector<Vec> X;
    for (size_t t = 0; t < tgt.size(); t++) X.push_back(embed(tgt[t], (int)t));
    for (const EncDecLayerWeights& L : m.weights.dec) {
      const float* rel =
          c.pos == PosKind::RelativeBucket ? (L.rel_bias ? L.rel_bias : m.weights.dec[0].rel_bias) : nullptr;
      sublayer(X, L.attn_norm, L.attn_norm_b, [&](const std::vector<Vec>& in) {
        auto Q = map(in, [&](const Vec& x) { return linear(L.wq, L.bq, x); });
        auto K = map(in, [&](const Vec& x) { return linear(L.wk, L.bk, x); });
        auto V = map(in, [&](const Vec& x) { return linear(L.wv, L.bv, x); });
        return map(attend(Q, K, V, true, rel, false), [&](const Vec& a) { return linear(L.wo, L.bo, a); });
      });
      sublayer(X, L.cross_norm, L.cross_norm_b, [&](const std::vector<Vec>& in) {
        auto Q = map(in, [&](const Vec& x) { return linear(L.cq, L.cbq, x); });
        auto K = map(enc, [&](const Vec& x) { return linear(L.ck, L.cbk, x); });
        auto V = map(enc, [&](const Vec& x) { return linear(L.cv, L.cbv, x); });
        return map(attend(Q, K, V, false, nullptr, false), [&](const Vec& a) { return linear(L.co, L.cbo, a); });
      });
      sublayer(X, L.ffn_norm, L.ffn_norm_b, [&](const std::vector<Vec>& in) { return ffn(L, in); });
    }
    Vec last = X.back();
    if (m.weights.dec_norm) last = normed(last, m.weights.dec_norm, m.weights.dec_norm_b);
    return linear(m.weights.classifier, nullptr, last);
  }
};

// Greedy decoding in the engine (one token per call after the start token) against the reference's
// logits at every step; tolerance relative to the largest logit.
std::vector<int> check_data_against_reference(const EncDecModelData& data, int threads, const std::vector<int>& src);

void check_against_reference(const Spec& s, int threads) {
  Owned o;
  check_data_against_reference(make_model(s, o), threads, {5, 17, 3, 39, 22, 8, 8, 30, 1, 12, 27, 6, 33, 14});
}

// Returns the reference's greedy target ids (after the start token).
std::vector<int> check_data_against_reference(const EncDecModelData& data, int threads, const std::vector<int>& src) {
  const ModelConfig& c = data.config;
  Ref ref{data};
  EncoderDecoder model(data, 0, std::make_shared<ThreadPool>(threads));
  model.encode(src.data(), (int)src.size());
  const std::vector<Vec> enc = ref.encoder(src);
  std::vector<int> tgt = {0};
  double worst = 0;
  for (int step = 0; step < 16; step++) {
    const float* got = model.decode(&tgt.back(), 1, (int)tgt.size() - 1);
    const Vec want = ref.decoder(enc, tgt);
    double scale = 0, diff = 0;
    for (int v = 0; v < c.vocab_size; v++) {
      scale = std::max(scale, std::fabs(want[v]));
      diff = std::max(diff, std::fabs(want[v] - got[v]));
    }
    worst = std::max(worst, diff / scale);
    if (!(diff < 1e-4 * scale)) {
      ADD_FAILURE() << "step " << step << ": max |logit - ref| = " << diff << ", max |ref| = " << scale;
      return {};
    }
    int best = 0;  // the reference's argmax drives the next step
    for (int v = 1; v < c.vocab_size; v++)
      if (want[v] > want[best]) best = v;
    tgt.push_back(best);
  }
  printf("[encdec %s, %d thread(s)] max |logit - ref| / max |ref| = %.2e over 16 steps\n", c.arch.c_str(), threads,
         worst);
  // The target prefix fed at once (all logits) equals step-by-step decoding.
  model.encode(src.data(), (int)src.size());
  model.decode(tgt.data(), (int)tgt.size(), 0, true);
  const Vec want = ref.decoder(enc, std::vector<int>(tgt.begin(), tgt.begin() + 5));
  const float* row = model.logits() + (size_t)4 * c.vocab_size;
  for (int v = 0; v < c.vocab_size; v++) EXPECT_NEAR(row[v], want[v], 1e-4 * (1 + std::fabs(want[v])));
  return std::vector<int>(tgt.begin() + 1, tgt.end());
}

}  // namespace

TEST(EncDec, VaswaniMatchesFloat64Reference) { check_against_reference(Spec{}, 1); }

TEST(EncDec, T5MatchesFloat64Reference) {
  Spec s;
  s.vaswani = false;
  check_against_reference(s, 1);
  s.kv_heads = 2;  // grouped-query heads through the biased path, threads splitting heads
  s.dim = 64;
  s.hidden = 128;
  check_against_reference(s, 3);
}

// Hand-computed from HF transformers' formula: exact buckets below max_exact, then
// max_exact + floor(log(rel / max_exact) / log(max_distance / max_exact) * (buckets - max_exact)).
TEST(EncDec, RelativePositionBuckets) {
  // Bidirectional, 32 buckets, distance 128: 16 per direction, max_exact 8, keys after the query
  // in buckets 16..31.
  EXPECT_EQ(relative_position_bucket(0, 32, 128, true), 0);
  EXPECT_EQ(relative_position_bucket(-1, 32, 128, true), 1);
  EXPECT_EQ(relative_position_bucket(1, 32, 128, true), 17);
  EXPECT_EQ(relative_position_bucket(-7, 32, 128, true), 7);
  EXPECT_EQ(relative_position_bucket(-8, 32, 128, true), 8);
  EXPECT_EQ(relative_position_bucket(-20, 32, 128, true), 10);  // 8 + floor(2.644)
  EXPECT_EQ(relative_position_bucket(20, 32, 128, true), 26);
  EXPECT_EQ(relative_position_bucket(-200, 32, 128, true), 15);
  EXPECT_EQ(relative_position_bucket(200, 32, 128, true), 31);
  // Causal, 32 buckets: max_exact 16; future keys are bucket 0.
  EXPECT_EQ(relative_position_bucket(3, 32, 128, false), 0);
  EXPECT_EQ(relative_position_bucket(-5, 32, 128, false), 5);
  EXPECT_EQ(relative_position_bucket(-20, 32, 128, false), 17);   // 16 + floor(1.716)
  EXPECT_EQ(relative_position_bucket(-127, 32, 128, false), 31);  // 16 + floor(15.94)
  EXPECT_EQ(relative_position_bucket(-5000, 32, 128, false), 31);
}

TEST(EncDec, BadInputIsRefused) {
  Owned o;
  Spec s;
  s.vaswani = false;
  EncoderDecoder model(make_model(s, o), 0, nullptr);
  int tok = 0;
  try {
    model.decode(&tok, 1, 0);
    FAIL() << "decode without a source";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::BadArgument);
  }
  std::vector<int> src(s.seq_len + 1, 3);
  EXPECT_THROW(model.encode(src.data(), (int)src.size()), Error);
  int bad = s.vocab;
  EXPECT_THROW(model.encode(&bad, 1), Error);
  model.encode(&tok, 1);
  EXPECT_THROW(model.decode(&bad, 1, 0), Error);
  EXPECT_THROW(model.decode(&tok, 1, s.seq_len), Error);
  EncDecModelData d = make_model(s, o);
  d.encdec.decoder_start_id = s.vocab;
  EXPECT_THROW(EncoderDecoder(d, 0, nullptr), Error);
}

// ---- Unigram tokenizer ----------------------------------------------------------------------

namespace {
const std::string kSp = "\xE2\x96\x81";  // U+2581

std::string sp(const std::string& s) {  // ' ' written as U+2581
  std::string o;
  for (char ch : s) o += ch == ' ' ? kSp : std::string(1, ch);
  return o;
}

// Every segmentation of the normalized text into pieces (or, where no piece is exactly the
// code point, <unk> for one code point), the best by the sum of scores in double; consecutive
// unknowns then merged. Exponential: short texts only.
struct Exhaustive {
  const std::vector<std::string>& pieces;
  const std::vector<float>& scores;
  int unk;
  double unk_score;
  double best = -1e300;
  std::vector<int> best_ids, cur;
  void go(const std::string& s, size_t off, double sum) {
    if (off == s.size()) {
      if (sum > best) best = sum, best_ids = cur;
      return;
    }
    const unsigned char b = s[off];
    const size_t cp = std::min<size_t>(b < 0x80    ? 1
                                       : b >= 0xF0 ? 4
                                       : b >= 0xE0 ? 3
                                       : b >= 0xC0 ? 2
                                                   : 1,
                                       s.size() - off);
    bool whole = false;
    for (size_t id = 3; id < pieces.size(); id++) {
      const std::string& p = pieces[id];
      if (s.compare(off, p.size(), p) != 0) continue;
      if (p.size() == cp) whole = true;
      cur.push_back((int)id);
      go(s, off + p.size(), sum + scores[id]);
      cur.pop_back();
    }
    if (!whole) {
      cur.push_back(unk);
      go(s, off + cp, sum + unk_score);
      cur.pop_back();
    }
  }
};
}  // namespace

TEST(Unigram, NormalizesLikeLlamaCpp) {
  const std::vector<std::string> pieces = {"<pad>", "</s>", "<unk>", "a"};
  const std::vector<float> scores = {0, 0, 0, -1};
  const std::vector<int> types = {3, 3, 2, 1};
  // The space prefix goes before the first non-space character; spaces are escaped one by one.
  EXPECT_EQ(Unigram(pieces, scores, types, 2, true, false, {}).normalize("  hello  world "), sp("   hello  world "));
  EXPECT_EQ(Unigram(pieces, scores, types, 2, false, false, {}).normalize(" a b"), sp(" a b"));
  // remove_extra_whitespaces: one U+2581 before each word, none after the last.
  EXPECT_EQ(Unigram(pieces, scores, types, 2, true, true, {}).normalize("  hello \t  world  "),
            sp(" hello") + sp(" \t") + sp(" world"));
  // An invalid byte becomes U+FFFD.
  EXPECT_EQ(Unigram(pieces, scores, types, 2, false, false, {})
                .normalize("a\xFF"
                           "b"),
            "a\xEF\xBF\xBD"
            "b");
}

TEST(Unigram, ViterbiFindsTheBestSegmentation) {
  // Scores chosen so that longest-first is wrong: "▁abc" + "d" loses to "▁ab" + "cd".
  const std::vector<std::string> pieces = {"<pad>", "</s>", "<unk>", kSp,  kSp + "a", kSp + "ab", kSp + "abc", "a",
                                           "b",     "c",    "d",     "cd", "bc",      "abcd",     "\xC3\xA9",  "e"};
  const std::vector<float> scores = {0,     0,     0,     -3.0f, -4.0f, -3.5f, -2.0f, -5.0f,
                                     -5.5f, -5.2f, -6.0f, -1.0f, -2.5f, -9.0f, -4.4f, -3.3f};
  const std::vector<int> types(pieces.size(), 1);
  std::vector<int> t = types;
  t[0] = t[1] = 3;
  t[2] = 2;
  Unigram u(pieces, scores, t, 2, true, false, {});
  std::vector<int> ids;
  u.encode("abcd", ids);
  EXPECT_EQ(ids, (std::vector<int>{5, 11}));  // ▁ab cd: -4.5 beats ▁abc d (-8.0) and ▁ a b c d
  // Unknown code points (no piece covers "x", "日本") become one <unk> per run.
  ids.clear();
  u.encode(
      "ax\xE6\x97\xA5\xE6\x9C\xAC"
      "d \xC3\xA9",
      ids);
  Exhaustive ex{pieces, scores, 2, -9.0 - 10.0};  // min normal score - 10
  ex.go(u.normalize("ax\xE6\x97\xA5\xE6\x9C\xAC"
                    "d \xC3\xA9"),
        0, 0.0);
  std::vector<int> want;
  for (size_t i = 0; i < ex.best_ids.size(); i++)
    if (!(i > 0 && ex.best_ids[i] == 2 && ex.best_ids[i - 1] == 2)) want.push_back(ex.best_ids[i]);
  EXPECT_EQ(ids, want);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 1);
}

TEST(Unigram, MatchesExhaustiveSearchOnRandomVocabularies) {
  std::mt19937 rng(3);
  const char* alphabet[] = {"a", "b", "c", " ", "\xC3\xA9", "d"};
  for (int round = 0; round < 30; round++) {
    std::vector<std::string> pieces = {"<pad>", "</s>", "<unk>"};
    std::vector<float> scores = {0, 0, 0};
    std::vector<int> types = {3, 3, 2};
    std::uniform_int_distribution<int> len(1, 3), ch(0, 5);
    std::uniform_real_distribution<float> sc(-8.0f, -0.5f);
    for (int i = 0; i < 24; i++) {
      std::string p;
      for (int k = len(rng); k > 0; k--) p += sp(alphabet[ch(rng)]);
      pieces.push_back(p);
      scores.push_back(sc(rng));
      types.push_back(1);
    }
    Unigram u(pieces, scores, types, 2, true, false, {});
    float mn = 0;
    for (size_t i = 3; i < scores.size(); i++) mn = std::min(mn, scores[i]);
    std::string text;
    for (int k = 0; k < 9; k++) text += alphabet[ch(rng)];
    std::vector<int> ids;
    u.encode(text, ids);
    Exhaustive ex{pieces, scores, 2, (double)(mn - 10.0f)};
    ex.go(u.normalize(text), 0, 0.0);
    std::vector<int> want;
    for (size_t i = 0; i < ex.best_ids.size(); i++)
      if (!(i > 0 && ex.best_ids[i] == 2 && ex.best_ids[i - 1] == 2)) want.push_back(ex.best_ids[i]);
    // Duplicate pieces make equal-score alternatives: compare the pieces, not the ids.
    auto spell = [&](const std::vector<int>& v) {
      std::string o;
      for (int id : v) o += pieces[id] + "|";
      return o;
    };
    EXPECT_EQ(spell(ids), spell(want)) << "round " << round << " text '" << text << "'";
  }
}

// A precompiled character map with one rule, U+FF21 (fullwidth A) -> "A", built by hand in the
// XOR-compressed double-array layout: root base 256; each node's child by byte c at base ^ c.
static std::vector<uint8_t> one_rule_charsmap() {
  std::vector<uint32_t> node(1024, 0);
  const uint8_t k0 = 0xEF, k1 = 0xBC, k2 = 0xA1;
  const uint32_t B0 = 256, C1 = 512, C2 = 768, VI = 100;
  node[0] = B0 << 10;
  const uint32_t i1 = B0 ^ k0, i2 = C1 ^ k1, i3 = C2 ^ k2;
  node[i1] = ((i1 ^ C1) << 10) | k0;
  node[i2] = ((i2 ^ C2) << 10) | k1;
  node[i3] = ((i3 ^ VI) << 10) | (1u << 8) | k2;  // leaf: the value sits at i3 ^ base
  node[VI] = (1u << 31) | 0;                      // replacement at offset 0
  std::vector<uint8_t> out(4);
  const uint32_t blob = (uint32_t)node.size() * 4;
  std::memcpy(out.data(), &blob, 4);
  out.resize(4 + blob);
  std::memcpy(out.data() + 4, node.data(), blob);
  out.push_back('A');
  out.push_back(0);
  return out;
}

TEST(Unigram, PrecompiledCharsmapRewritesLongestPrefix) {
  const std::vector<std::string> pieces = {"<pad>", "</s>", "<unk>", "a"};
  const std::vector<float> scores = {0, 0, 0, -1};
  const std::vector<int> types = {3, 3, 2, 1};
  Unigram u(pieces, scores, types, 2, true, false, one_rule_charsmap());
  EXPECT_EQ(u.normalize("\xEF\xBC\xA1"
                        "B \xEF\xBC\xA2"),
            sp(" AB \xEF\xBC\xA2"));  // U+FF22 has no rule
  // Hostile maps are refused with a typed error, never read out of bounds.
  std::vector<uint8_t> bad = one_rule_charsmap();
  bad.resize(100);
  EXPECT_THROW(Unigram(pieces, scores, types, 2, true, false, bad), Error);
  std::vector<uint8_t> bad2 = one_rule_charsmap();
  bad2[4 + 100 * 4] = 0xFF;  // the value offset points far past the replacements
  bad2[4 + 100 * 4 + 1] = 0xFF;
  Unigram u2(pieces, scores, types, 2, true, false, bad2);
  EXPECT_THROW(u2.normalize("\xEF\xBC\xA1"), Error);
}

// ---- T5 GGUF: loader, tokenizer, generation -----------------------------------------------------

namespace {
std::vector<uint8_t> t5_file(bool tied, int heads = 2) {
  static std::shared_ptr<const Blob> tb = map_file(std::string(QKV_SHARED_DIR) + "/models/aidreams-tok512.bin");
  static Tokenizer spm = Tokenizer::from_llama2c(tb->data(), tb->size(), 512);
  TestModelSpec s;
  s.arch = "t5";
  s.spm = &spm;
  s.dim = 64;
  s.hidden = 96;
  s.heads = heads;  // head dim 16: q_dim 32 != dim 64 (T5's d_kv)
  s.layers = 2;
  s.dec_layers = 3;  // encoder and decoder depths differ, as some T5 variants do
  s.context = 128;
  s.tied = tied;
  s.seed = 21;
  return write_test_encdec_model(s);
}
}  // namespace

TEST(T5Gguf, LoadsAndMatchesFloat64Reference) {
  for (bool tied : {false, true}) {
    auto blob = std::make_shared<VectorBlob>(t5_file(tied));
    ASSERT_TRUE(is_encdec_model(blob));
    ASSERT_EQ(model_kind(blob), ModelKind::EncoderDecoder);
    EncDecModelData m = load_encdec_model(blob);
    EXPECT_EQ(m.config.n_layers, 2);
    EXPECT_EQ(m.encdec.n_dec_layers, 3);
    EXPECT_EQ(m.config.head_dim, 16);
    EXPECT_EQ(m.config.ffn, FfnKind::GeGLU);
    EXPECT_EQ(m.config.pos, PosKind::RelativeBucket);
    EXPECT_EQ(m.config.tied_classifier, tied);
    EXPECT_EQ(m.weights.dec[1].rel_bias, nullptr);  // shared from layer 0
    std::unique_ptr<Tokenizer> tok = embedded_tokenizer(blob);
    ASSERT_TRUE(tok && tok->is_unigram());
    const std::vector<int> src = encdec_source_ids(*tok, "the cat sat on the mat. the dog sat on the log.");
    EXPECT_EQ(src.back(), 1);  // EOS appended, no BOS
    const std::vector<int> want = check_data_against_reference(m, 2, src);
    // Greedy generation through the engine's loop prints the reference's ids' pieces.
    EncoderDecoder model(load_encdec_model(blob), 0, std::make_shared<ThreadPool>(2));
    RunOptions opt;
    opt.prompt = "the cat sat on the mat. the dog sat on the log.";
    opt.steps = 16;
    opt.sampler.temperature = 0;
    std::string got;
    run_encdec_generate(model, *tok, opt, [&](const std::string& p) { got += p; });
    std::string text;
    int prev = 0;
    for (int id : want) {
      if (tok->is_eog(id)) break;
      text += tok->is_control(id) ? "" : tok->decode(prev, id);
      prev = id;
    }
    if (!text.empty() && text[0] == ' ') text.erase(0, 1);
    EXPECT_EQ(got, text);
    EXPECT_FALSE(got.empty());
  }
}

TEST(T5Gguf, BadFilesAreRefusedByName) {
  const std::vector<uint8_t> good = t5_file(false);
  // Truncated anywhere: a typed error, never a crash.
  for (size_t cut : {(size_t)16, good.size() / 3, good.size() / 2, good.size() - 7}) {
    auto blob = std::make_shared<VectorBlob>(std::vector<uint8_t>(good.begin(), good.begin() + cut));
    try {
      load_encdec_model(blob);
      ADD_FAILURE() << "a file cut at " << cut << " bytes loaded";
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == ErrorCode::BadModel) << e.what();
    }
  }
  // The decoder-only loader names the problem.
  try {
    load_model(std::make_shared<VectorBlob>(good));
    ADD_FAILURE() << "t5 loaded as a decoder-only model";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("encoder-decoder"), std::string::npos) << e.what();
  }
}
