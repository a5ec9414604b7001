// Image tokens: preprocessing (LLaVA's pad to square), the truncated vision tower, the projector.
#include "vision_chat.h"

#include <algorithm>
#include <cstring>

#include "../common.h"
#include "../kernels/activation.h"
#include "../model/products.h"

namespace qkv {

ImageTokenizer::ImageTokenizer(std::shared_ptr<const Blob> mmproj, int text_dim, std::shared_ptr<ThreadPool> pool)
    : pool_(std::move(pool)) {
  VisionLanguageData d = load_vision_language(std::move(mmproj), text_dim);
  pre_ = d.image.preprocess;
  pre_.mode = ResizeMode::Squash;  // the image is square once padded
  proj_ = d.projector;
  tower_ = std::make_unique<Transformer>(std::move(d.image.model), 0, pool_);
}

int ImageTokenizer::tokens_per_image() const {
  const int g = pre_.size / tower_->config().patch_size;
  return g * g;
}

std::vector<float> ImageTokenizer::encode(const uint8_t* rgba, uint64_t bytes, int width, int height) {
  if (width <= 0 || height <= 0 || width > kMaxImageSide || height > kMaxImageSide)
    fail(ErrorCode::BadArgument, "image is " + std::to_string(width) + "x" + std::to_string(height) +
                                     "; sides must be 1.." + std::to_string(kMaxImageSide));
  if (bytes < (uint64_t)width * height * 4)
    fail(ErrorCode::BadArgument, "image data holds " + std::to_string(bytes) + " bytes; " + std::to_string(width) +
                                     "x" + std::to_string(height) + " RGBA needs " +
                                     std::to_string((uint64_t)width * height * 4));
  std::vector<uint8_t> square;
  if (width != height) {
    // LLaVA's expand2square: the image centred on a square of the mean colour (122, 116, 104).
    const int side = std::max(width, height), ox = (side - width) / 2, oy = (side - height) / 2;
    if ((int64_t)side * side > kMaxImagePixels)
      fail(ErrorCode::BadArgument,
           "image " + std::to_string(width) + "x" + std::to_string(height) + " is too large once padded to a square");
    square.resize((size_t)side * side * 4);
    for (size_t i = 0; i < square.size(); i += 4) {
      square[i] = 122;
      square[i + 1] = 116;
      square[i + 2] = 104;
      square[i + 3] = 255;
    }
    for (int y = 0; y < height; y++)
      std::memcpy(&square[((size_t)(y + oy) * side + ox) * 4], rgba + (size_t)y * width * 4, (size_t)width * 4);
    rgba = square.data();
    bytes = square.size();
    width = height = side;
  }
  const std::vector<float> pixels = preprocess_image(rgba, bytes, width, height, pre_);
  const int rows = tower_->image_rows(pre_.size, pre_.size);
  const float* h = tower_->encode_image(pixels.data(), pre_.size, pre_.size);
  const int first = tower_->config().class_token ? 1 : 0;  // the class token is not an image token
  return project(h + (int64_t)first * tower_->config().dim, rows - first);
}

std::vector<float> ImageTokenizer::project(const float* states, int n) {
  const int hidden = (int)proj_.w0.rows, out = proj_.out_dim();
  std::vector<float> mid((size_t)n * hidden), y;
  ProductInput in;
  in.set(states, tower_->config().dim, n, {&proj_.w0});
  in.full(*pool_, mid.data(), hidden, proj_.w0);
  for (int t = 0; t < n; t++) {
    float* r = mid.data() + (size_t)t * hidden;
    for (int j = 0; j < hidden; j++) r[j] += proj_.b0[j];
    gelu_simd(r, hidden);
  }
  if (!proj_.w2) return mid;
  y.resize((size_t)n * out);
  ProductInput in2;
  in2.set(mid.data(), hidden, n, {&proj_.w2});
  in2.full(*pool_, y.data(), out, proj_.w2);
  for (int t = 0; t < n; t++)
    for (int j = 0; j < out; j++) y[(size_t)t * out + j] += proj_.b2[j];
  return y;
}

}  // namespace qkv
