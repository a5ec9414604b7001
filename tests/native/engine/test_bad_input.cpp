// Bad input to the engine: contexts and KV caches beyond their limits, prompts longer than the
// context, Transformer::forward misuse, malformed command-line options and sampler values; each
// ends in a qkv::Error with the right code and a message naming the problem.
#include <gtest/gtest.h>

#include "bad_input.h"

using namespace qkv_test;

namespace {

// ---------------------------------------------------------------------------------------------
// KV cache and context sizes
// ---------------------------------------------------------------------------------------------

TEST(BadInputContext, ContextLargerThanModelOrNegative) {
  EXPECT_QKV_ERROR(qkv::Transformer(load(tiny_model()), 17, one_thread()), ErrorCode::BadArgument, "context 17", "16");
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

}  // namespace
