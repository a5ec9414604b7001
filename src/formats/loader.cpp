// Format detection: GGUF by magic (not yet supported), otherwise a llama2.c checkpoint.
#include "loader.h"

#include <cstring>

#include "../common.h"
#include "../tokenizer/tokenizer.h"
#include "gguf.h"
#include "gguf_model.h"
#include "llama2c.h"

namespace qkv {

LoadedModel load_model(std::shared_ptr<const Blob> blob) {
  if (!blob || blob->size() == 0) fail(ErrorCode::BadModel, "model file is empty");
  if (looks_like_gguf(blob->data(), blob->size())) return load_gguf_model(GgufFile::parse(std::move(blob)));
  return load_llama2c(std::move(blob));
}

std::unique_ptr<Tokenizer> embedded_tokenizer(const std::shared_ptr<const Blob>& blob) {
  if (!blob || !looks_like_gguf(blob->data(), blob->size())) return nullptr;
  return std::make_unique<Tokenizer>(load_gguf_tokenizer(GgufFile::parse(blob)));
}

}  // namespace qkv
