// Hugging Face checkpoints without conversion: config.json, tokenizer.json (+ tokenizer_config.json)
// and model.safetensors (or model.safetensors.index.json and its shards), read as the GGUF that
// llama.cpp's convert_hf_to_gguf.py would write (same metadata keys and tensor names), with the
// tensors as views into the safetensors data. Everything downstream (the architecture rows,
// the tokenizers, `qkv quantize`) then reads one form.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../model/weights.h"
#include "gguf.h"

namespace qkv {

// The files of a checkpoint by base name ("config.json", "model-00001-of-00002.safetensors").
// As a Blob it is config.json's bytes.
class HfFiles : public Blob {
 public:
  explicit HfFiles(std::vector<std::pair<std::string, std::shared_ptr<const Blob>>> files);
  const uint8_t* data() const override;
  uint64_t size() const override;
  // A file by base name (directories dropped), or null.
  const Blob* find(const std::string& name) const;
  std::string text(const std::string& name) const;  // "" if absent
  const std::vector<std::pair<std::string, std::shared_ptr<const Blob>>>& files() const { return files_; }

 private:
  std::vector<std::pair<std::string, std::shared_ptr<const Blob>>> files_;
};

// The HfFiles a blob is, or null.
const HfFiles* as_hf_files(const Blob* blob);
// The bytes of every file of a model: a checkpoint's files, a split model's parts (model_bytes).
uint64_t input_bytes(const Blob& blob);

// The checkpoint as GGUF (see above). Throws Error(BadModel) naming the file and the problem,
// Error(Unsupported) for a model_type, dtype or option qkv does not run.
GgufFile hf_as_gguf(std::shared_ptr<const Blob> files);

// tokenizer.json (+ tokenizer_config.json, config.json) as tokenizer.ggml.* keys
// (hf_tokenizer.cpp). Error(BadTokenizer) / Error(Unsupported) name what is wrong.
// Returns the vocabulary size (ids 0..n-1).
class GgufWriter;
size_t add_hf_tokenizer(GgufWriter& w, const HfFiles& files);

// Natively: the checkpoint files in a directory (config.json, tokenizer*.json, *.safetensors,
// the index, 1_Pooling/config.json), mapped. Error(Io) if config.json is missing.
std::shared_ptr<const Blob> map_hf_directory(const std::string& dir);

}  // namespace qkv
