// Partial offload (the first layers on another engine, the rest on the CPU): the states leaving
// layer N - 1 (Transformer::hidden_states, what the GPU part computes) fed to the remaining
// layers (forward_hidden, Session::feed_hidden) give the logits of the whole CPU forward at
// every split point, for prefill in chunks and for decode steps after it.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "engine/session.h"
#include "formats/file.h"
#include "formats/loader.h"
#include "model/transformer.h"
#include "test_models.h"

using namespace qkv;

namespace {

std::shared_ptr<const Blob> blob_of(std::vector<uint8_t> v) { return std::make_shared<VectorBlob>(std::move(v)); }

double max_rel_diff(const float* a, const float* b, int n) {
  double scale = 0, diff = 0;
  for (int i = 0; i < n; i++) {
    scale = std::max(scale, (double)std::fabs(a[i]));
    diff = std::max(diff, (double)std::fabs(a[i] - b[i]));
  }
  return diff / std::max(scale, 1e-30);
}

// The same kernels in the same order: only the threads' blocking could differ (one thread here).
constexpr double kTol = 1e-6;

void check_every_split(const LoadedModel& m, const std::string& what) {
  const int V = m.config.vocab_size, L = m.config.n_layers, dim = m.config.dim;
  const int n = std::min(Transformer::kMaxBatch + 11, m.config.seq_len - 4);  // two prefill chunks
  auto pool = std::make_shared<ThreadPool>(1);
  std::vector<int> toks(n + 3);
  for (size_t i = 0; i < toks.size(); i++) toks[i] = 1 + (int)(i * 31) % (V - 1);
  Session ref(m, 0, pool);
  ref.feed(toks.data(), n, true);
  std::vector<float> want(ref.logits_at(0), ref.logits_at(0) + (size_t)n * V);
  std::vector<std::vector<float>> steps;
  for (int s = 0; s < 3; s++) {
    ref.feed(&toks[n + s], 1);
    steps.emplace_back(ref.logits(), ref.logits() + V);
  }
  for (int N = 0; N <= L; N++) {
    SCOPED_TRACE(what + ", split at layer " + std::to_string(N));
    Transformer gpu(m, 0, pool);  // stands for the GPU part: layers [0, N)
    Session cpu(m, 0, pool);      // layers [N, L) and the classifier
    std::vector<float> h = gpu.hidden_states(toks.data(), n, 0, N);
    ASSERT_EQ(h.size(), (size_t)n * dim);
    cpu.feed_hidden(toks.data(), n, h.data(), N, true);
    EXPECT_EQ(cpu.position(), n);
    EXPECT_LE(max_rel_diff(cpu.logits_at(0), want.data(), n * V), kTol);
    // The CPU cache holds only layers [N, L).
    EXPECT_EQ(cpu.transformer().kv_cache_bytes() * L, ref.transformer().kv_cache_bytes() * (L - N));
    for (int s = 0; s < 3; s++) {
      const int p = n + s;
      std::vector<float> x = gpu.hidden_states(&toks[p], 1, p, N);
      cpu.feed_hidden(&toks[p], 1, x.data(), N);
      EXPECT_LE(max_rel_diff(cpu.logits(), steps[s].data(), V), kTol) << "decode step " << s;
    }
  }
}

TEST(PartialOffload, EverySplitPointGivesTheCpuLogits) {
  for (const char* arch : {"llama", "qwen3", "gemma3", "gpt2", "qwen3moe"}) {
    TestModelSpec s;
    s.arch = arch;
    s.layers = 3;
    check_every_split(load_model(blob_of(write_test_model(s))), arch);
  }
}

// After hidden feeds the layers below the split lack those tokens: a CPU feed() (the GPU lost)
// recomputes them from the token list and goes on exactly as a session that ran on the CPU.
TEST(PartialOffload, CpuFeedAfterHiddenFeedsRecomputes) {
  TestModelSpec s;
  s.layers = 4;
  const LoadedModel m = load_model(blob_of(write_test_model(s)));
  const int V = m.config.vocab_size, N = 2;
  auto pool = std::make_shared<ThreadPool>(1);
  std::vector<int> toks(40);
  for (size_t i = 0; i < toks.size(); i++) toks[i] = 1 + (int)(i * 13) % (V - 1);
  Session ref(m, 0, pool), cpu(m, 0, pool);
  Transformer gpu(m, 0, pool);
  ref.feed(toks.data(), 25);  // the batches the CPU's catch-up runs: the same sums
  ref.feed(&toks[25], 13);
  std::vector<float> h = gpu.hidden_states(toks.data(), 30, 0, N);
  cpu.feed_hidden(toks.data(), 30, h.data(), N);
  cpu.truncate(25);  // below the split's position: the hidden cache is cut too
  EXPECT_EQ(cpu.hidden_position(), 25);
  cpu.feed(&toks[25], 13);
  for (int i = 0; i < V; i++) ASSERT_EQ(cpu.logits()[i], ref.logits()[i]) << "logit " << i;
  EXPECT_EQ(cpu.hidden_position(), 38);
  // Hidden feeds continue after a CPU feed (its forward wrote every layer).
  ref.feed(&toks[38], 1);
  std::vector<float> x = gpu.hidden_states(&toks[25], 14, 25, N);
  cpu.feed_hidden(&toks[38], 1, x.data() + 13 * m.config.dim, N);
  EXPECT_LE(max_rel_diff(cpu.logits(), ref.logits(), V), kTol);
}

TEST(PartialOffload, BadSplitsAreRefused) {
  TestModelSpec s;
  const LoadedModel m = load_model(blob_of(write_test_model(s)));
  auto pool = std::make_shared<ThreadPool>(1);
  Session cpu(m, 0, pool);
  std::vector<float> h(m.config.dim, 0.5f);
  int tok = 5;
  for (int bad : {-1, m.config.n_layers + 1}) {
    try {
      cpu.feed_hidden(&tok, 1, h.data(), bad);
      ADD_FAILURE() << "split " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::BadArgument);
    }
  }
  EXPECT_EQ(cpu.position(), 0);
  // A hidden feed must continue the hidden cache: not after feed_logits of other tokens.
  std::vector<float> logits(m.config.vocab_size, 0.0f);
  cpu.feed_logits(&tok, 1, logits.data(), 1);
  EXPECT_THROW(cpu.feed_hidden(&tok, 1, h.data(), 1), Error);
  cpu.set_capture_attention(true);
  cpu.truncate(0);
  EXPECT_THROW(cpu.feed_hidden(&tok, 1, h.data(), 1), Error);
}

}  // namespace
