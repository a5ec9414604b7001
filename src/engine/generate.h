// Generation with llama2.c run.c's contract: the prompt is encoded with BOS, positions count
// the prompt (steps includes it), prompt pieces are echoed, generation stops at BOS (id 1) or
// after `steps` positions. The prompt is prefilled in one batched pass.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "../model/transformer.h"
#include "../sampler/sampler.h"
#include "../tokenizer/tokenizer.h"

namespace qkv {

struct RunOptions {
  std::string prompt;
  // Positions to run including the prompt (run.c's -n); with `chat`, tokens of the reply only.
  // 0 or past the context: up to the end of the context (run.c's override).
  int steps = 256;
  SamplerOptions sampler;
  // Chat: `prompt` is the user's message (after `system`, if any), rendered in the tokenizer's
  // chat format; only the reply is printed, and it ends at an end-of-turn id.
  bool chat = false;
  std::string system;
  // Constrained decoding: GBNF text, or a JSON Schema (JSON text); at most one.
  std::string grammar;
  std::string json_schema;
};

struct RunStats {
  int prompt_tokens = 0;
  int generated_tokens = 0;  // sampled, not echoed
  double prefill_ms = 0, decode_ms = 0;
  // Things the user should know, for the CLIs' stderr: a guessed chat format, why nothing was
  // generated.
  std::vector<std::string> notes;
};

// Calls emit(bytes) for each piece, exactly the bytes run.c's safe_printf would print.
// should_stop (optional) is polled between tokens.
RunStats run_generate(Transformer& model, const Tokenizer& tok, const RunOptions& opt,
                      const std::function<void(const std::string&)>& emit,
                      const std::function<bool()>& should_stop = nullptr);

// run.c's safe_printf filter: drops empty pieces and lone bytes that are neither printable
// nor whitespace (C locale), and cuts at an embedded NUL like printf("%s").
std::string runc_printable(const std::string& piece);

}  // namespace qkv
