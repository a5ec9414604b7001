// GGUF: llama2.c models converted to GGUF behave exactly like the .bin path (config, token
// ids, logits bit for bit); every metadata kind parses; every malformed class is refused with
// a message naming it; random corruption never crashes.
#include <gtest/gtest.h>

#include <fstream>
#if defined(__linux__)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include <cstring>
#include <random>

#include "common.h"
#include "formats/file.h"
#include "formats/gguf.h"
#include "formats/gguf_model.h"
#include "formats/gguf_writer.h"
#include "formats/loader.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"

using namespace qkv;

namespace {

const std::string kModels = std::string(QKV_SHARED_DIR) + "/models/";

std::shared_ptr<const Blob> blob_of(std::vector<uint8_t> v) { return std::make_shared<VectorBlob>(std::move(v)); }

std::vector<uint8_t> converted(const std::string& model) {
  auto mb = map_file(kModels + model);
  LoadedModel m = load_model(mb);
  auto tb = map_file(kModels + "aidreams-tok512.bin");
  Tokenizer t = Tokenizer::from_llama2c(tb->data(), tb->size(), m.config.vocab_size);
  return llama2c_to_gguf(m, t, model);
}

class GgufConversion : public ::testing::TestWithParam<const char*> {};

TEST_P(GgufConversion, SameConfigTokensAndLogitsAsTheBinPath) {
  auto bin_blob = map_file(kModels + GetParam());
  auto gguf_blob = blob_of(converted(GetParam()));
  LoadedModel a = load_model(bin_blob), b = load_model(gguf_blob);
  EXPECT_EQ(a.config.describe(), b.config.describe());
  auto tb = map_file(kModels + "aidreams-tok512.bin");
  Tokenizer ta = Tokenizer::from_llama2c(tb->data(), tb->size(), a.config.vocab_size);
  std::unique_ptr<Tokenizer> tg = embedded_tokenizer(gguf_blob);
  ASSERT_TRUE(tg);
  for (const char* text : {"I dream of", "Once upon a time, a cat.", "  spaces  and\ttabs\n", "héllo wörld",
                           "日本語のテキスト", "emoji 🙂🚀", "code: x[i] += 1;", ""}) {
    std::vector<int> ia = ta.encode(text, true, false), ig = tg->encode(text, true, false);
    EXPECT_EQ(ia, ig) << "'" << text << "'";
    std::string da, dg;
    for (size_t i = 1; i < ia.size(); i++) da += ta.decode(ia[i - 1], ia[i]);
    for (size_t i = 1; i < ig.size(); i++) dg += tg->decode(ig[i - 1], ig[i]);
    EXPECT_EQ(da, dg);
  }
  Transformer ma(a, 0, nullptr), mg(b, 0, nullptr);
  std::vector<int> ids = ta.encode("I dream of electric sheep", true, false);
  const float* la = ma.forward(ids.data(), (int)ids.size(), 0);
  const float* lg = mg.forward(ids.data(), (int)ids.size(), 0);
  for (int i = 0; i < a.config.vocab_size; i++) ASSERT_EQ(la[i], lg[i]) << "logit " << i;
}

INSTANTIATE_TEST_SUITE_P(SharedModels, GgufConversion, ::testing::Values("aidreams260K.bin", "stories260K.bin"));

// ---- a raw GGUF builder for metadata kinds and malformed files ------------------------------

struct Raw {
  std::vector<uint8_t> o;
  template <class T>
  Raw& put(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    o.insert(o.end(), b, b + sizeof(T));
    return *this;
  }
  Raw& str(const std::string& s) {
    put<uint64_t>(s.size());
    o.insert(o.end(), s.begin(), s.end());
    return *this;
  }
};

Raw header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
  Raw r;
  r.o = {'G', 'G', 'U', 'F'};
  r.put<uint32_t>(version).put<uint64_t>(n_tensors).put<uint64_t>(n_kv);
  return r;
}

void expect_error(const std::vector<uint8_t>& bytes, ErrorCode code, const std::string& needle) {
  try {
    GgufFile::parse(blob_of(bytes));
    ADD_FAILURE() << "parsed, expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(GgufMetadata, EveryKindParses) {
  Raw r = header(3, 0, 14);
  r.str("u8").put<uint32_t>(0).put<uint8_t>(200);
  r.str("i8").put<uint32_t>(1).put<int8_t>(-5);
  r.str("u16").put<uint32_t>(2).put<uint16_t>(60000);
  r.str("i16").put<uint32_t>(3).put<int16_t>(-30000);
  r.str("u32").put<uint32_t>(4).put<uint32_t>(4000000000u);
  r.str("i32").put<uint32_t>(5).put<int32_t>(-2000000000);
  r.str("f32").put<uint32_t>(6).put<float>(1.5f);
  r.str("bool").put<uint32_t>(7).put<uint8_t>(1);
  r.str("str").put<uint32_t>(8).str("hello");
  r.str("u64").put<uint32_t>(10).put<uint64_t>(1ull << 40);
  r.str("i64").put<uint32_t>(11).put<int64_t>(-(1ll << 40));
  r.str("f64").put<uint32_t>(12).put<double>(2.25);
  r.str("arr").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(2).str("a").str("bc");
  r.str("nested")
      .put<uint32_t>(9)
      .put<uint32_t>(9)
      .put<uint64_t>(1)
      .put<uint32_t>(5)
      .put<uint64_t>(2)
      .put<int32_t>(7)
      .put<int32_t>(8);
  GgufFile g = GgufFile::parse(blob_of(r.o));
  EXPECT_EQ(g.get_int("u8"), 200);
  EXPECT_EQ(g.get_int("i8"), -5);
  EXPECT_EQ(g.get_int("u16"), 60000);
  EXPECT_EQ(g.get_int("i16"), -30000);
  EXPECT_EQ(g.get_int("u32"), 4000000000ll);
  EXPECT_EQ(g.get_int("i32"), -2000000000);
  EXPECT_EQ(g.get_float("f32"), 1.5);
  EXPECT_EQ(g.get_int("bool"), 1);
  EXPECT_EQ(g.get_string("str"), "hello");
  EXPECT_EQ(g.get_int("u64"), 1ll << 40);
  EXPECT_EQ(g.get_int("i64"), -(1ll << 40));
  EXPECT_EQ(g.get_float("f64"), 2.25);
  ASSERT_EQ(g.get("arr").size(), 2u);
  EXPECT_EQ(g.get("arr").str_at(1), "bc");
  EXPECT_EQ(g.get("nested").arr[0].int_at(1), 8);
  EXPECT_EQ(g.get_int_or("absent", 42), 42);
  try {
    g.get_string("general.architecture");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("general.architecture"), std::string::npos) << "missing keys are named";
  }
}

// One tensor "t" of `type` with ne0 x ne1 and the given offset; data section of data_bytes.
std::vector<uint8_t> one_tensor(uint32_t type, uint64_t ne0, uint64_t ne1, uint64_t offset, uint64_t data_bytes,
                                uint32_t n_dims = 2) {
  Raw r = header(3, 1, 0);
  r.str("t").put<uint32_t>(n_dims).put<uint64_t>(ne0);
  if (n_dims >= 2) r.put<uint64_t>(ne1);
  for (uint32_t i = 2; i < n_dims; i++) r.put<uint64_t>(1);
  r.put<uint32_t>(type).put<uint64_t>(offset);
  r.o.resize((r.o.size() + 31) / 32 * 32 + data_bytes, 0);
  return r.o;
}

// Issue 33, item 12: metadata arrays are held compactly (each element of a u8 array was a
// ~96-byte value: a 10 MB array took ~1 GB), and what the parser holds is counted.
TEST(GgufMetadata, ArraysAreHeldCompactly) {
  const uint64_t n = 10u << 20;
  Raw r = header(3, 0, 3);
  r.str("bytes").put<uint32_t>(9).put<uint32_t>(0).put<uint64_t>(n);
  r.o.resize(r.o.size() + n, 7);
  r.o.back() = 9;
  r.str("strings").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(1u << 20);
  for (int i = 0; i < (1 << 20); i++) r.str(i % 2 ? "" : "ab");
  r.str("floats").put<uint32_t>(9).put<uint32_t>(6).put<uint64_t>(3).put<float>(0.5f).put<float>(-2.0f).put<float>(
      1e30f);
  const uint64_t file_bytes = r.o.size();
  const GgufFile g = GgufFile::parse(blob_of(std::move(r.o)));
  ASSERT_EQ(g.get("bytes").size(), n);
  EXPECT_EQ(g.get("bytes").int_at(0), 7);
  EXPECT_EQ(g.get("bytes").int_at(n - 1), 9);
  ASSERT_EQ(g.get("strings").size(), 1u << 20);
  EXPECT_EQ(g.get("strings").str_at(0), "ab");
  EXPECT_EQ(g.get("strings").str_at(1), "");
  EXPECT_EQ(g.get("floats").num_at(1), -2.0);
  EXPECT_EQ(g.get("floats").num_at(2), (double)1e30f);
  // What the parser holds is about what the file holds (a string costs its bytes and an end).
  EXPECT_LT(g.metadata_bytes(), file_bytes + (1u << 20));
  EXPECT_GT(g.metadata_bytes(), n);
#if defined(__linux__)
  // The same in a child whose address space may grow by only 200 MB beyond what it has (a
  // 10 MB array of values needed ~1 GB): parsing must succeed there.
  Raw big = header(3, 0, 1);
  big.str("bytes").put<uint32_t>(9).put<uint32_t>(0).put<uint64_t>(n);
  big.o.resize(big.o.size() + n, 1);
  const auto blob = blob_of(std::move(big.o));
  const pid_t pid = fork();
  if (pid == 0) {
    uint64_t vm_kb = 0;
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
      if (line.compare(0, 7, "VmSize:") == 0) vm_kb = std::stoull(line.substr(7));
    const rlimit lim{(rlim_t)(vm_kb * 1024 + (200u << 20)), (rlim_t)(vm_kb * 1024 + (200u << 20))};
    setrlimit(RLIMIT_AS, &lim);
    try {
      _exit(GgufFile::parse(blob).get("bytes").size() == n ? 0 : 2);
    } catch (...) {
      _exit(3);
    }
  }
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
      << "the child could not parse a 10 MB array in 200 MB (status " << st << ")";
#endif
}

TEST(BadInputGguf, MetadataCountsAreBounded) {
  // Keys and arrays of arrays are held as values: their counts are bounded, not just by the file.
  Raw r = header(3, 0, 100000);
  for (int i = 0; i < 100000; i++) r.str("k" + std::to_string(i)).put<uint32_t>(0).put<uint8_t>(1);
  expect_error(r.o, ErrorCode::BadModel, "keys");
  Raw a = header(3, 0, 1);
  a.str("nested").put<uint32_t>(9).put<uint32_t>(9).put<uint64_t>(100000);
  for (int i = 0; i < 100000; i++) a.put<uint32_t>(0).put<uint64_t>(0);
  expect_error(a.o, ErrorCode::BadModel, "arrays in an array");
  Raw b = header(3, 0, 1);
  b.str("flags").put<uint32_t>(9).put<uint32_t>(7).put<uint64_t>(2).put<uint8_t>(1).put<uint8_t>(2);
  expect_error(b.o, ErrorCode::BadModel, "bool with value 2");
}

TEST(BadInputGguf, EveryMalformedClassIsNamed) {
  EXPECT_NO_THROW(GgufFile::parse(blob_of(one_tensor(0, 8, 2, 0, 64))));
  std::vector<uint8_t> magic = one_tensor(0, 8, 2, 0, 64);
  magic[0] = 'X';
  expect_error(magic, ErrorCode::BadModel, "magic");
  expect_error(header(1, 0, 0).o, ErrorCode::Unsupported, "version 1");
  expect_error(header(4, 0, 0).o, ErrorCode::Unsupported, "version 4");
  expect_error(header(3, 0, 1ull << 60).o, ErrorCode::BadModel, "metadata count");
  expect_error(header(3, 1ull << 60, 0).o, ErrorCode::BadModel, "tensor count");
  Raw longstr = header(3, 0, 1);
  longstr.put<uint64_t>(1ull << 50);
  longstr.o.resize(longstr.o.size() + 32, 0);
  expect_error(longstr.o, ErrorCode::BadModel, "runs past the end");
  Raw badkind = header(3, 0, 1);
  badkind.str("k").put<uint32_t>(99);
  expect_error(badkind.o, ErrorCode::BadModel, "unknown value kind");
  Raw bigarr = header(3, 0, 1);
  bigarr.str("k").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(1ull << 40);
  expect_error(bigarr.o, ErrorCode::BadModel, "more than the file holds");
  Raw badbool = header(3, 0, 1);
  badbool.str("k").put<uint32_t>(7).put<uint8_t>(7);
  expect_error(badbool.o, ErrorCode::BadModel, "bool");
  expect_error(one_tensor(0, 8, 2, 0, 32), ErrorCode::BadModel, "runs past the end");  // 64 bytes needed
  expect_error(one_tensor(0, 8, 2, 1ull << 40, 64), ErrorCode::BadModel, "runs past the end");
  expect_error(one_tensor(0, 8, 2, 4, 64), ErrorCode::BadModel, "not aligned");
  expect_error(one_tensor(77, 8, 2, 0, 64), ErrorCode::Unsupported, "unknown type 77");
  expect_error(one_tensor(8, 33, 1, 0, 64), ErrorCode::BadModel, "multiple of the Q8_0 block");
  expect_error(one_tensor(0, 1ull << 39, 1ull << 39, 0, 64), ErrorCode::BadModel, "too many elements");
  expect_error(one_tensor(0, 0, 2, 0, 64), ErrorCode::BadModel, "dimension 0");
  expect_error(one_tensor(0, 8, 2, 0, 64, 5), ErrorCode::BadModel, "5 dimensions");
  // Two tensors sharing bytes.
  Raw ov = header(3, 2, 0);
  ov.str("a").put<uint32_t>(1).put<uint64_t>(16).put<uint32_t>(0).put<uint64_t>(0);
  ov.str("b").put<uint32_t>(1).put<uint64_t>(16).put<uint32_t>(0).put<uint64_t>(32);
  ov.o.resize((ov.o.size() + 31) / 32 * 32 + 128, 0);
  expect_error(ov.o, ErrorCode::BadModel, "overlap");
  // Duplicate key.
  Raw dup = header(3, 0, 2);
  dup.str("k").put<uint32_t>(4).put<uint32_t>(1).str("k").put<uint32_t>(4).put<uint32_t>(2);
  expect_error(dup.o, ErrorCode::BadModel, "appears twice");
}

TEST(BadInputGguf, TruncationAtEveryHeaderByteAndInTheData) {
  std::vector<uint8_t> full = converted("aidreams260K.bin");
  GgufFile g = GgufFile::parse(blob_of(full));
  std::vector<uint64_t> cuts;
  for (uint64_t n = 0; n < g.data_offset(); n += 1 + n / 64) cuts.push_back(n);
  for (uint64_t n : {g.data_offset() + 1, (uint64_t)full.size() / 2, (uint64_t)full.size() - 1}) cuts.push_back(n);
  for (uint64_t n : cuts) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + n);
    try {
      GgufFile::parse(blob_of(cut));
      ADD_FAILURE() << "a file cut at " << n << " bytes parsed";
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == ErrorCode::BadModel) << n << ": " << e.what();
    }
  }
}

TEST(BadInputGguf, ArchitectureAndModelErrorsAreNamed) {
  auto build = [](const std::string& arch, bool f16) {
    GgufWriter w;
    w.add_string("general.architecture", arch);
    w.add_u32("llama.embedding_length", 8);
    w.add_u32("llama.feed_forward_length", 16);
    w.add_u32("llama.block_count", 1);
    w.add_u32("llama.attention.head_count", 2);
    w.add_u32("llama.context_length", 16);
    std::vector<float> z(8 * 16, 0.0f);
    w.add_tensor_f32("token_embd.weight", {8, 16}, z.data());
    std::vector<uint8_t> o = w.finish();
    if (f16) {  // retag the tensor as F16 (its data is then too long, which is fine to parse)
      GgufFile g = GgufFile::parse(std::make_shared<VectorBlob>(o));
      (void)g;
    }
    return o;
  };
  try {
    load_model(blob_of(build("mamba", false)));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("'mamba'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("supported: llama"), std::string::npos);
  }
  try {
    load_model(blob_of(build("llama", false)));  // no layer tensors
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::BadModel);
    EXPECT_NE(std::string(e.what()).find("blk.0.attn_norm.weight is missing"), std::string::npos) << e.what();
  }
}

TEST(BadInputGguf, RandomCorruptionNeverCrashes) {
  std::vector<uint8_t> full = converted("stories260K.bin");
  GgufFile g = GgufFile::parse(blob_of(full));
  const uint64_t head = g.data_offset();
  std::mt19937 rng(12345);
  int loaded = 0, refused = 0;
  for (int it = 0; it < 300; it++) {
    std::vector<uint8_t> b = full;
    const int flips = 1 + rng() % 4;
    for (int f = 0; f < flips; f++) b[rng() % head] = (uint8_t)rng();
    try {
      auto bb = blob_of(std::move(b));
      LoadedModel m = load_model(bb);
      auto tok = embedded_tokenizer(bb);
      Transformer t(m, 8, nullptr);
      std::vector<int> ids = tok->encode("I dream", true, false);
      for (int& id : ids) id = id % m.config.vocab_size;
      t.forward(ids.data(), (int)std::min<size_t>(ids.size(), 8), 0);
      loaded++;
    } catch (const Error&) {
      refused++;
    }
  }
  EXPECT_EQ(loaded + refused, 300);
  EXPECT_GT(refused, 0);
}

}  // namespace

namespace {

// An f32 copy of a loaded model, every weight dequantized (the reference for stored types).
struct F32Copy {
  std::vector<std::vector<float>> bufs;
  LoadedModel m;
};
F32Copy dequantized(const LoadedModel& src) {
  F32Copy c;
  c.m = src;
  auto conv = [&](Tensor& t) {
    std::vector<float> v((size_t)t.rows * t.cols);
    for (int64_t r = 0; r < t.rows; r++) dequantize_row_ref(t.type, t.row(r), v.data() + r * t.cols, (int)t.cols);
    c.bufs.push_back(std::move(v));
    t.type = DType::F32;
    t.data = c.bufs.back().data();
  };
  conv(c.m.weights.tok_embed);
  for (auto& L : c.m.weights.layers)
    for (Tensor* t : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_down, &L.w_up}) conv(*t);
  if (c.m.config.tied_classifier) c.m.weights.classifier = c.m.weights.tok_embed;
  else conv(c.m.weights.classifier);
  return c;
}

// Largest and root-mean-square difference of two (n, V) logit arrays, each position scaled by
// the largest |logit| of `ref` there.
struct LogitDiff {
  double max = 0, rms = 0;
};
LogitDiff logit_diff(const float* a, const float* ref, int n, int V) {
  LogitDiff r;
  for (int p = 0; p < n; p++) {
    double scale = 0;
    for (int i = 0; i < V; i++) scale = std::max(scale, (double)std::fabs(ref[(size_t)p * V + i]));
    for (int i = 0; i < V; i++) {
      const double d = std::fabs(a[(size_t)p * V + i] - ref[(size_t)p * V + i]) / scale;
      r.max = std::max(r.max, d);
      r.rms += d * d;
    }
  }
  r.rms = std::sqrt(r.rms / ((double)n * V));
  return r;
}

class StoredTypes : public ::testing::TestWithParam<const char*> {};

// F16/BF16 run the f32 arithmetic on decoded weights: equal to dequantize-then-f32. The block
// types quantize the activations to 8 bits per 32 (the Q8_0 rounding, applied to the other
// operand of every product): they must stay as close to dequantize-then-f32 as rounding the
// weights to Q8_0 keeps the f32 model (measured here on the same model and prompt).
TEST_P(StoredTypes, QuantizedEngineEqualsDequantizeThenF32) {
  auto mb = map_file(kModels + std::string("stories260K.bin"));
  LoadedModel f32 = load_model(mb);
  auto tb = map_file(kModels + "aidreams-tok512.bin");
  Tokenizer tok = Tokenizer::from_llama2c(tb->data(), tb->size(), f32.config.vocab_size);
  const QType type = parse_qtype(GetParam());
  std::vector<int> ids = tok.encode("Once upon a time there was a dream", true, false);
  const int V = f32.config.vocab_size, n = (int)ids.size();
  // Logits of every position: the stored-type engine and the same weights decoded to f32.
  auto run = [&](QType t, std::vector<float>* stored, std::vector<float>* decoded) {
    auto blob = blob_of(llama2c_to_gguf(f32, tok, "t", t));
    LoadedModel q = load_model(blob);
    EXPECT_EQ(q.weights.layers[0].wq.type, t) << "attention weights keep the stored type";
    F32Copy ref = dequantized(q);
    Transformer tq(q, 0, nullptr), tr(ref.m, 0, nullptr);
    const float* a = tq.forward(ids.data(), n, 0, true) - (size_t)(n - 1) * V;  // batched prefill
    stored->assign(a, a + (size_t)n * V);
    const float* b = tr.forward(ids.data(), n, 0, true) - (size_t)(n - 1) * V;
    decoded->assign(b, b + (size_t)n * V);
    // Decoding one token at a time (the T = 1 kernels) gives the last position's logits.
    Transformer tq1(q, 0, nullptr);
    for (int p = 0; p < n; p++) tq1.forward(&ids[p], 1, p);
    return logit_diff(tq1.logits(), stored->data() + (size_t)(n - 1) * V, 1, V);
  };
  std::vector<float> stored, decoded, q8, q8_decoded;
  const LogitDiff decode_vs_batch = run(type, &stored, &decoded);
  Transformer tf(f32, 0, nullptr);
  const float* f = tf.forward(ids.data(), n, 0, true) - (size_t)(n - 1) * V;
  const LogitDiff engine = logit_diff(stored.data(), decoded.data(), n, V);
  EXPECT_GT(logit_diff(f, decoded.data(), n, V).max, 0.0) << "the quantized weights must differ from the f32 ones";
  if (!qtype_int_dot(type)) {
    EXPECT_LE(engine.max, 1e-4) << GetParam() << ": stored-type engine vs dequantize-then-f32";
    EXPECT_LE(decode_vs_batch.max, 2e-4) << GetParam() << ": decode vs batched prefill";
    return;
  }
  run(QType::Q8_0, &q8, &q8_decoded);
  const LogitDiff q8_rounding = logit_diff(q8_decoded.data(), f, n, V);
  EXPECT_LE(engine.rms, q8_rounding.rms) << GetParam() << ": 8-bit activations vs dequantize-then-f32";
  EXPECT_LE(engine.max, q8_rounding.max) << GetParam();
  // Decode and prefill quantize each token's activations the same way; only the attention
  // kernels' rounding differs, which can tip an activation's rounding: far below the above.
  EXPECT_LE(decode_vs_batch.max, 0.25 * q8_rounding.max) << GetParam() << ": decode vs batched prefill";
}

INSTANTIATE_TEST_SUITE_P(Types, StoredTypes, ::testing::Values("f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1"));

}  // namespace
