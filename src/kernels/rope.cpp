// RoPE: scalar references and xsimd versions of both pair layouts.
#include "rope.h"

#include <algorithm>
#include <cmath>

#include "simd.h"

namespace qkv {

void rope_angles(float* c, float* s, int n_rot, int pos, float theta, float freq_scale, const float* factors,
                 float mscale, const RopeYarn* yarn) {
  if (yarn) mscale *= 1.0f + 0.1f * std::log(1.0f / freq_scale);
  for (int p = 0; p < n_rot / 2; p++) {
    float freq = 1.0f / std::pow(theta, (float)(2 * p) / (float)n_rot);
    if (factors) freq /= factors[p];
    float val = (float)pos * freq_scale * freq;
    if (yarn) {
      const float y = ((float)p - yarn->lo) / std::max(0.001f, yarn->hi - yarn->lo);
      const float mix = 1.0f - std::min(1.0f, std::max(0.0f, y));  // 1: unscaled, 0: scaled
      val = val * (1.0f - mix) + (float)pos * freq * mix;
    }
    c[p] = std::cos(val) * mscale;
    s[p] = std::sin(val) * mscale;
  }
}

RopeYarn rope_yarn_range(int n_rot, int orig_context, float theta, float beta_fast, float beta_slow) {
  auto dim = [&](float turns) {
    return (float)n_rot * std::log((float)orig_context / (turns * 2.0f * 3.14159265358979f)) / (2.0f * std::log(theta));
  };
  RopeYarn r;
  r.lo = std::max(0.0f, std::floor(dim(beta_fast)));
  r.hi = std::min((float)(n_rot - 1), std::ceil(dim(beta_slow)));
  return r;
}

void rope_adjacent_ref(float* x, int n_heads, int head_dim, int n_rot, const float* c, const float* s) {
  for (int h = 0; h < n_heads; h++) {
    float* v = x + h * head_dim;
    for (int p = 0; p < n_rot / 2; p++) {
      float v0 = v[2 * p], v1 = v[2 * p + 1];
      v[2 * p] = v0 * c[p] - v1 * s[p];
      v[2 * p + 1] = v0 * s[p] + v1 * c[p];
    }
  }
}

namespace {
// Lane permutation that swaps neighbours: (1, 0, 3, 2, ...).
struct SwapPairs {
  static constexpr unsigned get(unsigned i, unsigned) { return i ^ 1u; }
};
}  // namespace

void rope_adjacent_simd(float* x, int n_heads, int head_dim, int n_rot, const float* c, const float* s) {
  constexpr auto swap = xsimd::make_batch_constant<uint32_t, xsimd::default_arch, SwapPairs>();
  // Interleaved tables: ce = (c0, c0, c1, c1, ...), se = (-s0, s0, -s1, s1, ...), so that
  // y = x * ce + swap(x) * se rotates every pair at once.
  constexpr int kMax = 512;
  alignas(64) float ce[kMax], se[kMax];
  int nv = n_rot <= kMax ? n_rot : 0;  // very wide heads take the scalar path below
  for (int j = 0; j < nv; j++) {
    ce[j] = c[j / 2];
    se[j] = (j & 1) ? s[j / 2] : -s[j / 2];
  }
  for (int h = 0; h < n_heads; h++) {
    float* v = x + h * head_dim;
    int j = 0;
    for (; j + kLanes <= nv; j += kLanes) {
      fbatch xv = fbatch::load_unaligned(v + j);
      fbatch r = xv * fbatch::load_aligned(ce + j) + xsimd::swizzle(xv, swap) * fbatch::load_aligned(se + j);
      r.store_unaligned(v + j);
    }
    for (int p = j / 2; p < n_rot / 2; p++) {
      float v0 = v[2 * p], v1 = v[2 * p + 1];
      v[2 * p] = v0 * c[p] - v1 * s[p];
      v[2 * p + 1] = v0 * s[p] + v1 * c[p];
    }
  }
}

void rope_halves_ref(float* x, int n_heads, int head_dim, int n_rot, const float* c, const float* s) {
  int half = n_rot / 2;
  for (int h = 0; h < n_heads; h++) {
    float* v = x + h * head_dim;
    for (int p = 0; p < half; p++) {
      float v0 = v[p], v1 = v[p + half];
      v[p] = v0 * c[p] - v1 * s[p];
      v[p + half] = v0 * s[p] + v1 * c[p];
    }
  }
}

void rope_halves_simd(float* x, int n_heads, int head_dim, int n_rot, const float* c, const float* s) {
  int half = n_rot / 2;
  for (int h = 0; h < n_heads; h++) {
    float* v = x + h * head_dim;
    int p = 0;
    for (; p + kLanes <= half; p += kLanes) {
      fbatch a = fbatch::load_unaligned(v + p), b = fbatch::load_unaligned(v + p + half);
      fbatch cv = fbatch::load_unaligned(c + p), sv = fbatch::load_unaligned(s + p);
      (a * cv - b * sv).store_unaligned(v + p);
      (a * sv + b * cv).store_unaligned(v + p + half);
    }
    for (; p < half; p++) {
      float v0 = v[p], v1 = v[p + half];
      v[p] = v0 * c[p] - v1 * s[p];
      v[p + half] = v0 * s[p] + v1 * c[p];
    }
  }
}

}  // namespace qkv
