// Perplexity of a model on a token sequence: non-overlapping windows of `ctx` tokens, each run
// from an empty cache with all-logits forwards; every token but the first of its window is
// predicted by the logits of the token before it. PPL = exp(mean negative log-likelihood).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "../model/transformer.h"

namespace qkv {

struct PerplexityStats {
  double nll = 0;         // summed over predicted tokens (natural log)
  int64_t predicted = 0;  // tokens scored
  int64_t tokens = 0;     // tokens in the windows evaluated so far
  int windows = 0;
  double perplexity() const;  // exp(nll / predicted)
};

// -log softmax(logits)[target], in double (log-sum-exp shifted by the maximum).
double token_nll(const float* logits, int vocab, int target);

// ctx: window length, 2..model.context(). progress (optional) runs after each window with the
// window's own stats and the running totals. Throws BadArgument for fewer than 2 tokens or a
// bad ctx, BadModel for a token id outside the vocabulary.
PerplexityStats perplexity(
    Transformer& model, const std::vector<int>& ids, int ctx,
    const std::function<void(const PerplexityStats& window, const PerplexityStats& total)>& progress = nullptr);

}  // namespace qkv
