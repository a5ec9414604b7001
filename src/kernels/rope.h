// Rotary position embedding (RoPE) applied in place to the heads of one token.
#pragma once

namespace qkv {

// Angles for position `pos`: for pair p < n_rot/2, a = pos * theta^(-2p/n_rot), written as
// cos[p], sin[p]. The frequency is 1/powf(theta, 2p/(float)n_rot), as llama2.c computes it.
// freq_scale multiplies the position (linear rope scaling; 1 = none); factors (n_rot/2, optional)
// divide each frequency (Llama 3.1-style scaling, GGUF rope_freqs; LongRoPE's long or short
// factors); cos and sin are multiplied by mscale (GGUF rope.scaling.attn_factor, 1 = none), so
// rotated queries and keys carry it and attention scores carry its square.
// yarn (optional, YaRN scaling): pair p's angle blends the scaled angle (pos * freq_scale * f)
// with the unscaled one (pos * f) by ramp(p) = 1 - clamp((p - lo) / max(0.001, hi - lo), 0, 1),
// so pairs below lo keep their unscaled angle and pairs from hi on are scaled; mscale is then
// multiplied by 1 + 0.1 ln(1 / freq_scale). This is llama.cpp's (ggml's) YaRN with its
// extrapolation factor 1.
struct RopeYarn {
  float lo = 0.0f, hi = 0.0f;  // correction range, in pairs (rope_yarn_range)
};
void rope_angles(float* cos_out, float* sin_out, int n_rot, int pos, float theta, float freq_scale,
                 const float* factors = nullptr, float mscale = 1.0f, const RopeYarn* yarn = nullptr);

// The YaRN correction range for a model trained on orig_context positions: lo = floor(d(beta_fast)),
// hi = ceil(d(beta_slow)), clamped to [0, n_rot - 1], where d(b) = n_rot ln(orig_context / (2 pi b))
// / (2 ln theta) is the pair whose wavelength fits b turns into orig_context positions. The
// betas default to llama.cpp's (32 and 1), the only ones it uses for the architectures qkv reads.
RopeYarn rope_yarn_range(int n_rot, int orig_context, float theta, float beta_fast = 32.0f, float beta_slow = 1.0f);

// x: (n_heads, head_dim). Only the first n_rot dims of each head rotate (n_rot even, <= head_dim).
// Adjacent pairs (Llama, llama2.c):   (x[2p], x[2p+1])
// Split halves  (GPT-NeoX, Qwen):     (x[p],  x[p + n_rot/2])
void rope_adjacent_ref(float* x, int n_heads, int head_dim, int n_rot, const float* cos, const float* sin);
void rope_adjacent_simd(float* x, int n_heads, int head_dim, int n_rot, const float* cos, const float* sin);
void rope_halves_ref(float* x, int n_heads, int head_dim, int n_rot, const float* cos, const float* sin);
void rope_halves_simd(float* x, int n_heads, int head_dim, int n_rot, const float* cos, const float* sin);

}  // namespace qkv
