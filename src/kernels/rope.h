// Rotary position embedding (RoPE) applied in place to the heads of one token.
#pragma once

namespace qkv {

// Angles for position `pos`: for pair p < n_rot/2, a = pos * theta^(-2p/n_rot), written as
// cos[p], sin[p]. The frequency is 1/powf(theta, 2p/(float)n_rot), as llama2.c computes it.
// freq_scale multiplies the position (linear rope scaling; 1 = none); factors (n_rot/2, optional)
// divide each frequency (Llama 3.1-style scaling, GGUF rope_freqs; LongRoPE's long or short
// factors); cos and sin are multiplied by mscale (GGUF rope.scaling.attn_factor, 1 = none), so
// rotated queries and keys carry it and attention scores carry its square.
void rope_angles(float* cos_out, float* sin_out, int n_rot, int pos, float theta, float freq_scale,
                 const float* factors = nullptr, float mscale = 1.0f);

// x: (n_heads, head_dim). Only the first n_rot dims of each head rotate (n_rot even, <= head_dim).
// Adjacent pairs (Llama, llama2.c):   (x[2p], x[2p+1])
// Split halves  (GPT-NeoX, Qwen):     (x[p],  x[p + n_rot/2])
void rope_adjacent_ref(float* x, int n_heads, int head_dim, int n_rot, const float* cos, const float* sin);
void rope_adjacent_simd(float* x, int n_heads, int head_dim, int n_rot, const float* cos, const float* sin);
void rope_halves_ref(float* x, int n_heads, int head_dim, int n_rot, const float* cos, const float* sin);
void rope_halves_simd(float* x, int n_heads, int head_dim, int n_rot, const float* cos, const float* sin);

}  // namespace qkv
