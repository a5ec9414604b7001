// `qkv info` and `qkv tokenize`, shared by the native CLI (src/cli/main.cpp) and the Node CLI
// (bin/qkv.mjs, through bindings/qkv_bindings.cpp): the same arguments, errors and output bytes.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "../model/weights.h"

namespace qkv {

struct InspectArgs {
  std::string model_path;
  std::string tokenizer_path = "tokenizer.bin";  // llama2.c checkpoints only (-z)
  std::string text;                              // tokenize: the text
};

// `info MODEL [-z TOK]` / `tokenize MODEL [-z TOK] TEXT` (argv after the command). BadArgument.
InspectArgs parse_inspect_args(const std::string& cmd, const std::vector<std::string>& args);

// Whether the model needs its tokenizer from -z (llama2.c) rather than from the file (GGUF).
bool needs_separate_tokenizer(const Blob& model);

// info: one JSON object (the JS API's model.info names) with a newline. `tok` may be null.
std::string model_info_json(const std::shared_ptr<const Blob>& model, const Blob* tok);

// tokenize: one line per token, "ID<TAB>PIECE" with the piece's text as a JSON string.
std::string tokenize_lines(const std::shared_ptr<const Blob>& model, const Blob* tok, const std::string& text);

}  // namespace qkv
