// `qkv quantize` and `qkv perplexity`: the Q4_K and Q5_K writers decode back within their step,
// the quantize policy (norms f32, classifier at Q6_K for Q4_K/Q5_K, Q5_K_M's Q6_K layers, block
// fallbacks) is what the file
// holds, the windowed perplexity equals a direct token-by-token computation, and quantized
// models stay close to the f32 one on text the model generated itself.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "common.h"
#include "engine/generate.h"
#include "engine/perplexity.h"
#include "formats/file.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "formats/loader.h"
#include "formats/quantize.h"
#include "kernels/quant.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"

using namespace qkv;

namespace {

const std::string kModels = std::string(QKV_SHARED_DIR) + "/models/";

std::shared_ptr<const Blob> blob_of(std::vector<uint8_t> v) { return std::make_shared<VectorBlob>(std::move(v)); }

struct Aidreams {
  std::shared_ptr<const Blob> bin;
  std::unique_ptr<Tokenizer> tok;
  std::shared_ptr<const Blob> gguf_f32;
  std::vector<int> ids;  // tokens of a text the model generated itself
};

const Aidreams& aidreams() {
  static Aidreams* a = [] {
    auto* r = new Aidreams;
    r->bin = map_file(kModels + "aidreams260K.bin");
    LoadedModel m = load_model(r->bin);
    auto tb = map_file(kModels + "aidreams-tok512.bin");
    r->tok = std::make_unique<Tokenizer>(Tokenizer::from_llama2c(tb->data(), tb->size(), m.config.vocab_size));
    r->gguf_f32 = blob_of(llama2c_to_gguf(m, *r->tok, "aidreams260K", QType::F32));
    Transformer t(m, 0, nullptr);
    std::string text;
    for (uint64_t seed = 1; seed <= 8; seed++) {
      RunOptions o;
      o.steps = 0;  // the whole context
      o.sampler.temperature = 1.0f;
      o.sampler.seed = seed;
      run_generate(t, *r->tok, o, [&](const std::string& p) { text += p; });
      text += "\n";
    }
    r->ids = r->tok->encode(text, true, false);
    return r;
  }();
  return *a;
}

double ppl_of(const std::shared_ptr<const Blob>& blob, const std::vector<int>& ids, int ctx = 0) {
  Transformer t(load_model(blob), 0, nullptr);
  return perplexity(t, ids, ctx > 0 ? ctx : t.context()).perplexity();
}

// ---- Q4_K writer ----------------------------------------------------------------------------

TEST(QuantizeQ4K, DecodesBackWithinOneStepOfEachSubBlock) {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const int n = 1024;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; i++) x[i] = g(rng) * (1 + i / 256) + (i % 97 == 0 ? 6.0f : 0.0f);  // scales vary, outliers
  std::vector<uint8_t> q(qtype_row_bytes(QType::Q4_K, n));
  quantize_row_q4_k(x.data(), q.data(), n);
  dequantize_row_ref(QType::Q4_K, q.data(), y.data(), n);
  double err2 = 0, sig2 = 0;
  for (int s = 0; s < n / 32; s++) {
    float lo = 0, hi = 0;  // the grid always contains 0 or starts below it
    for (int i = 0; i < 32; i++) lo = std::min(lo, x[32 * s + i]), hi = std::max(hi, x[32 * s + i]);
    for (int i = 0; i < 32; i++) {
      const int k = 32 * s + i;
      ASSERT_LE(std::fabs(x[k] - y[k]), (hi - lo) / 15 * 1.2f) << "value " << k;
      err2 += (x[k] - y[k]) * (x[k] - y[k]);
      sig2 += x[k] * x[k];
    }
  }
  EXPECT_LT(std::sqrt(err2 / sig2), 0.12) << "relative RMS error";
  // Against Q4_0 on the same data (4.5 bits each): Q4_K must not be worse by much.
  std::vector<uint8_t> q40(qtype_row_bytes(QType::Q4_0, n));
  std::vector<float> z(n);
  quantize_row_q4_0(x.data(), q40.data(), n);
  dequantize_row_ref(QType::Q4_0, q40.data(), z.data(), n);
  double err40 = 0;
  for (int k = 0; k < n; k++) err40 += (x[k] - z[k]) * (x[k] - z[k]);
  EXPECT_LT(err2, err40 * 1.1);
}

// Q5_K: the same fit with 32 levels: every value within one step of its sub-block's grid, and a
// squared error well below Q4_K's on the same data (one more bit: about a quarter).
TEST(QuantizeQ5K, DecodesBackWithinOneStepAndBeatsQ4K) {
  std::mt19937 rng(8);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const int n = 2048;
  std::vector<float> x(n), y(n), z(n);
  for (int i = 0; i < n; i++) x[i] = g(rng) * (1 + i / 256) + (i % 89 == 0 ? -7.0f : 0.0f);
  std::vector<uint8_t> q5(qtype_row_bytes(QType::Q5_K, n)), q4(qtype_row_bytes(QType::Q4_K, n));
  ASSERT_EQ(q5.size(), (size_t)n / 256 * 176);
  quantize_row_q5_k(x.data(), q5.data(), n);
  dequantize_row_ref(QType::Q5_K, q5.data(), y.data(), n);
  quantize_row_q4_k(x.data(), q4.data(), n);
  dequantize_row_ref(QType::Q4_K, q4.data(), z.data(), n);
  double e5 = 0, e4 = 0, sig2 = 0;
  for (int s = 0; s < n / 32; s++) {
    float lo = 0, hi = 0;
    for (int i = 0; i < 32; i++) lo = std::min(lo, x[32 * s + i]), hi = std::max(hi, x[32 * s + i]);
    for (int i = 0; i < 32; i++) {
      const int k = 32 * s + i;
      ASSERT_LE(std::fabs(x[k] - y[k]), (hi - lo) / 31 * 1.2f) << "value " << k;
      e5 += (x[k] - y[k]) * (x[k] - y[k]);
      e4 += (x[k] - z[k]) * (x[k] - z[k]);
      sig2 += x[k] * x[k];
    }
  }
  printf("relative RMS error: Q5_K %.4f, Q4_K %.4f\n", std::sqrt(e5 / sig2), std::sqrt(e4 / sig2));
  EXPECT_LT(std::sqrt(e5 / sig2), 0.06);
  EXPECT_LT(e5, e4 * 0.4) << "Q5_K must be clearly more precise than Q4_K";
  // The integer dot product (the engine's path) agrees with the decoded row.
  std::vector<float> a(n);
  for (float& v : a) v = g(rng);
  double ref = 0;
  for (int k = 0; k < n; k++) ref += (double)y[k] * a[k];
  EXPECT_NEAR(dot_row_ref(QType::Q5_K, q5.data(), a.data(), n), ref, 1e-3 * std::sqrt((double)n) * 8);
}

TEST(QuantizeQ5K, ZeroAndConstantRows) {
  std::vector<float> x(256, 0.0f), y(256, 1.0f);
  std::vector<uint8_t> q(176);
  quantize_row_q5_k(x.data(), q.data(), 256);
  dequantize_row_ref(QType::Q5_K, q.data(), y.data(), 256);
  for (float v : y) ASSERT_EQ(v, 0.0f);
  for (float c : {0.5f, -3.0f}) {
    std::fill(x.begin(), x.end(), c);
    quantize_row_q5_k(x.data(), q.data(), 256);
    dequantize_row_ref(QType::Q5_K, q.data(), y.data(), 256);
    for (float v : y) ASSERT_NEAR(v, c, std::fabs(c) * 0.02f);
  }
}

TEST(QuantizeQ4K, ZeroAndConstantRows) {
  std::vector<float> x(256, 0.0f), y(256, 1.0f);
  std::vector<uint8_t> q(144);
  quantize_row_q4_k(x.data(), q.data(), 256);
  dequantize_row_ref(QType::Q4_K, q.data(), y.data(), 256);
  for (float v : y) ASSERT_EQ(v, 0.0f);
  for (float c : {0.5f, -3.0f}) {
    std::fill(x.begin(), x.end(), c);
    quantize_row_q4_k(x.data(), q.data(), 256);
    dequantize_row_ref(QType::Q4_K, q.data(), y.data(), 256);
    for (float v : y) ASSERT_NEAR(v, c, std::fabs(c) * 0.02f);
  }
}

// ---- quantize policy ----------------------------------------------------------------------

std::map<std::string, uint32_t> types_of(const GgufFile& g) {
  std::map<std::string, uint32_t> m;
  for (const auto& t : g.tensors()) m[t.name] = t.type;
  return m;
}

TEST(Quantize, Q8_0KeepsNormsF32AndMetadataAndLoads) {
  const Aidreams& a = aidreams();
  GgufFile in = GgufFile::parse(a.gguf_f32);
  QuantizeResult q = quantize_gguf(in, QType::Q8_0);
  auto blob = blob_of(q.bytes);
  GgufFile out = GgufFile::parse(blob);
  ASSERT_EQ(out.tensors().size(), in.tensors().size());
  // hidden_dim is 172: ffn_down's rows do not split into 32-blocks and fall back to F16.
  for (const auto& t : out.tensors()) {
    const bool down = t.name.find("ffn_down") != std::string::npos;
    EXPECT_EQ(t.type, t.dims.size() == 1 ? 0u : down ? 1u : 8u) << t.name;
  }
  for (const auto& t : q.tensors) {
    if (t.name.find("ffn_down") != std::string::npos)
      EXPECT_EQ(t.note, "rows of 172 do not split into Q8_0 blocks of 32, so F16");
    else EXPECT_EQ(t.note, "") << t.name;
  }
  for (const auto& [k, v] : in.metadata()) EXPECT_TRUE(out.find(k)) << k;
  EXPECT_EQ(out.get_int("general.file_type"), 7);
  EXPECT_LT(q.bytes.size(), a.gguf_f32->size() * 0.4);
  std::unique_ptr<Tokenizer> tok = embedded_tokenizer(blob);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("I dream of a cat", true, false), a.tok->encode("I dream of a cat", true, false));
}

TEST(Quantize, Q4KOnNarrowRowsFallsBackToQ5_0AndKeepsTheClassifierAtQ8_0) {
  const Aidreams& a = aidreams();  // dim 64: no row splits into 256-blocks
  QuantizeResult q = quantize_gguf(GgufFile::parse(a.gguf_f32), QType::Q4_K);
  auto types = types_of(GgufFile::parse(blob_of(q.bytes)));
  EXPECT_EQ(types["token_embd.weight"], 8u);  // tied classifier
  EXPECT_EQ(types["blk.0.attn_q.weight"], 6u);
  EXPECT_EQ(types["blk.0.ffn_up.weight"], 6u);
  EXPECT_EQ(types["blk.3.ffn_down.weight"], 1u);  // rows of 172: not even 32-blocks
  EXPECT_EQ(types["blk.0.attn_norm.weight"], 0u);
  // Q4_K_M's Q6_K layers of 4 (use_more_bits: 2 and 3) fall back to Q8_0 (attn_v) / F16 (ffn_down).
  EXPECT_EQ(types["blk.0.attn_v.weight"], 6u);
  EXPECT_EQ(types["blk.2.attn_v.weight"], 8u);
  EXPECT_EQ(types["blk.3.attn_v.weight"], 8u);
  for (const auto& t : q.tensors) {
    const bool six = t.name == "blk.2.attn_v.weight" || t.name == "blk.3.attn_v.weight" ||
                     t.name == "blk.2.ffn_down.weight" || t.name == "blk.3.ffn_down.weight";
    if (t.name == "token_embd.weight")
      EXPECT_EQ(t.note, "the classifier is kept at Q6_K; rows of 64 do not split into Q6_K blocks of 256, so Q8_0");
    else if (six)
      EXPECT_EQ(t.note.rfind("kept at Q6_K in this layer, as Q4_K_M does; rows of ", 0), 0u)
          << t.name << ": " << t.note;
    else if (t.to != 0)
      EXPECT_NE(t.note.find("do not split into Q4_K blocks of 256"), std::string::npos) << t.name << ": " << t.note;
  }
  EXPECT_TRUE(std::isfinite(ppl_of(blob_of(q.bytes), a.ids)));
}

// A random llama model with rows of 256 and an untied classifier, written directly.
std::vector<uint8_t> wide_model(std::vector<std::vector<float>>* keep) {
  const uint64_t d = 256, h = 512, V = 320;
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 1.0f);
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_u32("llama.context_length", 64);
  w.add_u32("llama.embedding_length", d);
  w.add_u32("llama.feed_forward_length", h);
  w.add_u32("llama.block_count", 1);
  w.add_u32("llama.attention.head_count", 4);
  auto mat = [&](const std::string& name, uint64_t cols, uint64_t rows, float sd) {
    keep->emplace_back(cols * rows);
    for (float& v : keep->back()) v = g(rng) * sd;
    if (rows == 1)
      for (float& v : keep->back()) v = 1.0f + 0.1f * v;
    w.add_tensor_f32(name, rows == 1 ? std::vector<uint64_t>{cols} : std::vector<uint64_t>{cols, rows},
                     keep->back().data());
  };
  mat("token_embd.weight", d, V, 1.0f);
  for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_output"})
    mat(std::string("blk.0.") + n + ".weight", d, d, 0.06f);
  mat("blk.0.attn_norm.weight", d, 1, 1);
  mat("blk.0.ffn_norm.weight", d, 1, 1);
  mat("blk.0.ffn_gate.weight", d, h, 0.06f);
  mat("blk.0.ffn_up.weight", d, h, 0.06f);
  mat("blk.0.ffn_down.weight", h, d, 0.04f);
  mat("output_norm.weight", d, 1, 1);
  mat("output.weight", d, V, 0.06f);
  return w.finish();
}

TEST(Quantize, Q4KWideModelUsesQ4KAndItsLogitsFollowTheF32Ones) {
  std::vector<std::vector<float>> keep;
  auto f32 = blob_of(wide_model(&keep));
  QuantizeResult q = quantize_gguf(GgufFile::parse(f32), QType::Q4_K);
  auto qb = blob_of(q.bytes);
  auto types = types_of(GgufFile::parse(qb));
  EXPECT_EQ(types["token_embd.weight"], 12u);  // untied: an ordinary matrix
  EXPECT_EQ(types["output.weight"], 14u);      // Q6_K, as llama.cpp's Q4_K_M
  EXPECT_EQ(types["blk.0.attn_q.weight"], 12u);
  EXPECT_EQ(types["blk.0.ffn_up.weight"], 12u);
  // use_more_bits picks the one layer of a 1-layer model: attn_v and ffn_down at Q6_K.
  EXPECT_EQ(types["blk.0.attn_v.weight"], 14u);
  EXPECT_EQ(types["blk.0.ffn_down.weight"], 14u);
  EXPECT_EQ(types["blk.0.ffn_norm.weight"], 0u);
  EXPECT_EQ(GgufFile::parse(qb).get_int("general.file_type"), 15);
  Transformer a(load_model(f32), 0, nullptr), b(load_model(qb), 0, nullptr);
  std::vector<int> ids = {1, 17, 250, 3, 99, 42, 7, 300};
  std::vector<float> la(a.forward(ids.data(), 8, 0), a.forward(ids.data(), 8, 0) + 320);
  const float* lb = b.forward(ids.data(), 8, 0);
  double dot = 0, na = 0, nb = 0;
  for (int i = 0; i < 320; i++) dot += la[i] * lb[i], na += la[i] * la[i], nb += lb[i] * lb[i];
  EXPECT_GT(dot / std::sqrt(na * nb), 0.98) << "cosine of the last logits";
}

// Q5_K_M's mix (llama.cpp's llama_tensor_get_type): the classifier, and attn_v / ffn_down in
// the layers use_more_bits picks (all 1 of 1 here), at Q6_K; the rest at Q5_K.
TEST(Quantize, Q5KWideModelIsAQ5KMMixAndCloserThanQ4K) {
  std::vector<std::vector<float>> keep;
  auto f32 = blob_of(wide_model(&keep));
  QuantizeResult q5 = quantize_gguf(GgufFile::parse(f32), QType::Q5_K);
  QuantizeResult q4 = quantize_gguf(GgufFile::parse(f32), QType::Q4_K);
  auto b5 = blob_of(q5.bytes), b4 = blob_of(q4.bytes);
  auto types = types_of(GgufFile::parse(b5));
  EXPECT_EQ(types["token_embd.weight"], 13u);
  EXPECT_EQ(types["blk.0.attn_q.weight"], 13u);
  EXPECT_EQ(types["blk.0.ffn_up.weight"], 13u);
  EXPECT_EQ(types["blk.0.attn_v.weight"], 14u);
  EXPECT_EQ(types["blk.0.ffn_down.weight"], 14u);
  EXPECT_EQ(types["output.weight"], 14u);
  EXPECT_EQ(types["output_norm.weight"], 0u);
  EXPECT_EQ(GgufFile::parse(b5).get_int("general.file_type"), 17);
  EXPECT_GT(q5.bytes.size(), q4.bytes.size());
  // Logits of the f32 model vs each: Q5_K closer than Q4_K.
  Transformer a(load_model(f32), 0, nullptr), m5(load_model(b5), 0, nullptr), m4(load_model(b4), 0, nullptr);
  std::vector<int> ids = {1, 17, 250, 3, 99, 42, 7, 300};
  std::vector<float> la(a.forward(ids.data(), 8, 0), a.forward(ids.data(), 8, 0) + 320);
  std::vector<float> l5(m5.forward(ids.data(), 8, 0), m5.forward(ids.data(), 8, 0) + 320);
  const float* l4 = m4.forward(ids.data(), 8, 0);
  double d5 = 0, d4 = 0;
  for (int i = 0; i < 320; i++) d5 += (l5[i] - la[i]) * (l5[i] - la[i]), d4 += (l4[i] - la[i]) * (l4[i] - la[i]);
  EXPECT_LT(d5, d4) << "Q5_K logits are closer to f32 than Q4_K's";
}

// Types under Q4_K_M and Q5_K_M in a 16-layer model, per layer (names only: the policy, not the
// data), as llama.cpp's llama_tensor_get_type gives them.
TEST(Quantize, KMixLayersFollowLlamaCpp) {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  std::vector<float> z(256 * 256, 0.01f);
  const char* kinds[] = {"attn_v", "ffn_down", "attn_q", "ffn_gate", "attn_qkv"};
  for (const char* k : kinds)
    for (int l = 0; l < 16; l++)
      w.add_tensor_f32("blk." + std::to_string(l) + "." + k + ".weight", {256, 256}, z.data());
  const auto file = blob_of(w.finish());
  auto digits = [&](QType type) {
    std::map<std::string, std::string> by;
    for (const auto& t : quantize_gguf(GgufFile::parse(file), type).tensors) {
      const std::string kind = t.name.substr(t.name.find('.', 4) + 1);
      by[kind] += t.to == 14u ? "6" : t.to == 13u ? "5" : t.to == 12u ? "4" : "?";
    }
    return by;
  };
  // use_more_bits(i, 16): i < 2, i >= 14, or (i - 2) % 3 == 2.
  auto q4 = digits(QType::Q4_K), q5 = digits(QType::Q5_K);
  EXPECT_EQ(q4["attn_v.weight"], "6644644644644666");
  EXPECT_EQ(q4["ffn_down.weight"], "6644644644644666");
  EXPECT_EQ(q4["attn_q.weight"], "4444444444444444");
  EXPECT_EQ(q4["ffn_gate.weight"], "4444444444444444");
  EXPECT_EQ(q4["attn_qkv.weight"], "5555555555555555");  // a fused Q/K/V: one step up everywhere
  EXPECT_EQ(q5["attn_v.weight"], "6655655655655666");
  EXPECT_EQ(q5["ffn_down.weight"], "6655655655655666");
  EXPECT_EQ(q5["attn_q.weight"], "5555555555555555");
  EXPECT_EQ(q5["attn_qkv.weight"], "6666666666666666");
}

TEST(Quantize, StreamedOutputEqualsTheWholeFileAndReportsProgress) {
  std::vector<std::vector<float>> keep;
  auto f32 = blob_of(wide_model(&keep));
  QuantizeResult whole = quantize_gguf(GgufFile::parse(f32), QType::Q5_K);
  std::vector<uint8_t> streamed;
  uint64_t last = 0, total = 0;
  int calls = 0;
  quantize_gguf_stream(
      GgufFile::parse(f32), QType::Q5_K,
      [&](const std::vector<uint8_t>& b) { streamed.insert(streamed.end(), b.begin(), b.end()); },
      [&](uint64_t done, uint64_t t) {
        EXPECT_GE(done, last);
        last = done, total = t, calls++;
      });
  EXPECT_EQ(streamed, whole.bytes);
  EXPECT_EQ(last, total);
  EXPECT_GT(calls, 5);
}

TEST(Quantize, RefusesWhatItCannotWrite) {
  GgufFile in = GgufFile::parse(aidreams().gguf_f32);
  EXPECT_THROW(quantize_gguf(in, QType::Q6_K), Error);
  EXPECT_THROW(parse_qtype("q3_k"), Error);
}

// ---- perplexity ------------------------------------------------------------------------------

// Token by token from an empty cache per window, softmax in double written out in full.
double direct_nll(const LoadedModel& m, const std::vector<int>& ids, int ctx, int64_t* predicted) {
  Transformer t(m, 0, nullptr);
  const int V = m.config.vocab_size;
  double nll = 0;
  *predicted = 0;
  for (size_t start = 0; start + 1 < ids.size(); start += ctx) {
    const size_t end = std::min(ids.size(), start + ctx);
    for (size_t i = start; i + 1 < end; i++) {
      const float* l = t.forward(&ids[i], 1, (int)(i - start));
      double z = 0;
      for (int k = 0; k < V; k++) z += std::exp((double)l[k]);
      nll -= std::log(std::exp((double)l[ids[i + 1]]) / z);
      (*predicted)++;
    }
  }
  return nll;
}

TEST(Perplexity, WindowedEqualsDirectTokenByTokenComputation) {
  const Aidreams& a = aidreams();
  ASSERT_GT(a.ids.size(), 500u);
  LoadedModel m = load_model(a.bin);
  for (int ctx : {128, 50}) {  // 50: windows that split the 64-token batches and a short last window
    Transformer t(m, 0, nullptr);
    PerplexityStats s = perplexity(t, a.ids, ctx);
    int64_t predicted;
    const double nll = direct_nll(m, a.ids, ctx, &predicted);
    EXPECT_EQ(s.predicted, predicted);
    EXPECT_EQ(s.windows, (int)((a.ids.size() - 1 + ctx - 1) / ctx));
    EXPECT_EQ(s.predicted, s.tokens - s.windows);
    EXPECT_NEAR(s.nll, nll, 1e-5 * nll) << "ctx " << ctx;
  }
}

TEST(Perplexity, SelfGeneratedTextIsLowAndQuantizedModelsStayClose) {
  const Aidreams& a = aidreams();
  const double f32 = ppl_of(a.bin, a.ids), gguf = ppl_of(a.gguf_f32, a.ids);
  EXPECT_EQ(f32, gguf);  // the f32 GGUF is the same model
  EXPECT_TRUE(std::isfinite(f32));
  EXPECT_GT(f32, 1.0);
  EXPECT_LT(f32, 12.0) << "vs 512 for a uniform guess";
  const double q8 = ppl_of(blob_of(quantize_gguf(GgufFile::parse(a.gguf_f32), QType::Q8_0).bytes), a.ids);
  const double q4 = ppl_of(blob_of(quantize_gguf(GgufFile::parse(a.gguf_f32), QType::Q4_0).bytes), a.ids);
  const double q5k = ppl_of(blob_of(quantize_gguf(GgufFile::parse(a.gguf_f32), QType::Q5_K).bytes), a.ids);
  printf("perplexity on %zu self-generated tokens: f32 %.4f, q8_0 %.4f, q4_0 %.4f, q5_k %.4f\n", a.ids.size(), f32, q8,
         q4, q5k);
  EXPECT_LT(std::fabs(q8 / f32 - 1), 0.01);
  EXPECT_LT(std::fabs(q4 / f32 - 1), 0.10);
  EXPECT_LT(std::fabs(q5k / f32 - 1), 0.03);  // Q5_1 here (rows of 64): between Q8_0 and Q4_0
  EXPECT_NE(q8, f32);                         // the weights did change
}

TEST(Perplexity, BadArgumentsAreNamed) {
  Transformer t(load_model(aidreams().bin), 0, nullptr);
  auto msg = [&](const std::vector<int>& ids, int ctx) {
    try {
      perplexity(t, ids, ctx);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg({1}, 128).find("at least 2 tokens"), std::string::npos);
  EXPECT_NE(msg({1, 2, 3}, 1).find("window 1"), std::string::npos);
  EXPECT_NE(msg({1, 2, 3}, 129).find("window 129"), std::string::npos);
  EXPECT_NE(msg({1, 512}, 16).find("outside the vocabulary"), std::string::npos);
}

}  // namespace
