// Test fixtures: a GGUF model written back as the Hugging Face checkpoint it would have been
// converted from (the inverse of convert_hf_to_gguf.py: HF tensor names and layouts, config.json,
// tokenizer.json, tokenizer_config.json), so that loading both must give the same model.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../kernels/quant.h"
#include "gguf.h"

namespace qkv {

using HfFileList = std::vector<std::pair<std::string, std::vector<uint8_t>>>;

// The checkpoint of `g` (llama, qwen2, qwen3, gemma, gemma2, gemma3 or bert) with its tensors
// stored as `dtype` (F32, F16 or BF16), in one model.safetensors or, with shards > 1, that many
// files and model.safetensors.index.json. `gguf_out` (if given) receives the GGUF a converter
// would write from that checkpoint: the same values, matrices as `dtype`, vectors F32.
HfFileList write_hf_checkpoint(const GgufFile& g, QType dtype, int shards, std::vector<uint8_t>* gguf_out = nullptr);

// tokenizer.json and tokenizer_config.json for the tokenizer.ggml.* keys of `g` (gpt2, llama
// (SentencePiece) and bert vocabularies), written as Hugging Face's tokenizers would hold them.
HfFileList write_hf_tokenizer(const GgufFile& g, bool add_bos);

// safetensors bytes: tensors (name, shape slowest first, dtype, raw bytes), in order.
struct HfTensor {
  std::string name;
  std::vector<uint64_t> shape;
  QType type;
  std::vector<uint8_t> bytes;
};
std::vector<uint8_t> write_safetensors(const std::vector<HfTensor>& tensors);

}  // namespace qkv
