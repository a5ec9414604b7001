// Bad input: every malformed model, tokenizer, option or call must end in a qkv::Error with
// the right code and a message naming the problem -- never a crash, an abort, a hang or a
// huge allocation. Synthetic tiny checkpoints are built here and then corrupted; the real
// fixtures in QKV_SHARED_DIR/models are only read.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <typeinfo>
#include <vector>

#if defined(__linux__)
#include <sys/resource.h>
#include <unistd.h>
#endif

#include "cli/args.h"
#include "common.h"
#include "engine/generate.h"
#include "formats/file.h"
#include "formats/gguf_writer.h"
#include "formats/loader.h"
#include "model/transformer.h"
#include "sampler/sampler.h"
#include "threadpool.h"
#include "tokenizer/tokenizer.h"

#ifndef QKV_SHARED_DIR
#define QKV_SHARED_DIR "../shared"
#endif

using qkv::ErrorCode;

namespace {

// ---------------------------------------------------------------------------------------------
// Synthetic llama2.c checkpoints and tokenizers
// ---------------------------------------------------------------------------------------------

enum HeaderField { kDim = 0, kHidden, kLayers, kHeads, kKvHeads, kVocab, kSeqLen };

struct Header {
  int32_t v[7];
};

// dim 8, hidden 16, 2 layers, 2 heads (head size 4), 1 kv head (GQA), vocab 32, context 16.
Header tiny_header() { return Header{{8, 16, 2, 2, 1, 32, 16}}; }

// Number of f32 values a header implies, counted independently of the engine's loader.
uint64_t weight_floats(const Header& h, bool freq) {
  const uint64_t dim = h.v[kDim], hid = h.v[kHidden], L = h.v[kLayers], heads = h.v[kHeads],
                 kvh = h.v[kKvHeads], seq = h.v[kSeqLen];
  const uint64_t V = h.v[kVocab] < 0 ? uint64_t(-(int64_t)h.v[kVocab]) : uint64_t(h.v[kVocab]);
  const uint64_t hd = dim / heads, kvd = kvh * hd;
  uint64_t n = V * dim;                 // token embedding
  n += L * dim;                         // rms_att
  n += L * dim * dim;                   // wq
  n += 2 * L * kvd * dim;               // wk, wv
  n += L * dim * dim;                   // wo
  n += L * dim;                         // rms_ffn
  n += 3 * L * hid * dim;               // w1, w2, w3
  n += dim;                             // rms_final
  if (freq) n += seq * (hd / 2) * 2;    // freq_cis_real, freq_cis_imag
  if (h.v[kVocab] < 0) n += V * dim;    // separate classifier
  return n;
}

std::vector<uint8_t> make_checkpoint(const Header& h, bool freq = false, uint64_t seed = 1) {
  const uint64_t n = weight_floats(h, freq);
  std::vector<uint8_t> out(28 + n * 4);
  std::memcpy(out.data(), h.v, 28);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  for (uint64_t i = 0; i < n; i++) {
    float f = u(rng);
    std::memcpy(out.data() + 28 + 4 * i, &f, 4);
  }
  return out;
}

std::vector<uint8_t> tiny_model(bool freq = false) { return make_checkpoint(tiny_header(), freq); }

void set_field(std::vector<uint8_t>& bytes, int field, int32_t value) {
  std::memcpy(bytes.data() + 4 * field, &value, 4);
}

struct Piece {
  float score;
  int32_t len;  // written as given (may lie about the bytes that follow)
  std::string bytes;
};

// Pieces of the tiny tokenizer: <unk>, <s>, </s>, " ", "a".."z", then merges.
std::vector<Piece> tiny_pieces(int n) {
  std::vector<std::string> s = {"<unk>", "\n<s>\n", "\n</s>\n", " "};
  for (char c = 'a'; c <= 'z'; c++) s.push_back(std::string(1, c));
  const char* merges[] = {"ab", "ba", " a", " b", "aba", "bab", "abab", "baba"};
  for (const char* m : merges) s.push_back(m);
  for (int i = 0; (int)s.size() < n; i++) s.push_back("x" + std::to_string(i));
  std::vector<Piece> p;
  for (int i = 0; i < n; i++) p.push_back({i < 3 ? 0.0f : -(float)i, (int32_t)s[i].size(), s[i]});
  return p;
}

std::vector<uint8_t> make_tokenizer(const std::vector<Piece>& pieces, int32_t max_token_length = 8) {
  std::vector<uint8_t> out(4);
  std::memcpy(out.data(), &max_token_length, 4);
  for (const Piece& p : pieces) {
    size_t o = out.size();
    out.resize(o + 8);
    std::memcpy(out.data() + o, &p.score, 4);
    std::memcpy(out.data() + o + 4, &p.len, 4);
    out.insert(out.end(), p.bytes.begin(), p.bytes.end());
  }
  return out;
}

std::vector<uint8_t> tiny_tokenizer(int n = 32) { return make_tokenizer(tiny_pieces(n)); }

std::shared_ptr<const qkv::Blob> blob(std::vector<uint8_t> bytes) {
  return std::make_shared<qkv::VectorBlob>(std::move(bytes));
}

qkv::LoadedModel load(const std::vector<uint8_t>& bytes) { return qkv::load_model(blob(bytes)); }

qkv::Tokenizer load_tok(const std::vector<uint8_t>& bytes, int vocab) {
  return qkv::Tokenizer::from_llama2c(bytes.data(), bytes.size(), vocab);
}

std::vector<uint8_t> cut(std::vector<uint8_t> v, size_t n) {
  v.resize(n);
  return v;
}

std::string shared_model(const char* name) { return std::string(QKV_SHARED_DIR) + "/models/" + name; }

bool file_exists(const std::string& p) { return std::ifstream(p, std::ios::binary).good(); }

#define REQUIRE_FIXTURE(path) \
  if (!file_exists(path)) GTEST_SKIP() << "fixture missing: " << (path)

// ---------------------------------------------------------------------------------------------
// Assertion: `f` throws qkv::Error with `code` and a message containing every needle.
// ---------------------------------------------------------------------------------------------

template <class F>
::testing::AssertionResult ThrowsQkv(F&& f, ErrorCode code, std::initializer_list<const char*> needles) {
  try {
    f();
  } catch (const qkv::Error& e) {
    const std::string msg = e.what();
    if (e.code() != code)
      return ::testing::AssertionFailure() << "error code [" << qkv::error_code_name(e.code()) << "] instead of ["
                                           << qkv::error_code_name(code) << "]: " << msg;
    for (const char* n : needles)
      if (msg.find(n) == std::string::npos)
        return ::testing::AssertionFailure() << "message does not mention '" << n << "': " << msg;
    if (msg.empty()) return ::testing::AssertionFailure() << "empty message";
    return ::testing::AssertionSuccess() << msg;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw " << typeid(e).name() << " instead of qkv::Error: " << e.what();
  } catch (...) {
    return ::testing::AssertionFailure() << "threw a non-std exception";
  }
  return ::testing::AssertionFailure() << "did not throw (expected [" << qkv::error_code_name(code) << "])";
}

#define EXPECT_QKV_ERROR(stmt, code, ...) EXPECT_TRUE(ThrowsQkv([&] { stmt; }, code, {__VA_ARGS__}))

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// While alive, caps the process's address space at its current size + `extra` bytes, so an
// attempt to allocate gigabytes fails at once (std::bad_alloc) instead of succeeding lazily.
// A no-op under sanitizers (their shadow memory does not mix with RLIMIT_AS) and off Linux.
class AddressSpaceCap {
 public:
  explicit AddressSpaceCap(uint64_t extra) {
#if defined(__linux__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    FILE* f = std::fopen("/proc/self/statm", "r");
    unsigned long long pages = 0;
    if (f && std::fscanf(f, "%llu", &pages) == 1 && getrlimit(RLIMIT_AS, &old_) == 0) {
      rlimit lim = old_;
      const uint64_t want = pages * (uint64_t)sysconf(_SC_PAGESIZE) + extra;
      if (lim.rlim_max == RLIM_INFINITY || want < lim.rlim_max) {
        lim.rlim_cur = want;
        active_ = setrlimit(RLIMIT_AS, &lim) == 0;
      }
    }
    if (f) std::fclose(f);
#endif
  }
  ~AddressSpaceCap() {
#if defined(__linux__)
    if (active_) setrlimit(RLIMIT_AS, &old_);
#endif
  }

 private:
#if defined(__linux__)
  rlimit old_{};
#endif
  bool active_ = false;
};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::shared_ptr<qkv::ThreadPool> one_thread() { return std::make_shared<qkv::ThreadPool>(1); }

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
    EXPECT_QKV_ERROR(load(v), ErrorCode::BadModel, "matches neither", "corrupt",
                     std::to_string(v.size()).c_str());
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
      {"n_kv_heads does not divide n_heads", {{kDim, 12}, {kHeads, 3}, {kKvHeads, 2}},
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
       {{kDim, INT32_MAX}, {kHidden, INT32_MAX}, {kLayers, INT32_MAX}, {kHeads, INT32_MAX}, {kKvHeads, INT32_MAX},
        {kVocab, INT32_MAX}, {kSeqLen, INT32_MAX}},
       {"2147483647"}},
      {"all INT32_MIN",
       {{kDim, INT32_MIN}, {kHidden, INT32_MIN}, {kLayers, INT32_MIN}, {kHeads, INT32_MIN}, {kKvHeads, INT32_MIN},
        {kVocab, INT32_MIN}, {kSeqLen, INT32_MIN}},
       {"-2147483648"}},
      // Largest values the validator allows: the implied size (terabytes) is refused against
      // the file's length before anything is allocated.
      {"maximal in-range header",
       {{kDim, 1 << 16}, {kHidden, 1 << 18}, {kLayers, 1024}, {kHeads, 64}, {kKvHeads, 64}, {kVocab, -(1 << 22)},
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
  EXPECT_QKV_ERROR(load(bytes_of("caf\xc3\xa9 na\xc3\xafve \xe2\x80\x94 UTF-8 text")), ErrorCode::BadModel, "text file");
  EXPECT_QKV_ERROR(load({}), ErrorCode::BadModel, "is empty", "expected a GGUF model or a llama2.c checkpoint");
  EXPECT_QKV_ERROR(load(bytes_of("<!DOCTYPE html><html><body>404</body></html>")), ErrorCode::BadModel, "web page (HTML)");
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
// KV cache and context sizes
// ---------------------------------------------------------------------------------------------

TEST(BadInputContext, ContextLargerThanModelOrNegative) {
  EXPECT_QKV_ERROR(qkv::Transformer(load(tiny_model()), 17, one_thread()), ErrorCode::BadArgument, "context 17",
                   "16");
  EXPECT_QKV_ERROR(qkv::Transformer(load(tiny_model()), -1, one_thread()), ErrorCode::BadArgument, "context");
  EXPECT_NO_THROW(qkv::Transformer(load(tiny_model()), 16, one_thread()));
}

TEST(BadInputContext, KvCacheBeyondLimitFailsBeforeAllocating) {
  // 64 layers of dim 64 with a header context of 2^20 positions: a 4 MiB file whose KV cache
  // would need 32 GiB. Refused by arithmetic, not by trying.
  Header h{{64, 8, 64, 1, 1, 8, 1 << 20}};
  std::vector<uint8_t> v = make_checkpoint(h);
  qkv::LoadedModel m = load(v);
  const auto t0 = std::chrono::steady_clock::now();
  {
    AddressSpaceCap cap(256ull << 20);
    EXPECT_QKV_ERROR(qkv::Transformer(load(v), 0, one_thread()), ErrorCode::OutOfMemory, "KV cache", "GiB",
                     "smaller context");
  }
  EXPECT_LT(ms_since(t0), 500.0);
  // The same model with a small context is fine.
  qkv::Transformer tr(std::move(m), 32, one_thread());
  EXPECT_EQ(tr.context(), 32);
}

TEST(BadInputContext, ThreadCounts) {
  EXPECT_QKV_ERROR(qkv::ThreadPool(0), ErrorCode::BadArgument, "thread");
  EXPECT_QKV_ERROR(qkv::ThreadPool(-3), ErrorCode::BadArgument, "thread");
  EXPECT_QKV_ERROR(qkv::ThreadPool(100000), ErrorCode::BadArgument, "100000");
}

// ---------------------------------------------------------------------------------------------
// Tokenizers: vocabulary mismatches and corruption
// ---------------------------------------------------------------------------------------------

TEST(BadInputTokenizer, MorePiecesThanTheModel) {
  EXPECT_QKV_ERROR(load_tok(tiny_tokenizer(33), 32), ErrorCode::BadTokenizer, "33 pieces", "vocabulary has 32",
                   "do not belong together");
  EXPECT_QKV_ERROR(load_tok(tiny_tokenizer(64), 32), ErrorCode::BadTokenizer, "64 pieces", "vocabulary has 32");
}

TEST(BadInputTokenizer, FewerPiecesThanTheModel) {
  EXPECT_QKV_ERROR(load_tok(tiny_tokenizer(31), 32), ErrorCode::BadTokenizer, "31 pieces", "vocabulary has 32",
                   "do not belong together");
  EXPECT_QKV_ERROR(load_tok(make_tokenizer({}), 32), ErrorCode::BadTokenizer, "0 pieces", "vocabulary has 32");
}

TEST(BadInputTokenizer, RealFixturesMismatch) {
  const std::string big = shared_model("llama2-tokenizer.bin"), small = shared_model("aidreams-tok512.bin");
  REQUIRE_FIXTURE(big);
  REQUIRE_FIXTURE(small);
  auto b = qkv::map_file(big);
  auto s = qkv::map_file(small);
  // 32000-piece Llama 2 tokenizer for a 512-token model, and the other way round.
  EXPECT_QKV_ERROR(qkv::Tokenizer::from_llama2c(b->data(), b->size(), 512), ErrorCode::BadTokenizer,
                   "32000 pieces", "vocabulary has 512");
  EXPECT_QKV_ERROR(qkv::Tokenizer::from_llama2c(s->data(), s->size(), 32000), ErrorCode::BadTokenizer,
                   "512 pieces", "vocabulary has 32000");
}

TEST(BadInputTokenizer, GenerateRefusesMismatchedTokenizer) {
  qkv::Transformer tr(load(tiny_model()), 0, one_thread());
  qkv::Tokenizer tok = load_tok(tiny_tokenizer(40), 40);
  qkv::RunOptions ro;
  ro.prompt = "ab";
  EXPECT_QKV_ERROR(qkv::run_generate(tr, tok, ro, [](const std::string&) {}), ErrorCode::BadArgument,
                   "vocabulary", "40", "32");
}

TEST(BadInputTokenizer, TruncatedOrEmpty) {
  const std::vector<uint8_t> full = tiny_tokenizer();
  EXPECT_QKV_ERROR(load_tok({}, 32), ErrorCode::BadTokenizer, "truncated", "0 bytes");
  EXPECT_QKV_ERROR(load_tok(cut(full, 3), 32), ErrorCode::BadTokenizer, "truncated", "4-byte header");
  // Header only: no pieces at all.
  EXPECT_QKV_ERROR(load_tok(cut(full, 4), 32), ErrorCode::BadTokenizer, "0 pieces");
  // Inside the (score, len) record of piece 0, and in the middle of a later piece's bytes.
  EXPECT_QKV_ERROR(load_tok(cut(full, 9), 32), ErrorCode::BadTokenizer, "truncated inside piece 0");
  EXPECT_QKV_ERROR(load_tok(cut(full, 4 + 8 + 2), 32), ErrorCode::BadTokenizer, "piece 0", "past the end");
  EXPECT_QKV_ERROR(load_tok(cut(full, full.size() - 1), 32), ErrorCode::BadTokenizer, "piece 31",
                   "past the end");
  EXPECT_QKV_ERROR(load_tok(full, 0), ErrorCode::BadTokenizer, "vocabulary size", "positive");
  EXPECT_QKV_ERROR(load_tok(full, -5), ErrorCode::BadTokenizer, "vocabulary size", "-5");
}

TEST(BadInputTokenizer, ImpossibleMaxTokenLength) {
  for (int32_t mtl : {0, -1, 65537, 1 << 30, INT32_MAX, INT32_MIN}) {
    SCOPED_TRACE(mtl);
    EXPECT_QKV_ERROR(load_tok(make_tokenizer(tiny_pieces(32), mtl), 32), ErrorCode::BadTokenizer,
                     "max_token_length", std::to_string(mtl).c_str());
  }
}

TEST(BadInputTokenizer, BadPieceLengths) {
  {
    std::vector<Piece> p = tiny_pieces(32);
    p[5].len = -1;
    EXPECT_QKV_ERROR(load_tok(make_tokenizer(p), 32), ErrorCode::BadTokenizer, "piece 5", "length -1");
  }
  {
    std::vector<Piece> p = tiny_pieces(32);
    p[7].len = INT32_MIN;
    EXPECT_QKV_ERROR(load_tok(make_tokenizer(p), 32), ErrorCode::BadTokenizer, "piece 7", "-2147483648");
  }
  {  // longer than max_token_length (8), with the bytes actually present
    std::vector<Piece> p = tiny_pieces(32);
    p[9].bytes = "abcdefghijk";
    p[9].len = 11;
    EXPECT_QKV_ERROR(load_tok(make_tokenizer(p), 32), ErrorCode::BadTokenizer, "piece 9", "length 11",
                     "max_token_length is 8");
  }
  {  // the last piece claims more bytes than the file has left
    std::vector<Piece> p = tiny_pieces(32);
    p[31].len = 8;  // real bytes: a few
    EXPECT_QKV_ERROR(load_tok(make_tokenizer(p), 32), ErrorCode::BadTokenizer, "piece 31", "past the end");
  }
  {  // a huge length with a huge max_token_length: still bounded by the file
    std::vector<Piece> p = tiny_pieces(32);
    p[3].len = 65536;
    EXPECT_QKV_ERROR(load_tok(make_tokenizer(p, 65536), 32), ErrorCode::BadTokenizer, "piece 3");
  }
}

TEST(BadInputTokenizer, UnencodableBytesAndBadIds) {
  qkv::Tokenizer tok = load_tok(tiny_tokenizer(), 32);
  // No byte-fallback pieces in a 32-piece vocabulary: a character it lacks cannot be encoded.
  EXPECT_QKV_ERROR(tok.encode("Z", true, false), ErrorCode::BadArgument, "cannot encode byte");
  EXPECT_QKV_ERROR(tok.encode("\xc3\xa9", true, false), ErrorCode::BadArgument, "cannot encode byte");
  EXPECT_QKV_ERROR(tok.decode(1, -1), ErrorCode::BadArgument, "token id -1", "outside the vocabulary");
  EXPECT_QKV_ERROR(tok.decode(1, 32), ErrorCode::BadArgument, "token id 32", "0..31");
}

// Arbitrary bytes as a prompt (invalid UTF-8, NUL, lone continuation bytes): a tokenizer with
// byte fallback encodes every one of them, and decoding gives the same bytes back.
TEST(BadInputTokenizer, ArbitraryBytesRoundTrip) {
  const std::string tp = shared_model("aidreams-tok512.bin");
  REQUIRE_FIXTURE(tp);
  auto tb = qkv::map_file(tp);
  qkv::Tokenizer tok = qkv::Tokenizer::from_llama2c(tb->data(), tb->size(), 512);
  std::mt19937 rng(99);
  for (int it = 0; it < 500; it++) {
    std::string text(rng() % 48, '\0');
    for (char& ch : text) ch = (char)(rng() % 256);
    std::vector<int> ids = tok.encode(text, true, false);
    ASSERT_FALSE(ids.empty());
    std::string back;
    for (size_t i = 1; i < ids.size(); i++) {
      ASSERT_GE(ids[i], 0);
      ASSERT_LT(ids[i], 512);
      back += tok.decode(ids[i - 1], ids[i]);
    }
    ASSERT_EQ(back, text) << "iteration " << it;
  }
}

// ---------------------------------------------------------------------------------------------
// Prompts longer than the context
// ---------------------------------------------------------------------------------------------

std::string long_prompt(size_t chars) {
  const std::string base = "I dream of electric sheep, quiet machines and the long night of the stars. ";
  std::string s;
  while (s.size() < chars) s += base;
  return s.substr(0, chars);
}

TEST(BadInputPrompt, LongerThanRealModelContext) {
  const std::string mp = shared_model("aidreams260K.bin"), tp = shared_model("aidreams-tok512.bin");
  REQUIRE_FIXTURE(mp);
  REQUIRE_FIXTURE(tp);
  qkv::Transformer tr(qkv::load_model(qkv::map_file(mp)), 0, one_thread());
  ASSERT_EQ(tr.context(), 128);
  auto tb = qkv::map_file(tp);
  qkv::Tokenizer tok = qkv::Tokenizer::from_llama2c(tb->data(), tb->size(), 512);
  qkv::RunOptions ro;
  ro.prompt = long_prompt(600);
  ASSERT_GT(tok.encode(ro.prompt, true, false).size(), 128u);
  int emitted = 0;
  EXPECT_QKV_ERROR(qkv::run_generate(tr, tok, ro, [&](const std::string&) { emitted++; }), ErrorCode::BadArgument,
                   "context", "128");
  EXPECT_EQ(emitted, 0) << "nothing may be printed before the error";
}

TEST(BadInputPrompt, LongerThanReducedContext) {
  qkv::Transformer tr(load(tiny_model()), 4, one_thread());
  qkv::Tokenizer tok = load_tok(tiny_tokenizer(), 32);
  qkv::RunOptions ro;
  ro.prompt = "a b a b a b";
  EXPECT_QKV_ERROR(qkv::run_generate(tr, tok, ro, [](const std::string&) {}), ErrorCode::BadArgument,
                   "longer than the context of 4");
}

// ---------------------------------------------------------------------------------------------
// Transformer::forward misuse
// ---------------------------------------------------------------------------------------------

TEST(BadInputForward, BadTokensCountsAndPositions) {
  qkv::Transformer tr(load(tiny_model()), 0, one_thread());
  const int ok[4] = {1, 5, 6, 7};
  const int neg[1] = {-1}, past[1] = {32}, huge[1] = {INT32_MAX};
  EXPECT_QKV_ERROR(tr.forward(neg, 1, 0), ErrorCode::BadArgument, "token id -1", "vocabulary");
  EXPECT_QKV_ERROR(tr.forward(past, 1, 0), ErrorCode::BadArgument, "token id 32", "0..31");
  EXPECT_QKV_ERROR(tr.forward(huge, 1, 0), ErrorCode::BadArgument, "token id 2147483647");
  const int mixed[3] = {1, 2, 99};
  EXPECT_QKV_ERROR(tr.forward(mixed, 3, 0), ErrorCode::BadArgument, "token id 99");
  EXPECT_QKV_ERROR(tr.forward(ok, 0, 0), ErrorCode::BadArgument, "at least one token");
  EXPECT_QKV_ERROR(tr.forward(ok, -4, 0), ErrorCode::BadArgument, "at least one token");
  EXPECT_QKV_ERROR(tr.forward(ok, 1, 16), ErrorCode::BadArgument, "context of 16");
  EXPECT_QKV_ERROR(tr.forward(ok, 4, 13), ErrorCode::BadArgument, "13..16", "context of 16");
  EXPECT_QKV_ERROR(tr.forward(ok, 1, -1), ErrorCode::BadArgument, "positions -1");
  EXPECT_QKV_ERROR(tr.forward(ok, 4, INT32_MAX), ErrorCode::BadArgument, "context");
  EXPECT_QKV_ERROR(tr.forward(ok, 4, INT32_MIN), ErrorCode::BadArgument, "context");
  // The model is still usable after every refusal.
  const float* lg = nullptr;
  ASSERT_NO_THROW(lg = tr.forward(ok, 4, 12));
  for (int i = 0; i < 32; i++) ASSERT_TRUE(std::isfinite(lg[i]));
}

// ---------------------------------------------------------------------------------------------
// Options: command-line parsing and sampler validation
// ---------------------------------------------------------------------------------------------

qkv::RunArgs parse(std::initializer_list<const char*> a) {
  std::vector<std::string> v(a.begin(), a.end());
  return qkv::parse_run_args(v);
}

TEST(BadInputArgs, MalformedNumbers) {
  EXPECT_QKV_ERROR(parse({"m.bin", "-t", "nan"}), ErrorCode::BadArgument, "-t", "number", "'nan'");
  EXPECT_QKV_ERROR(parse({"m.bin", "-t", "NaN"}), ErrorCode::BadArgument, "-t", "number");
  EXPECT_QKV_ERROR(parse({"m.bin", "-t", "abc"}), ErrorCode::BadArgument, "-t", "number", "'abc'");
  EXPECT_QKV_ERROR(parse({"m.bin", "-t", ""}), ErrorCode::BadArgument, "-t", "number");
  EXPECT_QKV_ERROR(parse({"m.bin", "-t", "1.0x"}), ErrorCode::BadArgument, "-t", "'1.0x'");
  EXPECT_QKV_ERROR(parse({"m.bin", "-p", "nan"}), ErrorCode::BadArgument, "-p", "number");
  EXPECT_QKV_ERROR(parse({"m.bin", "-n", "abc"}), ErrorCode::BadArgument, "-n", "integer", "'abc'");
  EXPECT_QKV_ERROR(parse({"m.bin", "-n", "1.5"}), ErrorCode::BadArgument, "-n", "integer");
  EXPECT_QKV_ERROR(parse({"m.bin", "-n", "99999999999999999999"}), ErrorCode::BadArgument, "-n", "integer");
  EXPECT_QKV_ERROR(parse({"m.bin", "-k", "abc"}), ErrorCode::BadArgument, "-k", "integer");
  EXPECT_QKV_ERROR(parse({"m.bin", "-s", "seed"}), ErrorCode::BadArgument, "-s", "integer");
  EXPECT_QKV_ERROR(parse({"m.bin", "--threads", "many"}), ErrorCode::BadArgument, "--threads", "integer");
  EXPECT_QKV_ERROR(parse({"m.bin", "--ctx", "1e3"}), ErrorCode::BadArgument, "--ctx", "integer");
}

TEST(BadInputArgs, OutOfRangeValues) {
  EXPECT_QKV_ERROR(parse({"m.bin", "--threads", "0"}), ErrorCode::BadArgument, "--threads", "1..256", "got 0");
  EXPECT_QKV_ERROR(parse({"m.bin", "--threads", "-2"}), ErrorCode::BadArgument, "--threads", "got -2");
  EXPECT_QKV_ERROR(parse({"m.bin", "--threads", "100000"}), ErrorCode::BadArgument, "--threads", "100000");
  EXPECT_QKV_ERROR(parse({"m.bin", "--ctx", "0"}), ErrorCode::BadArgument, "--ctx", "got 0");
  EXPECT_QKV_ERROR(parse({"m.bin", "--ctx", "-5"}), ErrorCode::BadArgument, "--ctx", "got -5");
  EXPECT_QKV_ERROR(parse({"m.bin", "--ctx", "99999999999"}), ErrorCode::BadArgument, "--ctx");
  EXPECT_QKV_ERROR(parse({"m.bin", "-t", "inf"}), ErrorCode::BadArgument, "temperature");
  EXPECT_QKV_ERROR(parse({"m.bin", "-t", "1e39"}), ErrorCode::BadArgument, "temperature");
  EXPECT_QKV_ERROR(parse({"m.bin", "-t", "1000"}), ErrorCode::BadArgument, "temperature");
  EXPECT_QKV_ERROR(parse({"m.bin", "--min-p", "2"}), ErrorCode::BadArgument, "min_p");
  EXPECT_QKV_ERROR(parse({"m.bin", "--min-p", "-0.5"}), ErrorCode::BadArgument, "min_p");
  EXPECT_QKV_ERROR(parse({"m.bin", "--repeat-penalty", "0"}), ErrorCode::BadArgument, "repetition_penalty");
  EXPECT_QKV_ERROR(parse({"m.bin", "--repeat-penalty", "-1"}), ErrorCode::BadArgument, "repetition_penalty");
  EXPECT_QKV_ERROR(parse({"m.bin", "--repeat-penalty", "inf"}), ErrorCode::BadArgument, "repetition_penalty");
}

TEST(BadInputArgs, ClampedAsRunC) {
  // Documented: out-of-range numbers are clamped as run.c does, not refused.
  qkv::RunArgs a = parse({"m.bin", "-t", "-3", "-p", "7", "-k", "-5", "-n", "-10", "-s", "-1"});
  EXPECT_EQ(a.run.sampler.temperature, 0.0f);
  EXPECT_EQ(a.run.sampler.top_p, 0.9f);
  EXPECT_EQ(parse({"m.bin", "-p", "inf"}).run.sampler.top_p, 0.9f);
  EXPECT_EQ(parse({"m.bin", "-t", "-inf"}).run.sampler.temperature, 0.0f);
  EXPECT_EQ(a.run.sampler.top_k, 0);
  EXPECT_EQ(a.run.steps, 0);
  EXPECT_EQ(a.run.sampler.seed, 0u);
}

TEST(BadInputArgs, StructuralErrors) {
  EXPECT_QKV_ERROR(parse({}), ErrorCode::BadArgument, "missing MODEL");
  EXPECT_QKV_ERROR(parse({""}), ErrorCode::BadArgument, "missing MODEL");
  EXPECT_QKV_ERROR(parse({"-n", "5"}), ErrorCode::BadArgument, "missing MODEL");
  EXPECT_QKV_ERROR(parse({"m.bin", "--frobnicate", "1"}), ErrorCode::BadArgument, "unknown option --frobnicate");
  EXPECT_QKV_ERROR(parse({"m.bin", "-x", "1"}), ErrorCode::BadArgument, "unknown option -x");
  EXPECT_QKV_ERROR(parse({"m.bin", "-n"}), ErrorCode::BadArgument, "option -n needs a value");
  EXPECT_QKV_ERROR(parse({"m.bin", "-i", "hi", "-z"}), ErrorCode::BadArgument, "option -z needs a value");
  EXPECT_QKV_ERROR(parse({"m.bin", "extra.bin"}), ErrorCode::BadArgument, "unexpected argument 'extra.bin'");
  EXPECT_QKV_ERROR(parse({"m.bin", "-"}), ErrorCode::BadArgument, "unexpected argument '-'");
}

TEST(BadInputSampler, ValidateRejectsMeaninglessValues) {
  auto with = [](auto set) {
    qkv::SamplerOptions o;
    set(o);
    return o;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  EXPECT_QKV_ERROR(with([&](auto& o) { o.temperature = nan; }).validate(), ErrorCode::BadArgument, "temperature");
  EXPECT_QKV_ERROR(with([&](auto& o) { o.temperature = -1; }).validate(), ErrorCode::BadArgument, "temperature");
  EXPECT_QKV_ERROR(with([&](auto& o) { o.temperature = inf; }).validate(), ErrorCode::BadArgument, "temperature");
  EXPECT_QKV_ERROR(with([&](auto& o) { o.top_p = nan; }).validate(), ErrorCode::BadArgument, "top_p");
  EXPECT_QKV_ERROR(with([&](auto& o) { o.top_k = -5; }).validate(), ErrorCode::BadArgument, "top_k", "-5");
  EXPECT_QKV_ERROR(with([&](auto& o) { o.min_p = 1.5f; }).validate(), ErrorCode::BadArgument, "min_p");
  EXPECT_QKV_ERROR(with([&](auto& o) { o.min_p = nan; }).validate(), ErrorCode::BadArgument, "min_p");
  EXPECT_QKV_ERROR(with([&](auto& o) { o.repetition_penalty = 0; }).validate(), ErrorCode::BadArgument,
                   "repetition_penalty");
  EXPECT_QKV_ERROR(with([&](auto& o) { o.repetition_penalty = -2; }).validate(), ErrorCode::BadArgument,
                   "repetition_penalty");
  EXPECT_QKV_ERROR(with([&](auto& o) { o.repetition_penalty = nan; }).validate(), ErrorCode::BadArgument,
                   "repetition_penalty");
  EXPECT_QKV_ERROR(with([&](auto& o) { o.repetition_window = -1; }).validate(), ErrorCode::BadArgument,
                   "repetition_window");
  // The Sampler constructor validates too.
  EXPECT_QKV_ERROR(qkv::Sampler(32, with([&](auto& o) { o.top_k = -1; })), ErrorCode::BadArgument, "top_k");
}

// Logits that are NaN, or that overflow to +inf once divided by a tiny temperature, turn the
// softmax into NaNs. Whatever the sampler does then, it must return a token of the vocabulary.
void expect_valid_tokens_from_nonfinite_logits(const qkv::SamplerOptions& base) {
  const int V = 16;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  qkv::Sampler s(V, base);
  for (float bad : {nan, inf, -inf}) {
    SCOPED_TRACE(bad);
    std::vector<float> lg(V, 0.5f);
    lg[3] = bad;
    const int t = s.sample(lg.data());
    EXPECT_GE(t, 0);
    EXPECT_LT(t, V);
    std::vector<float> all(V, bad);
    const int u = s.sample(all.data());
    EXPECT_GE(u, 0);
    EXPECT_LT(u, V);
  }
}

TEST(BadInputSampler, NonFiniteLogitsGiveATokenOfTheVocabulary) {
  qkv::SamplerOptions o;
  o.seed = 42;
  o.top_p = 1.0f;  // plain multinomial
  expect_valid_tokens_from_nonfinite_logits(o);
  o.top_k = 4;  // filtered path
  expect_valid_tokens_from_nonfinite_logits(o);
  o.top_k = 0;
  o.min_p = 0.1f;
  expect_valid_tokens_from_nonfinite_logits(o);
  o.min_p = 0.0f;
  o.temperature = 0.0f;  // greedy
  expect_valid_tokens_from_nonfinite_logits(o);
}

// KNOWN ENGINE BUG (disabled until fixed): with top-p sampling (the default) and a softmax
// that came out all NaN, Sampler::sample_topp keeps no candidate (n0 = 0, last = -1) and
// returns cand_[last].index = cand_[-1].index (src/sampler/sampler.cpp), a heap read before
// the vector (AddressSanitizer: heap-buffer-overflow). Natively it happens to read 0 (<unk>),
// in the WASM build 4107 ("token id 4107 is outside the vocabulary").
TEST(BadInputSampler, NonFiniteLogitsWithTopP) {
  qkv::SamplerOptions o;
  o.seed = 42;
  o.top_p = 0.9f;
  expect_valid_tokens_from_nonfinite_logits(o);
}

// KNOWN ENGINE BUG (disabled until fixed), the same one reached from the command line: a
// temperature that validate() accepts but so small that logits / temperature overflow to inf
// (CLI: -t 1e-40) makes the softmax all NaN. Such a temperature should behave like greedy.
TEST(BadInputSampler, TinyTemperatureActsLikeGreedy) {
  const int V = 16;
  for (float t : {1e-30f, 1e-38f, 1e-40f}) {
    qkv::SamplerOptions o;
    o.seed = 7;
    o.temperature = t;
    ASSERT_NO_THROW(o.validate());
    qkv::Sampler s(V, o);
    std::vector<float> lg(V);
    for (int i = 0; i < V; i++) lg[i] = 0.1f * i - 0.5f;
    lg[11] = 9.0f;  // the clear argmax
    EXPECT_EQ(s.sample(lg.data()), 11) << "temperature " << t;
  }
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
