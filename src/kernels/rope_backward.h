// Gradient of rotary position embedding (rope.h) for training.
#pragma once

namespace qkv {

// RoPE is a rotation by +angle per pair, so its gradient is the rotation by -angle (the
// transpose): dx <- R(-a) dx in place, with the same layout, pairs and tables as the forward.
// half = n_rot / 2 entries of cos/sin for this token's position.
void rope_adjacent_backward_ref(float* dx, int n_heads, int head_dim, int n_rot, const float* cos, const float* sin);
void rope_adjacent_backward_simd(float* dx, int n_heads, int head_dim, int n_rot, const float* cos, const float* sin);

}  // namespace qkv
