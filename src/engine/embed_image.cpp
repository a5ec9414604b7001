// Image embeddings over Transformer::encode_image: pooling, projection, normalisation.
#include "embed_image.h"

#include <algorithm>
#include <cmath>

#include "../common.h"
#include "../kernels/quant.h"

namespace qkv {

PoolKind image_pooling(const Transformer& model, const ImageEmbedOptions& o) {
  const ModelConfig& c = model.config();
  const PoolKind p = o.pooling != PoolKind::None ? o.pooling : c.pooling;
  if (p == PoolKind::Cls && !c.class_token)
    fail(ErrorCode::BadArgument, "this image encoder has no class token: pool by 'mean'");
  if (p != PoolKind::Cls && p != PoolKind::Mean)
    fail(ErrorCode::BadArgument, std::string("image pooling must be 'cls' or 'mean', got '") + pool_kind_name(p) + "'");
  return p;
}

int image_embedding_dim(const Transformer& model, const ImageEmbedOptions& o) {
  const Tensor& proj = model.weights().projection;
  return o.project && proj ? (int)proj.rows : model.config().dim;
}

std::vector<float> embed_pixels(Transformer& model, const float* pixels, int height, int width,
                                const ImageEmbedOptions& o) {
  const ModelConfig& c = model.config();
  const PoolKind pool = image_pooling(model, o);
  const int rows = model.image_rows(height, width), dim = c.dim, first = c.class_token ? 1 : 0;
  const float* h = model.encode_image(pixels, height, width);
  std::vector<float> e(dim);
  if (pool == PoolKind::Cls) {
    for (int d = 0; d < dim; d++) e[d] = h[d];
  } else {
    std::vector<double> acc(dim, 0.0);
    for (int r = first; r < rows; r++)
      for (int d = 0; d < dim; d++) acc[d] += h[(int64_t)r * dim + d];
    for (int d = 0; d < dim; d++) e[d] = (float)(acc[d] / (rows - first));
  }
  const Tensor& proj = model.weights().projection;
  if (o.project && proj) {
    std::vector<float> row((size_t)proj.cols), y((size_t)proj.rows);
    for (int64_t r = 0; r < proj.rows; r++) {
      dequantize_row_ref(proj.type, proj.row(r), row.data(), (int)proj.cols);
      double s = 0.0;
      for (int64_t j = 0; j < proj.cols; j++) s += (double)row[j] * e[j];
      y[r] = (float)s;
    }
    e.swap(y);
  }
  if (o.normalize) {
    double ss = 0.0;
    for (float v : e) ss += (double)v * v;
    const float inv = ss > 0.0 ? (float)(1.0 / std::sqrt(ss)) : 0.0f;
    for (float& v : e) v *= inv;
  }
  return e;
}

std::vector<float> embed_image(Transformer& model, const ImagePreprocess& p, const uint8_t* rgba, uint64_t bytes,
                               int width, int height, const ImageEmbedOptions& o) {
  if (!model.config().is_vision()) fail(ErrorCode::Unsupported, model.config().arch + " is not an image encoder");
  image_pooling(model, o);  // a bad option is named before the work
  const std::vector<float> pixels = preprocess_image(rgba, bytes, width, height, p);
  return embed_pixels(model, pixels.data(), p.size, p.size, o);
}

std::vector<float> classify_pixels(Transformer& model, const Tensor& head_w, const float* head_b, const float* pixels,
                                   int height, int width) {
  if (!head_w || head_w.cols != model.config().dim)
    fail(ErrorCode::Unsupported, "this image encoder has no classifier head (v.head.weight)");
  ImageEmbedOptions o;
  o.normalize = false;
  o.project = false;
  const std::vector<float> e = embed_pixels(model, pixels, height, width, o);
  std::vector<float> row((size_t)head_w.cols);
  std::vector<double> logit((size_t)head_w.rows);
  double top = -INFINITY;
  for (int64_t r = 0; r < head_w.rows; r++) {
    dequantize_row_ref(head_w.type, head_w.row(r), row.data(), (int)head_w.cols);
    double s = head_b ? head_b[r] : 0.0;
    for (int64_t j = 0; j < head_w.cols; j++) s += (double)row[j] * e[j];
    logit[r] = s;
    top = std::max(top, s);
  }
  // Softmax in double, shifted by the largest logit so that no exp overflows.
  double z = 0.0;
  for (double& l : logit) z += (l = std::exp(l - top));
  std::vector<float> p(logit.size());
  for (size_t r = 0; r < p.size(); r++) p[r] = (float)(logit[r] / z);
  return p;
}

std::vector<float> classify_image(Transformer& model, const Tensor& head_w, const float* head_b,
                                  const ImagePreprocess& p, const uint8_t* rgba, uint64_t bytes, int width,
                                  int height) {
  if (!model.config().is_vision()) fail(ErrorCode::Unsupported, model.config().arch + " is not an image encoder");
  if (!head_w) fail(ErrorCode::Unsupported, "this image encoder has no classifier head (v.head.weight)");
  const std::vector<float> pixels = preprocess_image(rgba, bytes, width, height, p);
  return classify_pixels(model, head_w, head_b, pixels.data(), p.size, p.size);
}

}  // namespace qkv
