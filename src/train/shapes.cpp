// Procedural shape images (shapes.h).
#include "shapes.h"

#include <algorithm>
#include <cmath>

#include "../common.h"
#include "rng.h"

namespace qkv {

const std::vector<std::string>& shape_labels() {
  static const std::vector<std::string> k = {"circle", "ring", "square", "triangle", "cross", "star"};
  return k;
}

namespace {

constexpr double kPi = 3.14159265358979323846;

// Whether the point (u, v), in the shape's frame (centre 0, radius 1), is inside shape `label`.
bool inside(int label, double u, double v) {
  const double r2 = u * u + v * v;
  switch (label) {
    case 0: return r2 <= 1.0;
    case 1: return r2 <= 1.0 && r2 >= 0.36;
    case 2: return std::fabs(u) <= 0.78 && std::fabs(v) <= 0.78;
    case 3: {  // equilateral, inscribed in the unit circle: inside the three edges' half-planes
      const double s = 0.8660254037844386;
      return -v <= 0.5 && s * u + 0.5 * v <= 0.5 && -s * u + 0.5 * v <= 0.5;
    }
    case 4: return (std::fabs(u) <= 0.3 && std::fabs(v) <= 1.0) || (std::fabs(v) <= 0.3 && std::fabs(u) <= 1.0);
    default: {  // five points: the boundary radius goes linearly from 0.45 (valleys) to 1 (tips)
      if (r2 > 1.0) return false;
      const double seg = 2.0 * kPi / 5.0;
      double a = std::atan2(u, v) + kPi;  // 0 .. 2 pi, a tip at angle 0 (straight up)
      a = std::fmod(a, seg) / seg;
      const double t = std::fabs(a - 0.5) * 2.0;
      return std::sqrt(r2) <= 0.45 + 0.55 * t;
    }
  }
}

double luma(const int* c) { return 0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2]; }

void draw(Rng& rng, int label, int S, uint8_t* out) {
  // Radius 20..42% of the side, centre so the shape stays inside the image.
  const double r = S * (0.2 + 0.22 * rng.uniform());
  const double cx = r + (S - 2 * r) * rng.uniform(), cy = r + (S - 2 * r) * rng.uniform();
  const double th = 2 * kPi * rng.uniform(), ct = std::cos(th), st = std::sin(th);
  int fg[3], bg[3];
  do {
    for (int i = 0; i < 3; i++) fg[i] = (int)rng.below(256), bg[i] = (int)rng.below(256);
  } while (std::fabs(luma(fg) - luma(bg)) < 60.0);
  const int noise = (int)rng.below(25);  // per-pixel noise up to +-noise
  for (int y = 0; y < S; y++)
    for (int x = 0; x < S; x++) {
      int cover = 0;  // of 4 x 4 samples in the pixel
      for (int sy = 0; sy < 4; sy++)
        for (int sx = 0; sx < 4; sx++) {
          const double px = x + (sx + 0.5) / 4 - cx, py = y + (sy + 0.5) / 4 - cy;
          cover += inside(label, (ct * px + st * py) / r, (-st * px + ct * py) / r);
        }
      uint8_t* p = out + ((int64_t)y * S + x) * 4;
      for (int c = 0; c < 3; c++) {
        const int n = noise ? (int)rng.below(2 * noise + 1) - noise : 0;
        const int v = (bg[c] * (16 - cover) + fg[c] * cover + 8) / 16 + n;
        p[c] = (uint8_t)std::clamp(v, 0, 255);
      }
      p[3] = 255;
    }
}

}  // namespace

ShapeImages generate_shapes(uint64_t seed, ShapeSplit split, uint64_t batch, int n, int size, int classes) {
  if (size < 8 || size > 1024)
    fail(ErrorCode::BadArgument, "shape images are 8..1024 pixels a side, not " + std::to_string(size));
  if (n < 0 || (int64_t)n * size * size > (int64_t)1 << 28)
    fail(ErrorCode::BadArgument, "too many shape images (" + std::to_string(n) + ")");
  if (classes < 0 || classes == 1 || classes > (int)shape_labels().size())
    fail(ErrorCode::BadArgument, "the shapes task has 2.." + std::to_string(shape_labels().size()) + " classes, not " +
                                     std::to_string(classes));
  ShapeImages out;
  out.size = size;
  out.rgba.resize((size_t)n * size * size * 4);
  out.labels.resize(n);
  // One stream per (seed, split, batch): splitmix-style mixing keeps neighbouring batches apart.
  uint64_t s =
      seed * 0x9E3779B97F4A7C15ull + (split == ShapeSplit::HeldOut ? 0xD1B54A32D192ED03ull : 0x8CB92BA72F3D8DD7ull);
  s ^= (batch + 1) * 0xBF58476D1CE4E5B9ull;
  s ^= s >> 31;
  Rng rng(s);
  const int K = classes > 0 ? classes : (int)shape_labels().size();
  for (int i = 0; i < n; i++) {
    out.labels[i] = (int)rng.below(K);
    draw(rng, out.labels[i], size, out.rgba.data() + (size_t)i * size * size * 4);
  }
  return out;
}

}  // namespace qkv
