// One entry point for model bytes of any supported format.
#pragma once
#include <memory>

#include "../model/weights.h"

namespace qkv {

// Detects the format (GGUF by magic, else a llama2.c checkpoint) and loads it.
// Throws Error(BadModel / Unsupported) saying what was found.
LoadedModel load_model(std::shared_ptr<const Blob> blob);

// What a model file holds, from one parse of its header: which class loads it.
enum class ModelKind { Decoder, EncoderDecoder, ImageEncoder };
ModelKind model_kind(const std::shared_ptr<const Blob>& blob);

class Tokenizer;
// The tokenizer stored in the model file (GGUF), or null for formats that keep it apart.
std::unique_ptr<Tokenizer> embedded_tokenizer(const std::shared_ptr<const Blob>& blob);

}  // namespace qkv
