// The generated image task of the ViT recipe: one shape (circle, ring, square, triangle, cross,
// star) drawn per image at a random position, size and rotation, in a random colour on a random
// background of another brightness, antialiased, with per-pixel noise; the label is the shape.
// Deterministic for a seed (an integer RNG; only libm's last-bit differences between platforms
// could move an edge sample). Training and held-out images come from separate streams of the
// same seed (ShapeSplit), so no held-out image is trained on.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace qkv {

enum class ShapeSplit { Train, HeldOut };

// The class names, in label order.
const std::vector<std::string>& shape_labels();

struct ShapeImages {
  int size = 0;               // side in pixels
  std::vector<uint8_t> rgba;  // n images of size x size x 4 bytes (alpha 255), one after another
  std::vector<int> labels;    // n labels, indices into shape_labels()
};

// n images of size x size (8..1024) pixels of the first `classes` shapes (0: all); batch: which
// batch of the split's stream (so step k's batch is the same whatever ran before). Throws
// Error(BadArgument) for impossible sizes or class counts.
ShapeImages generate_shapes(uint64_t seed, ShapeSplit split, uint64_t batch, int n, int size, int classes = 0);

}  // namespace qkv
