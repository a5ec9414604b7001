// The encoder-decoder generation loop: encode once, then decode one token per step.
#include "encdec_generate.h"

#include <chrono>

#include "../common.h"
#include "../sampler/sampler.h"

namespace qkv {

static double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

std::vector<int> encdec_source_ids(const Tokenizer& tok, const std::string& source) {
  std::vector<int> ids = tok.encode(source, true, true);
  if (ids.empty()) fail(ErrorCode::BadArgument, "the source is empty: give a text to encode (-i)");
  return ids;
}

RunStats run_encdec_generate(EncoderDecoder& model, const Tokenizer& tok, const RunOptions& opt,
                             const std::function<void(const std::string&)>& emit,
                             const std::function<bool()>& should_stop) {
  const ModelConfig& c = model.config();
  if (tok.vocab_size() != c.vocab_size)
    fail(ErrorCode::BadArgument, "tokenizer vocabulary (" + std::to_string(tok.vocab_size()) +
                                     ") does not match the model's (" + std::to_string(c.vocab_size) + ")");
  if (opt.chat) fail(ErrorCode::Unsupported, "encoder-decoder models have no chat format; give the source text alone");
  Sampler sampler(c.vocab_size, opt.sampler);
  int steps = opt.steps;
  if (steps <= 0 || steps > model.context()) steps = model.context();
  const std::vector<int> src = encdec_source_ids(tok, opt.prompt);
  if ((int)src.size() > model.context())
    fail(ErrorCode::BadArgument, "the source is " + std::to_string(src.size()) +
                                     " tokens, longer than the context of " + std::to_string(model.context()) +
                                     " tokens; shorten it");
  RunStats st;
  st.prompt_tokens = (int)src.size();
  const double t0 = now_ms();
  model.encode(src.data(), (int)src.size());
  st.prefill_ms = now_ms() - t0;
  const double t1 = now_ms();
  std::vector<int> seq;
  std::vector<float> work(c.vocab_size);
  int token = model.encdec().decoder_start_id;
  for (int pos = 0; pos < steps; pos++) {
    const float* logits = model.decode(&token, 1, pos);
    std::copy(logits, logits + c.vocab_size, work.begin());
    const int next = sampler.sample(work.data(), seq.data(), (int)seq.size());
    st.generated_tokens++;
    if (tok.is_eog(next)) break;
    seq.push_back(next);
    std::string piece = tok.is_control(next) ? std::string() : tok.decode(token, next);
    if (pos == 0 && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);  // SentencePiece drops the leading space
    if (!piece.empty()) emit(piece);
    token = next;
    if (should_stop && should_stop()) break;
  }
  st.decode_ms = now_ms() - t1;
  return st;
}

}  // namespace qkv
