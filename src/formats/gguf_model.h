// GGUF -> LoadedModel (architecture keys mapped onto ModelConfig) and the tokenizer stored in
// the file's tokenizer.ggml.* metadata.
#pragma once
#include "../tokenizer/tokenizer.h"
#include "gguf.h"

namespace qkv {

// Supported architectures, for messages.
const char* gguf_supported_archs();

LoadedModel load_gguf_model(const GgufFile& g);
Tokenizer load_gguf_tokenizer(const GgufFile& g);

}  // namespace qkv
