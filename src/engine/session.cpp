// Session: KV-cache bookkeeping around Transformer::forward.
#include "session.h"

#include <algorithm>

#include "../common.h"

namespace qkv {

Session::Session(const LoadedModel& model, int context, std::shared_ptr<ThreadPool> pool)
    : t_(model, context, std::move(pool)) {}

void Session::check_feed(int n) const {
  if (n <= 0) fail(ErrorCode::BadArgument, "feed needs at least one token");
  if ((int64_t)position() + n > context())
    fail(ErrorCode::BadArgument, "feeding " + std::to_string(n) + " tokens after " + std::to_string(position()) +
                                     " would pass the context of " + std::to_string(context()) +
                                     " tokens; start a new session or truncate");
}

void Session::record_feed(const int* ids, int n, bool all_logits) {
  tokens_.insert(tokens_.end(), ids, ids + n);
  has_logits_ = true;
  fed_ = n;
  fed_all_ = all_logits ? n : 1;
}

void Session::feed(const int* ids, int n, bool all_logits, const float* rows) {
  check_feed(n);
  has_logits_ = false;
  ext_ = false;
  // Tokens fed elsewhere (feed_logits) enter the CPU cache first.
  if (cpu_pos_ < position()) t_.forward(tokens_.data() + cpu_pos_, position() - cpu_pos_, cpu_pos_);
  cpu_pos_ = position();
  t_.forward(ids, n, position(), all_logits, rows);
  record_feed(ids, n, all_logits);
  cpu_pos_ = hid_pos_ = position();
}

void Session::feed_hidden(const int* ids, int n, const float* hidden, int first, bool all_logits) {
  check_feed(n);
  if (hid_pos_ != position())
    fail(ErrorCode::BadArgument, "feed_hidden: the cache of layers " + std::to_string(first) + ".. holds " +
                                     std::to_string(hid_pos_) + " tokens, not the session's " +
                                     std::to_string(position()));
  has_logits_ = false;
  ext_ = false;
  check_tokens(ids, n, config().vocab_size);
  t_.forward_hidden(hidden, n, position(), first, all_logits);
  record_feed(ids, n, all_logits);
  hid_pos_ = position();
}

void Session::feed_logits(const int* ids, int n, const float* logits, int rows) {
  check_feed(n);
  if (rows != 1 && rows != n)
    fail(ErrorCode::BadArgument, "feed_logits takes the logits of the last token or of all of them");
  const size_t len = (size_t)rows * config().vocab_size;
  ext_logits_.assign(logits, logits + len);
  ext_ = true;
  record_feed(ids, n, rows == n && n > 1);
}

const float* Session::logits_at(int i) const {
  if (!has_logits_) fail(ErrorCode::BadArgument, "no logits: feed at least one token first");
  if (i == -1) i = fed_ - 1;
  if (fed_all_ == 1) {
    if (i != fed_ - 1)
      fail(ErrorCode::BadArgument, "logits of earlier tokens need a feed with all logits (allLogits: true)");
    return ext_ ? ext_logits_.data() : t_.logits();
  }
  if (i < 0 || i >= fed_all_)
    fail(ErrorCode::BadArgument,
         "logits index " + std::to_string(i) + " out of range (0.." + std::to_string(fed_all_ - 1) + ")");
  return (ext_ ? ext_logits_.data() : t_.logits()) + (size_t)i * config().vocab_size;
}

int Session::prefill(const std::vector<int>& ids, const float* rows, size_t n_rows) {
  if (ids.empty()) fail(ErrorCode::BadArgument, "prefill needs at least one token");
  const size_t n_embedded = (size_t)std::count(ids.begin(), ids.end(), Transformer::kEmbeddingRow);
  if (n_embedded && (!rows || n_rows != n_embedded * (size_t)config().dim))
    fail(ErrorCode::BadArgument, "prefill: " + std::to_string(n_embedded) + " image positions need as many rows of " +
                                     std::to_string(config().dim) + " values");
  size_t common = 0;
  while (common < ids.size() && common < tokens_.size() && ids[common] == tokens_[common] &&
         ids[common] != Transformer::kEmbeddingRow)
    common++;
  if (common == ids.size()) common--;  // recompute the last token for its logits
  truncate((int)common);
  feed(ids.data() + common, (int)(ids.size() - common), false, n_embedded ? rows : nullptr);
  return (int)(ids.size() - common);
}

void Session::truncate(int n) {
  if (n < 0 || n > position())
    fail(ErrorCode::BadArgument,
         "cannot truncate to " + std::to_string(n) + " tokens: the session holds " + std::to_string(position()));
  if (n < position()) has_logits_ = false;
  tokens_.resize(n);
  cpu_pos_ = std::min(cpu_pos_, n);
  hid_pos_ = std::min(hid_pos_, n);
}

const float* Session::logits() const { return logits_at(-1); }

int Session::sample(Sampler& s) {
  const float* l = logits();
  work_.assign(l, l + config().vocab_size);
  return s.sample(work_.data(), tokens_.data(), (int)tokens_.size());
}

std::vector<float> Session::attention(int layer, int head) const {
  const ModelConfig& c = config();
  if (t_.attention().empty()) fail(ErrorCode::BadArgument, "no attention recorded: turn capture on, then feed tokens");
  if (layer < 0 || layer >= c.n_layers)
    fail(ErrorCode::BadArgument,
         "layer " + std::to_string(layer) + " out of range (0.." + std::to_string(c.n_layers - 1) + ")");
  if (head < 0 || head >= c.n_heads)
    fail(ErrorCode::BadArgument,
         "head " + std::to_string(head) + " out of range (0.." + std::to_string(c.n_heads - 1) + ")");
  const size_t per = (size_t)t_.attention_queries() * t_.attention_keys();
  const float* p = t_.attention().data() + ((size_t)layer * c.n_heads + head) * per;
  return std::vector<float>(p, p + per);
}

}  // namespace qkv
