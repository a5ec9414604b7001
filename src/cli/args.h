// Command-line parsing shared by the native CLI and the WASM/Node CLI (same flags, same errors).
#pragma once
#include <string>
#include <vector>

#include "../engine/generate.h"

namespace qkv {

struct RunArgs {
  std::string model_path;
  std::string tokenizer_path = "tokenizer.bin";
  RunOptions run;
  int threads = 0;                  // 0 = all hardware threads
  int context = 0;                  // 0 = the model's
  std::string logits_out;           // `qkv logits` / `qkv convert`: the output file (-o)
  std::string weight_type = "f32";  // `qkv convert --type`, `qkv quantize --type`
  std::string text_path;            // `qkv quantize --text`: measure perplexity before and after
  bool allow_requantize = false;    // `qkv quantize --allow-requantize`: accept an already-quantized input
  std::string grammar_path;         // --grammar FILE (GBNF); the caller reads it into run.grammar
  std::string json_schema_path;     // --json-schema FILE; read into run.json_schema
};

// "unknown option F" with " (did you mean K?)" when one of `known` is a close spelling.
std::string unknown_option_message(const std::string& flag, const std::vector<std::string>& known);
// " (did you mean K?)" for the closest of `known` when it is a close spelling of `word`, else "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& known);

// Parses `run MODEL [-z TOK] [-i PROMPT] [-n STEPS] [-t TEMP] [-p TOPP] [-s SEED] [-k TOPK]
// [--min-p X] [--repeat-penalty X] [--threads N] [--ctx N]` (argv without the program name
// and command). Out-of-range numbers are clamped as run.c does; malformed ones are errors.
// Throws Error(BadArgument) with the message to show.
RunArgs parse_run_args(const std::vector<std::string>& args);

const char* run_usage();

}  // namespace qkv
