// Training forward and backward of the ViT classifier (vit_model.h).
#include "vit_model.h"

#include <cmath>
#include <cstring>

#include "../common.h"
#include "../kernels/activation.h"
#include "../kernels/activation_backward.h"
#include "../kernels/attention_bias_backward.h"
#include "../kernels/norm.h"
#include "../kernels/norm_backward.h"
#include "rng.h"

namespace qkv {

static constexpr int64_t kMaxParams = 1ll << 27;

ModelConfig VitTrainShape::model_config() const {
  auto need = [](bool ok, const std::string& m) {
    if (!ok) fail(ErrorCode::BadArgument, "ViT shape: " + m);
  };
  need(channels == 3, "channels = " + std::to_string(channels) + "; clip GGUF files hold RGB (3 channels)");
  need(patch_size >= 1 && patch_size <= 64, "patch_size = " + std::to_string(patch_size) + " must be 1..64");
  need(image_size >= patch_size && image_size <= 1024 && image_size % patch_size == 0,
       "image_size = " + std::to_string(image_size) + " must be a multiple of patch_size " +
           std::to_string(patch_size) + ", at most 1024");
  need(patches() <= 4096, std::to_string(patches()) + " patches per image; at most 4096");
  need(dim > 0 && dim <= 4096, "dim = " + std::to_string(dim) + " must be 1..4096");
  need(n_heads > 0 && dim % n_heads == 0,
       "dim " + std::to_string(dim) + " is not a multiple of n_heads " + std::to_string(n_heads));
  need(hidden_dim > 0 && hidden_dim <= 16384, "hidden_dim = " + std::to_string(hidden_dim) + " must be 1..16384");
  need(n_layers > 0 && n_layers <= 64, "n_layers = " + std::to_string(n_layers) + " must be 1..64");
  need(n_classes >= 2 && n_classes <= 65536, std::to_string(n_classes) + " classes; must be 2..65536");
  ModelConfig c;
  c.arch = "clip";
  c.dim = dim;
  c.hidden_dim = hidden_dim;
  c.n_layers = n_layers;
  c.n_heads = c.n_kv_heads = n_heads;
  c.head_dim = dim / n_heads;
  c.vocab_size = 0;
  c.patch_size = patch_size;
  c.image_size = image_size;
  c.n_channels = channels;
  c.class_token = true;
  c.pooling = PoolKind::Cls;
  c.seq_len = rows();
  c.norm = NormKind::LayerNorm;
  c.norm_eps = norm_eps;
  c.pos = PosKind::Learned;
  c.causal = false;
  c.tied_classifier = false;
  c.ffn = FfnKind::GELU;
  c.validate();
  return c;
}

VitParamLayout::VitParamLayout(const VitTrainShape& s) {
  const int64_t d = s.dim, h = s.hidden_dim;
  int64_t off = 0;
  auto take = [&](int64_t n, bool decay) {
    const int64_t o = off;
    off += n;
    if (!decay) {
      if (!no_decay.empty() && no_decay.back().second == o) no_decay.back().second = off;
      else no_decay.push_back({o, off});
    }
    return o;
  };
  patch_w = take(d * s.patch_dim(), true);
  patch_b = take(d, false);
  cls = take(d, false);
  pos = take((int64_t)s.rows() * d, false);
  pre_w = take(d, false);
  pre_b = take(d, false);
  for (int l = 0; l < s.n_layers; l++) {
    Layer L;
    L.ln1_w = take(d, false);
    L.ln1_b = take(d, false);
    L.wq = take(d * d, true);
    L.bq = take(d, false);
    L.wk = take(d * d, true);
    L.bk = take(d, false);
    L.wv = take(d * d, true);
    L.bv = take(d, false);
    L.wo = take(d * d, true);
    L.bo = take(d, false);
    L.ln2_w = take(d, false);
    L.ln2_b = take(d, false);
    L.w_up = take(h * d, true);
    L.b_up = take(h, false);
    L.w_down = take(d * h, true);
    L.b_down = take(d, false);
    layers.push_back(L);
  }
  post_w = take(d, false);
  post_b = take(d, false);
  head_w = take((int64_t)s.n_classes * d, true);
  head_b = take(s.n_classes, false);
  total = off;
}

VitTrainModel::VitTrainModel(const VitTrainShape& s, ThreadPool* pool)
    : s_(s), lay_((s.model_config(), s)), pool_(pool) {
  if (lay_.total > kMaxParams)
    fail(ErrorCode::BadArgument, "ViT shape: " + std::to_string(lay_.total) +
                                     " parameters; the trainer takes at most " + std::to_string(kMaxParams));
  params_.assign(lay_.total, 0.0f);
  grads_.assign(lay_.total, 0.0f);
}

void VitTrainModel::init(uint64_t seed) {
  Rng rng(seed);
  std::fill(params_.begin(), params_.end(), 0.0f);
  const int64_t d = s_.dim, h = s_.hidden_dim;
  auto fill = [&](int64_t off, int64_t n, double sd) {
    for (int64_t i = 0; i < n; i++) params_[off + i] = (float)(rng.normal() * sd);
  };
  auto ones = [&](int64_t off) { std::fill(params_.begin() + off, params_.begin() + off + d, 1.0f); };
  const double res = 1.0 / std::sqrt(2.0 * s_.n_layers);
  fill(lay_.patch_w, d * s_.patch_dim(), 1.0 / std::sqrt((double)s_.patch_dim()));
  fill(lay_.cls, d, 0.02);
  fill(lay_.pos, (int64_t)s_.rows() * d, 0.02);
  ones(lay_.pre_w);
  for (const auto& L : lay_.layers) {
    ones(L.ln1_w);
    ones(L.ln2_w);
    fill(L.wq, d * d, 1.0 / std::sqrt((double)d));
    fill(L.wk, d * d, 1.0 / std::sqrt((double)d));
    fill(L.wv, d * d, 1.0 / std::sqrt((double)d));
    fill(L.wo, d * d, res / std::sqrt((double)d));
    fill(L.w_up, h * d, 1.0 / std::sqrt((double)d));
    fill(L.w_down, d * h, res / std::sqrt((double)h));
  }
  ones(lay_.post_w);
}

void VitTrainModel::zero_grads() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

static void grow(std::vector<float>& v, size_t n) {
  if (v.size() != n) v.assign(n, 0.0f);
}

void VitTrainModel::linear(float* y, const float* x, int64_t w, int64_t b, int rows, int cols, int n) {
  linear_forward(pool_, scratch_, y, x, params_.data() + w, rows, cols, n);
  const float* bias = params_.data() + b;
  for (int t = 0; t < n; t++)
    for (int r = 0; r < rows; r++) y[(int64_t)t * rows + r] += bias[r];
}

void VitTrainModel::linear_back(float* dx, bool acc, const float* dy, const float* x, int64_t w, int64_t b, int rows,
                                int cols, int n) {
  linear_backward(pool_, scratch_, dx, acc, dy, x, params_.data() + w, grads_.data() + w, rows, cols, n);
  float* db = grads_.data() + b;
  for (int t = 0; t < n; t++)
    for (int r = 0; r < rows; r++) db[r] += dy[(int64_t)t * rows + r];
}

void VitTrainModel::layernorm(float* y, const float* x, int64_t w, int64_t b, int n) {
  const int d = s_.dim;
  pool_->parallel_for(n, 64, [&](int r0, int r1, int) {
    for (int r = r0; r < r1; r++)
      layernorm_simd(y + (int64_t)r * d, x + (int64_t)r * d, &params_[w], &params_[b], d, s_.norm_eps);
  });
}

void VitTrainModel::layernorm_back(float* dx, const float* dy, const float* x, int64_t w, int64_t b, int n) {
  const int d = s_.dim;
  // Rows in order: dw and db are sums over every row.
  for (int r = 0; r < n; r++)
    layernorm_backward_simd(dx + (int64_t)r * d, &grads_[w], &grads_[b], dy + (int64_t)r * d, x + (int64_t)r * d,
                            &params_[w], d, s_.norm_eps);
}

static BiasAttentionArgs image_args(const VitTrainShape& s, int b, const float* q, const float* k, const float* v,
                                    float* out, float* probs) {
  const int R = s.rows(), D = s.dim;
  BiasAttentionArgs a;
  a.n_q = a.n_kv = R;
  a.n_heads = s.n_heads;
  a.head_dim = D / s.n_heads;
  const int64_t off = (int64_t)b * R * D;
  a.q = q + off;
  a.k = k + off;
  a.v = v + off;
  a.out = out + off;
  a.q_stride = a.kv_stride = a.out_stride = D;
  a.probs = probs + (int64_t)b * s.n_heads * R * R;
  a.scale = 1.0f / std::sqrt((float)a.head_dim);
  return a;
}

void VitTrainModel::attention(Acts& A, int B) {
  const int R = s_.rows();
  grow(A.probs, (size_t)B * s_.n_heads * R * R);
  grow(A.att, A.q.size());
  pool_->parallel_for(B, 1, [&](int b0, int b1, int) {
    for (int b = b0; b < b1; b++)
      bias_attention_simd(image_args(s_, b, A.q.data(), A.k.data(), A.v.data(), A.att.data(), A.probs.data()), 0,
                          s_.n_heads);
  });
}

void VitTrainModel::attention_back(Acts& A, const float* datt, float* dq, float* dk, float* dv, int B) {
  const int64_t RD = (int64_t)s_.rows() * s_.dim;
  pool_->parallel_for(B, 1, [&](int b0, int b1, int) {
    for (int b = b0; b < b1; b++) {
      BiasAttentionArgs a = image_args(s_, b, A.q.data(), A.k.data(), A.v.data(), A.att.data(), A.probs.data());
      a.dout = datt + b * RD;
      a.dq = dq + b * RD;
      a.dk = dk + b * RD;
      a.dv = dv + b * RD;
      bias_attention_backward_simd(a, 0, s_.n_heads);
    }
  });
}

double VitTrainModel::forward(const float* pixels, const int* labels, int B) {
  if (B <= 0) fail(ErrorCode::BadArgument, "ViT forward: a batch needs at least one image");
  const int S = s_.image_size, p = s_.patch_size, C = s_.channels, G = s_.grid(), np = s_.patches(), R = s_.rows();
  const int D = s_.dim, K = s_.patch_dim(), H = s_.hidden_dim, NC = s_.n_classes;
  const int N = B * R;
  B_ = B;
  if (labels) {
    for (int b = 0; b < B; b++)
      if (labels[b] < 0 || labels[b] >= NC)
        fail(ErrorCode::BadArgument,
             "ViT forward: label " + std::to_string(labels[b]) + " outside 0.." + std::to_string(NC - 1));
    labels_.assign(labels, labels + B);
  } else {
    labels_.clear();
  }
  // Unfold: patch (py, px) of image b -> one row in (channel, row, column) order (the kernel's).
  grow(patches_, (size_t)B * np * K);
  for (int b = 0; b < B; b++)
    for (int py = 0; py < G; py++)
      for (int px = 0; px < G; px++) {
        float* row = patches_.data() + ((int64_t)b * np + py * G + px) * K;
        for (int ch = 0; ch < C; ch++)
          for (int y = 0; y < p; y++)
            std::memcpy(row + (ch * p + y) * p, pixels + (((int64_t)b * C + ch) * S + py * p + y) * S + px * p,
                        p * sizeof(float));
      }
  grow(emb_, (size_t)B * np * D);
  linear(emb_.data(), patches_.data(), lay_.patch_w, lay_.patch_b, D, K, B * np);
  grow(x0_, (size_t)N * D);
  const float *cls = &params_[lay_.cls], *pos = &params_[lay_.pos];
  for (int b = 0; b < B; b++)
    for (int r = 0; r < R; r++) {
      float* xr = x0_.data() + ((int64_t)b * R + r) * D;
      const float* src = r == 0 ? cls : emb_.data() + ((int64_t)b * np + r - 1) * D;
      for (int d = 0; d < D; d++) xr[d] = src[d] + pos[(int64_t)r * D + d];
    }
  acts_.resize(s_.n_layers);
  grow(x_, (size_t)N * D);
  layernorm(x_.data(), x0_.data(), lay_.pre_w, lay_.pre_b, N);
  for (int l = 0; l < s_.n_layers; l++) {
    const auto& L = lay_.layers[l];
    Acts& A = acts_[l];
    A.x_in = x_;
    grow(A.xn1, (size_t)N * D);
    grow(A.q, (size_t)N * D);
    grow(A.k, (size_t)N * D);
    grow(A.v, (size_t)N * D);
    layernorm(A.xn1.data(), x_.data(), L.ln1_w, L.ln1_b, N);
    linear(A.q.data(), A.xn1.data(), L.wq, L.bq, D, D, N);
    linear(A.k.data(), A.xn1.data(), L.wk, L.bk, D, D, N);
    linear(A.v.data(), A.xn1.data(), L.wv, L.bv, D, D, N);
    attention(A, B);
    grow(A.x_mid, (size_t)N * D);
    linear(A.x_mid.data(), A.att.data(), L.wo, L.bo, D, D, N);
    for (size_t i = 0; i < A.x_mid.size(); i++) A.x_mid[i] += x_[i];
    grow(A.xn2, (size_t)N * D);
    layernorm(A.xn2.data(), A.x_mid.data(), L.ln2_w, L.ln2_b, N);
    grow(A.u, (size_t)N * H);
    linear(A.u.data(), A.xn2.data(), L.w_up, L.b_up, H, D, N);
    A.h = A.u;
    pool_->parallel_for(N, 64, [&](int r0, int r1, int) { gelu_simd(A.h.data() + (int64_t)r0 * H, (r1 - r0) * H); });
    linear(x_.data(), A.h.data(), L.w_down, L.b_down, D, H, N);
    for (size_t i = 0; i < x_.size(); i++) x_[i] += A.x_mid[i];
  }
  // Class-token pooling: the post-LayerNorm of each image's first row.
  grow(xc_, (size_t)B * D);
  for (int b = 0; b < B; b++) std::memcpy(&xc_[(size_t)b * D], &x_[(size_t)b * R * D], D * sizeof(float));
  grow(pooled_, (size_t)B * D);
  layernorm(pooled_.data(), xc_.data(), lay_.post_w, lay_.post_b, B);
  grow(logits_, (size_t)B * NC);
  linear(logits_.data(), pooled_.data(), lay_.head_w, lay_.head_b, NC, D, B);
  if (labels_.empty()) return 0.0;
  dlogits_ = logits_;
  return mean_cross_entropy(pool_, dlogits_.data(), NC, labels_.data(), B);
}

void VitTrainModel::backward() {
  if (labels_.empty() || B_ == 0)
    fail(ErrorCode::BadArgument, "ViT backward: no forward with labels to go back through");
  const int B = B_, np = s_.patches(), R = s_.rows(), D = s_.dim, K = s_.patch_dim(), H = s_.hidden_dim;
  const int NC = s_.n_classes, N = B * R;
  std::vector<float> dpooled((size_t)B * D), dxc((size_t)B * D, 0.0f);
  linear_back(dpooled.data(), false, dlogits_.data(), pooled_.data(), lay_.head_w, lay_.head_b, NC, D, B);
  layernorm_back(dxc.data(), dpooled.data(), xc_.data(), lay_.post_w, lay_.post_b, B);
  std::vector<float> dx((size_t)N * D, 0.0f), dh((size_t)N * H), dxn((size_t)N * D), dq((size_t)N * D),
      dk((size_t)N * D), dv((size_t)N * D), datt((size_t)N * D);
  for (int b = 0; b < B; b++) std::memcpy(&dx[(size_t)b * R * D], &dxc[(size_t)b * D], D * sizeof(float));
  for (int l = s_.n_layers - 1; l >= 0; l--) {
    const auto& L = lay_.layers[l];
    Acts& A = acts_[l];
    // x_out = x_mid + fc2(gelu(fc1(ln2(x_mid)))): dx is d x_out, and becomes d x_mid.
    linear_back(dh.data(), false, dx.data(), A.h.data(), L.w_down, L.b_down, D, H, N);
    pool_->parallel_for(N, 64, [&](int r0, int r1, int) {
      const int64_t o = (int64_t)r0 * H;
      gelu_backward_simd(dh.data() + o, dh.data() + o, A.u.data() + o, (r1 - r0) * H);
    });
    linear_back(dxn.data(), false, dh.data(), A.xn2.data(), L.w_up, L.b_up, H, D, N);
    layernorm_back(dx.data(), dxn.data(), A.x_mid.data(), L.ln2_w, L.ln2_b, N);
    // x_mid = x_in + out(attention(q, k, v of ln1(x_in))): dx becomes d x_in.
    linear_back(datt.data(), false, dx.data(), A.att.data(), L.wo, L.bo, D, D, N);
    std::fill(dq.begin(), dq.end(), 0.0f);
    std::fill(dk.begin(), dk.end(), 0.0f);
    std::fill(dv.begin(), dv.end(), 0.0f);
    attention_back(A, datt.data(), dq.data(), dk.data(), dv.data(), B);
    linear_back(dxn.data(), false, dq.data(), A.xn1.data(), L.wq, L.bq, D, D, N);
    linear_back(dxn.data(), true, dk.data(), A.xn1.data(), L.wk, L.bk, D, D, N);
    linear_back(dxn.data(), true, dv.data(), A.xn1.data(), L.wv, L.bv, D, D, N);
    layernorm_back(dx.data(), dxn.data(), A.x_in.data(), L.ln1_w, L.ln1_b, N);
  }
  std::vector<float> dx0((size_t)N * D, 0.0f);
  layernorm_back(dx0.data(), dx.data(), x0_.data(), lay_.pre_w, lay_.pre_b, N);
  // x0 row r of image b = (r == 0 ? class token : patch projection) + position r.
  float *dcls = &grads_[lay_.cls], *dpos = &grads_[lay_.pos];
  std::vector<float> demb((size_t)B * np * D);
  for (int b = 0; b < B; b++)
    for (int r = 0; r < R; r++) {
      const float* g = dx0.data() + ((int64_t)b * R + r) * D;
      for (int d = 0; d < D; d++) dpos[(int64_t)r * D + d] += g[d];
      if (r == 0)
        for (int d = 0; d < D; d++) dcls[d] += g[d];
      else std::memcpy(&demb[((size_t)b * np + r - 1) * D], g, D * sizeof(float));
    }
  linear_back(nullptr, false, demb.data(), patches_.data(), lay_.patch_w, lay_.patch_b, D, K, B * np);
}

}  // namespace qkv
