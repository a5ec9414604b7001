// Image encoders from llama.cpp's mmproj GGUF files (general.architecture = "clip"): the CLIP or
// SigLIP vision tower (clip.vision.* keys, v.* tensors) as a Vision Transformer row of the
// options table, and the preprocessing its images need.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "../model/weights.h"
#include "../vision/image.h"
#include "gguf.h"

namespace qkv {

// An image classifier head (v.head.weight (n_classes, dim), v.head.bias, clip.vision.labels),
// applied to the pooled state before any projection, then softmax. Empty when the file has none.
struct ImageClassifierHead {
  Tensor weight;                // (n_classes, dim): GGUF dims [dim, n_classes]
  const float* bias = nullptr;  // (n_classes), or none
  std::vector<std::string> labels;
  std::shared_ptr<const Blob> storage;  // keeps the views alive after the model moves on
  explicit operator bool() const { return (bool)weight; }
  int classes() const { return (int)weight.rows; }
};

struct ImageModelData {
  LoadedModel model;
  ImageClassifierHead head;
  ImagePreprocess preprocess;
  std::string projector;  // clip.projector_type, if the file names one (the VLM projector, not run here)
};

// Whether the file is an image encoder (general.architecture "clip").
bool gguf_is_clip(const GgufFile& g);
// The vision tower as llama.cpp's clip.cpp reads it: v.patch_embd.weight [patch, patch, 3, dim]
// (+ v.patch_embd.bias), v.class_embd (CLIP; none: SigLIP), v.position_embd.weight, v.pre_ln,
// v.blk.N.{ln1, attn_q, attn_k, attn_v, attn_out, ln2, ffn_up, ffn_down}, v.post_ln,
// visual_projection.weight (optional), v.head.weight + v.head.bias + clip.vision.labels (an optional
// classifier head, all or none); GELU when clip.use_gelu, else quick GELU. Throws
// Error(BadModel / Unsupported) naming the missing or mis-shaped tensor or impossible key.
ImageModelData load_gguf_clip(const GgufFile& g);

// A vision-language model's projector, read from the mmproj by llama.cpp's tensor names: it turns
// the vision tower's patch states into rows of the text model's embedding space (image tokens).
struct VisionProjector {
  std::string type;           // clip.projector_type; "mlp" (LLaVA): linear, GELU, linear
  Tensor w0, w2;              // mm.0.weight (hidden, vision dim); mm.2.weight (out, hidden), optional
  const float* b0 = nullptr;  // mm.0.bias (hidden,)
  const float* b2 = nullptr;  // mm.2.bias (out,)
  int out_dim() const { return (int)(w2 ? w2.rows : w0.rows); }
};

struct VisionLanguageData {
  ImageModelData image;  // the tower as the projector reads it (LLaVA: up to its second-to-last layer)
  VisionProjector projector;
};

// The mmproj of a vision-language model for chat: the tower cut where llama.cpp's graph for the
// projector type reads it (mlp: the first block_count - 1 layers, then v.post_ln if present), and
// the projector. text_dim: the text model's embedding width; a projector of another width is
// Error(BadModel) naming both. Other projector types are Error(Unsupported) naming the type.
VisionLanguageData load_gguf_vision_language(const GgufFile& g, int text_dim);

// From bytes: whether they are an mmproj / CLIP GGUF, and the model.
bool is_image_model(const std::shared_ptr<const Blob>& blob);
ImageModelData load_image_model(std::shared_ptr<const Blob> blob);
VisionLanguageData load_vision_language(std::shared_ptr<const Blob> blob, int text_dim);

}  // namespace qkv
