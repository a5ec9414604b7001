// Images for Vision Transformers: bicubic resampling of float planes (the model's position
// tables and pixels both) and the preprocessing an image encoder expects (resize, centre crop,
// rescale, mean/std normalisation), from RGBA bytes. Pure functions; no model knowledge.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace qkv {

// PyTorch's F.interpolate(mode='bicubic', align_corners=False, size=(dh, dw)): the cubic
// convolution kernel with a = -0.75, 4 x 4 taps, source coordinate (d + 0.5) * in / out - 0.5,
// taps beyond the edge clamped to it, no antialiasing. Used for position tables (as Hugging
// Face's ViT / CLIP interpolate_pos_encoding do). planes: count of (sh, sw) planes in src,
// each written as (dh, dw) into dst.
void resize_bicubic_torch(const float* src, int planes, int sh, int sw, float* dst, int dh, int dw);

// PIL's bicubic resampling (Image.resize(..., BICUBIC), what Hugging Face's image processors
// call): the cubic kernel with a = -0.5, its support widened by in / out when shrinking
// (antialiasing), weights normalised over the taps inside the image, rows then columns. In float:
// PIL rounds to 8 bits between its two passes and at the end, this does not (up to about 1/255
// apart). Same layout as resize_bicubic_torch.
void resize_bicubic_pil(const float* src, int planes, int sh, int sw, float* dst, int dh, int dw);

// How an image reaches the encoder's square input: Crop: the shorter side resized to `size`
// (the longer one in proportion, truncated), then the centre size x size (CLIP); Squash: resized
// to size x size whatever its aspect (SigLIP).
enum class ResizeMode { Crop, Squash };
const char* resize_mode_name(ResizeMode m);
ResizeMode parse_resize_mode(const std::string& s);  // "crop" | "squash"; Error(BadArgument) otherwise

struct ImagePreprocess {
  int size = 224;  // the encoder's input side
  ResizeMode mode = ResizeMode::Crop;
  float mean[3] = {0.5f, 0.5f, 0.5f};  // per channel, on the 0..1 scale
  float std[3] = {0.5f, 0.5f, 0.5f};
};

// Largest width or height accepted (larger images are an error naming it, not an allocation).
constexpr int kMaxImageSide = 16384;
constexpr int kMaxEncoderSide = 4096;         // the encoder's input side (ImagePreprocess::size)
constexpr int64_t kMaxImagePixels = 1 << 26;  // 8192 x 8192: the float planes then take 768 MiB

// RGBA bytes (width * height * 4, row-major, alpha ignored) -> (3, size, size) floats:
// resized per p.mode with resize_bicubic_pil, each value v / 255 then (v - mean[c]) / std[c].
// Throws Error(BadArgument) for zero or oversized dimensions (sides, pixel count) or a short buffer.
std::vector<float> preprocess_image(const uint8_t* rgba, uint64_t bytes, int width, int height,
                                    const ImagePreprocess& p);

// A binary PPM (P6, maxval 255) or PGM (P5) file -> RGBA bytes, width, height. Throws
// Error(BadArgument) naming what is wrong with a corrupt or truncated file.
std::vector<uint8_t> decode_pnm(const uint8_t* data, uint64_t size, int* width, int* height);

// A PNG file (every colour type and bit depth, palette, tRNS, Adam7) -> RGBA bytes; 16-bit
// samples keep their high byte. Throws Error(BadArgument) naming what is wrong with a corrupt,
// truncated or oversized file (the sides and pixel limits above; decompression stops at the
// declared image size), Error(Unsupported) for an unknown critical chunk.
std::vector<uint8_t> decode_png(const uint8_t* data, uint64_t size, int* width, int* height);

// A JPEG file (baseline or progressive Huffman, 8-bit, greyscale or YCbCr with any integer
// subsampling, restart markers) -> RGBA bytes, decoded as libjpeg's djpeg does by default
// except for the IDCT (exact in double; djpeg -dct float is the closest), then turned upright
// per its EXIF orientation (as browsers show it; width and height swap for 5..8). Throws
// Error(Unsupported) naming arithmetic coding, lossless, 12-bit or CMYK files, Error(BadArgument)
// for corrupt, truncated or oversized ones.
std::vector<uint8_t> decode_jpeg(const uint8_t* data, uint64_t size, int* width, int* height);

// Any of the above, told apart by their first bytes (not by a file name). Error(BadArgument)
// names the formats read when the bytes are none of them.
std::vector<uint8_t> decode_image(const uint8_t* data, uint64_t size, int* width, int* height);

}  // namespace qkv
