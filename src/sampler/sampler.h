// Next-token sampling. With only temperature and top-p set, this is llama2.c run.c's sampler
// exactly (xorshift RNG, coin drawn after the softmax, top-p by sorted cumulative mass), so a
// seed gives the same tokens as run.c.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "../grammar/matcher.h"

namespace qkv {

struct SamplerOptions {
  float temperature = 1.0f;         // 0 = greedy (argmax)
  float top_p = 0.9f;               // nucleus; <= 0 or >= 1 disables it
  int top_k = 0;                    // 0 = off
  float min_p = 0.0f;               // keep tokens with p >= min_p * p_max; 0 = off
  float repetition_penalty = 1.0f;  // > 1 discourages recent tokens (CTRL-style); 1 = off
  int repetition_window = 64;       // how many recent tokens the penalty looks at
  uint64_t seed = 0;                // 0 = the current time, as run.c does
  // OpenAI's penalties over the tokens this sampler has chosen: logit -= presence * (count > 0)
  // + frequency * count. 0 = off.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::vector<std::pair<int, float>> logit_bias;  // (token, added to its logit)
  // >= 0: record the chosen token's log-probability and this many top alternatives (last_*).
  int logprobs = -1;

  // Throws Error(BadArgument) for values outside their meaning (NaN, negative, ...).
  void validate() const;
};

// run.c's xorshift64* RNG.
uint32_t rng_u32(uint64_t* state);
float rng_f32(uint64_t* state);

class Sampler {
 public:
  Sampler(int vocab_size, const SamplerOptions& opt);
  // Picks the next token from `logits` (vocab,), which it overwrites. `recent` are the latest
  // tokens of the sequence, for the repetition penalty.
  int sample(float* logits, const int* recent = nullptr, int n_recent = 0);
  const SamplerOptions& options() const { return opt_; }
  // Constrained decoding: tokens outside the grammar's mask get -inf logits before sampling,
  // and the chosen token advances the matcher. Not owned; nullptr (the default) = no grammar,
  // and sampling is exactly as without this.
  void set_grammar(GrammarMatcher* g);
  GrammarMatcher* grammar() const { return grammar_; }

  // With options.logprobs >= 0, after each sample(): the chosen token's log-probability and the
  // top alternatives (most likely first), from the distribution it was drawn from: the logits
  // after penalties, bias and grammar mask, divided by the temperature (1 when greedy),
  // log-softmaxed (before top-k / top-p / min-p truncation).
  float last_logprob() const { return last_logprob_; }
  const std::vector<std::pair<int, float>>& last_top() const { return last_top_; }

  struct ProbIndex {
    float prob;
    int index;
  };

 private:
  int sample_masked(float* logits, const int* recent, int n_recent);
  int sample_unconstrained(float* logits, const int* recent, int n_recent);
  int draw(float* logits, int best);
  int sample_topp(const float* probs, float coin);
  int sample_filtered(float* probs, float coin);
  std::vector<ProbIndex>& candidates();

  int vocab_;
  SamplerOptions opt_;
  uint64_t state_;
  std::vector<ProbIndex> cand_;
  GrammarMatcher* grammar_ = nullptr;
  std::vector<int> counts_;
  std::vector<float> lp_logits_;  // times each token was chosen (penalties only)
  float last_logprob_ = 0.0f;
  std::vector<std::pair<int, float>> last_top_;
  void record_logprobs(const float* logits, int chosen);
};

}  // namespace qkv
