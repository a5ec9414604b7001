// RoPE backward: the forward kernels applied with the sine negated (rotation by -angle).
#include "rope_backward.h"

#include "rope.h"

namespace qkv {

static constexpr int kMaxHalf = 512;  // head_dim <= 1024 (ModelConfig::validate)

void rope_adjacent_backward_ref(float* dx, int n_heads, int head_dim, int n_rot, const float* cos, const float* sin) {
  float neg[kMaxHalf];
  for (int p = 0; p < n_rot / 2; p++) neg[p] = -sin[p];
  rope_adjacent_ref(dx, n_heads, head_dim, n_rot, cos, neg);
}

void rope_adjacent_backward_simd(float* dx, int n_heads, int head_dim, int n_rot, const float* cos, const float* sin) {
  float neg[kMaxHalf];
  for (int p = 0; p < n_rot / 2; p++) neg[p] = -sin[p];
  rope_adjacent_simd(dx, n_heads, head_dim, n_rot, cos, neg);
}

}  // namespace qkv
