// Sampler: run.c's procedures reproduced operation for operation (so float rounding matches),
// plus top-k, min-p and repetition penalty when asked for.
#include "sampler.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <string>

#include "../common.h"
#include "../kernels/softmax.h"

namespace qkv {

void SamplerOptions::validate() const {
  auto bad = [](const std::string& m) { fail(ErrorCode::BadArgument, m); };
  if (!(temperature >= 0.0f) || !std::isfinite(temperature) || temperature > 100.0f)
    bad("temperature must be a number in [0, 100], got " + std::to_string(temperature));
  if (!std::isfinite(top_p)) bad("top_p must be a finite number");
  if (top_k < 0) bad("top_k must be >= 0, got " + std::to_string(top_k));
  if (!(min_p >= 0.0f && min_p <= 1.0f)) bad("min_p must be in [0, 1], got " + std::to_string(min_p));
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty) || repetition_penalty > 100.0f)
    bad("repetition_penalty must be in (0, 100], got " + std::to_string(repetition_penalty));
  if (repetition_window < 0) bad("repetition_window must be >= 0");
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) bad("presence_penalty must be in [-2, 2]");
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) bad("frequency_penalty must be in [-2, 2]");
  for (const auto& b : logit_bias)
    if (!(b.second >= -100.0f && b.second <= 100.0f)) bad("logit_bias values must be in [-100, 100]");
  if (logprobs > 20) bad("logprobs (top alternatives) must be at most 20");
}

uint32_t rng_u32(uint64_t* s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return (uint32_t)((*s * 0x2545F4914F6CDD1Dull) >> 32);
}

float rng_f32(uint64_t* s) { return (rng_u32(s) >> 8) / 16777216.0f; }

Sampler::Sampler(int vocab_size, const SamplerOptions& opt) : vocab_(vocab_size), opt_(opt) {
  if (vocab_size <= 0) fail(ErrorCode::BadArgument, "sampler needs a positive vocabulary size");
  opt_.validate();
  state_ = opt.seed != 0 ? opt.seed : (uint64_t)(unsigned int)std::time(nullptr);
}

// The candidate list of the filtering samplers, made on first use: greedy and plain sampling
// never need it, and the JS API makes a sampler per token.
std::vector<Sampler::ProbIndex>& Sampler::candidates() {
  if (cand_.size() < (size_t)vocab_) cand_.resize(vocab_);
  return cand_;
}

static int argmax(const float* x, int n) {
  int best = 0;
  float bv = x[0];
  for (int i = 1; i < n; i++)
    if (x[i] > bv) {
      bv = x[i];
      best = i;
    }
  return best;
}

static int sample_mult(const float* p, int n, float coin) {
  float cdf = 0.0f;
  for (int i = 0; i < n; i++) {
    cdf += p[i];
    if (coin < cdf) return i;
  }
  return n - 1;
}

// run.c's order: probability descending, and (its merge sort being stable over candidates
// listed by index) index ascending among equals. A strict total order, so any sort by it gives
// the same sequence as the stable sort.
struct Before {  // a type, not a function pointer: WASM made each comparison an indirect call
  bool operator()(const Sampler::ProbIndex& a, const Sampler::ProbIndex& b) const {
    return a.prob > b.prob || (a.prob == b.prob && a.index < b.index);
  }
};
static constexpr Before before{};

static void stable_sort_desc(Sampler::ProbIndex* cand, int n) {
  std::stable_sort(cand, cand + n,
                   [](const Sampler::ProbIndex& a, const Sampler::ProbIndex& b) { return a.prob > b.prob; });
}

// Makes cand[0, want) the first `want` elements of the sorted order (top-k): a heap's partial
// sort, O(n log want), unless want is a good part of n, where it is slower than sorting all.
static void sort_first(Sampler::ProbIndex* cand, int n, int want) {
  if (want >= n / 8) stable_sort_desc(cand, n);
  else std::partial_sort(cand, cand + want, cand + n, before);
}

int Sampler::sample_topp(const float* probs, float coin) {
  const int n = vocab_;
  const float topp = opt_.top_p;
  std::vector<ProbIndex>& cand = candidates();
  int n0 = 0;
  // Tokens below this cannot be part of the nucleus (run.c's pre-filter).
  const float cutoff = (1.0f - topp) / (n - 1);
  for (int i = 0; i < n; i++)
    if (probs[i] >= cutoff) cand[n0++] = {probs[i], i};
  // run.c uses qsort, which in glibc is a stable merge sort for arrays this size.
  if (n0 == 0) return argmax(probs, n);  // only with a one-token vocabulary
  stable_sort_desc(cand.data(), n0);
  float cum = 0.0f;
  int last = n0 - 1;
  for (int i = 0; i < n0; i++) {
    cum += cand[i].prob;
    if (cum > topp) {
      last = i;
      break;
    }
  }
  const float r = coin * cum;
  float cdf = 0.0f;
  for (int i = 0; i <= last; i++) {
    cdf += cand[i].prob;
    if (r < cdf) return cand[i].index;
  }
  return cand[last].index;
}

// Top-k / min-p / top-p over softmax probabilities, then one draw from what is left.
int Sampler::sample_filtered(float* probs, float coin) {
  const int n = vocab_;
  std::vector<ProbIndex>& cand = candidates();
  int n0 = 0;
  float pmax = 0.0f;
  for (int i = 0; i < n; i++) pmax = std::max(pmax, probs[i]);
  const float floor = opt_.min_p * pmax;
  for (int i = 0; i < n; i++)
    if (probs[i] >= floor && probs[i] > 0.0f) cand[n0++] = {probs[i], i};
  if (n0 == 0) return argmax(probs, n);
  // Top-k needs only the k first (the rest is cut); otherwise all are summed in sorted order.
  if (opt_.top_k > 0 && opt_.top_k < n0) {
    sort_first(cand.data(), n0, opt_.top_k);
    n0 = opt_.top_k;
  } else {
    stable_sort_desc(cand.data(), n0);
  }
  float total = 0.0f;
  for (int i = 0; i < n0; i++) total += cand[i].prob;
  if (opt_.top_p > 0.0f && opt_.top_p < 1.0f) {
    float cum = 0.0f;
    for (int i = 0; i < n0; i++) {
      cum += cand[i].prob / total;
      if (cum > opt_.top_p) {
        n0 = i + 1;
        break;
      }
    }
    total = 0.0f;
    for (int i = 0; i < n0; i++) total += cand[i].prob;
  }
  const float r = coin * total;
  float cdf = 0.0f;
  for (int i = 0; i < n0; i++) {
    cdf += cand[i].prob;
    if (r < cdf) return cand[i].index;
  }
  return cand[n0 - 1].index;
}

void Sampler::set_grammar(GrammarMatcher* g) {
  if (g && g->vocab_size() != vocab_)
    fail(ErrorCode::BadArgument, "grammar vocabulary (" + std::to_string(g->vocab_size()) +
                                     ") does not match the sampler's (" + std::to_string(vocab_) + ")");
  grammar_ = g;
}

int Sampler::sample(float* logits, const int* recent, int n_recent) {
  const bool penalties = opt_.presence_penalty != 0.0f || opt_.frequency_penalty != 0.0f;
  if (penalties) {
    if (counts_.empty()) counts_.assign(vocab_, 0);
    for (int i = 0; i < vocab_; i++)
      if (counts_[i] > 0) logits[i] -= opt_.presence_penalty + opt_.frequency_penalty * (float)counts_[i];
  }
  for (const auto& b : opt_.logit_bias)
    if (b.first >= 0 && b.first < vocab_) logits[b.first] += b.second;
  int t = sample_masked(logits, recent, n_recent);
  if (penalties) counts_[t]++;
  return t;
}

int Sampler::sample_masked(float* logits, const int* recent, int n_recent) {
  if (!grammar_) return sample_unconstrained(logits, recent, n_recent);
  const std::vector<uint64_t>& mask = grammar_->mask();
  int first = -1;
  for (int i = 0; i < vocab_; i++) {
    if ((mask[i >> 6] >> (i & 63)) & 1) {
      if (first < 0) first = i;
    } else {
      logits[i] = -INFINITY;
    }
  }
  if (first < 0) fail(ErrorCode::BadArgument, "grammar: no token of the vocabulary can continue the output");
  int t = sample_unconstrained(logits, recent, n_recent);
  // Only when every allowed logit is NaN or -inf does the draw land outside the mask.
  if (!((mask[t >> 6] >> (t & 63)) & 1)) t = first;
  grammar_->accept_token(t);
  return t;
}

void Sampler::record_logprobs(const float* logits, int chosen) {
  const float scale = opt_.temperature > 0.0f ? 1.0f / opt_.temperature : 1.0f;
  double mx = -INFINITY;
  for (int i = 0; i < vocab_; i++) mx = std::max(mx, (double)logits[i] * scale);
  double sum = 0;
  for (int i = 0; i < vocab_; i++) sum += std::exp((double)logits[i] * scale - mx);
  const double lse = mx + std::log(sum);
  auto lp = [&](int i) { return (float)((double)logits[i] * scale - lse); };
  last_logprob_ = lp(chosen);
  last_top_.clear();
  const int k = std::min(opt_.logprobs, vocab_);
  if (k <= 0) return;
  std::vector<ProbIndex>& cand = candidates();
  for (int i = 0; i < vocab_; i++) cand[i] = {logits[i], i};
  std::partial_sort(cand.begin(), cand.begin() + k, cand.begin() + vocab_, before);
  // Tokens the grammar or a -inf logit rules out are not alternatives.
  for (int i = 0; i < k; i++)
    if (std::isfinite(lp(cand[i].index))) last_top_.push_back({cand[i].index, lp(cand[i].index)});
}

int Sampler::sample_unconstrained(float* logits, const int* recent, int n_recent) {
  if (opt_.repetition_penalty != 1.0f && recent && n_recent > 0) {
    const int from = n_recent > opt_.repetition_window ? n_recent - opt_.repetition_window : 0;
    std::vector<char> seen(vocab_, 0);
    for (int i = from; i < n_recent; i++) {
      const int t = recent[i];
      if (t < 0 || t >= vocab_ || seen[t]) continue;
      seen[t] = 1;
      logits[t] = logits[t] > 0.0f ? logits[t] / opt_.repetition_penalty : logits[t] * opt_.repetition_penalty;
    }
  }
  // NaN logits (from broken weights) can never be chosen.
  for (int i = 0; i < vocab_; i++)
    if (std::isnan(logits[i])) logits[i] = -INFINITY;
  const int best = argmax(logits, vocab_);
  if (opt_.logprobs >= 0) {
    // The draw below overwrites the logits: keep what the log-probabilities are computed from.
    lp_logits_.assign(logits, logits + vocab_);
  }
  const int t = draw(logits, best);
  if (opt_.logprobs >= 0) record_logprobs(lp_logits_.data(), t);
  return t;
}

int Sampler::draw(float* logits, int best) {
  if (opt_.temperature == 0.0f) return best;
  // Sampling needs a finite maximum after scaling: a tiny temperature that overflows the
  // logits (or an all -inf row) is the greedy limit, so it gives the greedy answer.
  if (!std::isfinite(logits[best] / opt_.temperature)) return best;
  for (int i = 0; i < vocab_; i++) logits[i] /= opt_.temperature;
  if (opt_.top_k > 0 || opt_.min_p > 0.0f) {
    // Weights exp(l - max) left unnormalized (sample_filtered sums what it keeps), so the draw
    // depends only on the kept tokens' logits: the WebGPU path reads back only the top ones.
    const float mx = logits[best];
    for (int i = 0; i < vocab_; i++) logits[i] = std::exp(logits[i] - mx);
    return sample_filtered(logits, rng_f32(&state_));
  }
  softmax_ref(logits, vocab_);  // run.c's exact order of operations
  const float coin = rng_f32(&state_);
  if (opt_.top_p <= 0.0f || opt_.top_p >= 1.0f) return sample_mult(logits, vocab_, coin);
  return sample_topp(logits, coin);
}

}  // namespace qkv
