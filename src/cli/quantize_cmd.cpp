// `qkv quantize`: see quantize_cmd.h.
#include "quantize_cmd.h"

#include <cstdio>
#include <map>

#include "../formats/gguf.h"
#include "../formats/gguf_writer.h"
#include "../formats/hf.h"
#include "../formats/loader.h"
#include "../tokenizer/tokenizer.h"

namespace qkv {

QuantizeArgs parse_quantize_args(const std::vector<std::string>& args) {
  if (args.size() < 2 || args[1].empty() || args[1][0] == '-')
    fail(ErrorCode::BadArgument, "missing OUT path (usage: see qkv --help)");
  QuantizeArgs q;
  q.out_path = args[1];
  std::vector<std::string> rest(args);
  rest.erase(rest.begin() + 1);
  q.run = parse_run_args(rest);
  bool type_given = false;
  for (const auto& s : args) type_given |= s == "--type";
  if (!type_given) fail(ErrorCode::BadArgument, std::string("quantize needs --type ") + qtype_names());
  q.type = parse_qtype(q.run.weight_type);
  return q;
}

void check_requantize(const GgufFile& in, QType to, bool allow) {
  if (allow || to == QType::F32 || to == QType::F16 || to == QType::BF16) return;  // widening loses nothing
  std::map<std::string, int> quantized;                                            // type name -> matrices of it
  for (const GgufTensorInfo& t : in.tensors())
    if (t.dims.size() >= 2 && t.type != (uint32_t)GgmlType::F32 && t.type != (uint32_t)GgmlType::F16 &&
        t.type != (uint32_t)GgmlType::BF16)
      quantized[ggml_type_name(t.type)]++;
  if (quantized.empty()) return;
  std::string mix;
  for (const auto& [k, v] : quantized) mix += (mix.empty() ? "" : ", ") + std::to_string(v) + " " + k;
  fail(ErrorCode::BadArgument,
       "the input is already quantized (" + mix +
           " matrices): quantizing it again adds the "
           "first rounding error to the second; quantize the F32/F16/BF16 original instead, or pass "
           "--allow-requantize (allowRequantize: true in JS) to do it anyway");
}

std::shared_ptr<const Blob> quantize_input(const std::shared_ptr<const Blob>& in, const Blob* tok,
                                           const std::string& name) {
  if (looks_like_gguf(in->data(), in->size()) || as_hf_files(in.get())) return in;  // GgufFile::parse reads both
  LoadedModel m = load_model(in);
  if (!tok)
    fail(ErrorCode::BadArgument,
         "a llama2.c checkpoint needs its tokenizer (-z TOKENIZER in the CLIs, options.tokenizer in JS)");
  Tokenizer t = Tokenizer::from_llama2c(tok->data(), tok->size(), m.config.vocab_size);
  return std::make_shared<VectorBlob>(llama2c_to_gguf(m, t, name, QType::F32));
}

std::string quantize_summary(const QuantizeArgs& a, bool from_gguf, uint64_t in_bytes, uint64_t out_bytes,
                             const std::vector<QuantizedTensor>& tensors, const char* format) {
  std::map<std::string, int> count;
  for (const auto& t : tensors) count[ggml_type_name(t.to)]++;
  std::string mix;
  for (const auto& [k, v] : count) mix += (mix.empty() ? "" : ", ") + std::to_string(v) + " " + k;
  char ratio[32];
  snprintf(ratio, sizeof ratio, "%.2fx", (double)in_bytes / (double)(out_bytes ? out_bytes : 1));
  std::string s = a.run.model_path + " (" +
                  (format      ? format
                   : from_gguf ? "GGUF"
                               : "llama2.c") +
                  ", " + format_bytes(in_bytes) + ") -> " + a.out_path + " (" + a.run.weight_type + ", " +
                  format_bytes(out_bytes) + "): " + ratio + " smaller\n";
  s += "tensors: " + mix + "\n";
  for (const auto& t : tensors)
    if (!t.note.empty()) s += "  " + t.name + ": " + t.note + "\n";
  return s;
}

std::string perplexity_change(const std::string& text_path, const PerplexityStats& before,
                              const PerplexityStats& after) {
  char buf[160];
  snprintf(buf, sizeof buf, " (%lld tokens predicted): before %.4f, after %.4f (%+.2f%%)\n", (long long)after.predicted,
           before.perplexity(), after.perplexity(), 100.0 * (after.perplexity() / before.perplexity() - 1.0));
  return "perplexity on " + text_path + buf;
}

}  // namespace qkv
