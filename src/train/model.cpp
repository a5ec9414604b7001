// Training forward and backward of the llama-style decoder. Token rows are (batch, position)
// flattened: N = B*T rows through every matmul at once.
#include "model.h"

#include <cmath>
#include <cstring>
#include <tuple>

#include "../common.h"
#include "../kernels/activation.h"
#include "../kernels/activation_backward.h"
#include "../kernels/attention.h"
#include "../kernels/attention_backward.h"
#include "../kernels/attention_sparse.h"
#include "../model/blocks.h"
#include "../kernels/matmul.h"
#include "../kernels/matmul_backward.h"
#include "../kernels/norm.h"
#include "../kernels/norm_backward.h"
#include "../kernels/optim.h"
#include "../kernels/rope.h"
#include "../kernels/rope_backward.h"
#include "rng.h"

namespace qkv {

ParamLayout::ParamLayout(const ModelConfig& c) {
  const int64_t d = c.dim, q = c.q_dim(), kv = c.kv_dim(), h = c.hidden_dim;
  int64_t off = 0;
  auto take = [&](int64_t n) {
    int64_t o = off;
    off += n;
    return o;
  };
  auto norm = [&]() {
    int64_t o = take(d);
    norms.push_back({o, o + d});
    return o;
  };
  tok_embed = take((int64_t)c.vocab_size * d);
  for (int l = 0; l < c.n_layers; l++) {
    Layer L;
    L.attn_norm = norm();
    L.wq = take(q * d);
    L.wk = take(kv * d);
    L.wv = take(kv * d);
    L.wo = take(d * q);
    L.ffn_norm = norm();
    L.w_gate = take(h * d);
    L.w_down = take(d * h);
    L.w_up = take(h * d);
    if (c.attn_of(l) == AttnKind::Additive) {
      const int64_t rows = (int64_t)c.n_heads * c.additive_dim;
      L.add_wq = take(rows * c.head_dim);
      L.add_wk = take(rows * c.head_dim);
      L.add_v = take(rows);
    }
    layers.push_back(L);
  }
  final_norm = norm();
  total = off;
}

TrainModel::TrainModel(const ModelConfig& c, ThreadPool* pool) : c_(c), lay_(c), pool_(pool) {
  c_.validate();
  if (c_.norm != NormKind::RMSNorm) fail(ErrorCode::Unsupported, "training supports RMSNorm only");
  if (c_.pos != PosKind::RopeAdjacent) fail(ErrorCode::Unsupported, "training supports RoPE (adjacent pairs) only");
  if (c_.ffn != FfnKind::SwiGLU) fail(ErrorCode::Unsupported, "training supports the SwiGLU feed-forward only");
  if (!c_.tied_classifier) fail(ErrorCode::Unsupported, "training supports a tied classifier only");
  if (c_.sliding_window != 0) fail(ErrorCode::Unsupported, "training does not support sliding-window attention");
  if (c_.q_dim() != c_.dim) fail(ErrorCode::Unsupported, "training needs n_heads * head_dim == dim");
  for (int l = 0; l < c_.n_layers; l++)
    if (c_.attn_of(l) == AttnKind::Linear || c_.window_of(l) != 0)
      fail(ErrorCode::Unsupported, "training does not support layer " + std::to_string(l) + "'s " +
                                       (c_.window_of(l) ? "sliding-window" : "linear") + " attention");
  params_.assign(lay_.total, 0.0f);
  grads_.assign(lay_.total, 0.0f);
}

void TrainModel::init(uint64_t seed) {
  Rng rng(seed);
  for (float& p : params_) p = 0.0f;
  for (auto [b, e] : lay_.norms)
    for (int64_t i = b; i < e; i++) params_[i] = 1.0f;
  const int64_t d = c_.dim, q = c_.q_dim(), kv = c_.kv_dim(), h = c_.hidden_dim;
  const float std = 0.02f, res_std = 0.02f / std::sqrt(2.0f * c_.n_layers);
  auto fill = [&](int64_t off, int64_t n, float s) {
    for (int64_t i = 0; i < n; i++) params_[off + i] = (float)(rng.normal() * s);
  };
  fill(lay_.tok_embed, (int64_t)c_.vocab_size * d, std);
  for (const auto& L : lay_.layers) {
    fill(L.wq, q * d, std);
    fill(L.wk, kv * d, std);
    fill(L.wv, kv * d, std);
    fill(L.wo, d * q, res_std);
    fill(L.w_gate, h * d, std);
    fill(L.w_down, d * h, res_std);
    fill(L.w_up, h * d, std);
    if (L.add_wq >= 0) {  // tanh inputs of order one for unit-size q and k
      const int64_t rows = (int64_t)c_.n_heads * c_.additive_dim;
      fill(L.add_wq, rows * c_.head_dim, 1.0f / std::sqrt((float)c_.head_dim));
      fill(L.add_wk, rows * c_.head_dim, 1.0f / std::sqrt((float)c_.head_dim));
      fill(L.add_v, rows, std);
    }
  }
}

void TrainModel::zero_grads() { std::memset(grads_.data(), 0, grads_.size() * sizeof(float)); }

// Below this many multiply-adds a product runs on the calling thread.
static constexpr int64_t kMinTrainParallelWork = 1 << 15;

// f(i) for each row i < n, rows split over the pool (element-wise work: any split gives the same bits).
template <class F>
static void each_row(ThreadPool* pool, int n, F f) {
  pool->parallel_for(n, 16, [&](int i0, int i1, int) {
    for (int i = i0; i < i1; i++) f(i);
  });
}

void TrainModel::matmul(float* y, const float* x, int64_t w_off, int rows, int cols, int n_tok) {
  linear_forward(pool_, scratch_, y, x, params_.data() + w_off, rows, cols, n_tok);
}

// Output rows per task: whole row tiles of the f32 kernel (4 or 6 rows).
static constexpr int kRowGrain = 48;
// Tokens per task when the tokens are split.
static constexpr int kTokGrain = 64;
// Tokens laid out at a time into a LinearScratch (kTokBlock x the input width at most).
static constexpr int kTokBlock = 256;

// y (n, rows) = x W^T (+ y when accumulate), x (n, cols), W (rows, cols). The f32 kernel lays
// its tokens out first (xpack_f32), so the pool splits the tokens when there are enough for every
// thread to have several blocks: each task lays out only its own and multiplies them by every row
// (in parallel, and once). With fewer tokens it splits the rows, and x is laid out once, into
// xp, kTokBlock tokens at a time before each section, and shared.
static void packed_product(ThreadPool* pool, std::vector<float>& xp, float* y, const float* x, const float* W, int rows,
                           int cols, int n, bool accumulate) {
  if ((int64_t)rows * cols * n < kMinTrainParallelWork || n < kXPackMinTokens) {
    if (accumulate) return matmul_f32_acc_simd(y, rows, x, cols, W, n, cols, 0, rows);
    return matmul_f32_simd(y, rows, x, cols, W, n, cols, 0, rows);
  }
  if (n >= 4 * kTokGrain * pool->size()) {
    // Units of kTokGrain tokens, the last taking the rest: every task has at least kTokGrain
    // tokens, so none takes matmul_f32_simd's few-token path, whose sums round differently (the
    // result must not depend on the thread count).
    const int units = n / kTokGrain;
    pool->parallel_for(units, 1, [&](int u0, int u1, int) {
      const int t0 = u0 * kTokGrain, t1 = u1 == units ? n : u1 * kTokGrain;
      const float* xb = x + (int64_t)t0 * cols;
      float* yb = y + (int64_t)t0 * rows;
      if (accumulate) matmul_f32_acc_simd(yb, rows, xb, cols, W, t1 - t0, cols, 0, rows);
      else matmul_f32_simd(yb, rows, xb, cols, W, t1 - t0, cols, 0, rows);
    });
    return;
  }
  const int tb = std::min(n, kTokBlock);
  if (xp.size() < xpack_f32_floats(tb, cols)) xp.resize(xpack_f32_floats(tb, cols));
  for (int t0 = 0; t0 < n; t0 += tb) {
    const int tn = std::min(tb, n - t0);
    xpack_f32(xp.data(), x + (int64_t)t0 * cols, cols, tn, cols);
    float* yb = y + (int64_t)t0 * rows;
    pool->parallel_for(rows, kRowGrain, [&](int r0, int r1, int) {
      matmul_f32_xpacked(yb, rows, xp.data(), W, cols, tn, cols, r0, r1, accumulate);
    });
  }
}

void linear_forward(ThreadPool* pool, LinearScratch& s, float* y, const float* x, const float* W, int rows, int cols,
                    int n) {
  packed_product(pool, s.a, y, x, W, rows, cols, n, false);
}

// Transposes src (rows, cols; row stride lds) into dst (cols, rows), in tiles that keep both in cache.
static void transpose(ThreadPool* pool, float* dst, const float* src, int64_t lds, int rows, int cols) {
  constexpr int kB = 32;
  pool->parallel_for((cols + kB - 1) / kB, 1, [&](int b0, int b1, int) {
    for (int c0 = b0 * kB; c0 < std::min(cols, b1 * kB); c0 += kB)
      for (int r0 = 0; r0 < rows; r0 += kB)
        for (int r = r0; r < std::min(rows, r0 + kB); r++)
          for (int c = c0; c < std::min(cols, c0 + kB); c++) dst[(int64_t)c * rows + r] = src[r * lds + c];
  });
}

// Both products run on the f32 prefill kernel (matmul.h), which reads its second operand as rows
// of the summed dimension: dx = dy W reads W^T; dW += dy^T x sums over tokens, so it takes dy
// laid out from its transpose (xpack_f32_t reads dy as it is stored) and reads x^T, transposed a
// block of tokens at a time. The transposes move O(n (rows + cols)) floats for O(n rows cols)
// multiply-adds.
void linear_backward(ThreadPool* pool, LinearScratch& s, float* dx, bool acc_dx, const float* dy, const float* x,
                     const float* W, float* dW, int rows, int cols, int n) {
  if (dx) {
    if (s.wt.size() < (size_t)rows * cols) s.wt.resize((size_t)rows * cols);
    transpose(pool, s.wt.data(), W, cols, rows, cols);  // (cols, rows)
    packed_product(pool, s.a, dx, dy, s.wt.data(), cols, rows, n, acc_dx);
  }
  const int tb = std::min(n, kTokBlock);
  if (s.a.size() < xpack_f32_floats(rows, tb)) s.a.resize(xpack_f32_floats(rows, tb));
  if (s.b.size() < (size_t)cols * tb) s.b.resize((size_t)cols * tb);
  for (int t0 = 0; t0 < n; t0 += tb) {
    const int tn = std::min(tb, n - t0);
    transpose(pool, s.b.data(), x + (int64_t)t0 * cols, cols, tn, cols);  // (cols, tn)
    const float* Bt = s.b.data();
    if (rows < kXPackMinTokens) {  // too few rows to pack: dy^T as rows, through matmul_f32_acc_simd
      if (s.wt.size() < (size_t)rows * tn) s.wt.resize((size_t)rows * tn);
      transpose(pool, s.wt.data(), dy + (int64_t)t0 * rows, rows, tn, rows);  // (rows, tn)
      matmul_f32_acc_simd(dW, cols, s.wt.data(), tn, Bt, rows, tn, 0, cols);
      continue;
    }
    xpack_f32_t(s.a.data(), dy + (int64_t)t0 * rows, rows, rows, tn);  // dy^T: rows as the kernel's tokens
    pool->parallel_for(cols, kRowGrain, [&](int c0, int c1, int) {
      matmul_f32_xpacked(dW, cols, s.a.data(), Bt, tn, rows, tn, c0, c1, true);
    });
  }
}

void TrainModel::matmul_back(float* dx, bool acc_dx, const float* dy, const float* x, int64_t w_off, int rows, int cols,
                             int n_tok) {
  linear_backward(pool_, scratch_, dx, acc_dx, dy, x, params_.data() + w_off, grads_.data() + w_off, rows, cols, n_tok);
}

// The fields the forward and backward attention arguments share, for sequence b of the batch.
template <class Args>
static void sequence_args(Args& a, const ModelConfig& c, const float* q, const float* k, const float* v, int b, int T) {
  const int qd = c.q_dim(), kvd = c.kv_dim();
  a.n_heads = c.n_heads;
  a.n_kv_heads = c.n_kv_heads;
  a.head_dim = c.head_dim;
  a.q = q + (size_t)b * T * qd;
  a.q_stride = qd;
  a.k = k + (size_t)b * T * kvd;
  a.v = v + (size_t)b * T * kvd;
  a.kv_stride = kvd;
  a.out_stride = qd;
  a.scale = 1.0f / std::sqrt((float)c.head_dim);
  a.causal = true;
}

static void grow(std::vector<float>& v, size_t n) {
  if (v.size() != n) v.assign(n, 0.0f);
}

void rmsnorm_rows(std::vector<float>& y, const std::vector<float>& x, const float* w, int dim, float eps, int n) {
  grow(y, (size_t)n * dim);
  for (int i = 0; i < n; i++) rmsnorm_simd(&y[(size_t)i * dim], &x[(size_t)i * dim], w, dim, eps);
}

void rmsnorm_rows_backward(float* dx, float* dw, const float* dy, const float* x, const float* w, int dim, float eps,
                           int n) {
  for (int i = 0; i < n; i++)
    rmsnorm_backward_simd(dx + (size_t)i * dim, dw, dy + (size_t)i * dim, x + (size_t)i * dim, w, dim, eps);
}

double mean_cross_entropy(ThreadPool* pool, float* logits, int vocab, const int* targets, int n) {
  std::vector<double> row(n, 0.0);
  const float scale = 1.0f / n;
  pool->parallel_for(n, 8, [&](int i0, int i1, int) {
    for (int i = i0; i < i1; i++) row[i] = cross_entropy_simd(logits + (size_t)i * vocab, vocab, targets[i], scale);
  });
  double loss = 0.0;
  for (double r : row) loss += r;
  return loss / n;
}

void TrainModel::norm_rows(std::vector<float>& y, const std::vector<float>& x, int64_t w_off, int n_tok) {
  rmsnorm_rows(y, x, &params_[w_off], c_.dim, c_.norm_eps, n_tok);
}

void TrainModel::norm_rows_back(const std::vector<float>& x, int64_t w_off, int n_tok) {
  rmsnorm_rows_backward(dx_.data(), &grads_[w_off], dxn_.data(), x.data(), &params_[w_off], c_.dim, c_.norm_eps, n_tok);
}

double TrainModel::forward(const int* inputs, const int* targets, int B, int T) {
  const ModelConfig& c = c_;
  if (B <= 0 || T <= 0) fail(ErrorCode::BadArgument, "forward needs at least one sequence of one token");
  if (T > c.seq_len)
    fail(ErrorCode::BadArgument,
         "sequence length " + std::to_string(T) + " exceeds the model's " + std::to_string(c.seq_len));
  const int N = B * T, D = c.dim, qd = c.q_dim(), kvd = c.kv_dim(), H = c.hidden_dim, V = c.vocab_size;
  const int hd = c.head_dim, half = c.rot_dims() / 2;
  for (int i = 0; i < N; i++)
    if (inputs[i] < 0 || inputs[i] >= V || targets[i] < 0 || targets[i] >= V)
      fail(ErrorCode::BadArgument, "token id outside the vocabulary of " + std::to_string(V));
  B_ = B;
  T_ = T;
  inputs_.assign(inputs, inputs + N);
  targets_.assign(targets, targets + N);
  acts_.resize(c.n_layers);
  rope_cos_.resize((size_t)T * half);
  rope_sin_.resize((size_t)T * half);
  for (int t = 0; t < T; t++)
    rope_angles(rope_cos_.data() + t * half, rope_sin_.data() + t * half, c.rot_dims(), t, c.rope_theta,
                c.rope_freq_scale);

  std::vector<float> x((size_t)N * D);
  for (int i = 0; i < N; i++)
    std::memcpy(x.data() + (size_t)i * D, params_.data() + lay_.tok_embed + (int64_t)inputs[i] * D, D * sizeof(float));

  for (int l = 0; l < c.n_layers; l++) {
    const auto& L = lay_.layers[l];
    LayerActs& A = acts_[l];
    A.x_in = x;
    norm_rows(A.xn1, x, L.attn_norm, N);
    grow(A.q, (size_t)N * qd);
    grow(A.k, (size_t)N * kvd);
    grow(A.v, (size_t)N * kvd);
    matmul(A.q.data(), A.xn1.data(), L.wq, qd, D, N);
    matmul(A.k.data(), A.xn1.data(), L.wk, kvd, D, N);
    matmul(A.v.data(), A.xn1.data(), L.wv, kvd, D, N);
    each_row(pool_, N, [&](int i) {
      const int t = i % T;
      rope_adjacent_simd(&A.q[(size_t)i * qd], c.n_heads, hd, c.rot_dims(), &rope_cos_[t * half], &rope_sin_[t * half]);
      rope_adjacent_simd(&A.k[(size_t)i * kvd], c.n_kv_heads, hd, c.rot_dims(), &rope_cos_[t * half],
                         &rope_sin_[t * half]);
    });
    grow(A.probs, (size_t)B * c.n_heads * T * T);
    grow(A.att, (size_t)N * qd);
    pool_->parallel_for(B * c.n_heads, 1, [&](int u0, int u1, int) {
      for (int u = u0; u < u1; u++) {
        const int b = u / c.n_heads, h = u % c.n_heads;
        AttentionArgs a;
        sequence_args(a, c, A.q.data(), A.k.data(), A.v.data(), b, T);
        a.n_q = a.n_kv = T;
        a.out = A.att.data() + (size_t)b * T * qd;
        a.probs = A.probs.data() + (size_t)b * c.n_heads * T * T;
        attend(c, c.attn_of(l), additive_of(l), a, h, h + 1);
      }
    });
    std::vector<float> tmp((size_t)N * D);
    matmul(tmp.data(), A.att.data(), L.wo, D, qd, N);
    each_row(pool_, N, [&](int i) { add_f32_simd(&x[(size_t)i * D], &tmp[(size_t)i * D], D); });
    A.x_mid = x;
    norm_rows(A.xn2, x, L.ffn_norm, N);
    grow(A.g, (size_t)N * H);
    grow(A.u, (size_t)N * H);
    matmul(A.g.data(), A.xn2.data(), L.w_gate, H, D, N);
    matmul(A.u.data(), A.xn2.data(), L.w_up, H, D, N);
    A.h = A.g;
    each_row(pool_, N, [&](int i) { swiglu_simd(&A.h[(size_t)i * H], &A.u[(size_t)i * H], H); });
    matmul(tmp.data(), A.h.data(), L.w_down, D, H, N);
    each_row(pool_, N, [&](int i) { add_f32_simd(&x[(size_t)i * D], &tmp[(size_t)i * D], D); });
  }
  x_final_ = x;
  norm_rows(xf_, x, lay_.final_norm, N);
  grow(dlogits_, (size_t)N * V);
  matmul(dlogits_.data(), xf_.data(), lay_.tok_embed, V, D, N);
  // Logits -> mean loss, and the rows become d(mean loss)/d(logits).
  return mean_cross_entropy(pool_, dlogits_.data(), V, targets_.data(), N);
}

AdditiveWeights TrainModel::additive_of(int l) const {
  const auto& L = lay_.layers[l];
  if (L.add_wq < 0) return {};
  return {params_.data() + L.add_wq, params_.data() + L.add_wk, params_.data() + L.add_v};
}

// dq, dk, dv of an additive layer from datt_, and its parameters' gradients: per (sequence,
// query head) into add_grads_ (heads of one group add their dk and dv in head order), then
// summed over the sequences in order, so any thread count gives the same bits.
void TrainModel::additive_backward(int l, int B, int T) {
  const ModelConfig& c = c_;
  const auto& L = lay_.layers[l];
  LayerActs& A = acts_[l];
  const int qd = c.q_dim(), kvd = c.kv_dim(), hd = c.head_dim, group = c.n_heads / c.n_kv_heads;
  const int64_t nw = (int64_t)c.additive_dim * hd, per = 2 * nw + c.additive_dim;
  grow(add_grads_, (size_t)B * c.n_heads * per);
  const AdditiveWeights w = additive_of(l);
  pool_->parallel_for(B * c.n_kv_heads, 1, [&](int u0, int u1, int) {
    std::vector<float> dk((size_t)T * kvd), dv((size_t)T * kvd);
    for (int u = u0; u < u1; u++) {
      const int b = u / c.n_kv_heads, g = u % c.n_kv_heads;
      AttentionArgs a;
      sequence_args(a, c, A.q.data(), A.k.data(), A.v.data(), b, T);
      a.n_q = a.n_kv = T;
      a.out = A.att.data() + (size_t)b * T * qd;
      a.probs = A.probs.data() + (size_t)b * c.n_heads * T * T;
      for (int h = g * group; h < (g + 1) * group; h++) {
        const AdditiveAttentionArgs d = additive_head_args(c, w, a, h);
        float* pg = add_grads_.data() + ((size_t)b * c.n_heads + h) * per;
        AdditiveAttentionGrads gr;
        gr.probs = d.probs;
        gr.out = d.out;
        gr.dout = datt_.data() + (size_t)b * T * qd + (size_t)h * hd;
        gr.dq = dq_.data() + (size_t)b * T * qd + (size_t)h * hd;
        gr.dk = dk.data() + (size_t)g * hd;
        gr.dvalues = dv.data() + (size_t)g * hd;
        gr.dw_q = pg;
        gr.dw_k = pg + nw;
        gr.dv = pg + 2 * nw;
        attention_additive_backward_simd(d, gr);
        for (int t = 0; t < T; t++) {
          float* ok = dk_.data() + ((size_t)b * T + t) * kvd + (size_t)g * hd;
          float* ov = dv_.data() + ((size_t)b * T + t) * kvd + (size_t)g * hd;
          const float* ik = dk.data() + (size_t)t * kvd + (size_t)g * hd;
          const float* iv = dv.data() + (size_t)t * kvd + (size_t)g * hd;
          if (h == g * group) {
            std::memcpy(ok, ik, hd * sizeof(float));
            std::memcpy(ov, iv, hd * sizeof(float));
          } else {
            add_f32_simd(ok, ik, hd);
            add_f32_simd(ov, iv, hd);
          }
        }
      }
    }
  });
  float* G = grads_.data();
  for (int b = 0; b < B; b++)
    for (int h = 0; h < c.n_heads; h++) {
      const float* pg = add_grads_.data() + ((size_t)b * c.n_heads + h) * per;
      add_f32_simd(G + L.add_wq + (int64_t)h * nw, pg, (int)nw);
      add_f32_simd(G + L.add_wk + (int64_t)h * nw, pg + nw, (int)nw);
      add_f32_simd(G + L.add_v + (int64_t)h * c.additive_dim, pg + 2 * nw, c.additive_dim);
    }
}

void TrainModel::backward() {
  const ModelConfig& c = c_;
  QKV_CHECK(B_ > 0, "backward() before forward()");
  const int B = B_, T = T_, N = B * T, D = c.dim, qd = c.q_dim(), kvd = c.kv_dim(), H = c.hidden_dim, V = c.vocab_size;
  const int hd = c.head_dim, half = c.rot_dims() / 2;
  float* G = grads_.data();
  grow(dx_, (size_t)N * D);
  grow(dxn_, (size_t)N * D);
  // Classifier (tied to the embedding) and final norm.
  matmul_back(dxn_.data(), false, dlogits_.data(), xf_.data(), lay_.tok_embed, V, D, N);
  std::memset(dx_.data(), 0, dx_.size() * sizeof(float));
  norm_rows_back(x_final_, lay_.final_norm, N);
  grow(dh_, (size_t)N * H);
  grow(dg_, (size_t)N * H);
  grow(du_, (size_t)N * H);
  grow(datt_, (size_t)N * qd);
  grow(dq_, (size_t)N * qd);
  grow(dk_, (size_t)N * kvd);
  grow(dv_, (size_t)N * kvd);
  for (int l = c.n_layers - 1; l >= 0; l--) {
    const auto& L = lay_.layers[l];
    LayerActs& A = acts_[l];
    // Feed-forward: x_out = x_mid + W_down (silu(W_gate xn2) * W_up xn2).
    matmul_back(dh_.data(), false, dx_.data(), A.h.data(), L.w_down, D, H, N);
    each_row(pool_, N, [&](int i) {
      swiglu_backward_simd(&dg_[(size_t)i * H], &du_[(size_t)i * H], &dh_[(size_t)i * H], &A.g[(size_t)i * H],
                           &A.u[(size_t)i * H], H);
    });
    matmul_back(dxn_.data(), false, dg_.data(), A.xn2.data(), L.w_gate, H, D, N);
    matmul_back(dxn_.data(), true, du_.data(), A.xn2.data(), L.w_up, H, D, N);
    norm_rows_back(A.x_mid, L.ffn_norm, N);
    // Attention: x_mid = x_in + W_o attention(rope(W_q xn1), rope(W_k xn1), W_v xn1).
    matmul_back(datt_.data(), false, dx_.data(), A.att.data(), L.wo, D, qd, N);
    const AttnKind kind = c.attn_of(l);
    if (kind == AttnKind::Additive) additive_backward(l, B, T);
    else
      pool_->parallel_for(B * c.n_kv_heads, 1, [&](int u0, int u1, int) {
        for (int u = u0; u < u1; u++) {
          const int b = u / c.n_kv_heads, g = u % c.n_kv_heads;
          AttentionBackwardArgs a;
          sequence_args(a, c, A.q.data(), A.k.data(), A.v.data(), b, T);
          a.n = T;
          a.probs = A.probs.data() + (size_t)b * c.n_heads * T * T;
          a.out = A.att.data() + (size_t)b * T * qd;
          a.dout = datt_.data() + (size_t)b * T * qd;
          a.dq = dq_.data() + (size_t)b * T * qd;
          a.dk = dk_.data() + (size_t)b * T * kvd;
          a.dv = dv_.data() + (size_t)b * T * kvd;
          if (kind == AttnKind::BlockSparse) attention_block_sparse_backward(a, c.sparse, g, g + 1);
          else attention_backward_simd(a, g, g + 1);
        }
      });
    each_row(pool_, N, [&](int i) {
      const int t = i % T;
      rope_adjacent_backward_simd(&dq_[(size_t)i * qd], c.n_heads, hd, c.rot_dims(), &rope_cos_[t * half],
                                  &rope_sin_[t * half]);
      rope_adjacent_backward_simd(&dk_[(size_t)i * kvd], c.n_kv_heads, hd, c.rot_dims(), &rope_cos_[t * half],
                                  &rope_sin_[t * half]);
    });
    matmul_back(dxn_.data(), false, dq_.data(), A.xn1.data(), L.wq, qd, D, N);
    matmul_back(dxn_.data(), true, dk_.data(), A.xn1.data(), L.wk, kvd, D, N);
    matmul_back(dxn_.data(), true, dv_.data(), A.xn1.data(), L.wv, kvd, D, N);
    norm_rows_back(A.x_in, L.attn_norm, N);
  }
  // Embedding rows, in token order (a fixed summation order for repeated tokens).
  for (int i = 0; i < N; i++) {
    float* ge = G + lay_.tok_embed + (int64_t)inputs_[i] * D;
    add_f32_simd(ge, &dx_[(size_t)i * D], D);
  }
}

LoadedModel TrainModel::view() const {
  LoadedModel m;
  m.config = c_;
  const float* P = params_.data();
  auto t = [&](int64_t off, int64_t rows, int64_t cols) {
    Tensor w;
    w.type = DType::F32;
    w.data = P + off;
    w.rows = rows;
    w.cols = cols;
    return w;
  };
  const int64_t d = c_.dim, q = c_.q_dim(), kv = c_.kv_dim(), h = c_.hidden_dim;
  ModelWeights& w = m.weights;
  w.tok_embed = t(lay_.tok_embed, c_.vocab_size, d);
  for (const auto& L : lay_.layers) {
    LayerWeights lw;
    lw.attn_norm = P + L.attn_norm;
    lw.wq = t(L.wq, q, d);
    lw.wk = t(L.wk, kv, d);
    lw.wv = t(L.wv, kv, d);
    lw.wo = t(L.wo, d, q);
    lw.ffn_norm = P + L.ffn_norm;
    lw.w_gate = t(L.w_gate, h, d);
    lw.w_down = t(L.w_down, d, h);
    lw.w_up = t(L.w_up, h, d);
    if (L.add_wq >= 0) lw.additive = {P + L.add_wq, P + L.add_wk, P + L.add_v};
    w.layers.push_back(lw);
  }
  w.final_norm = P + lay_.final_norm;
  w.classifier = w.tok_embed;
  return m;
}

double TrainModel::forward_flops(const ModelConfig& c, int B, int T) {
  const double N = (double)B * T, d = c.dim, q = c.q_dim(), kv = c.kv_dim(), h = c.hidden_dim;
  const double per_tok = d * (q + 2 * kv) + q * d + 3 * d * h;
  const double attn = (double)B * c.n_heads * c.head_dim * 2.0 * T * (T + 1) / 2.0;  // QK^T and PV, causal half
  return 2.0 * (c.n_layers * (N * per_tok) + c.n_layers * attn + N * d * c.vocab_size);
}

}  // namespace qkv
