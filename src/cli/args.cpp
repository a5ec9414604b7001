// Flag parsing with run.c's meanings: -n counts positions including the prompt, -t < 0 -> 0,
// -p outside [0, 1] -> 0.9, -s <= 0 -> time-based seed.
#include "args.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "../common.h"

namespace qkv {

const char* run_usage() {
  return "Usage:   qkv run MODEL [options]\n"
         "Example: qkv run model.bin -z tokenizer.bin -n 256 -i \"Once upon a time\"\n"
         "Options:\n"
         "  -z PATH   tokenizer (llama2.c tokenizer.bin), default tokenizer.bin\n"
         "  -i TEXT   prompt, default empty\n"
         "  -n INT    positions to run including the prompt (as run.c), default 256, 0 = whole context\n"
         "  -t FLOAT  temperature in [0, inf), default 1.0 (0 = greedy)\n"
         "  -p FLOAT  top-p (nucleus) in [0, 1], default 0.9\n"
         "  -s INT    random seed, default time-based\n"
         "  -k INT    top-k, default 0 (off)\n"
         "  --min-p FLOAT           min-p filter, default 0 (off)\n"
         "  --repeat-penalty FLOAT  repetition penalty, default 1 (off)\n"
         "  --threads INT           worker threads, default all cores\n"
         "  --ctx INT               KV-cache length, default the model's\n"
         "  --chat TEXT             chat: TEXT is the user's message, rendered in the model's chat\n"
         "                          format (GGUF chat template); prints only the reply\n"
         "  --system TEXT           chat: a system message before it\n"
         "  --grammar FILE          constrain the output to a GBNF grammar (llama.cpp's format)\n"
         "  --json-schema FILE      constrain the output to JSON valid under a JSON Schema\n"
         "With --chat, -n counts the reply's tokens, not the prompt's (0 = up to the context).\n";
}

static void bad(const std::string& m) { fail(ErrorCode::BadArgument, m); }

// Levenshtein distance, for "did you mean".
static size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); j++) row[j] = j;
  for (size_t i = 1; i <= a.size(); i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); j++) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = (size_t)-1;
  for (const std::string& k : known) {
    const size_t d = edit_distance(word, k);
    if (d < best_d) best_d = d, best = k;
  }
  // Close: a third of the name or two edits, whichever is less (a one-letter flag is never "close").
  if (!best.empty() && word.size() > 2 && best_d <= std::min<size_t>(2, std::max<size_t>(1, word.size() / 3)))
    return " (did you mean " + best + "?)";
  return "";
}

std::string unknown_option_message(const std::string& flag, const std::vector<std::string>& known) {
  return "unknown option " + flag + did_you_mean(flag, known);
}

static long long parse_int(const std::string& flag, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  long long r = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE) bad("option " + flag + " needs an integer, got '" + v + "'");
  return r;
}

static float parse_float(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  float r = std::strtof(v.c_str(), &end);
  if (v.empty() || *end != '\0' || std::isnan(r)) bad("option " + flag + " needs a number, got '" + v + "'");
  return r;
}

static int clamp_int(long long v, long long lo, long long hi) { return (int)(v < lo ? lo : v > hi ? hi : v); }

RunArgs parse_run_args(const std::vector<std::string>& args) {
  RunArgs a;
  if (args.empty() || args[0].empty() || args[0][0] == '-') bad("missing MODEL path");
  a.model_path = args[0];
  long long seed = 0;
  static const std::vector<std::string> valued = {"-z",        "-i",        "-n",
                                                  "-t",        "-p",        "-s",
                                                  "-k",        "--min-p",   "--repeat-penalty",
                                                  "--threads", "--ctx",     "--chat",
                                                  "--system",  "--grammar", "--json-schema",
                                                  "-o",        "--type",    "--text"};
  static const std::vector<std::string> switches = {"--allow-requantize"};
  for (size_t i = 1; i < args.size(); i += 2) {
    const std::string& f = args[i];
    if (f.size() < 2 || f[0] != '-') bad("unexpected argument '" + f + "'");
    if (std::find(switches.begin(), switches.end(), f) != switches.end()) {
      a.allow_requantize = true;
      i--;  // a switch takes no value
      continue;
    }
    if (std::find(valued.begin(), valued.end(), f) == valued.end()) {
      std::vector<std::string> all(valued);
      all.insert(all.end(), switches.begin(), switches.end());
      bad(unknown_option_message(f, all));
    }
    if (i + 1 >= args.size()) bad("option " + f + " needs a value");
    const std::string& v = args[i + 1];
    if (f == "-z") a.tokenizer_path = v;
    else if (f == "-i") a.run.prompt = v;
    else if (f == "-n") a.run.steps = clamp_int(parse_int(f, v), 0, 1 << 30);
    else if (f == "-t") a.run.sampler.temperature = parse_float(f, v);
    else if (f == "-p") a.run.sampler.top_p = parse_float(f, v);
    else if (f == "-s") seed = parse_int(f, v);
    else if (f == "-k") a.run.sampler.top_k = clamp_int(parse_int(f, v), 0, 1 << 30);
    else if (f == "--min-p") a.run.sampler.min_p = parse_float(f, v);
    else if (f == "--repeat-penalty") a.run.sampler.repetition_penalty = parse_float(f, v);
    else if (f == "--threads") {
      long long t = parse_int(f, v);
      if (t < 1 || t > 256) bad("--threads must be 1..256, got " + v);
      a.threads = (int)t;
    } else if (f == "--ctx") {
      long long c = parse_int(f, v);
      if (c < 1 || c > (1 << 20)) bad("--ctx must be 1..1048576, got " + v);
      a.context = (int)c;
    } else if (f == "--chat") {
      a.run.chat = true;
      a.run.prompt = v;
    } else if (f == "--system") a.run.system = v;
    else if (f == "--grammar") a.grammar_path = v;
    else if (f == "--json-schema") a.json_schema_path = v;
    else if (f == "-o") a.logits_out = v;
    else if (f == "--type") a.weight_type = v;
    else if (f == "--text") a.text_path = v;
    else bad("unknown option " + f);
  }
  // run.c's overrides.
  if (a.run.sampler.temperature < 0.0f) a.run.sampler.temperature = 0.0f;
  if (a.run.sampler.top_p < 0.0f || a.run.sampler.top_p > 1.0f) a.run.sampler.top_p = 0.9f;
  a.run.sampler.seed = seed > 0 ? (uint64_t)seed : 0;
  a.run.sampler.validate();
  return a;
}

}  // namespace qkv
