// Bicubic resampling (PyTorch's and PIL's definitions), image preprocessing and PNM decoding.
#include "image.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "../common.h"

namespace qkv {

// Cubic convolution kernel (Keys), a = -0.75 (PyTorch) or -0.5 (PIL).
static double cubic(double x, double a) {
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

namespace {
// One axis of a separable resampling: per output index, its first source index and weights.
struct Taps {
  std::vector<int> first, count;
  std::vector<double> w;  // count[i] weights from offset i * width
  int width = 0;
};

Taps torch_taps(int in, int out) {
  Taps t;
  t.width = 4;
  const double scale = (double)in / out;
  for (int i = 0; i < out; i++) {
    const double src = (i + 0.5) * scale - 0.5;
    const int x0 = (int)std::floor(src);
    const double f = src - x0;
    // Clamped taps: an edge sample repeated takes each repeat's weight, so list all four.
    t.first.push_back(x0 - 1);
    t.count.push_back(4);
    for (int k = 0; k < 4; k++) t.w.push_back(cubic(f + 1 - k, -0.75));
  }
  return t;
}

Taps pil_taps(int in, int out) {
  Taps t;
  const double scale = (double)in / out, fs = std::max(scale, 1.0), support = 2.0 * fs;
  t.width = (int)std::ceil(support) * 2 + 1;
  for (int i = 0; i < out; i++) {
    const double center = (i + 0.5) * scale;
    const int lo = std::max(0, (int)(center - support + 0.5)), hi = std::min(in, (int)(center + support + 0.5));
    double sum = 0.0;
    std::vector<double> w;
    for (int x = lo; x < hi; x++) {
      w.push_back(cubic((x - center + 0.5) / fs, -0.5));
      sum += w.back();
    }
    t.first.push_back(lo);
    t.count.push_back(hi - lo);
    for (int k = 0; k < t.width; k++) t.w.push_back(k < (int)w.size() && sum != 0.0 ? w[k] / sum : 0.0);
  }
  return t;
}

// dst (dh, dw) = columns then rows of src (sh, sw) through the taps; indices clamped to the image.
void separable(const float* src, int planes, int sh, int sw, float* dst, int dh, int dw, const Taps& tx,
               const Taps& ty) {
  std::vector<double> tmp((size_t)sh * dw);
  for (int p = 0; p < planes; p++) {
    const float* s = src + (int64_t)p * sh * sw;
    float* d = dst + (int64_t)p * dh * dw;
    for (int y = 0; y < sh; y++)
      for (int x = 0; x < dw; x++) {
        double acc = 0.0;
        for (int k = 0; k < tx.count[x]; k++)
          acc += tx.w[(size_t)x * tx.width + k] * s[(int64_t)y * sw + std::clamp(tx.first[x] + k, 0, sw - 1)];
        tmp[(size_t)y * dw + x] = acc;
      }
    for (int y = 0; y < dh; y++)
      for (int x = 0; x < dw; x++) {
        double acc = 0.0;
        for (int k = 0; k < ty.count[y]; k++)
          acc += ty.w[(size_t)y * ty.width + k] * tmp[(size_t)std::clamp(ty.first[y] + k, 0, sh - 1) * dw + x];
        d[(int64_t)y * dw + x] = (float)acc;
      }
  }
}

void check_sides(int sh, int sw, int dh, int dw) {
  if (sh <= 0 || sw <= 0 || dh <= 0 || dw <= 0 || sh > kMaxImageSide || sw > kMaxImageSide || dh > kMaxImageSide ||
      dw > kMaxImageSide)
    fail(ErrorCode::BadArgument, "resize: sides must be 1.." + std::to_string(kMaxImageSide) + ", got " +
                                     std::to_string(sw) + "x" + std::to_string(sh) + " -> " + std::to_string(dw) + "x" +
                                     std::to_string(dh));
}
}  // namespace

void resize_bicubic_torch(const float* src, int planes, int sh, int sw, float* dst, int dh, int dw) {
  check_sides(sh, sw, dh, dw);
  separable(src, planes, sh, sw, dst, dh, dw, torch_taps(sw, dw), torch_taps(sh, dh));
}

void resize_bicubic_pil(const float* src, int planes, int sh, int sw, float* dst, int dh, int dw) {
  check_sides(sh, sw, dh, dw);
  separable(src, planes, sh, sw, dst, dh, dw, pil_taps(sw, dw), pil_taps(sh, dh));
}

const char* resize_mode_name(ResizeMode m) { return m == ResizeMode::Crop ? "crop" : "squash"; }

ResizeMode parse_resize_mode(const std::string& s) {
  if (s == "crop") return ResizeMode::Crop;
  if (s == "squash") return ResizeMode::Squash;
  fail(ErrorCode::BadArgument, "resize mode '" + s + "' is not one of crop, squash");
}

std::vector<float> preprocess_image(const uint8_t* rgba, uint64_t bytes, int width, int height,
                                    const ImagePreprocess& p) {
  if (width <= 0 || height <= 0 || width > kMaxImageSide || height > kMaxImageSide)
    fail(ErrorCode::BadArgument, "image is " + std::to_string(width) + "x" + std::to_string(height) +
                                     "; width and height must be 1.." + std::to_string(kMaxImageSide));
  if ((int64_t)width * height > kMaxImagePixels)
    fail(ErrorCode::BadArgument, "image is " + std::to_string(width) + "x" + std::to_string(height) + "; at most " +
                                     std::to_string(kMaxImagePixels) + " pixels are read (scale it down first)");
  if (!rgba || bytes < (uint64_t)width * height * 4)
    fail(ErrorCode::BadArgument, "image data holds " + std::to_string(bytes) + " bytes; a " + std::to_string(width) +
                                     "x" + std::to_string(height) + " RGBA image needs " +
                                     std::to_string((uint64_t)width * height * 4));
  if (p.size <= 0 || p.size > kMaxEncoderSide)
    fail(ErrorCode::BadArgument,
         "the encoder's input side must be 1.." + std::to_string(kMaxEncoderSide) + ", got " + std::to_string(p.size));
  const int S = p.size;
  int rw = S, rh = S;  // resized sides
  if (p.mode == ResizeMode::Crop) {
    if (width <= height) rh = (int)std::min<int64_t>(kMaxImageSide, (int64_t)S * height / width);
    else rw = (int)std::min<int64_t>(kMaxImageSide, (int64_t)S * width / height);
  }
  std::vector<float> planes((size_t)3 * width * height);
  const int64_t n = (int64_t)width * height;
  for (int64_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) planes[(size_t)c * n + i] = rgba[i * 4 + c];
  std::vector<float> resized((size_t)3 * rw * rh);
  resize_bicubic_pil(planes.data(), 3, height, width, resized.data(), rh, rw);
  const int top = (rh - S) / 2, left = (rw - S) / 2;
  std::vector<float> out((size_t)3 * S * S);
  for (int c = 0; c < 3; c++)
    for (int y = 0; y < S; y++)
      for (int x = 0; x < S; x++) {
        const float v = resized[((size_t)c * rh + top + y) * rw + left + x] / 255.0f;
        out[((size_t)c * S + y) * S + x] = (v - p.mean[c]) / p.std[c];
      }
  return out;
}

std::vector<uint8_t> decode_pnm(const uint8_t* data, uint64_t size, int* width, int* height) {
  auto bad = [](const std::string& m) { fail(ErrorCode::BadArgument, "PNM image: " + m); };
  if (size < 2 || data[0] != 'P' || (data[1] != '6' && data[1] != '5')) bad("not a binary PPM (P6) or PGM (P5) file");
  const int channels = data[1] == '6' ? 3 : 1;
  uint64_t p = 2;
  int64_t v[3];
  for (int k = 0; k < 3; k++) {
    // Whitespace and # comments between the header fields.
    while (p < size && (std::isspace(data[p]) || data[p] == '#')) {
      if (data[p] == '#')
        while (p < size && data[p] != '\n') p++;
      else p++;
    }
    if (p >= size || !std::isdigit(data[p])) bad("truncated or malformed header");
    int64_t x = 0;
    while (p < size && std::isdigit(data[p]) && x <= (1 << 30)) x = x * 10 + (data[p++] - '0');
    v[k] = x;
  }
  if (p >= size || !std::isspace(data[p])) bad("malformed header");
  p++;
  if (v[0] < 1 || v[1] < 1 || v[0] > kMaxImageSide || v[1] > kMaxImageSide)
    bad("size " + std::to_string(v[0]) + "x" + std::to_string(v[1]) + " (sides must be 1.." +
        std::to_string(kMaxImageSide) + ")");
  if (v[2] != 255) bad("maxval " + std::to_string(v[2]) + " (only 8-bit files, maxval 255, are read)");
  const uint64_t n = (uint64_t)v[0] * v[1];
  if (size - p < n * channels)
    bad("truncated: " + std::to_string(size - p) + " bytes of pixels, " + std::to_string(n * channels) + " needed");
  std::vector<uint8_t> rgba(n * 4);
  for (uint64_t i = 0; i < n; i++) {
    for (int c = 0; c < 3; c++) rgba[i * 4 + c] = data[p + i * channels + (channels == 3 ? c : 0)];
    rgba[i * 4 + 3] = 255;
  }
  *width = (int)v[0];
  *height = (int)v[1];
  return rgba;
}

std::vector<uint8_t> decode_image(const uint8_t* data, uint64_t size, int* width, int* height) {
  if (size >= 8 && data[0] == 0x89 && data[1] == 'P' && data[2] == 'N' && data[3] == 'G')
    return decode_png(data, size, width, height);
  if (size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff) return decode_jpeg(data, size, width, height);
  if (size >= 2 && data[0] == 'P' && (data[1] == '5' || data[1] == '6')) return decode_pnm(data, size, width, height);
  fail(ErrorCode::BadArgument, "not an image qkv reads: PNG, JPEG and binary PPM (P6) / PGM (P5) files are read" +
                                   std::string(size == 0 ? " (the file is empty)" : ""));
}

}  // namespace qkv
