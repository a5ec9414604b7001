// Windowed perplexity (see perplexity.h). Each window is fed in chunks of the engine's batch,
// so memory for logits stays at kMaxBatch x vocab whatever the window length.
#include "perplexity.h"

#include <algorithm>
#include <cmath>

#include "../common.h"

namespace qkv {

double PerplexityStats::perplexity() const { return predicted > 0 ? std::exp(nll / (double)predicted) : NAN; }

double token_nll(const float* logits, int vocab, int target) {
  double mx = logits[0];
  for (int i = 1; i < vocab; i++) mx = std::max(mx, (double)logits[i]);
  double sum = 0;
  for (int i = 0; i < vocab; i++) sum += std::exp((double)logits[i] - mx);
  return std::log(sum) + mx - (double)logits[target];
}

PerplexityStats perplexity(Transformer& model, const std::vector<int>& ids, int ctx,
                           const std::function<void(const PerplexityStats&, const PerplexityStats&)>& progress) {
  const int vocab = model.config().vocab_size;
  if (ids.size() < 2)
    fail(ErrorCode::BadArgument, "perplexity needs at least 2 tokens, the text has " + std::to_string(ids.size()));
  if (ctx < 2 || ctx > model.context())
    fail(ErrorCode::BadArgument, "perplexity window " + std::to_string(ctx) + " must be 2.." +
                                     std::to_string(model.context()) + " (the model's context)");
  for (int id : ids)
    if (id < 0 || id >= vocab)
      fail(ErrorCode::BadArgument, "token id " + std::to_string(id) + " is outside the vocabulary");
  PerplexityStats total;
  const int64_t n = (int64_t)ids.size();
  for (int64_t start = 0; start + 1 < n; start += ctx) {
    const int len = (int)std::min<int64_t>(ctx, n - start);
    PerplexityStats win;
    win.tokens = len;
    win.windows = 1;
    for (int i = 0; i < len; i += Transformer::kMaxBatch) {
      const int b = std::min(Transformer::kMaxBatch, len - i);
      model.forward(ids.data() + start + i, b, i, true);
      for (int j = 0; j < b && i + j + 1 < len; j++) {
        win.nll += token_nll(model.logits() + (size_t)j * vocab, vocab, ids[start + i + j + 1]);
        win.predicted++;
      }
    }
    total.nll += win.nll;
    total.predicted += win.predicted;
    total.tokens += win.tokens;
    total.windows++;
    if (progress) progress(win, total);
  }
  return total;
}

}  // namespace qkv
