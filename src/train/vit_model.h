// The trainable Vision Transformer classifier (CLIP's vision tower as llama.cpp's clip loader
// reads it, plus a classification head): the patch embedding as one matrix product over the
// unfolded patches (+ bias), a class token first, learned position embeddings, the pre-LayerNorm,
// pre-norm blocks (LayerNorm, multi-head attention with biases, LayerNorm, fc1 -> GELU (tanh
// form) -> fc2), the post-LayerNorm of the class token (class-token pooling), and a linear head
// with softmax cross-entropy over the classes. Parameters live in one flat f32 array, as in
// TrainModel; the batch is B images of the same size, run as one (B x rows, dim) matrix.
#pragma once
#include <cstdint>
#include <vector>

#include "../model/config.h"
#include "../threadpool.h"
#include "model.h"

namespace qkv {

struct VitTrainShape {
  int image_size = 32, patch_size = 4, channels = 3;
  int dim = 64, n_heads = 4, hidden_dim = 128, n_layers = 4;
  int n_classes = 0;
  float norm_eps = 1e-5f;
  int grid() const { return image_size / patch_size; }
  int patches() const { return grid() * grid(); }
  int rows() const { return patches() + 1; }  // the class token, then the patches
  int patch_dim() const { return channels * patch_size * patch_size; }
  // The inference model's configuration (the clip loader's); throws Error(BadArgument) naming
  // the impossible value.
  ModelConfig model_config() const;
};

struct VitParamLayout {
  struct Layer {
    int64_t ln1_w, ln1_b, wq, bq, wk, bk, wv, bv, wo, bo, ln2_w, ln2_b, w_up, b_up, w_down, b_down;
  };
  int64_t patch_w = 0, patch_b = 0;  // (dim, channels * patch^2) in (channel, row, column) order, (dim,)
  int64_t cls = 0, pos = 0;          // (dim,), (rows, dim)
  int64_t pre_w = 0, pre_b = 0;
  std::vector<Layer> layers;
  int64_t post_w = 0, post_b = 0;
  int64_t head_w = 0, head_b = 0;  // (n_classes, dim), (n_classes,)
  int64_t total = 0;
  // Ranges without weight decay (norms, biases, class token, positions), ascending.
  std::vector<std::pair<int64_t, int64_t>> no_decay;
  explicit VitParamLayout(const VitTrainShape& s);
};

class VitTrainModel {
 public:
  VitTrainModel(const VitTrainShape& s, ThreadPool* pool);

  const VitTrainShape& shape() const { return s_; }
  const VitParamLayout& layout() const { return lay_; }
  std::vector<float>& params() { return params_; }
  const std::vector<float>& params() const { return params_; }
  std::vector<float>& grads() { return grads_; }

  // LayerNorm weights 1, biases 0; class token, positions N(0, 0.02); matrices N(0, 1/sqrt(fan_in)),
  // the residual projections (attn_out, fc2) further / sqrt(2 n_layers); head 0.
  void init(uint64_t seed);

  // pixels: B images (channels, image_size, image_size), normalised as the GGUF's image_mean /
  // image_std say (preprocess_image's output); labels: B classes, or null for no loss (0 is
  // returned). Mean softmax cross-entropy; keeps the activations for backward().
  double forward(const float* pixels, const int* labels, int B);
  void backward();  // grads += d(loss)/d(params) of the last forward() with labels
  void zero_grads();

  // Of the last forward: the pooled vectors (the class token after the post-LayerNorm, what the
  // clip loader's model embeds with class pooling, unnormalised), (B, dim), and the logits,
  // (B, n_classes).
  const std::vector<float>& pooled() const { return pooled_; }
  const std::vector<float>& logits() const { return logits_; }

 private:
  struct Acts {
    std::vector<float> x_in, xn1, q, k, v, probs, att, x_mid, xn2, u, h;
  };
  void linear(float* y, const float* x, int64_t w, int64_t b, int rows, int cols, int n);
  void linear_back(float* dx, bool acc, const float* dy, const float* x, int64_t w, int64_t b, int rows, int cols,
                   int n);
  void layernorm(float* y, const float* x, int64_t w, int64_t b, int n);
  void layernorm_back(float* dx, const float* dy, const float* x, int64_t w, int64_t b, int n);
  void attention(Acts& A, int B);
  void attention_back(Acts& A, const float* datt, float* dq, float* dk, float* dv, int B);

  VitTrainShape s_;
  VitParamLayout lay_;
  ThreadPool* pool_;
  std::vector<float> params_, grads_;
  LinearScratch scratch_;
  int B_ = 0;
  std::vector<int> labels_;
  std::vector<float> patches_, emb_, x0_, x_, xc_, pooled_, logits_, dlogits_;
  std::vector<Acts> acts_;
};

}  // namespace qkv
