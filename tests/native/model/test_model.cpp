// Model-level checks on the real shared models: batched prefill equals token-by-token
// decoding, thread counts do not change results, attention capture is a proper distribution;
// the tokenizer against a direct (quadratic) transcription of run.c's merge loop; the sampler.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common.h"
#include "formats/file.h"
#include "formats/loader.h"
#include "kernels/attention.h"
#include "kernels/softmax.h"
#include "engine/session.h"
#include "model/transformer.h"
#include "sampler/sampler.h"
#include "tokenizer/tokenizer.h"

using namespace qkv;

namespace {

const std::string kShared = QKV_SHARED_DIR;
const std::string kModels = kShared + "/models/";

std::unique_ptr<Transformer> open_model(const std::string& name, int threads = 1) {
  return std::make_unique<Transformer>(load_model(map_file(kModels + name)), 0, std::make_shared<ThreadPool>(threads));
}

Tokenizer open_tokenizer(const std::string& name, int vocab) {
  auto b = map_file(kModels + name);
  return Tokenizer::from_llama2c(b->data(), b->size(), vocab);
}

// Relative difference normalised by the logit vector's scale.
double max_rel_diff(const float* a, const float* b, int n) {
  double scale = 0, diff = 0;
  for (int i = 0; i < n; i++) {
    scale = std::max(scale, (double)std::fabs(a[i]));
    diff = std::max(diff, (double)std::fabs(a[i] - b[i]));
  }
  return diff / std::max(scale, 1e-30);
}

constexpr double kPrefillTol = 1e-5;  // batched vs one-at-a-time: same math, different blocking

class ModelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ModelTest, BatchedPrefillMatchesTokenByToken) {
  auto batched = open_model(GetParam());
  auto stepwise = open_model(GetParam());
  const int V = batched->config().vocab_size;
  const int n = std::min(100, batched->config().seq_len);
  std::mt19937 rng(7);
  std::vector<int> toks(n);
  for (auto& t : toks) t = 3 + rng() % (V - 3);
  toks[0] = 1;
  batched->forward(toks.data(), n, 0, true);
  std::vector<float> all(batched->logits(), batched->logits() + (size_t)n * V);
  double worst = 0;
  for (int p = 0; p < n; p++) {
    const float* l = stepwise->forward(&toks[p], 1, p);
    worst = std::max(worst, max_rel_diff(all.data() + (size_t)p * V, l, V));
  }
  EXPECT_LE(worst, kPrefillTol) << "max relative logit difference " << worst;
  // And the logits carry information (not all equal).
  float mn = all[0], mx = all[0];
  for (float v : all) mn = std::min(mn, v), mx = std::max(mx, v);
  EXPECT_GT(mx - mn, 1.0f);
}

TEST_P(ModelTest, PrefillInChunksContinuesTheCache) {
  // A prompt fed as two forward calls equals one call (the cache carries the first part).
  auto one = open_model(GetParam());
  auto two = open_model(GetParam());
  const int V = one->config().vocab_size, n = std::min(90, one->config().seq_len);
  std::vector<int> toks(n);
  for (int i = 0; i < n; i++) toks[i] = 1 + (i * 37) % (V - 1);
  std::vector<float> a(one->forward(toks.data(), n, 0), one->forward(toks.data(), n, 0) + V);
  two->forward(toks.data(), 41, 0);
  const float* b = two->forward(toks.data() + 41, n - 41, 41);
  EXPECT_LE(max_rel_diff(a.data(), b, V), kPrefillTol);
}

// A feed computed elsewhere (WebGPU): Session::feed_logits records the tokens and their logits
// without touching the CPU cache; the next CPU feed computes the missing tokens from the token
// list first, so it gives exactly the logits of a session that ran everything on the CPU. And
// rope_table gives the tables the forward uses (one position at a time equals all at once).
TEST_P(ModelTest, ExternalFeedsCatchUpOnTheCpu) {
  const LoadedModel m = load_model(map_file(kModels + GetParam()));
  const int V = m.config.vocab_size, n0 = std::min(Transformer::kMaxBatch + 9, m.config.seq_len - 4);
  auto pool = std::make_shared<ThreadPool>(1);
  Session ref(m, 0, pool), ext(m, 0, pool);
  std::vector<int> toks(n0 + 2);
  for (size_t i = 0; i < toks.size(); i++) toks[i] = 1 + (int)(i * 29) % (V - 1);
  ref.feed(toks.data(), n0);
  std::vector<float> want(ref.logits(), ref.logits() + V);
  ext.feed_logits(toks.data(), n0, want.data(), 1);
  EXPECT_EQ(ext.position(), n0);
  EXPECT_EQ(ext.transformer().kv_cache_bytes(), 0u) << "an external feed leaves the CPU cache alone";
  for (int i = 0; i < V; i++) ASSERT_EQ(ext.logits()[i], want[i]);
  EXPECT_THROW(ext.feed_logits(toks.data(), 2, want.data(), 3), Error);
  ref.feed(&toks[n0], 2);
  ext.feed(&toks[n0], 2);
  for (int i = 0; i < V; i++) ASSERT_EQ(ext.logits()[i], ref.logits()[i]) << "logit " << i;
  // truncate() below the CPU's position, then external again, then CPU: still the same.
  ext.truncate(n0 - 3);
  ref.truncate(n0 - 3);
  ext.feed_logits(&toks[n0 - 3], 3, want.data(), 1);
  ref.feed(&toks[n0 - 3], 3);
  ext.feed(&toks[n0], 1);
  ref.feed(&toks[n0], 1);
  for (int i = 0; i < V; i++) ASSERT_EQ(ext.logits()[i], ref.logits()[i]) << "logit " << i;

  const int half = m.config.rot_dims() / 2;
  std::vector<float> c_all(3 * half), s_all(3 * half), c1(half), s1(half);
  ref.transformer().rope_table(5, 3, false, c_all.data(), s_all.data());
  ref.transformer().rope_table(7, 1, false, c1.data(), s1.data());
  for (int p = 0; p < half; p++) {
    ASSERT_EQ(c1[p], c_all[2 * half + p]);
    ASSERT_EQ(s1[p], s_all[2 * half + p]);
  }
}

// Per-layer attention options: linear-attention layers and per-layer sliding windows through the
// same forward pass. Batched prefill (chunks of 64, linear layers in recurrent form) must equal
// token-by-token decoding; a per-layer window equal for all layers equals the global option; the
// options change the logits.
TEST_P(ModelTest, PerLayerAttentionOptions) {
  LoadedModel base = load_model(map_file(kModels + GetParam()));
  const int L = base.config.n_layers, V = base.config.vocab_size;
  auto make = [&](auto edit) {
    LoadedModel m = base;
    edit(m.config);
    return std::make_unique<Transformer>(m, 0, std::make_shared<ThreadPool>(2));
  };
  auto mixed_cfg = [&](ModelConfig& c) {
    c.layer_attn.assign(L, AttnKind::Softmax);
    c.layer_window.assign(L, 0);
    for (int l = 0; l < L; l += 2) c.layer_attn[l] = AttnKind::Linear;
    c.layer_window[L - 1] = 5;
  };
  auto batched = make(mixed_cfg), stepwise = make(mixed_cfg), plain = make([](ModelConfig&) {});
  const int n = std::min(90, base.config.seq_len);
  std::vector<int> toks(n);
  for (int i = 0; i < n; i++) toks[i] = 1 + (i * 31) % (V - 1);
  batched->forward(toks.data(), n, 0, true);
  std::vector<float> all(batched->logits(), batched->logits() + (size_t)n * V);
  double worst = 0;
  for (int p = 0; p < n; p++)
    worst = std::max(worst, max_rel_diff(all.data() + (size_t)p * V, stepwise->forward(&toks[p], 1, p), V));
  EXPECT_LE(worst, 1e-4) << "linear/windowed layers: batched vs token-by-token";
  const float* a = plain->forward(toks.data(), n, 0);
  EXPECT_GT(max_rel_diff(a, all.data() + (size_t)(n - 1) * V, V), 1e-3) << "the options must change the result";

  auto per_layer = make([&](ModelConfig& c) { c.layer_window.assign(L, 7); });
  auto global = make([&](ModelConfig& c) { c.sliding_window = 7; });
  const float* x = per_layer->forward(toks.data(), n, 0);
  std::vector<float> xv(x, x + V);
  const float* y = global->forward(toks.data(), n, 0);
  for (int i = 0; i < V; i++) ASSERT_EQ(xv[i], y[i]);

  LoadedModel bad = base;
  bad.config.layer_window.assign(L + 1, 0);
  EXPECT_THROW(Transformer(bad, 0, nullptr), Error);
}

TEST_P(ModelTest, ThreadCountDoesNotChangeLogits) {
  auto t1 = open_model(GetParam(), 1);
  auto t2 = open_model(GetParam(), 2);
  auto t3 = open_model(GetParam(), 3);
  const int V = t1->config().vocab_size, n = 20;
  std::vector<int> toks(n);
  for (int i = 0; i < n; i++) toks[i] = 1 + (i * 13) % (V - 1);
  std::vector<float> a(t1->forward(toks.data(), n, 0), t1->forward(toks.data(), n, 0) + V);
  const float* b = t2->forward(toks.data(), n, 0);
  for (int i = 0; i < V; i++) ASSERT_EQ(a[i], b[i]) << "2 threads, logit " << i;
  const float* c = t3->forward(toks.data(), n, 0);
  for (int i = 0; i < V; i++) ASSERT_EQ(a[i], c[i]) << "3 threads, logit " << i;
}

TEST_P(ModelTest, AttentionCaptureIsCausalDistribution) {
  auto m = open_model(GetParam());
  const ModelConfig& c = m->config();
  const int pre = 5, n = 7;
  std::vector<int> toks(pre + n);
  for (int i = 0; i < pre + n; i++) toks[i] = 1 + (i * 11) % (c.vocab_size - 1);
  m->forward(toks.data(), pre, 0);
  m->set_capture_attention(true);
  m->forward(toks.data() + pre, n, pre);
  ASSERT_EQ(m->attention_queries(), n);
  ASSERT_EQ(m->attention_keys(), pre + n);
  const auto& a = m->attention();
  ASSERT_EQ(a.size(), (size_t)c.n_layers * c.n_heads * n * (pre + n));
  for (int l = 0; l < c.n_layers; l++)
    for (int h = 0; h < c.n_heads; h++)
      for (int i = 0; i < n; i++) {
        const float* row = a.data() + (((size_t)l * c.n_heads + h) * n + i) * (pre + n);
        double s = 0;
        for (int j = 0; j < pre + n; j++) {
          if (j > pre + i) EXPECT_EQ(row[j], 0.0f) << "future key " << j << " of query " << pre + i;
          EXPECT_GE(row[j], 0.0f);
          s += row[j];
        }
        EXPECT_NEAR(s, 1.0, 1e-5);
      }
  // Capturing must not change the logits.
  auto plain = open_model(GetParam());
  plain->forward(toks.data(), pre, 0);
  const float* p = plain->forward(toks.data() + pre, n, pre);
  for (int i = 0; i < c.vocab_size; i++) ASSERT_EQ(p[i], m->logits()[i]);
}

INSTANTIATE_TEST_SUITE_P(SharedModels, ModelTest, ::testing::Values("aidreams260K.bin", "stories260K.bin"));

// ---- Tokenizer ----------------------------------------------------------------------------

// run.c's encode transcribed directly: rescan every adjacent pair after each merge.
std::vector<int> encode_quadratic(const Tokenizer& t, const std::string& text, bool bos) {
  std::map<std::string, int> idx;
  for (int i = t.vocab_size() - 1; i >= 0; i--) idx[t.piece(i)] = i;
  auto look = [&](const std::string& s) {
    auto it = idx.find(s);
    return it == idx.end() ? -1 : it->second;
  };
  std::vector<int> tok;
  if (bos) tok.push_back(1);
  if (!text.empty()) tok.push_back(look(" "));
  std::string buf;
  for (size_t i = 0; i < text.size(); i++) {
    if (((unsigned char)text[i] & 0xC0) != 0x80) buf.clear();
    buf += text[i];
    if (i + 1 < text.size() && ((unsigned char)text[i + 1] & 0xC0) == 0x80 && buf.size() < 4) continue;
    int id = look(buf);
    if (id != -1) tok.push_back(id);
    else
      for (unsigned char ch : buf) tok.push_back(ch + 3);
    buf.clear();
  }
  for (;;) {
    float best = -1e10f;
    int best_id = -1, best_i = -1;
    for (size_t i = 0; i + 1 < tok.size(); i++) {
      int id = look(t.piece(tok[i]) + t.piece(tok[i + 1]));
      if (id != -1 && t.score(id) > best) {
        best = t.score(id);
        best_id = id;
        best_i = (int)i;
      }
    }
    if (best_i < 0) break;
    tok[best_i] = best_id;
    tok.erase(tok.begin() + best_i + 1);
  }
  return tok;
}

std::vector<std::string> sample_texts() {
  return {"",
          "I dream of",
          "Once upon a time, there was a little girl named Lily.",
          "  leading and   inner   whitespace runs\t\ttabs\nnewlines\n\n",
          "héllo wörld — naïve café",
          "日本語のテキストと中文",
          "emoji 🙂🚀 and a 👩‍👩‍👧 family",
          "code: for (int i = 0; i < n; i++) { s += x[i]; }",
          "<s> </s> <0x41> literal control-looking text",
          std::string("bytes \x01\x02\x7f and a lone \xff\xfe byte", 28)};
}

TEST(TokenizerTest, HeapMergesEqualRunCQuadraticLoop) {
  for (const char* tok_name : {"llama2-tokenizer.bin", "aidreams-tok512.bin"}) {
    const int V = std::string(tok_name) == "llama2-tokenizer.bin" ? 32000 : 512;
    Tokenizer t = open_tokenizer(tok_name, V);
    std::vector<std::string> texts = sample_texts();
    std::mt19937 rng(3);
    const std::string alphabet = "abcdefghij klmnop.,!?\n\xc3\xa9\xe4\xb8\xad";
    for (int k = 0; k < 40; k++) {
      std::string s;
      int len = rng() % 80;
      for (int i = 0; i < len; i++) s += alphabet[rng() % alphabet.size()];
      texts.push_back(s);
    }
    for (const auto& s : texts) {
      if (V == 512 && s.find('\xff') != std::string::npos) continue;
      EXPECT_EQ(t.encode(s, true, false), encode_quadratic(t, s, true)) << tok_name << ": '" << s << "'";
    }
  }
}

TEST(TokenizerTest, DecodeRoundTripsValidUtf8) {
  Tokenizer t = open_tokenizer("llama2-tokenizer.bin", 32000);
  for (const auto& s : sample_texts()) {
    if (s.empty()) continue;
    std::vector<int> ids = t.encode(s, true, false);
    ASSERT_EQ(ids[0], 1);
    std::string out;
    for (size_t i = 1; i < ids.size(); i++) out += t.decode(ids[i - 1], ids[i]);
    // The dummy-prefix space is dropped after BOS, so decoding gives the text back exactly.
    EXPECT_EQ(out, s);
  }
}

TEST(TokenizerTest, ByteFallbackAndEos) {
  Tokenizer t = open_tokenizer("llama2-tokenizer.bin", 32000);
  std::vector<int> ids = t.encode("\xff", false, true);
  ASSERT_EQ(ids.size(), 3u);  // dummy prefix, byte token, EOS
  EXPECT_EQ(ids[1], 0xff + 3);
  EXPECT_EQ(t.byte_value(ids[1]), 0xff);
  EXPECT_EQ(t.decode(5, ids[1]), std::string("\xff"));
  EXPECT_EQ(ids[2], 2);
}

TEST(TokenizerTest, LongTextEncodesQuickly) {
  // 200 KB of text: the quadratic loop would take minutes; the heap version is linearithmic.
  Tokenizer t = open_tokenizer("llama2-tokenizer.bin", 32000);
  std::string s;
  while (s.size() < 200000) s += "The quick brown fox jumps over the lazy dog. ";
  std::vector<int> ids = t.encode(s, true, false);
  EXPECT_GT(ids.size(), 30000u);
  EXPECT_LT(ids.size(), 60000u);
}

// ---- Sampler --------------------------------------------------------------------------------

std::vector<float> random_logits(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

int argmax(const std::vector<float>& v) { return (int)(std::max_element(v.begin(), v.end()) - v.begin()); }

TEST(SamplerTest, GreedyAndTopK1AreArgmax) {
  auto l = random_logits(1000, 1);
  SamplerOptions o;
  o.temperature = 0.0f;
  Sampler g(1000, o);
  auto w = l;
  EXPECT_EQ(g.sample(w.data()), argmax(l));
  o.temperature = 1.5f;
  o.top_k = 1;
  o.seed = 9;
  Sampler k1(1000, o);
  for (int i = 0; i < 20; i++) {
    w = l;
    EXPECT_EQ(k1.sample(w.data()), argmax(l));
  }
}

TEST(SamplerTest, SameSeedSameSequenceDifferentSeedDiffers) {
  auto l = random_logits(512, 2);
  auto draw = [&](uint64_t seed) {
    SamplerOptions o;
    o.temperature = 1.0f;
    o.top_p = 0.9f;
    o.seed = seed;
    Sampler s(512, o);
    std::vector<int> out;
    for (int i = 0; i < 50; i++) {
      auto w = l;
      out.push_back(s.sample(w.data()));
    }
    return out;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

TEST(SamplerTest, MultinomialFrequenciesFollowSoftmax) {
  const int n = 8, draws = 40000;
  std::vector<float> l = {0.0f, 1.0f, 2.0f, -1.0f, 0.5f, 1.5f, -2.0f, 0.2f};
  SamplerOptions o;
  o.temperature = 1.0f;
  o.top_p = 1.0f;  // plain multinomial
  o.seed = 5;
  Sampler s(n, o);
  std::vector<int> count(n);
  for (int i = 0; i < draws; i++) {
    auto w = l;
    count[s.sample(w.data())]++;
  }
  double z = 0;
  for (float x : l) z += std::exp(x);
  for (int i = 0; i < n; i++) {
    double p = std::exp(l[i]) / z, f = (double)count[i] / draws;
    EXPECT_NEAR(f, p, 4 * std::sqrt(p * (1 - p) / draws) + 1e-3) << "token " << i;
  }
}

TEST(SamplerTest, TopPAndMinPExcludeTheTail) {
  // Probabilities ~ 0.5, 0.3, 0.15, then a long tail: top-p 0.7 keeps only the first two.
  std::vector<float> l(100, -10.0f);
  l[10] = std::log(0.5f), l[20] = std::log(0.3f), l[30] = std::log(0.15f);
  for (auto [opt_top_p, opt_min_p, allowed] : std::vector<std::tuple<float, float, std::vector<int>>>{
           {0.7f, 0.0f, {10, 20}}, {1.0f, 0.5f, {10, 20}}, {1.0f, 0.7f, {10}}}) {
    SamplerOptions o;
    o.temperature = 1.0f;
    o.top_p = opt_top_p;
    o.min_p = opt_min_p;
    o.seed = 11;
    Sampler s(100, o);
    std::map<int, int> seen;
    for (int i = 0; i < 2000; i++) {
      auto w = l;
      seen[s.sample(w.data())]++;
    }
    for (auto& kv : seen)
      EXPECT_NE(std::find(allowed.begin(), allowed.end(), kv.first), allowed.end())
          << "token " << kv.first << " drawn with top_p " << opt_top_p << " min_p " << opt_min_p;
    EXPECT_EQ(seen.size(), allowed.size());
  }
}

// run.c's top-p, and top-k then top-p, written plainly: the whole candidate list stably sorted.
int reference_draw(std::vector<float> logits, float temperature, float top_p, int top_k, uint64_t seed) {
  const int n = (int)logits.size();
  for (float& x : logits) x /= temperature;
  if (top_k > 0) {  // the filtering sampler's weights: exp(l - max), not normalized
    const float mx = *std::max_element(logits.begin(), logits.end());
    for (float& x : logits) x = std::exp(x - mx);
  } else {
    qkv::softmax_ref(logits.data(), n);
  }
  const float coin = qkv::rng_f32(&seed);
  std::vector<std::pair<float, int>> cand;
  const float cutoff = top_k > 0 ? 0.0f : (1.0f - top_p) / (n - 1);
  for (int i = 0; i < n; i++)
    if (top_k > 0 ? logits[i] > 0.0f : logits[i] >= cutoff) cand.push_back({logits[i], i});
  std::stable_sort(cand.begin(), cand.end(), [](auto& a, auto& b) { return a.first > b.first; });
  if (top_k > 0) {
    if (top_k < (int)cand.size()) cand.resize(top_k);
    float total = 0.0f;
    for (auto& c : cand) total += c.first;
    float cum = 0.0f;
    for (size_t i = 0; i < cand.size(); i++) {
      cum += cand[i].first / total;
      if (cum > top_p) {
        cand.resize(i + 1);
        break;
      }
    }
    total = 0.0f;
    for (auto& c : cand) total += c.first;
    const float r = coin * total;
    float cdf = 0.0f;
    for (auto& c : cand)
      if (r < (cdf += c.first)) return c.second;
    return cand.back().second;
  }
  float cum = 0.0f;
  size_t last = cand.size() - 1;
  for (size_t i = 0; i < cand.size(); i++)
    if ((cum += cand[i].first) > top_p) {
      last = i;
      break;
    }
  const float r = coin * cum;
  float cdf = 0.0f;
  for (size_t i = 0; i <= last; i++)
    if (r < (cdf += cand[i].first)) return cand[i].second;
  return cand[last].second;
}

// With top-k the sampler sorts only the k first candidates; the draws (and top-p's, which sorts
// all) must be the full stable sort's, bit for bit: flat and peaked distributions over 32000 tokens, and logits
// rounded to a few values (long runs of equal probabilities, ordered by index).
TEST(SamplerTest, PartialSortDrawsWhatTheFullSortDraws) {
  const int n = 32000;
  std::mt19937 rng(17);
  int checked = 0;
  for (float scale : {0.05f, 1.0f, 4.0f, 12.0f})
    for (bool ties : {false, true}) {
      std::normal_distribution<float> d(0.0f, scale);
      std::vector<float> l(n);
      for (float& x : l) x = ties ? std::round(d(rng)) : d(rng);
      for (float top_p : {0.5f, 0.9f, 0.99f, 0.9999f})
        for (int top_k : {0, 1, 7, 40, 5000})
          for (uint64_t seed : {1ull, 42ull, 977ull}) {
            SamplerOptions o;
            o.temperature = 1.0f;
            o.top_p = top_p;
            o.top_k = top_k;
            o.seed = seed;
            Sampler s(n, o);
            auto w = l;
            ASSERT_EQ(s.sample(w.data()), reference_draw(l, 1.0f, top_p, top_k, seed))
                << "scale " << scale << (ties ? " (ties)" : "") << " top_p " << top_p << " top_k " << top_k << " seed "
                << seed;
            checked++;
          }
    }
  EXPECT_EQ(checked, 480);
}

TEST(SamplerTest, RepetitionPenaltyDemotesRecentTokens) {
  std::vector<float> l = {2.0f, 1.9f, -1.0f};
  SamplerOptions o;
  o.temperature = 0.0f;
  o.repetition_penalty = 1.5f;
  Sampler s(3, o);
  auto w = l;
  EXPECT_EQ(s.sample(w.data()), 0);
  int recent[] = {0};
  w = l;
  EXPECT_EQ(s.sample(w.data(), recent, 1), 1);  // 2.0 / 1.5 < 1.9
}

}  // namespace
