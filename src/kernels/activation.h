// Elementwise activations of the feed-forward block.
#pragma once

namespace qkv {

// silu(x) = x / (1 + exp(-x))                       in place, x: (n,)
void silu_ref(float* x, int n);
void silu_simd(float* x, int n);
// gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   (GPT-2's tanh form), in place
void gelu_ref(float* x, int n);
void gelu_simd(float* x, int n);
// quick_gelu(x) = x * sigmoid(1.702 x)   (OpenAI CLIP's approximation), in place
void quick_gelu_ref(float* x, int n);
void quick_gelu_simd(float* x, int n);
// relu(x) = max(x, 0)                               in place
void relu_ref(float* x, int n);
void relu_simd(float* x, int n);
// SwiGLU: gate <- silu(gate) * up                   gate, up: (n,)
void swiglu_ref(float* gate, const float* up, int n);
void swiglu_simd(float* gate, const float* up, int n);
// GeGLU: gate <- gelu(gate) * up (gelu in the tanh form above)   gate, up: (n,)
void geglu_ref(float* gate, const float* up, int n);
void geglu_simd(float* gate, const float* up, int n);
// x <- a * x                                        in place, x: (n,)
void scale_ref(float* x, float a, int n);
void scale_simd(float* x, float a, int n);

}  // namespace qkv
