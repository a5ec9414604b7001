// The native `qkv` command: `run` (llama2.c run.c's contract: generated text on stdout, speed
// on stderr) and `logits` (writes the prompt's logits as raw f32, for conformance tests).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>
#include <unistd.h>

#include "../common.h"
#include "../engine/embed.h"
#include "../engine/embed_image.h"
#include "../formats/gguf_clip.h"
#include "../engine/perplexity.h"
#include "../formats/file.h"
#include "../engine/encdec_generate.h"
#include "../formats/gguf_encdec.h"
#include "../formats/gguf_writer.h"
#include "../formats/hf.h"
#include "../formats/loader.h"
#include "../formats/quantize.h"
#include "../json.h"
#include "../kernels/simd.h"
#include "../threadpool.h"
#include "train_cmd.h"
#include "args.h"
#include "inspect.h"
#include "quantize_cmd.h"

using namespace qkv;

static int usage(FILE* f) {
  fprintf(f,
          "qkv %s: a Transformer inference engine\n\nCommands:\n"
          "  qkv run MODEL [options]          generate text (llama2.c run.c flags)\n"
          "  qkv info MODEL [-z TOK]          model architecture and sizes, as JSON\n"
          "  qkv tokenize MODEL [-z TOK] TEXT token ids and pieces of TEXT, one per line\n"
          "  qkv logits MODEL -z TOK -i TEXT -o OUT.f32   write the prompt's logits\n"
          "  qkv convert MODEL.bin -z TOK.bin -o OUT.gguf [--type TYPE]\n"
          "                                   llama2.c checkpoint to GGUF (default f32)\n"
          "  qkv quantize IN OUT.gguf --type TYPE [-z TOK.bin] [--text FILE] [--ctx N] [--allow-requantize]\n"
          "                                   F32/F16 GGUF or llama2.c checkpoint to a quantized GGUF\n"
          "                                   TYPE: %s\n"
          "  qkv perplexity MODEL FILE [-z TOK.bin] [--ctx N] [--threads N]\n"
          "                                   perplexity on a text, in windows of N tokens\n"
          "  qkv embed MODEL TEXT... [--pooling mean|cls|last] [--no-normalize] [--truncate] [--threads N]\n"
          "                                   one JSON array (the text's embedding) per line\n"
          "  qkv embed-image MMPROJ IMAGE... [--pooling cls|mean] [--no-normalize] [--no-project]\n"
          "                 [--size N] [--resize crop|squash] [--threads N]\n"
          "                                   an image encoder (llama.cpp mmproj GGUF) on PNG, JPEG or\n"
          "                                   PPM/PGM images (told by content): one JSON array per line\n"
          "  qkv classify-image MODEL IMAGE... [--top N] [--size N] [--resize crop|squash] [--threads N]\n"
          "                                   an image classifier (clip GGUF with v.head.*) on PNG, JPEG or\n"
          "                                   PPM/PGM images: one JSON array of the N likeliest {index, label, probability}\n"
          "  qkv --version                    print the version\n%s\n%s",
          QKV_VERSION, qtype_names(), train_usage(), run_usage());
  return f == stderr ? 1 : 0;
}

struct Loaded {
  std::unique_ptr<Transformer> model;
  std::unique_ptr<Tokenizer> tok;
};

static Loaded load(const RunArgs& a) {
  Loaded l;
  int threads = a.threads > 0 ? a.threads : ThreadPool::hardware_threads();
  auto pool = std::make_shared<ThreadPool>(threads);
  auto blob = map_model_file(a.model_path);
  l.model = std::make_unique<Transformer>(load_model(blob), a.context, pool);
  l.tok = embedded_tokenizer(blob);  // GGUF carries its tokenizer; llama2.c needs -z
  if (!l.tok) {
    auto tb = map_file(a.tokenizer_path);
    l.tok = std::make_unique<Tokenizer>(Tokenizer::from_llama2c(tb->data(), tb->size(), l.model->config().vocab_size));
  }
  return l;
}

static void print_stats(const RunStats& st, int threads) {
  const double pre = st.prefill_ms > 0 ? st.prompt_tokens / (st.prefill_ms / 1000.0) : 0;
  const double dec = st.decode_ms > 0 ? st.generated_tokens / (st.decode_ms / 1000.0) : 0;
  fprintf(stderr, "prefill: %d tokens, %.1f tok/s | decode: %d tokens, %.1f tok/s | %d threads, %s\n", st.prompt_tokens,
          pre, st.generated_tokens, dec, threads, simd_arch_name());
}

// Encoder-decoder models (t5 GGUF): -i is the source; the target is printed.
static int cmd_run_encdec(const RunArgs& a, std::shared_ptr<const Blob> blob) {
  const int threads = a.threads > 0 ? a.threads : ThreadPool::hardware_threads();
  EncoderDecoder model(load_encdec_model(blob), a.context, std::make_shared<ThreadPool>(threads));
  std::unique_ptr<Tokenizer> tok = embedded_tokenizer(blob);
  if (!tok) fail(ErrorCode::BadModel, "the encoder-decoder model carries no tokenizer");
  RunStats st = run_encdec_generate(model, *tok, a.run, [](const std::string& p) {
    fwrite(p.data(), 1, p.size(), stdout);
    fflush(stdout);
  });
  printf("\n");
  fflush(stdout);
  print_stats(st, threads);
  return 0;
}

static std::string read_text(const std::string& path);

static int cmd_run(RunArgs a) {
  if (!a.grammar_path.empty()) a.run.grammar = read_text(a.grammar_path);
  if (!a.json_schema_path.empty()) a.run.json_schema = read_text(a.json_schema_path);
  {
    auto blob = map_model_file(a.model_path);
    if (is_encdec_model(blob)) return cmd_run_encdec(a, blob);
  }
  Loaded l = load(a);
  RunStats st = run_generate(*l.model, *l.tok, a.run, [](const std::string& p) {
    fwrite(p.data(), 1, p.size(), stdout);
    fflush(stdout);
  });
  printf("\n");
  fflush(stdout);
  for (const std::string& n : st.notes) fprintf(stderr, "qkv: %s\n", n.c_str());
  print_stats(st, l.model->pool().size());
  return 0;
}

// qkv convert MODEL.bin -z TOKENIZER.bin -o OUT.gguf
static int cmd_convert(const RunArgs& a) {
  if (a.logits_out.empty()) fail(ErrorCode::BadArgument, "convert needs -o OUT.gguf");
  auto blob = map_model_file(a.model_path);
  LoadedModel m = load_model(blob);
  auto tb = map_file(a.tokenizer_path);
  Tokenizer tok = Tokenizer::from_llama2c(tb->data(), tb->size(), m.config.vocab_size);
  std::string name = a.model_path.substr(a.model_path.find_last_of('/') + 1);
  const QType type = parse_qtype(a.weight_type);
  std::vector<uint8_t> out = llama2c_to_gguf(m, tok, name, type);
  std::ofstream f(a.logits_out, std::ios::binary);
  f.write(reinterpret_cast<const char*>(out.data()), (std::streamsize)out.size());
  if (!f) fail(ErrorCode::Io, "cannot write " + a.logits_out);
  fprintf(stderr, "wrote %s (%s, %s weights)\n", a.logits_out.c_str(), format_bytes(out.size()).c_str(),
          a.weight_type.c_str());
  return 0;
}

// `quantize` and `perplexity` take a second positional argument after MODEL; the flags are the
// shared ones. Returns the parsed flags and puts the second argument in *second.
static RunArgs parse_two(const std::vector<std::string>& args, const char* what, std::string* second) {
  if (args.size() < 2 || args[1].empty() || args[1][0] == '-')
    fail(ErrorCode::BadArgument, std::string("missing ") + what + " (usage: see qkv --help)");
  *second = args[1];
  std::vector<std::string> rest(args);
  rest.erase(rest.begin() + 1);
  return parse_run_args(rest);
}

static std::string read_text(const std::string& path) {
  auto b = map_file(path);
  std::string s(reinterpret_cast<const char*>(b->data()), b->size());
  if (s.empty()) fail(ErrorCode::BadArgument, "text file " + path + " is empty");
  return s;
}

// Perplexity of the model in `blob` on `text`, window = --ctx or the model's context.
static PerplexityStats measure(const std::shared_ptr<const Blob>& blob, const RunArgs& a, const std::string& text,
                               const char* label) {
  int threads = a.threads > 0 ? a.threads : ThreadPool::hardware_threads();
  Transformer model(load_model(blob), a.context, std::make_shared<ThreadPool>(threads));
  std::unique_ptr<Tokenizer> tok = embedded_tokenizer(blob);
  if (!tok) {
    auto tb = map_file(a.tokenizer_path);
    tok = std::make_unique<Tokenizer>(Tokenizer::from_llama2c(tb->data(), tb->size(), model.config().vocab_size));
  }
  const std::vector<int> ids = tok->encode(text, true, false);
  const int ctx = model.context();
  const int64_t windows = ((int64_t)ids.size() - 1 + ctx - 1) / ctx;
  return perplexity(model, ids, ctx, [&](const PerplexityStats& w, const PerplexityStats& t) {
    fprintf(stderr, "%s[%d/%lld] %lld tokens, window ppl %.4f, running ppl %.4f\n", label, t.windows,
            (long long)windows, (long long)w.tokens, w.perplexity(), t.perplexity());
  });
}

// qkv perplexity MODEL FILE [--ctx N] [--threads N] [-z TOK]
static int cmd_perplexity(const std::vector<std::string>& args) {
  std::string file;
  RunArgs a = parse_two(args, "text FILE", &file);
  const std::string text = read_text(file);
  auto blob = map_model_file(a.model_path);
  PerplexityStats st = measure(blob, a, text, "");
  printf("perplexity: %.4f (%lld tokens predicted, %lld tokens in %d windows)\n", st.perplexity(),
         (long long)st.predicted, (long long)st.tokens, st.windows);
  return 0;
}

// qkv quantize IN OUT --type T [-z TOK] [--text FILE] [--ctx N] [--threads N]
static int cmd_quantize(const std::vector<std::string>& args) {
  const QuantizeArgs q = parse_quantize_args(args);
  const RunArgs& a = q.run;
  const std::string text = a.text_path.empty() ? "" : read_text(a.text_path);  // fail before the work
  auto in = map_model_file(a.model_path);
  const bool from_gguf = looks_like_gguf(in->data(), in->size()) || as_hf_files(in.get());
  std::shared_ptr<const Blob> tok;
  if (!from_gguf) tok = map_file(a.tokenizer_path);
  std::shared_ptr<const Blob> gguf =
      quantize_input(in, tok.get(), a.model_path.substr(a.model_path.find_last_of('/') + 1));
  const GgufFile parsed = GgufFile::parse(gguf);
  check_requantize(parsed, q.type, a.allow_requantize);  // before the output file is created
  std::vector<QuantizedTensor> tensors;
  uint64_t out_bytes = 0;
  {  // streamed to the file: no copy of the output in memory
    std::ofstream f(q.out_path, std::ios::binary);
    if (!f) fail(ErrorCode::Io, "cannot write " + q.out_path);
    tensors = quantize_gguf_stream(parsed, q.type, [&](const std::vector<uint8_t>& b) {
      f.write(reinterpret_cast<const char*>(b.data()), (std::streamsize)b.size());
      out_bytes += b.size();
    });
    if (!f.flush()) fail(ErrorCode::Io, "cannot write " + q.out_path);
  }
  fputs(quantize_summary(q, from_gguf, input_bytes(*in), out_bytes, tensors,
                         as_hf_files(in.get()) ? "Hugging Face" : nullptr)
            .c_str(),
        stdout);
  if (!text.empty()) {
    PerplexityStats before = measure(gguf, a, text, "before ");
    PerplexityStats after = measure(map_file(q.out_path), a, text, "after ");
    fputs(perplexity_change(a.text_path, before, after).c_str(), stdout);
  }
  return 0;
}

// qkv embed MODEL TEXT... [--pooling P] [--no-normalize] [--threads N]
static int cmd_embed(const std::vector<std::string>& args) {
  std::vector<std::string> flags, texts;
  EmbedOptions o;
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    if (a == "--no-normalize") {
      o.normalize = false;
    } else if (a == "--truncate") {
      o.truncate = true;
    } else if (a == "--pooling") {
      if (i + 1 >= args.size()) fail(ErrorCode::BadArgument, "--pooling needs mean, cls or last");
      o.pooling = parse_pooling(args[++i]);
    } else if (a == "--threads") {
      if (i + 1 >= args.size()) fail(ErrorCode::BadArgument, a + " needs a value");
      flags.push_back(a);
      flags.push_back(args[++i]);
    } else if (a == "--") {
      texts.insert(texts.end(), args.begin() + i + 1, args.end());  // TEXTs that start with '-'
      break;
    } else if (a.size() > 2 && a[0] == '-' && a[1] == '-') {  // a misspelt flag is not a text to embed
      fail(ErrorCode::BadArgument,
           unknown_option_message(a, {"--pooling", "--no-normalize", "--truncate", "--threads"}));
    } else if (flags.empty() && texts.empty() && !a.empty() && a[0] != '-') {
      flags.push_back(a);  // MODEL
    } else {
      texts.push_back(a);
    }
  }
  if (flags.empty() || flags[0][0] == '-')
    fail(ErrorCode::BadArgument, "embed needs MODEL (usage: qkv embed MODEL TEXT...)");
  if (texts.empty()) fail(ErrorCode::BadArgument, "embed needs at least one TEXT");
  Loaded l = load(parse_run_args(flags));
  const std::vector<float> e = embed_texts(*l.model, *l.tok, texts, o);
  const int dim = l.model->config().dim;
  std::string line;
  char buf[32];
  for (size_t i = 0; i < texts.size(); i++) {
    line = "[";
    for (int d = 0; d < dim; d++) {
      snprintf(buf, sizeof buf, "%s%.9g", d ? "," : "", e[i * dim + d]);
      line += buf;
    }
    line += "]\n";
    fwrite(line.data(), 1, line.size(), stdout);
  }
  return 0;
}

// A binary PPM/PGM file as RGBA bytes; a corrupt one is an error naming the file.
static std::vector<uint8_t> read_image(const std::string& path, int* w, int* h) {
  auto file = map_file(path);
  try {
    return decode_image(file->data(), file->size(), w, h);  // PNG, JPEG, PPM/PGM, told by content
  } catch (const Error& e) {
    fail(e.code(), path + ": " + e.what());
  }
}

static int parse_int_flag(const std::string& flag, const std::string& v, int lo, int hi) {
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end || n < lo || n > hi)
    fail(ErrorCode::BadArgument,
         flag + " must be an integer in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got '" + v + "'");
  return (int)n;
}

// qkv classify-image MODEL IMAGE... [--top N] [--size N] [--resize M] [--threads N]: one JSON array
// per image of the N likeliest classes, [{"index", "label", "probability"}], most likely first.
static int cmd_classify_image(const std::vector<std::string>& args) {
  std::vector<std::string> paths;
  int threads = 0, size = 0, top = 5;
  std::string resize;
  auto value = [&](size_t& i) -> const std::string& {
    if (i + 1 >= args.size()) fail(ErrorCode::BadArgument, args[i] + " needs a value");
    return args[++i];
  };
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    if (a == "--top") top = parse_int_flag(a, value(i), 1, 1 << 20);
    else if (a == "--threads") threads = parse_int_flag(a, value(i), 1, 256);
    else if (a == "--size") size = parse_int_flag(a, value(i), 1, kMaxEncoderSide);
    else if (a == "--resize") resize = value(i);
    else if (a.size() > 1 && a[0] == '-')
      fail(ErrorCode::BadArgument, unknown_option_message(a, {"--top", "--size", "--resize", "--threads"}));
    else paths.push_back(a);
  }
  if (paths.empty())
    fail(ErrorCode::BadArgument, "classify-image needs MODEL (usage: qkv classify-image MODEL IMAGE...)");
  if (paths.size() < 2) fail(ErrorCode::BadArgument, "classify-image needs at least one IMAGE");
  ImageModelData d = load_image_model(map_file(paths[0]));
  if (!d.head)
    fail(ErrorCode::Unsupported,
         paths[0] + " has no classifier head (v.head.weight, clip.vision.labels): use embed-image");
  ImagePreprocess pp = d.preprocess;
  if (size) pp.size = size;
  if (!resize.empty()) pp.mode = parse_resize_mode(resize);
  auto pool = std::make_shared<ThreadPool>(threads > 0 ? threads : ThreadPool::hardware_threads());
  Transformer model(std::move(d.model), 0, pool);
  for (size_t k = 1; k < paths.size(); k++) {
    int w = 0, h = 0;
    const std::vector<uint8_t> rgba = read_image(paths[k], &w, &h);
    const std::vector<float> p = classify_image(model, d.head.weight, d.head.bias, pp, rgba.data(), rgba.size(), w, h);
    std::vector<int> order(p.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = (int)i;
    // Most likely first; ties in class order, as the JS API sorts.
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
    Json out;
    out.k = Json::Arr;
    char buf[32];
    for (size_t i = 0; i < order.size() && (int)i < top; i++) {
      Json c;
      c.k = Json::Obj;
      Json index, label, prob;
      index.k = prob.k = Json::Num;
      index.s = std::to_string(order[i]);
      snprintf(buf, sizeof buf, "%.9g", p[order[i]]);
      prob.s = buf;
      label.k = Json::Str;
      label.s = d.head.labels[order[i]];
      c.obj = {{"index", index}, {"label", label}, {"probability", prob}};
      out.arr.push_back(std::move(c));
    }
    const std::string line = json_text(out) + "\n";
    fwrite(line.data(), 1, line.size(), stdout);
  }
  return 0;
}

// qkv embed-image MMPROJ IMAGE... [--pooling P] [--no-normalize] [--no-project] [--size N] [--resize M] [--threads N]
static int cmd_embed_image(const std::vector<std::string>& args) {
  std::vector<std::string> paths;
  ImageEmbedOptions o;
  int threads = 0, size = 0;
  std::string resize;
  auto value = [&](size_t& i) -> const std::string& {
    if (i + 1 >= args.size()) fail(ErrorCode::BadArgument, args[i] + " needs a value");
    return args[++i];
  };
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    if (a == "--no-normalize") o.normalize = false;
    else if (a == "--no-project") o.project = false;
    else if (a == "--pooling") {
      const std::string& v = value(i);
      if (v != "cls" && v != "mean") fail(ErrorCode::BadArgument, "--pooling must be cls or mean, got '" + v + "'");
      o.pooling = parse_pooling(v);
    } else if (a == "--threads") threads = parse_int_flag(a, value(i), 1, 256);
    else if (a == "--size") size = parse_int_flag(a, value(i), 1, kMaxEncoderSide);
    else if (a == "--resize") resize = value(i);
    else if (a.size() > 1 && a[0] == '-')
      fail(ErrorCode::BadArgument, unknown_option_message(a, {"--pooling", "--no-normalize", "--no-project", "--size",
                                                              "--resize", "--threads"}));
    else paths.push_back(a);
  }
  if (paths.empty()) fail(ErrorCode::BadArgument, "embed-image needs MMPROJ (usage: qkv embed-image MMPROJ IMAGE...)");
  if (paths.size() < 2) fail(ErrorCode::BadArgument, "embed-image needs at least one IMAGE");
  ImageModelData d = load_image_model(map_file(paths[0]));
  ImagePreprocess pp = d.preprocess;
  if (size) pp.size = size;
  if (!resize.empty()) pp.mode = parse_resize_mode(resize);
  auto pool = std::make_shared<ThreadPool>(threads > 0 ? threads : ThreadPool::hardware_threads());
  Transformer model(std::move(d.model), 0, pool);
  std::string line;
  char buf[32];
  for (size_t k = 1; k < paths.size(); k++) {
    int w = 0, h = 0;
    const std::vector<uint8_t> rgba = read_image(paths[k], &w, &h);
    const std::vector<float> e = embed_image(model, pp, rgba.data(), rgba.size(), w, h, o);
    line = "[";
    for (size_t i = 0; i < e.size(); i++) {
      snprintf(buf, sizeof buf, "%s%.9g", i ? "," : "", e[i]);
      line += buf;
    }
    line += "]\n";
    fwrite(line.data(), 1, line.size(), stdout);
  }
  return 0;
}

// qkv info MODEL [-z TOK] / qkv tokenize MODEL [-z TOK] TEXT
static int cmd_inspect(const std::string& cmd, const std::vector<std::string>& args) {
  const InspectArgs a = parse_inspect_args(cmd, args);
  auto model = map_model_file(a.model_path);
  std::shared_ptr<const Blob> tok;
  // info shows a llama2.c model without its tokenizer too; tokenize needs it.
  if (needs_separate_tokenizer(*model) && (cmd == "tokenize" || access(a.tokenizer_path.c_str(), R_OK) == 0))
    tok = map_file(a.tokenizer_path);
  const std::string out = cmd == "info" ? model_info_json(model, tok.get()) : tokenize_lines(model, tok.get(), a.text);
  fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

static int cmd_logits(const RunArgs& a) {
  if (a.logits_out.empty()) fail(ErrorCode::BadArgument, "logits needs -o OUT");
  Loaded l = load(a);
  std::vector<int> ids = l.tok->encode(a.run.prompt, true, false);
  int n = (int)ids.size();
  l.model->forward(ids.data(), n, 0, true);
  std::ofstream out(a.logits_out, std::ios::binary);
  out.write(reinterpret_cast<const char*>(l.model->logits()), (std::streamsize)n * l.model->config().vocab_size * 4);
  if (!out) fail(ErrorCode::Io, "cannot write " + a.logits_out);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) return usage(stderr);
  std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") return usage(stdout);
  if (cmd == "--version" || cmd == "-V" || cmd == "version") {
    printf("qkv %s (native, %s)\n", QKV_VERSION, simd_arch_name());
    return 0;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (cmd == "run") return cmd_run(parse_run_args(args));
    if (cmd == "logits") return cmd_logits(parse_run_args(args));
    if (cmd == "info" || cmd == "tokenize") return cmd_inspect(cmd, args);
    if (cmd == "convert") return cmd_convert(parse_run_args(args));
    if (cmd == "train") return cmd_train(args);
    if (cmd == "train-tokenizer") return cmd_train_tokenizer(args);
    if (cmd == "quantize") return cmd_quantize(args);
    if (cmd == "perplexity") return cmd_perplexity(args);
    if (cmd == "embed") return cmd_embed(args);
    if (cmd == "embed-image") return cmd_embed_image(args);
    if (cmd == "classify-image") return cmd_classify_image(args);
    fprintf(stderr, "qkv: unknown command '%s'%s\n\n", cmd.c_str(),
            did_you_mean(cmd, {"run", "info", "tokenize", "logits", "convert", "quantize", "perplexity", "embed",
                               "embed-image", "classify-image", "train", "train-tokenizer"})
                .c_str());
    return usage(stderr);
  } catch (const Error& e) {
    fprintf(stderr, "qkv: error [%s]: %s\n", error_code_name(e.code()), e.what());
    if (e.code() == ErrorCode::BadArgument && cmd == "run") fprintf(stderr, "\n%s", run_usage());
    return 1;
  } catch (const std::bad_alloc&) {
    fprintf(stderr, "qkv: error [out_of_memory]: not enough memory\n");
    return 1;
  } catch (const std::exception& e) {
    fprintf(stderr, "qkv: error [internal]: %s\n", e.what());
    return 1;
  }
}
