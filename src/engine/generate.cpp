// The generation loop of run.c, with the prompt prefilled in one batched forward pass.
#include "generate.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "../common.h"
#include "../grammar/vocab.h"
#include "../chat/chat.h"

namespace qkv {

static double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

std::string runc_printable(const std::string& piece) {
  std::string p = piece.substr(0, piece.find('\0'));
  if (p.empty()) return p;
  if (p.size() == 1) {
    const unsigned char b = p[0];
    const bool printable = b >= 0x20 && b < 0x7f;
    const bool space = b == ' ' || (b >= '\t' && b <= '\r');
    if (!printable && !space) return std::string();
  }
  return p;
}

RunStats run_generate(Transformer& model, const Tokenizer& tok, const RunOptions& opt,
                      const std::function<void(const std::string&)>& emit, const std::function<bool()>& should_stop) {
  const ModelConfig& c = model.config();
  if (tok.vocab_size() != c.vocab_size)
    fail(ErrorCode::BadArgument, "tokenizer vocabulary (" + std::to_string(tok.vocab_size()) +
                                     ") does not match the model's (" + std::to_string(c.vocab_size) + ")");
  Sampler sampler(c.vocab_size, opt.sampler);
  std::unique_ptr<GrammarMatcher> grammar;
  if (!opt.grammar.empty() || !opt.json_schema.empty()) {
    grammar = std::make_unique<GrammarMatcher>(compile_grammar(opt.grammar, opt.json_schema), token_trie(tok));
    sampler.set_grammar(grammar.get());
  }
  int steps = opt.steps;
  if (steps < 0) steps = 0;
  if (steps == 0 || steps > model.context()) steps = model.context();

  std::vector<int> prompt;
  if (opt.chat) {
    std::vector<ChatMessage> msgs;
    if (!opt.system.empty()) msgs.push_back({"system", opt.system, ""});
    msgs.push_back({"user", opt.prompt, ""});
    prompt = tok.encode(render_chat(chat_template_of(&tok), msgs, true), true, false, true);
  } else {
    prompt = tok.encode(opt.prompt, true, false);
  }
  if ((int)prompt.size() > model.context())
    fail(ErrorCode::BadArgument, "the prompt is " + std::to_string(prompt.size()) +
                                     " tokens, longer than the context of " + std::to_string(model.context()) +
                                     " tokens; shorten it");
  if (prompt.empty())
    fail(ErrorCode::BadArgument,
         "the prompt is empty and this model's tokenizer adds no BOS token: give a prompt (-i)");
  RunStats st;
  if (opt.chat) {  // -n counts the reply: a rendered chat prompt is long and its length is not the user's to know
    steps = opt.steps <= 0 ? model.context()
                           : (int)std::min<int64_t>(model.context(), (int64_t)prompt.size() - 1 + opt.steps);
    if (chat_template_of(&tok).guessed)
      st.notes.push_back("this model has no chat template qkv recognizes; using ChatML");
  }
  st.prompt_tokens = (int)prompt.size();
  std::vector<int> seq = prompt;  // every token so far, for the repetition penalty

  // Prefill: the forced positions 0..k-1 in one pass. Logits are needed only from position
  // n_prompt - 1 on, which is the last of the batch when the prompt fits in `steps`.
  const int k = std::min((int)prompt.size(), steps);
  double t0 = now_ms();
  const float* logits = model.forward(prompt.data(), k, 0);
  st.prefill_ms = now_ms() - t0;

  int token = prompt[0];
  int pos = 0;
  // Without a BOS in front (BPE models that add none), the prompt's first token is text too.
  if (token != tok.bos_id() && !opt.chat) {
    std::string first = runc_printable(tok.decode(-1, token));
    if (!first.empty()) emit(first);
  }
  double t1 = now_ms();
  std::vector<float> work(c.vocab_size);
  while (pos < steps) {
    int next;
    const bool forced = pos < (int)prompt.size() - 1;
    if (forced) {
      next = prompt[pos + 1];
    } else {
      if (pos >= k) logits = model.forward(&token, 1, pos);
      std::copy(logits, logits + c.vocab_size, work.begin());
      next = sampler.sample(work.data(), seq.data(), (int)seq.size());
      st.generated_tokens++;
      seq.push_back(next);
    }
    pos++;
    // run.c stops at BOS (kept for SentencePiece models, whose GGUF conversions must print run.c's
    // bytes); byte-level BPE and RWKV models stop at their end-of-generation ids, as llama.cpp does.
    if (next == tok.bos_id() || (!forced && (tok.is_bpe() || tok.is_rwkv() || opt.chat) && tok.is_eog(next))) break;
    if (opt.chat && forced) {  // chat prints the reply only
      token = next;
      continue;
    }
    std::string piece = runc_printable(tok.decode(token, next));
    if (!piece.empty()) emit(piece);
    token = next;
    if (should_stop && should_stop()) break;
  }
  st.decode_ms = now_ms() - t1;
  if (st.generated_tokens == 0)
    st.notes.push_back(opt.chat
                           ? "nothing was generated: the chat prompt (" + std::to_string(prompt.size()) +
                                 " tokens) fills the context of " + std::to_string(model.context()) + " tokens"
                           : "nothing was generated: -n " + std::to_string(steps) + " counts the prompt's " +
                                 std::to_string(prompt.size()) + " tokens too (as llama2.c's run.c does); raise -n");
  return st;
}

}  // namespace qkv
