// Image embeddings: RGBA bytes -> the encoder's preprocessing -> Vision Transformer states ->
// one pooled (class token or mean of the patches), optionally projected and L2-normalised vector.
#pragma once
#include <cstdint>
#include <vector>

#include "../model/transformer.h"
#include "../vision/image.h"

namespace qkv {

struct ImageEmbedOptions {
  // Cls: the class token's state; Mean: the average of the patches' states (the class token
  // left out). None: the model's own (class token when it has one).
  PoolKind pooling = PoolKind::None;
  bool normalize = true;  // divide by the L2 norm
  bool project = true;    // through the model's projection (CLIP's visual_projection), if it has one
};

PoolKind image_pooling(const Transformer& model, const ImageEmbedOptions& o);
// Length of the vectors embed_image returns: the projection's rows when it is applied, else dim.
int image_embedding_dim(const Transformer& model, const ImageEmbedOptions& o);

// One image's vector from preprocessed pixels (3, h, w) (Transformer::encode_image's input).
std::vector<float> embed_pixels(Transformer& model, const float* pixels, int height, int width,
                                const ImageEmbedOptions& o);
// One image's vector from RGBA bytes (width * height * 4), preprocessed as `p` says.
std::vector<float> embed_image(Transformer& model, const ImagePreprocess& p, const uint8_t* rgba, uint64_t bytes,
                               int width, int height, const ImageEmbedOptions& o);

// An image classifier: the softmax of head_w (n_classes, dim) x pooled + head_b over the model's
// own pooled state (class token, or mean of the patches without one), before any projection or
// normalisation. Returns the n_classes probabilities in class order.
std::vector<float> classify_pixels(Transformer& model, const Tensor& head_w, const float* head_b, const float* pixels,
                                   int height, int width);
std::vector<float> classify_image(Transformer& model, const Tensor& head_w, const float* head_b,
                                  const ImagePreprocess& p, const uint8_t* rgba, uint64_t bytes, int width, int height);

}  // namespace qkv
