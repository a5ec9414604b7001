// Format detection first (detect.h): GGUF by magic, a llama2.c checkpoint for other binary data,
// and anything recognisably else is refused by name.
#include "loader.h"

#include <cstring>

#include "../common.h"
#include "../tokenizer/tokenizer.h"
#include "detect.h"
#include "gguf.h"
#include "gguf_clip.h"
#include "gguf_encdec.h"
#include "gguf_model.h"
#include "hf.h"
#include "llama2c.h"

namespace qkv {

LoadedModel load_model(std::shared_ptr<const Blob> blob) {
  if (as_hf_files(blob.get())) return load_gguf_model(GgufFile::parse(std::move(blob)));
  const FileFormat f = blob ? detect_format(blob->data(), blob->size()) : FileFormat::Empty;
  if (f == FileFormat::Gguf) return load_gguf_model(GgufFile::parse(std::move(blob)));
  if (f != FileFormat::Binary && f != FileFormat::TooShort) fail(ErrorCode::BadModel, not_a_model_message(f));
  if (looks_like_llama2c(blob->data(), blob->size())) return load_llama2c(std::move(blob));
  // No magic and no plausible llama2.c header: say both, then what the header check found.
  try {
    return load_llama2c(std::move(blob));
  } catch (const Error& e) {
    fail(e.code(),
         std::string("the file is not GGUF (no 'GGUF' magic) and not a plausible llama2.c checkpoint: ") + e.what());
  }
}

std::unique_ptr<Tokenizer> embedded_tokenizer(const std::shared_ptr<const Blob>& blob) {
  if (!blob || (!looks_like_gguf(blob->data(), blob->size()) && !as_hf_files(blob.get()))) return nullptr;
  return std::make_unique<Tokenizer>(load_gguf_tokenizer(GgufFile::parse(blob)));
}

ModelKind model_kind(const std::shared_ptr<const Blob>& blob) {
  if (!blob || !looks_like_gguf(blob->data(), blob->size())) return ModelKind::Decoder;
  const GgufFile g = GgufFile::parse(blob);
  return gguf_is_clip(g) ? ModelKind::ImageEncoder : gguf_is_encdec(g) ? ModelKind::EncoderDecoder : ModelKind::Decoder;
}

}  // namespace qkv
