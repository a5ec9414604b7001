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

// From bytes: whether they are an mmproj / CLIP GGUF, and the model.
bool is_image_model(const std::shared_ptr<const Blob>& blob);
ImageModelData load_image_model(std::shared_ptr<const Blob> blob);

}  // namespace qkv
