// qkv_grammar_bench [--threads N] [--steps N]: the per-token cost of constrained decoding (the
// grammar mask and the matcher's advance) over a real 32k vocabulary (Llama 2's SentencePiece,
// ../shared/vocab) and a ~152k one (GPT-2's 50k byte-level tokens plus pairs of them, Qwen2's
// size), against one decode step of a random-weight model of llama2.c's 110M shape. Prints
// figures; asserts nothing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common.h"
#include "formats/file.h"
#include "formats/llama2c.h"
#include "formats/loader.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/vocab.h"
#include "kernels/simd.h"
#include "model/transformer.h"
#include "threadpool.h"
#include "tokenizer/tokenizer.h"

using namespace qkv;

static double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// Milliseconds per decode step of a random f32 model: dim 768, hidden 2048, 12 layers, 12 heads,
// vocab 32000 (llama2.c's 110M), averaged over `steps` tokens after a warm-up.
static double decode_step_ms(int threads, int steps) {
  const int dim = 768, hidden = 2048, layers = 12, heads = 12, vocab = 32000, seq = 256;
  const uint64_t d = dim, h = hidden, L = layers, V = vocab;
  const uint64_t floats = V * d + L * d + 4 * L * d * d + L * d + 3 * L * h * d + d;
  std::vector<uint8_t> bytes(28 + floats * 4);
  const int32_t header[7] = {dim, hidden, layers, heads, heads, vocab, seq};
  std::memcpy(bytes.data(), header, sizeof header);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  float* w = reinterpret_cast<float*>(bytes.data() + 28);
  for (uint64_t i = 0; i < floats; i++) w[i] = nd(rng);
  // RMSNorm weights at 1 (a fresh model's), so activations keep a realistic scale.
  uint64_t off = V * d;
  for (uint64_t i = 0; i < L * d; i++) w[off + i] = 1.0f;
  off += L * d + 4 * L * d * d;
  for (uint64_t i = 0; i < L * d; i++) w[off + i] = 1.0f;
  for (uint64_t i = 0; i < d; i++) w[floats - d + i] = 1.0f;
  auto blob = std::make_shared<VectorBlob>(std::move(bytes));
  LoadedModel m = load_model(blob);
  Transformer t(m, seq, std::make_shared<ThreadPool>(threads));
  int tok = 1;
  for (int i = 0; i < 4; i++) t.forward(&tok, 1, i);
  const double t0 = now_ms();
  for (int i = 0; i < steps; i++) t.forward(&tok, 1, 4 + i);
  return (now_ms() - t0) / steps;
}

struct Figures {
  double mean_ms = 0, max_ms = 0, trie_ms = 0;
  int steps = 0;
  size_t states = 0;
};

// A generation of `steps` tokens, each drawn at random from the grammar's mask, timing the mask
// and the advance of every step.
static Figures run(const std::shared_ptr<TokenTrie>& trie, const std::string& gbnf, int steps, uint32_t seed) {
  Figures f;
  GrammarMatcher m(std::make_shared<Grammar>(Grammar::parse(gbnf)), trie);
  std::mt19937 rng(seed);
  double total = 0;
  std::vector<int> ok;
  for (int s = 0; s < steps; s++) {
    const double t0 = now_ms();
    const std::vector<uint64_t>& mask = m.mask();
    const double t1 = now_ms();
    ok.clear();
    for (int i = 0; i < trie->vocab_size(); i++)
      if ((mask[i >> 6] >> (i & 63)) & 1) ok.push_back(i);
    if (ok.empty()) break;
    int pick = ok[rng() % ok.size()];
    // Prefer continuing over ending (an end stops the run early); short tokens, as models write.
    for (int tries = 0; tries < 8 && (trie->bytes(pick).size() > 4 || trie->bytes(pick).empty()); tries++)
      pick = ok[rng() % ok.size()];
    if (trie->bytes(pick).empty()) break;
    const double t2 = now_ms();
    m.accept_token(pick);
    const double dt = (t1 - t0) + (now_ms() - t2);
    total += dt;
    f.max_ms = std::max(f.max_ms, dt);
    f.steps++;
  }
  f.mean_ms = f.steps ? total / f.steps : 0;
  f.states = m.state_count();
  return f;
}

int main(int argc, char** argv) {
  int threads = ThreadPool::hardware_threads(), steps = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
  }
  try {
    const std::string dir = "../shared/vocab/";
    auto spm = embedded_tokenizer(map_model_file(dir + "ggml-vocab-llama-spm.gguf"));
    auto gpt2 = embedded_tokenizer(map_model_file(dir + "ggml-vocab-gpt-2.gguf"));
    double t0 = now_ms();
    auto trie32 = token_trie(*spm);
    const double trie32_ms = now_ms() - t0;
    // ~152k: GPT-2's tokens, then concatenations of two of them (as further merges would make).
    std::vector<std::string> big;
    for (int i = 0; i < gpt2->vocab_size(); i++) big.push_back(gpt2->decode(-1, i));
    std::mt19937 rng(3);
    std::set<std::string> seen(big.begin(), big.end());
    while (big.size() < 151936) {
      std::string s = big[rng() % 50257] + big[rng() % 50257];
      if (s.size() <= 16 && seen.insert(s).second) big.push_back(s);
    }
    t0 = now_ms();
    auto trie152 = std::make_shared<TokenTrie>(big, std::vector<int>{50256});
    const double trie152_ms = now_ms() - t0;

    const std::string schema =
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":40},\"age\":{\"type\":\"integer\"},"
        "\"email\":{\"type\":\"string\",\"format\":\"email\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":8},"
        "\"kind\":{\"enum\":[\"person\",\"company\"]},\"score\":{\"type\":\"number\"}},\"required\":[\"name\",\"age\",\"tags\"]}";
    const std::vector<std::pair<const char*, std::string>> grammars = {
        {"JSON schema (object, strings, array, enum)", json_schema_to_gbnf(schema)},
        {"any JSON object (json_object)", json_object_gbnf()},
        {"GBNF: arithmetic expressions",
         "root ::= expr\nexpr ::= term ([-+*/] term)*\nterm ::= [0-9]+ | \"(\" expr \")\" | [a-z]+\n"},
    };
    std::printf("qkv_grammar_bench: %d steps per run, masks over the whole vocabulary, %s\n", steps, simd_arch_name());
    std::printf("token trie build: 32000 tokens %.1f ms, 151936 tokens %.1f ms (once per model)\n", trie32_ms,
                trie152_ms);
    const double step1 = decode_step_ms(1, 16);
    const double stepn = threads > 1 ? decode_step_ms(threads, 16) : step1;
    std::printf("110M-shape f32 decode step: %.2f ms (1 thread), %.2f ms (%d threads)\n\n", step1, stepn, threads);
    const double step = std::min(step1, stepn);  // the faster decode step: the stricter comparison
    std::printf("%-44s %7s %9s %9s %8s %7s %12s\n", "grammar", "vocab", "mean ms", "max ms", "states", "steps",
                "% of a step");
    for (const auto& g : grammars) {
      for (auto& v : {std::make_pair(32000, trie32), std::make_pair(151936, trie152)}) {
        Figures f = run(v.second, g.second, steps, 11);
        std::printf("%-44s %7d %9.3f %9.3f %8zu %7d %11.1f%%\n", g.first, v.first, f.mean_ms, f.max_ms, f.states,
                    f.steps, 100.0 * f.mean_ms / step);
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "qkv_grammar_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
