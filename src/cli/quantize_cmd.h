// `qkv quantize` shared by the native CLI (src/cli/main.cpp) and the Node CLI (through
// bindings/quantize_bindings.cpp): argument parsing, the llama2.c -> GGUF step, and the report
// lines, so both print the same bytes.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../common.h"
#include "../engine/perplexity.h"
#include "../formats/gguf.h"
#include "../formats/quantize.h"
#include "args.h"

namespace qkv {

struct QuantizeArgs {
  RunArgs run;           // model_path, tokenizer_path, weight_type, text_path, context, threads
  std::string out_path;  // the second positional argument
  QType type = QType::Q8_0;
};

// `IN OUT --type T [-z TOK] [--text FILE] [--ctx N] [--threads N]`. Throws BadArgument.
QuantizeArgs parse_quantize_args(const std::vector<std::string>& args);

// The GGUF to re-encode: `in` itself, or a llama2.c checkpoint (with the tokenizer bytes `tok`)
// converted to an f32 GGUF in memory. `name` goes into general.name.
std::shared_ptr<const Blob> quantize_input(const std::shared_ptr<const Blob>& in, const Blob* tok,
                                           const std::string& name);

// Refuses (BadArgument) to re-encode a GGUF whose weight matrices are already of a block type to
// another block type, unless `allow` (--allow-requantize): a second rounding costs more quality
// than quantizing the original. Widening to f32/f16/bf16 is always allowed.
void check_requantize(const GgufFile& in, QType to, bool allow);

// "IN (GGUF, 1.2 MiB) -> OUT (q8_0, 300 KiB): 3.70x smaller\ntensors: ...\n  name: note\n..."
std::string quantize_summary(const QuantizeArgs& a, bool from_gguf, uint64_t in_bytes, uint64_t out_bytes,
                             const std::vector<QuantizedTensor>& tensors, const char* format = nullptr);
// "perplexity on FILE (N tokens predicted): before X, after Y (+Z%)\n"
std::string perplexity_change(const std::string& text_path, const PerplexityStats& before,
                              const PerplexityStats& after);

}  // namespace qkv
