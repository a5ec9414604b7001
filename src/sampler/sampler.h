// Next-token sampling. With only temperature and top-p set, this is llama2.c run.c's sampler
// exactly (xorshift RNG, coin drawn after the softmax, top-p by sorted cumulative mass), so a
// seed gives the same tokens as run.c.
#pragma once
#include <cstdint>
#include <vector>

#include "../grammar/matcher.h"

namespace qkv {

struct SamplerOptions {
  float temperature = 1.0f;  // 0 = greedy (argmax)
  float top_p = 0.9f;        // nucleus; <= 0 or >= 1 disables it
  int top_k = 0;             // 0 = off
  float min_p = 0.0f;        // keep tokens with p >= min_p * p_max; 0 = off
  float repetition_penalty = 1.0f;  // > 1 discourages recent tokens (CTRL-style); 1 = off
  int repetition_window = 64;       // how many recent tokens the penalty looks at
  uint64_t seed = 0;                // 0 = the current time, as run.c does

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

  struct ProbIndex {
    float prob;
    int index;
  };

 private:
  int sample_unconstrained(float* logits, const int* recent, int n_recent);
  int sample_topp(const float* probs, float coin);
  int sample_filtered(float* probs, float coin);
  std::vector<ProbIndex>& candidates();

  int vocab_;
  SamplerOptions opt_;
  uint64_t state_;
  std::vector<ProbIndex> cand_;
  GrammarMatcher* grammar_ = nullptr;
};

}  // namespace qkv
