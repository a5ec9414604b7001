// The trainable decoder-only model: parameters in one flat f32 array (so the optimizer and the
// gradient clipping are single loops), a training forward pass over (batch x seq) tokens that
// keeps the activations its backward pass needs, and the backward pass itself.
// Separate from the inference Transformer, whose weights are read-only views into a file.
#pragma once
#include <cstdint>
#include <vector>

#include "../model/weights.h"
#include "../threadpool.h"

namespace qkv {

// Offsets of each tensor in the flat parameter array (llama layout, tied classifier).
// Operands linear_forward and linear_backward lay out for the f32 kernel, kept between calls.
struct LinearScratch {
  std::vector<float> wt, a, b;
};

struct ParamLayout {
  struct Layer {
    int64_t attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_down, w_up;
    // Additive attention layers: W_q, W_k (n_heads * additive_dim, head_dim), v (n_heads,
    // additive_dim), after the layer's other tensors; -1 in other layers.
    int64_t add_wq = -1, add_wk = -1, add_v = -1;
  };
  int64_t tok_embed = 0;  // (vocab, dim)
  std::vector<Layer> layers;
  int64_t final_norm = 0;  // (dim,)
  int64_t total = 0;
  // [begin, end) ranges of norm weights: no weight decay there.
  std::vector<std::pair<int64_t, int64_t>> norms;
  explicit ParamLayout(const ModelConfig& c);
};

class TrainModel {
 public:
  // Supported: RMSNorm, RoPE (adjacent pairs), SwiGLU, tied classifier, no biases; softmax,
  // block-sparse and additive attention layers; anything else is refused with
  // Error(Unsupported). pool may be shared with other work.
  TrainModel(const ModelConfig& c, ThreadPool* pool);

  const ModelConfig& config() const { return c_; }
  const ParamLayout& layout() const { return lay_; }
  std::vector<float>& params() { return params_; }
  const std::vector<float>& params() const { return params_; }
  std::vector<float>& grads() { return grads_; }

  // Norm weights 1; matrices N(0, 0.02), residual projections (wo, w_down) scaled by
  // 1/sqrt(2 n_layers) (GPT-2's scheme). Deterministic for a seed.
  void init(uint64_t seed);

  // Mean cross-entropy of predicting targets[i] after inputs[0..i] within each of the B
  // sequences of T tokens (inputs, targets: (B, T)). Keeps the activations for backward().
  double forward(const int* inputs, const int* targets, int B, int T);
  // grads += d(mean loss)/d(params) for the last forward(). Call zero_grads() first.
  void backward();
  void zero_grads();

  // The parameters as a LoadedModel whose tensors point into params() (valid while this
  // object lives and params() is not resized), for export and for inference checks.
  LoadedModel view() const;

  // Multiply-adds of one forward pass over B x T tokens (matmuls and attention), for FLOP/s.
  static double forward_flops(const ModelConfig& c, int B, int T);

 private:
  void matmul(float* y, const float* x, int64_t w_off, int rows, int cols, int n_tok);           // y = x W^T
  void norm_rows(std::vector<float>& y, const std::vector<float>& x, int64_t w_off, int n_tok);  // y = rmsnorm(x)
  void norm_rows_back(const std::vector<float>& x, int64_t w_off, int n_tok);  // dx_ += ..., grads += ... from dxn_
  void matmul_back(float* dx, bool acc_dx, const float* dy, const float* x, int64_t w_off, int rows, int cols,
                   int n_tok);  // dx (+)= dy W; dW += dy^T x

  ModelConfig c_;
  ParamLayout lay_;
  ThreadPool* pool_;
  std::vector<float> params_, grads_;
  LinearScratch scratch_;

  // Activations of the last forward, N = B*T tokens.
  int B_ = 0, T_ = 0;
  std::vector<int> inputs_, targets_;
  struct LayerActs {
    std::vector<float> x_in, xn1, q, k, v, probs, att, x_mid, xn2, g, u, h;
    // (N,dim) (N,dim) (N,q_dim) (N,kv_dim) (N,kv_dim) (B,heads,T,T) (N,q_dim) (N,dim) (N,dim) (N,hidden) x3
  };
  std::vector<LayerActs> acts_;
  std::vector<float> x_final_, xf_, dlogits_;  // (N,dim) (N,dim) (N,vocab)
  std::vector<float> rope_cos_, rope_sin_;     // (T, n_rot/2)
  // Backward scratch.
  std::vector<float> dx_, dxn_, dq_, dk_, dv_, datt_, dh_, dg_, du_;
  // Additive layers: per (sequence, head) parameter gradients, summed in a fixed order after.
  std::vector<float> add_grads_;
  void additive_backward(int l, int B, int T);
  // Layer l's additive parameters as views into params_ (nulls in other layers).
  AdditiveWeights additive_of(int l) const;
};

// Pieces of a training pass over flat f32 parameters that TrainModel and EncDecTrainModel
// (encdec_model.h) share.
// y = x W^T: W (rows, cols), x (n, cols), y (n, rows); rows split over the pool, or tokens for
// large n. The scratch keeps x laid out for the f32 kernel (256 x cols floats at most).
void linear_forward(ThreadPool* pool, LinearScratch& s, float* y, const float* x, const float* W, int rows, int cols,
                    int n);
// dx (+= when acc_dx) dy W when dx is not null, and dW += dy^T x: W, dW (rows, cols), dy
// (n, rows), x (n, cols); columns split over the pool. The scratch keeps the transposed and
// packed operands between calls (at most rows x cols + about 256 x (rows + cols) floats).
void linear_backward(ThreadPool* pool, LinearScratch& scratch, float* dx, bool acc_dx, const float* dy, const float* x,
                     const float* W, float* dW, int rows, int cols, int n);
// y = rmsnorm(x) row by row with weights w: n rows of dim (y is sized to n * dim).
void rmsnorm_rows(std::vector<float>& y, const std::vector<float>& x, const float* w, int dim, float eps, int n);
// dx += d(rmsnorm_rows)/dx and dw += d/dw, from dy (n rows of dim).
void rmsnorm_rows_backward(float* dx, float* dw, const float* dy, const float* x, const float* w, int dim, float eps,
                           int n);
// Mean softmax cross-entropy of n rows of vocab logits against targets; each row of logits
// becomes the gradient of that mean with respect to it.
double mean_cross_entropy(ThreadPool* pool, float* logits, int vocab, const int* targets, int n);

}  // namespace qkv
