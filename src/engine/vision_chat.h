// Images in chat: an mmproj's vision tower and projector turn an image into rows of a text
// model's embedding space, which the decoder takes in place of token embeddings
// (Transformer::kEmbeddingRow positions), as llama.cpp's mtmd does.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../formats/gguf_clip.h"
#include "../model/transformer.h"

namespace qkv {

class ImageTokenizer {
 public:
  // text_dim: the text model's embedding width (an mmproj of another width is Error(BadModel)).
  ImageTokenizer(std::shared_ptr<const Blob> mmproj, int text_dim, std::shared_ptr<ThreadPool> pool);

  const std::string& projector() const { return proj_.type; }
  int dim() const { return proj_.out_dim(); }
  int image_size() const { return pre_.size; }
  // Image tokens per image (the tower's patches at its input size).
  int tokens_per_image() const;
  const ModelConfig& vision_config() const { return tower_->config(); }

  // RGBA bytes (width * height * 4) -> (tokens_per_image(), dim()) rows. A non-square image is
  // first padded to a square with LLaVA's background colour (its pad-to-square), then resized
  // as the encoder's preprocessing says.
  std::vector<float> encode(const uint8_t* rgba, uint64_t bytes, int width, int height);

  // Vision tower states (tokens_per_image(), vision dim) -> projected rows (as encode()'s end).
  std::vector<float> project(const float* states, int n);

 private:
  std::shared_ptr<ThreadPool> pool_;
  std::unique_ptr<Transformer> tower_;
  ImagePreprocess pre_;
  VisionProjector proj_;
};

}  // namespace qkv
