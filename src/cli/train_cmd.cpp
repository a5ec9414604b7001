// `qkv train` and `qkv train-tokenizer`.
#include "train_cmd.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "args.h"
#include "../common.h"
#include "../train/bpe.h"
#include "../train/encdec_trainer.h"
#include "../train/trainer.h"
#include "../train/vit_trainer.h"

namespace qkv {

const char* train_usage() {
  return "  qkv train CONFIG [key=value ...]    train a model (see models/recipes/*.conf); later key=value win\n"
         "  qkv train-tokenizer TEXT --vocab N --out TOK.gguf|TOK.bin   learn a SentencePiece-style BPE\n";
}

static std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(ErrorCode::Io, "cannot read " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int cmd_train(const std::vector<std::string>& args) {
  if (args.empty() || args[0].empty() || args[0][0] == '-')
    fail(ErrorCode::BadArgument, "usage: qkv train CONFIG [key=value ...]");
  const std::string text = slurp(args[0]);
  const std::vector<std::string> overrides(args.begin() + 1, args.end());
  const std::string arch = train_config_arch(text, overrides);
  if (arch == "encdec") {  // the encoder-decoder trainer
    run_encdec_training(parse_encdec_train_config(text, overrides, args[0]));
    return 0;
  }
  if (arch == "vit") {  // the image classifier trainer
    run_vit_training(parse_vit_train_config(text, overrides, args[0]));
    return 0;
  }
  TrainConfig cfg = parse_train_config(text, overrides, args[0]);
  run_training(cfg);
  return 0;
}

int cmd_train_tokenizer(const std::vector<std::string>& args) {
  std::string text_path, out;
  int vocab = 0;
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) fail(ErrorCode::BadArgument, "option " + a + " needs a value");
      return args[++i];
    };
    if (a == "--vocab") {
      const std::string& v = value();
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end) fail(ErrorCode::BadArgument, "--vocab needs an integer, got '" + v + "'");
      vocab = (int)n;
    } else if (a == "--out" || a == "-o") {
      out = value();
    } else if (!a.empty() && a[0] == '-') {
      fail(ErrorCode::BadArgument, unknown_option_message(a, {"--vocab", "--out", "-o"}));
    } else if (text_path.empty()) {
      text_path = a;
    } else {
      fail(ErrorCode::BadArgument, "unexpected argument '" + a + "'");
    }
  }
  if (text_path.empty() || vocab == 0 || out.empty())
    fail(ErrorCode::BadArgument, "usage: qkv train-tokenizer TEXT --vocab N --out TOK.gguf|TOK.bin");
  const bool bin = out.size() >= 4 && out.compare(out.size() - 4, 4, ".bin") == 0;
  const bool gguf = out.size() >= 5 && out.compare(out.size() - 5, 5, ".gguf") == 0;
  if (!bin && !gguf) fail(ErrorCode::BadArgument, "--out must end in .gguf or .bin, got '" + out + "'");
  const std::string text = slurp(text_path);
  const auto t0 = std::chrono::steady_clock::now();
  BpeVocab v = train_bpe(text, vocab);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<uint8_t> bytes = bin ? bpe_to_llama2c(v) : bpe_to_gguf(v, out.substr(out.find_last_of('/') + 1));
  std::ofstream f(out, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), (std::streamsize)bytes.size());
  if (!f) fail(ErrorCode::Io, "cannot write " + out);
  const size_t n_tok = bpe_tokenizer(v).encode(text, false, false).size();
  fprintf(
      stderr,
      "learned %d pieces (%d characters, %d merges) in %.1f s; %zu bytes -> %zu tokens (%.2f bytes/token); wrote %s\n",
      (int)v.pieces.size(), v.n_chars, v.n_merges, secs, text.size(), n_tok, (double)text.size() / n_tok, out.c_str());
  return 0;
}

}  // namespace qkv
