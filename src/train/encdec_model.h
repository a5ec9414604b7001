// The trainable encoder-decoder model (T5 layout as qkv's EncoderDecoder and llama.cpp's `t5`
// run it): shared token embeddings, pre-norm RMSNorm, bidirectional encoder self-attention and
// causal decoder self-attention with a learned relative-position bias table per stack (T5's
// buckets, kept in layer 0 and shared by the stack's layers), unscaled dot products (T5 folds
// the scale into Wq), decoder cross-attention over the encoder output, ReLU feed-forward,
// final norms, tied classifier. Parameters live in one flat f32 array, as in TrainModel.
//
// A batch is a list of (source ids, target ids) pairs of any lengths, packed without padding:
// every matmul runs over all source rows (encoder) or all target rows (decoder) at once;
// attention runs per example. The decoder is teacher-forced: its inputs are the start token
// and the target shifted right; the loss is the mean cross-entropy over all target tokens.
#pragma once
#include <cstdint>
#include <vector>

#include "../model/encdec.h"
#include "../threadpool.h"
#include "model.h"

namespace qkv {

struct EncDecTrainShape {
  int dim = 64, n_heads = 4, hidden_dim = 128, enc_layers = 2, dec_layers = 2;
  int vocab = 0, seq_len = 128;  // seq_len: the longest source or target (stored as context_length)
  int rel_buckets = 32, rel_max_distance = 128;
  int decoder_start_id = 0;
  float norm_eps = 1e-6f;
  // > 0: every decoder layer's cross-attention is additive (Bahdanau) with a tanh layer this wide.
  int additive_cross = 0;
  ModelConfig model_config() const;  // throws Error(BadArgument) for impossible shapes
};

struct EncDecParamLayout {
  struct Layer {
    int64_t attn_norm, wq, wk, wv, wo;
    int64_t cross_norm = -1, cq = -1, ck = -1, cv = -1, co = -1;  // decoder layers only
    int64_t cadd_wq = -1, cadd_wk = -1, cadd_v = -1;              // additive cross-attention only
    int64_t ffn_norm, w_up, w_down;
  };
  int64_t tok_embed = 0;               // (vocab, dim)
  int64_t enc_bias = 0, dec_bias = 0;  // (rel_buckets, n_heads)
  std::vector<Layer> enc, dec;
  int64_t enc_norm = 0, dec_norm = 0;
  int64_t total = 0;
  std::vector<std::pair<int64_t, int64_t>> norms;  // no weight decay
  explicit EncDecParamLayout(const EncDecTrainShape& s);
};

class EncDecTrainModel {
 public:
  EncDecTrainModel(const EncDecTrainShape& s, ThreadPool* pool);

  const EncDecTrainShape& shape() const { return s_; }
  const EncDecParamLayout& layout() const { return lay_; }
  std::vector<float>& params() { return params_; }
  const std::vector<float>& params() const { return params_; }
  std::vector<float>& grads() { return grads_; }

  // Norms 1, bias tables 0; Wq N(0, 1/sqrt(dim * head_dim)) (the folded score scale), other
  // matrices N(0, 1/sqrt(fan_in)), output projections further / sqrt(2 * layers).
  void init(uint64_t seed);

  // Mean cross-entropy over every target token of the batch (targets end with EOS; the
  // decoder sees the start token then targets[..-1]). Keeps activations for backward().
  double forward(const std::vector<std::vector<int>>& sources, const std::vector<std::vector<int>>& targets);
  void backward();  // grads += d(loss)/d(params) of the last forward()
  void zero_grads();
  // A hash of which ReLU inputs of the last forward were positive: a finite difference whose
  // two ends differ in it straddles a kink of the loss (tests skip those elements).
  uint64_t relu_pattern() const;

  // Views into params() (valid while this object lives) in the inference model's form.
  EncDecModelData view() const;

 private:
  struct Acts {
    std::vector<float> x_in, xn1, q, k, v, probs, att, x_a, xnc, cq, ck, cv, cprobs, catt, x_b, xn2, u, h;
  };
  void matmul(float* y, const float* x, int64_t w_off, int rows, int cols, int n);
  void matmul_back(float* dx, bool acc, const float* dy, const float* x, int64_t w_off, int rows, int cols, int n);
  void norm_rows(std::vector<float>& y, const std::vector<float>& x, int64_t w_off, int n);
  void norm_back(float* dx, const float* dy, const std::vector<float>& x, int64_t w_off, int n);
  // Self- (src == tgt stack) or cross-attention over every example; forward or backward.
  enum class Kind { EncSelf, DecSelf, Cross };
  void attention(Kind kind, const float* q, const float* k, const float* v, float* out, std::vector<float>& probs);
  void attention_back(Kind kind, const float* q, const float* k, const float* v, const float* out, const float* probs,
                      const float* dout, float* dq, float* dk, float* dv);
  // Additive cross-attention of every example, forward or backward (into dq/dk/dv and the
  // parameters' gradients), for decoder layer L.
  void additive_cross(const EncDecParamLayout::Layer& L, const float* q, const float* k, const float* v, float* out,
                      std::vector<float>& probs);
  void additive_cross_back(const EncDecParamLayout::Layer& L, const float* q, const float* k, const float* v,
                           const float* out, const float* probs, const float* dout, float* dq, float* dk, float* dv);
  void layer_forward(Acts& A, const EncDecParamLayout::Layer& L, std::vector<float>& x, bool dec);
  void layer_backward(Acts& A, const EncDecParamLayout::Layer& L, std::vector<float>& dx, bool dec);

  EncDecTrainShape s_;
  EncDecParamLayout lay_;
  ThreadPool* pool_;
  std::vector<float> params_, grads_;
  LinearScratch scratch_;  // linear_backward's transposed operands
  // Batch: source rows [src_off[b], +src_len[b]), target rows likewise; probs offsets per example.
  std::vector<int> src_ids_, dec_in_, dec_out_, src_off_, src_len_, tgt_off_, tgt_len_;
  int Ns_ = 0, Nt_ = 0;
  std::vector<Acts> enc_, dec_;
  std::vector<float> enc_x_, enc_out_, dec_x_, xf_, dlogits_, denc_out_;
};

}  // namespace qkv
