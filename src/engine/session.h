// A conversation with a model: its own KV cache over shared weights, the tokens in that cache,
// and the step-level operations the JS API builds on (feed, logits, sample, attention).
#pragma once
#include <memory>
#include <vector>

#include "../model/transformer.h"
#include "../sampler/sampler.h"

namespace qkv {

class Session {
 public:
  // `model` is shared between sessions (weights are read-only views); each session owns a cache.
  Session(const LoadedModel& model, int context, std::shared_ptr<ThreadPool> pool);

  const ModelConfig& config() const { return t_.config(); }
  int context() const { return t_.context(); }
  Transformer& transformer() { return t_; }
  const std::vector<int>& tokens() const { return tokens_; }
  int position() const { return (int)tokens_.size(); }

  // Runs `ids` after the cached tokens (one batched pass). Logits of the last one follow;
  // with all_logits, those of every fed token (logits_at(i), i < n). rows: the embedding rows
  // of the ids that are Transformer::kEmbeddingRow (an image's tokens), in order.
  void feed(const int* ids, int n, bool all_logits = false, const float* rows = nullptr);
  // Logits of the i-th token of the last feed (all_logits feeds; i = -1: the last token).
  const float* logits_at(int i) const;
  // Makes the cache hold exactly `ids`: keeps the longest common prefix with what is cached and
  // runs only the rest (always at least the last token, so its logits are fresh). rows: as
  // feed()'s; a prefix never extends over an embedding row (two images would compare equal).
  // Returns how many tokens were computed.
  int prefill(const std::vector<int>& ids, const float* rows = nullptr, size_t n_rows = 0);
  // Forgets cached tokens from position n on.
  void truncate(int n);

  // A feed computed elsewhere (the whole model on WebGPU): records `ids` as fed with their
  // logits, (rows, vocab), rows = n (all logits) or 1 (the last token's). The CPU KV cache then
  // lacks these tokens; the next CPU feed() first computes them from the token list, so a
  // session moves back to the CPU with the same state.
  void feed_logits(const int* ids, int n, const float* logits, int rows);

  // Partial offload: `ids` whose states entering layer `first` were computed elsewhere (the
  // first layers on WebGPU), hidden (n, dim); this session runs layers [first, n_layers) and the
  // classifier (Transformer::forward_hidden). Those layers' cache must hold every earlier token
  // (hidden_position()); the layers below stay empty, so a CPU feed() later recomputes the
  // tokens from the token list, as after feed_logits.
  void feed_hidden(const int* ids, int n, const float* hidden, int first, bool all_logits = false);
  // Tokens held by the cache of the layers a feed_hidden() runs.
  int hidden_position() const { return hid_pos_; }

  bool has_logits() const { return has_logits_; }
  const float* logits() const;
  // Samples the next token from the current logits (the sampler sees this session's tokens for
  // its repetition penalty). Does not feed it.
  int sample(Sampler& s);

  // Attention probabilities of the last feed: (n_q, n_kv) for one layer and head, where n_q is
  // the number of tokens fed and n_kv the position after them. Capture must be on before feeding.
  void set_capture_attention(bool on) { t_.set_capture_attention(on); }
  std::vector<float> attention(int layer, int head) const;
  int attention_queries() const { return t_.attention_queries(); }
  int attention_keys() const { return t_.attention_keys(); }

 private:
  Transformer t_;
  std::vector<int> tokens_;
  std::vector<float> work_;
  bool has_logits_ = false;
  int fed_ = 0, fed_all_ = 0;      // tokens in the last feed; how many of them have logits
  int cpu_pos_ = 0;                // tokens_[0..cpu_pos_) are in the CPU KV cache
  int hid_pos_ = 0;                // tokens_[0..hid_pos_) are in the cache of the layers feed_hidden() runs
  std::vector<float> ext_logits_;  // logits of a feed_logits() feed
  bool ext_ = false;               // the last feed's logits are ext_logits_
  void check_feed(int n) const;
  void record_feed(const int* ids, int n, bool all_logits);
};

}  // namespace qkv
