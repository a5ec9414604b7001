// Training's elementwise kernels: softmax cross-entropy with its gradient, and the AdamW update.
#pragma once
#include <cstdint>

namespace qkv {

// One row of logits (n,) with target class `target`: returns -log softmax(logits)[target] and
// overwrites logits with the gradient of that loss times `scale`: (softmax - onehot) * scale.
double cross_entropy_ref(float* logits, int n, int target, float scale);
double cross_entropy_simd(float* logits, int n, int target, float scale);

struct AdamWParams {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  float weight_decay = 0.0f;  // decoupled: p -= lr * wd * p (0 for norm weights)
  int64_t step = 1;           // 1-based, for the bias corrections 1 - beta^step
};

// m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
// p -= lr * ((m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + wd * p)        all (n,)
void adamw_ref(float* p, const float* g, float* m, float* v, int64_t n, const AdamWParams& h);
void adamw_simd(float* p, const float* g, float* m, float* v, int64_t n, const AdamWParams& h);

}  // namespace qkv
