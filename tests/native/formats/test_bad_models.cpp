// Bad model files: truncated, impossible or oversized llama2.c headers, GGUF magic sent to the
// GGUF reader and errors naming what a file looks like, and random corruption that must end in a
// usable model or a qkv::Error (see bad_input.h for the synthetic checkpoints).
#include <gtest/gtest.h>

#include "bad_input.h"
#include "test_models.h"

using namespace qkv_test;

namespace {

// ---------------------------------------------------------------------------------------------
// Baseline: the synthetic model and tokenizer are valid, so every failure below is the
// corruption's doing.
// ---------------------------------------------------------------------------------------------

TEST(BadInputBaseline, SyntheticTinyModelLoadsAndRuns) {
  for (bool freq : {false, true}) {
    qkv::LoadedModel m = load(tiny_model(freq));
    EXPECT_EQ(m.config.dim, 8);
    EXPECT_EQ(m.config.vocab_size, 32);
    qkv::Transformer tr(std::move(m), 0, one_thread());
    qkv::Tokenizer tok = load_tok(tiny_tokenizer(), 32);
    qkv::RunOptions ro;
    ro.prompt = "abba";
    ro.steps = 10;
    ro.sampler.temperature = 0.0f;
    std::string out;
    qkv::RunStats st = qkv::run_generate(tr, tok, ro, [&](const std::string& p) { out += p; });
    EXPECT_GT(st.prompt_tokens, 1);
    EXPECT_FALSE(out.empty());
  }
  // Separate classifier (negative vocab_size in the header).
  Header h = tiny_header();
  h.v[kVocab] = -32;
  qkv::LoadedModel m = load(make_checkpoint(h));
  EXPECT_FALSE(m.config.tied_classifier);
  EXPECT_EQ(m.config.vocab_size, 32);
}

// ---------------------------------------------------------------------------------------------
// Truncated checkpoints
// ---------------------------------------------------------------------------------------------

TEST(BadInputCheckpoint, EmptyFile) {
  EXPECT_QKV_ERROR(load({}), ErrorCode::BadModel, "empty");
  EXPECT_QKV_ERROR(qkv::load_model(nullptr), ErrorCode::BadModel, "empty");
}

TEST(BadInputCheckpoint, TruncatedInsideHeader) {
  const std::vector<uint8_t> full = tiny_model();
  for (size_t n : {1u, 4u, 10u, 27u}) {
    SCOPED_TRACE("cut at " + std::to_string(n));
    EXPECT_QKV_ERROR(load(cut(full, n)), ErrorCode::BadModel, "truncated", "28-byte header",
                     (std::to_string(n) + " bytes").c_str());
  }
}

TEST(BadInputCheckpoint, TruncatedAfterHeaderAndInWeights) {
  const std::vector<uint8_t> full = tiny_model();
  const std::string need = std::to_string(full.size());
  for (size_t n : {size_t(28), size_t(29), size_t(32), full.size() / 2, full.size() - 4, full.size() - 1}) {
    SCOPED_TRACE("cut at " + std::to_string(n));
    EXPECT_QKV_ERROR(load(cut(full, n)), ErrorCode::BadModel, "truncated", need.c_str(),
                     ("the file has " + std::to_string(n)).c_str());
  }
}

TEST(BadInputCheckpoint, TrailingExtraBytes) {
  const std::vector<uint8_t> full = tiny_model();
  for (size_t extra : {1u, 3u, 4u, 1000u}) {
    SCOPED_TRACE("extra " + std::to_string(extra));
    std::vector<uint8_t> v = full;
    v.resize(v.size() + extra, 0);
    EXPECT_QKV_ERROR(load(v), ErrorCode::BadModel, "matches neither", "corrupt", std::to_string(v.size()).c_str());
  }
  // Between the two legal layouts (half a freq_cis block).
  std::vector<uint8_t> with_freq = tiny_model(true);
  const size_t without = tiny_model(false).size();
  EXPECT_QKV_ERROR(load(cut(with_freq, (without + with_freq.size()) / 2)), ErrorCode::BadModel, "matches neither");
}

TEST(BadInputCheckpoint, FromDiskViaMapFile) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "qkv_bad_input_empty.bin";
  { std::ofstream(path, std::ios::binary | std::ios::trunc); }
  EXPECT_QKV_ERROR(qkv::load_model(qkv::map_file(path)), ErrorCode::BadModel, "empty");
  const std::string trunc = dir + "qkv_bad_input_trunc.bin";
  {
    std::vector<uint8_t> v = cut(tiny_model(), 100);
    std::ofstream(trunc, std::ios::binary | std::ios::trunc).write((const char*)v.data(), v.size());
  }
  EXPECT_QKV_ERROR(qkv::load_model(qkv::map_file(trunc)), ErrorCode::BadModel, "truncated");
  std::remove(path.c_str());
  std::remove(trunc.c_str());
  EXPECT_QKV_ERROR(qkv::map_file(dir + "qkv_bad_input_does_not_exist.bin"), ErrorCode::Io, "cannot open",
                   "qkv_bad_input_does_not_exist.bin");
  EXPECT_QKV_ERROR(qkv::map_file(dir), ErrorCode::Io, "not a regular file");
}

// ---------------------------------------------------------------------------------------------
// Impossible header values
// ---------------------------------------------------------------------------------------------

struct HeaderCase {
  const char* name;
  std::vector<std::pair<int, int32_t>> set;
  std::vector<const char*> needles;
};

void expect_header_rejected(const HeaderCase& c) {
  SCOPED_TRACE(c.name);
  std::vector<uint8_t> v = tiny_model();
  for (auto& fv : c.set) set_field(v, fv.first, fv.second);
  std::string msg;
  const auto t0 = std::chrono::steady_clock::now();
  {
    AddressSpaceCap cap(256ull << 20);  // no header may make the loader allocate more than this
    msg = message_of([&] { load(v); });
    EXPECT_TRUE(ThrowsQkv([&] { load(v); }, ErrorCode::BadModel, {}));
  }
  EXPECT_LT(ms_since(t0), 500.0) << "rejecting a bad header must be fast";
  for (const char* n : c.needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
}

TEST(BadInputHeader, ZeroAndNegativeSizes) {
  const HeaderCase cases[] = {
      {"dim 0", {{kDim, 0}}, {"dim = 0"}},
      {"dim -8", {{kDim, -8}}, {"dim = -8"}},
      {"hidden_dim 0", {{kHidden, 0}}, {"hidden_dim = 0"}},
      {"hidden_dim -16", {{kHidden, -16}}, {"hidden_dim = -16"}},
      {"n_layers 0", {{kLayers, 0}}, {"n_layers = 0"}},
      {"n_layers -1", {{kLayers, -1}}, {"n_layers = -1"}},
      {"n_heads 0", {{kHeads, 0}}, {"n_heads = 0"}},
      {"n_heads -2", {{kHeads, -2}}, {"n_heads = -2"}},
      {"n_kv_heads 0", {{kKvHeads, 0}}, {"n_kv_heads = 0"}},
      {"n_kv_heads -1", {{kKvHeads, -1}}, {"n_kv_heads = -1"}},
      {"seq_len 0", {{kSeqLen, 0}}, {"seq_len = 0"}},
      {"seq_len -16", {{kSeqLen, -16}}, {"seq_len = -16"}},
      {"vocab_size 0", {{kVocab, 0}}, {"vocab_size"}},
      {"vocab_size INT32_MIN", {{kVocab, INT32_MIN}}, {"vocab_size"}},
  };
  for (const HeaderCase& c : cases) expect_header_rejected(c);
}

TEST(BadInputHeader, InconsistentHeads) {
  const HeaderCase cases[] = {
      {"n_heads does not divide dim", {{kHeads, 3}}, {"not divisible by n_heads = 3"}},
      {"n_kv_heads > n_heads", {{kKvHeads, 4}}, {"n_kv_heads = 4", "n_heads = 2"}},
      {"n_kv_heads does not divide n_heads",
       {{kDim, 12}, {kHeads, 3}, {kKvHeads, 2}},
       {"n_heads = 3", "n_kv_heads = 2"}},
  };
  for (const HeaderCase& c : cases) expect_header_rejected(c);
}

TEST(BadInputHeader, OddHeadSize) {
  // dim 6 / 2 heads = head size 3: rotary embedding needs pairs.
  std::vector<uint8_t> v = tiny_model();
  set_field(v, kDim, 6);
  std::string msg = message_of([&] { load(v); });
  EXPECT_TRUE(ThrowsQkv([&] { load(v); }, ErrorCode::BadModel, {"3"}));
  EXPECT_TRUE(msg.find("odd") != std::string::npos || msg.find("even") != std::string::npos) << msg;
  EXPECT_TRUE(msg.find("head") != std::string::npos || msg.find("rotary") != std::string::npos) << msg;
}

TEST(BadInputHeader, HugeValuesFailFastWithoutAllocating) {
  const int32_t G = 1 << 30;
  const HeaderCase cases[] = {
      {"dim 2^30", {{kDim, G}}, {"dim = 1073741824"}},
      {"hidden_dim 2^30", {{kHidden, G}}, {"hidden_dim = 1073741824"}},
      {"n_layers 2^30", {{kLayers, G}}, {"n_layers = 1073741824"}},
      {"n_heads 2^30", {{kHeads, G}}, {"n_heads"}},
      {"n_kv_heads 2^30", {{kKvHeads, G}}, {"n_kv_heads = 1073741824"}},
      {"vocab_size 2^30", {{kVocab, G}}, {"vocab_size = 1073741824"}},
      {"vocab_size -2^30", {{kVocab, -G}}, {"vocab_size = 1073741824"}},
      {"seq_len 2^30", {{kSeqLen, G}}, {"seq_len = 1073741824"}},
      {"all INT32_MAX",
       {{kDim, INT32_MAX},
        {kHidden, INT32_MAX},
        {kLayers, INT32_MAX},
        {kHeads, INT32_MAX},
        {kKvHeads, INT32_MAX},
        {kVocab, INT32_MAX},
        {kSeqLen, INT32_MAX}},
       {"2147483647"}},
      {"all INT32_MIN",
       {{kDim, INT32_MIN},
        {kHidden, INT32_MIN},
        {kLayers, INT32_MIN},
        {kHeads, INT32_MIN},
        {kKvHeads, INT32_MIN},
        {kVocab, INT32_MIN},
        {kSeqLen, INT32_MIN}},
       {"-2147483648"}},
      // Largest values the validator allows: the implied size (terabytes) is refused against
      // the file's length before anything is allocated.
      {"maximal in-range header",
       {{kDim, 1 << 16},
        {kHidden, 1 << 18},
        {kLayers, 1024},
        {kHeads, 64},
        {kKvHeads, 64},
        {kVocab, -(1 << 22)},
        {kSeqLen, 1 << 20}},
       {"truncated", "needs"}},
  };
  for (const HeaderCase& c : cases) expect_header_rejected(c);
}

// ---------------------------------------------------------------------------------------------
// Sizes that run past the end of the file
// ---------------------------------------------------------------------------------------------

TEST(BadInputCheckpoint, HeaderSizesPastEndOfFile) {
  const HeaderCase cases[] = {
      {"more layers than the file holds", {{kLayers, 3}}, {"truncated", "layers 3", "needs"}},
      {"1024 layers", {{kLayers, 1024}}, {"truncated", "needs"}},
      {"bigger vocabulary", {{kVocab, 4000}}, {"truncated", "vocab 4000"}},
      {"wider model", {{kDim, 64}, {kHeads, 2}}, {"truncated", "dim 64"}},
      {"wider ffn", {{kHidden, 1 << 18}}, {"truncated"}},
      {"separate classifier the file lacks", {{kVocab, -32}}, {"truncated", "separate classifier"}},
  };
  for (const HeaderCase& c : cases) expect_header_rejected(c);
  // Fewer layers than the file holds: the rest is unexplained trailing data.
  expect_header_rejected({"fewer layers than the file holds", {{kLayers, 1}}, {"matches neither"}});
}

TEST(BadInputFormat, GgufMagicGoesToTheGgufReader) {
  std::vector<uint8_t> v = {'G', 'G', 'U', 'F', 3, 0, 0, 0};
  v.resize(64, 0);
  EXPECT_QKV_ERROR(load(v), ErrorCode::BadModel, "general.architecture");
  EXPECT_QKV_ERROR(load(cut(v, 4)), ErrorCode::BadModel, "GGUF");
  v[4] = 9;
  EXPECT_QKV_ERROR(load(v), ErrorCode::Unsupported, "GGUF version 9");
  // A tokenizer or text file handed over as a model is refused, not interpreted.
  EXPECT_QKV_ERROR(load(tiny_tokenizer()), ErrorCode::BadModel, "looks like a llama2.c tokenizer", "-z");
  const std::string text = "this is not a model file at all, just some text";
  EXPECT_QKV_ERROR(load(std::vector<uint8_t>(text.begin(), text.end())), ErrorCode::BadModel);
}

std::vector<uint8_t> bytes_of(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

// Issue 33 item 5: the format is detected first, and the error says what the file looks like and
// what was expected, instead of reading it as a corrupt model of another format.
TEST(BadInputFormat, ErrorsNameWhatTheFileLooksLike) {
  const char* expected = "expected GGUF or a llama2.c checkpoint";
  // A text file renamed .gguf used to be read as a llama2.c header (dim = 1936287860 ...).
  const std::string text = "this is not a model file at all, just some text\nwith a second line\n";
  EXPECT_QKV_ERROR(load(bytes_of(text)), ErrorCode::BadModel, "looks like a text file, not a model", expected);
  EXPECT_EQ(message_of([&] { load(bytes_of(text)); }).find("dim ="), std::string::npos);
  EXPECT_QKV_ERROR(load(bytes_of("caf\xc3\xa9 na\xc3\xafve \xe2\x80\x94 UTF-8 text")), ErrorCode::BadModel,
                   "text file");
  EXPECT_QKV_ERROR(load({}), ErrorCode::BadModel, "is empty", "expected a GGUF model or a llama2.c checkpoint");
  EXPECT_QKV_ERROR(load(bytes_of("<!DOCTYPE html><html><body>404</body></html>")), ErrorCode::BadModel,
                   "web page (HTML)");
  EXPECT_QKV_ERROR(load(bytes_of("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 12\n")),
                   ErrorCode::BadModel, "Git LFS pointer", "git lfs pull");
  std::vector<uint8_t> st = {14, 0, 0, 0, 0, 0, 0, 0};
  const std::string json = "{\"__metadata__\"";
  st.insert(st.end(), json.begin(), json.end());
  st.resize(64, 0);
  EXPECT_QKV_ERROR(load(st), ErrorCode::BadModel, "safetensors", expected, "checkpoint's directory");
  std::vector<uint8_t> zip = {'P', 'K', 3, 4};
  zip.resize(100, 0);
  EXPECT_QKV_ERROR(load(zip), ErrorCode::BadModel, "zip archive");
  // Binary data with no magic and no plausible llama2.c header: both formats are named.
  std::vector<uint8_t> junk(200);
  for (size_t i = 0; i < junk.size(); i++) junk[i] = (uint8_t)(0x80 + (i * 37) % 120);
  junk[3] = 0xff;  // a negative dim
  EXPECT_QKV_ERROR(load(junk), ErrorCode::BadModel, "not GGUF", "not a plausible llama2.c checkpoint");
  // Real llama2.c checkpoints are still read as such (their headers are not text).
  EXPECT_NO_THROW(load(tiny_model()));
}

TEST(BadInputFormat, TruncatedGgufSaysGgufAndWhatIsCut) {
  const std::vector<uint8_t> all = qkv::write_test_model(qkv::TestModelSpec{});
  for (size_t n : {size_t(6), size_t(20), size_t(100), size_t(2000), all.size() / 2, all.size() - 1}) {
    SCOPED_TRACE("cut at " + std::to_string(n));
    const std::string m = message_of([&] { load(cut(all, n)); });
    EXPECT_NE(m.find("GGUF"), std::string::npos) << m;
    EXPECT_TRUE(m.find("truncated") != std::string::npos || m.find("runs past the end") != std::string::npos) << m;
    EXPECT_EQ(m.find("llama2.c"), std::string::npos) << m;
  }
  // What is cut short is named: the header field, with the byte offset and the file size.
  EXPECT_QKV_ERROR(load(cut(all, 6)), ErrorCode::BadModel, "truncated inside the version", "of 6");
}

// ---------------------------------------------------------------------------------------------
// Random corruption: every outcome is a load (and a usable model) or a qkv::Error.
// ---------------------------------------------------------------------------------------------

struct FuzzOutcome {
  int ok = 0, errors = 0;
};

// Loads the pair and, when that works, runs a prompt and samples: all of it must either work
// or throw qkv::Error.
void exercise(const std::vector<uint8_t>& model, const std::vector<uint8_t>& tokenizer,
              const std::shared_ptr<qkv::ThreadPool>& pool, FuzzOutcome* out, const std::string& what) {
  try {
    qkv::LoadedModel m = load(model);
    const int ctx = std::min(m.config.seq_len, 32);
    const int V = m.config.vocab_size;
    qkv::Transformer tr(std::move(m), ctx, pool);
    qkv::Tokenizer tok = load_tok(tokenizer, V);
    std::vector<int> ids = tok.encode("ab ba", true, false);
    if ((int)ids.size() > ctx) ids.resize(ctx);
    const float* lg = tr.forward(ids.data(), (int)ids.size(), 0);
    std::vector<float> work(lg, lg + V);
    qkv::SamplerOptions so;
    so.seed = 3;
    so.temperature = 0.8f;
    qkv::Sampler s(V, so);
    const int next = s.sample(work.data());
    ASSERT_GE(next, 0) << what;
    ASSERT_LT(next, V) << what;
    for (int id : ids) tok.decode(1, id);
    tok.decode(ids.back(), next);
    out->ok++;
  } catch (const qkv::Error& e) {
    out->errors++;
    EXPECT_NE(std::string(e.what()), "") << what;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": threw " << typeid(e).name() << " instead of qkv::Error: " << e.what();
  }
}

TEST(BadInputFuzz, RandomCorruptionNeverCrashes) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<uint8_t> models[2] = {tiny_model(false), tiny_model(true)};
  const std::vector<uint8_t> tok = tiny_tokenizer();
  auto pool = one_thread();
  std::mt19937_64 rng(20240611);
  auto pick = [&](uint64_t n) { return (uint64_t)(rng() % n); };
  const int32_t interesting[] = {0, 1, -1, 2, 3, 7, 64, 1 << 16, 1 << 20, 1 << 30, INT32_MAX, INT32_MIN, -32};
  FuzzOutcome out;
  const int kIters = 300;
  {
    AddressSpaceCap cap(1ull << 30);  // any single corruption may cost at most this much memory
    for (int it = 0; it < kIters; it++) {
      std::vector<uint8_t> m = models[it & 1], t = tok;
      std::string what = "iteration " + std::to_string(it) + ": ";
      switch (it % 5) {
        case 0:
        case 1: {  // flip 1-3 random bytes of the model header
          int flips = 1 + (int)pick(3);
          for (int k = 0; k < flips; k++) {
            size_t at = pick(28);
            uint8_t x = (uint8_t)(1 + pick(255));
            m[at] ^= x;
            what += "header[" + std::to_string(at) + "]^=" + std::to_string(x) + " ";
          }
          break;
        }
        case 2: {  // one header field set to an interesting value
          int field = (int)pick(7);
          int32_t v = interesting[pick(sizeof interesting / sizeof interesting[0])];
          set_field(m, field, v);
          what += "field " + std::to_string(field) + " = " + std::to_string(v);
          break;
        }
        case 3: {  // flip 1-4 random bytes anywhere in the tokenizer
          int flips = 1 + (int)pick(4);
          for (int k = 0; k < flips; k++) {
            size_t at = pick(t.size());
            uint8_t x = (uint8_t)(1 + pick(255));
            t[at] ^= x;
            what += "tok[" + std::to_string(at) + "]^=" + std::to_string(x) + " ";
          }
          break;
        }
        case 4: {  // truncate or extend one of the two files
          bool model_side = pick(2) == 0;
          std::vector<uint8_t>& f = model_side ? m : t;
          size_t n = pick(f.size() + 16);
          f.resize(n, (uint8_t)pick(256));
          what += std::string(model_side ? "model" : "tokenizer") + " resized to " + std::to_string(n);
          break;
        }
      }
      exercise(m, t, pool, &out, what);
    }
  }
  EXPECT_EQ(out.ok + out.errors, kIters);
  EXPECT_GT(out.errors, kIters / 2) << "most corruptions must be detected";
  EXPECT_GT(out.ok, 0) << "some corruptions are harmless (seq_len, scores, piece bytes)";
  EXPECT_LT(ms_since(t0), 2000.0);
}

}  // namespace
