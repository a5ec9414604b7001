// Format detection: GGUF by magic (not yet supported), otherwise a llama2.c checkpoint.
#include "loader.h"

#include <cstring>

#include "../common.h"
#include "llama2c.h"

namespace qkv {

LoadedModel load_model(std::shared_ptr<const Blob> blob) {
  if (!blob || blob->size() == 0) fail(ErrorCode::BadModel, "model file is empty");
  if (blob->size() >= 4 && std::memcmp(blob->data(), "GGUF", 4) == 0)
    fail(ErrorCode::Unsupported, "GGUF models are not supported yet; use a llama2.c .bin checkpoint");
  return load_llama2c(std::move(blob));
}

}  // namespace qkv
