// Training forward and backward of the encoder-decoder model (encdec_model.h).
#include "encdec_model.h"

#include <cmath>
#include <cstring>

#include "../common.h"
#include "../kernels/activation.h"
#include "../kernels/activation_backward.h"
#include "../kernels/attention_additive.h"
#include "../kernels/attention_bias_backward.h"
#include "../kernels/matmul.h"
#include "../kernels/matmul_backward.h"
#include "../kernels/norm.h"
#include "../kernels/norm_backward.h"
#include "../kernels/optim.h"
#include "model.h"
#include "rng.h"

namespace qkv {

static constexpr int64_t kMaxParams = 1ll << 27;

ModelConfig EncDecTrainShape::model_config() const {
  auto need = [](bool ok, const std::string& m) {
    if (!ok) fail(ErrorCode::BadArgument, "encoder-decoder shape: " + m);
  };
  need(dim > 0 && dim <= 4096, "dim = " + std::to_string(dim) + " must be 1..4096");
  need(n_heads > 0 && dim % n_heads == 0,
       "dim " + std::to_string(dim) + " is not a multiple of n_heads " + std::to_string(n_heads));
  need(hidden_dim > 0 && hidden_dim <= 16384, "hidden_dim = " + std::to_string(hidden_dim) + " must be 1..16384");
  need(enc_layers > 0 && enc_layers <= 64, "enc_layers = " + std::to_string(enc_layers) + " must be 1..64");
  need(dec_layers > 0 && dec_layers <= 64, "dec_layers = " + std::to_string(dec_layers) + " must be 1..64");
  need(vocab > 3 && vocab <= 65536, "vocabulary of " + std::to_string(vocab) + " must be 4..65536");
  need(seq_len > 1 && seq_len <= 4096, "seq_len = " + std::to_string(seq_len) + " must be 2..4096");
  need(rel_buckets >= 4 && rel_buckets <= 256, "rel_buckets must be 4..256");
  need(decoder_start_id >= 0 && decoder_start_id < vocab, "decoder start token outside the vocabulary");
  need(additive_cross >= 0 && additive_cross <= 4096,
       "additive_cross = " + std::to_string(additive_cross) + " must be 0..4096");
  ModelConfig c;
  c.arch = "t5";
  c.dim = dim;
  c.hidden_dim = hidden_dim;
  c.n_layers = enc_layers;
  c.n_heads = c.n_kv_heads = n_heads;
  c.head_dim = dim / n_heads;
  c.vocab_size = vocab;
  c.seq_len = seq_len;
  c.norm = NormKind::RMSNorm;
  c.norm_eps = norm_eps;
  c.pos = PosKind::RelativeBucket;
  c.rel_buckets = rel_buckets;
  c.rel_max_distance = rel_max_distance;
  c.causal = false;
  c.ffn = FfnKind::ReLU;
  c.tied_classifier = true;
  c.additive_dim = additive_cross;
  c.validate();
  return c;
}

EncDecParamLayout::EncDecParamLayout(const EncDecTrainShape& s) {
  const int64_t d = s.dim, h = s.hidden_dim;
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
  tok_embed = take((int64_t)s.vocab * d);
  enc_bias = take((int64_t)s.rel_buckets * s.n_heads);
  dec_bias = take((int64_t)s.rel_buckets * s.n_heads);
  auto layer = [&](bool dec) {
    Layer L;
    L.attn_norm = norm();
    L.wq = take(d * d);
    L.wk = take(d * d);
    L.wv = take(d * d);
    L.wo = take(d * d);
    if (dec) {
      L.cross_norm = norm();
      L.cq = take(d * d);
      L.ck = take(d * d);
      L.cv = take(d * d);
      L.co = take(d * d);
      if (s.additive_cross > 0) {
        const int64_t rows = (int64_t)s.n_heads * s.additive_cross, hd = s.dim / s.n_heads;
        L.cadd_wq = take(rows * hd);
        L.cadd_wk = take(rows * hd);
        L.cadd_v = take(rows);
      }
    }
    L.ffn_norm = norm();
    L.w_up = take(h * d);
    L.w_down = take(d * h);
    return L;
  };
  for (int l = 0; l < s.enc_layers; l++) enc.push_back(layer(false));
  for (int l = 0; l < s.dec_layers; l++) dec.push_back(layer(true));
  enc_norm = norm();
  dec_norm = norm();
  total = off;
}

EncDecTrainModel::EncDecTrainModel(const EncDecTrainShape& s, ThreadPool* pool)
    : s_(s), lay_((s.model_config(), s)), pool_(pool) {
  // Weights, gradients and two AdamW moments: 16 bytes a parameter.
  if (lay_.total > kMaxParams)
    fail(ErrorCode::BadArgument, "encoder-decoder shape: " + std::to_string(lay_.total) +
                                     " parameters; the trainer takes at most " + std::to_string(kMaxParams) +
                                     " (dim, hidden_dim or the layer counts are too large)");
  params_.assign(lay_.total, 0.0f);
  grads_.assign(lay_.total, 0.0f);
}

void EncDecTrainModel::init(uint64_t seed) {
  Rng rng(seed);
  std::fill(params_.begin(), params_.end(), 0.0f);
  for (auto [b, e] : lay_.norms)
    for (int64_t i = b; i < e; i++) params_[i] = 1.0f;
  const int64_t d = s_.dim, h = s_.hidden_dim;
  const int hd = s_.dim / s_.n_heads;
  const float res = 1.0f / std::sqrt(2.0f * (s_.enc_layers + s_.dec_layers));
  auto fill = [&](int64_t off, int64_t n, double sd) {
    for (int64_t i = 0; i < n; i++) params_[off + i] = (float)(rng.normal() * sd);
  };
  fill(lay_.tok_embed, (int64_t)s_.vocab * d, 1.0 / std::sqrt((double)d));
  auto layer = [&](const EncDecParamLayout::Layer& L, bool dec) {
    fill(L.wq, d * d, 1.0 / std::sqrt((double)d * hd));
    fill(L.wk, d * d, 1.0 / std::sqrt((double)d));
    fill(L.wv, d * d, 1.0 / std::sqrt((double)d));
    fill(L.wo, d * d, res / std::sqrt((double)d));
    if (dec) {
      fill(L.cq, d * d, 1.0 / std::sqrt((double)d * hd));
      fill(L.ck, d * d, 1.0 / std::sqrt((double)d));
      fill(L.cv, d * d, 1.0 / std::sqrt((double)d));
      fill(L.co, d * d, res / std::sqrt((double)d));
      if (L.cadd_wq >= 0) {  // tanh inputs of order one, scores near zero: uniform alignments at first
        const int64_t rows = (int64_t)s_.n_heads * s_.additive_cross;
        fill(L.cadd_wq, rows * hd, 1.0 / std::sqrt((double)hd));
        fill(L.cadd_wk, rows * hd, 1.0 / std::sqrt((double)hd));
        fill(L.cadd_v, rows, 1.0 / std::sqrt((double)s_.additive_cross));
      }
    }
    fill(L.w_up, h * d, 1.0 / std::sqrt((double)d));
    fill(L.w_down, d * h, res / std::sqrt((double)h));
  };
  for (const auto& L : lay_.enc) layer(L, false);
  for (const auto& L : lay_.dec) layer(L, true);
}

uint64_t EncDecTrainModel::relu_pattern() const {
  uint64_t h = 1469598103934665603ull;
  for (const auto* stack : {&enc_, &dec_})
    for (const Acts& A : *stack)
      for (float u : A.u) h = (h ^ (uint64_t)(u > 0.0f)) * 1099511628211ull;
  return h;
}

void EncDecTrainModel::zero_grads() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

static void grow(std::vector<float>& v, size_t n) {
  if (v.size() != n) v.assign(n, 0.0f);
}

void EncDecTrainModel::matmul(float* y, const float* x, int64_t w_off, int rows, int cols, int n) {
  linear_forward(pool_, scratch_, y, x, params_.data() + w_off, rows, cols, n);
}

void EncDecTrainModel::matmul_back(float* dx, bool acc, const float* dy, const float* x, int64_t w_off, int rows,
                                   int cols, int n) {
  linear_backward(pool_, scratch_, dx, acc, dy, x, params_.data() + w_off, grads_.data() + w_off, rows, cols, n);
}

void EncDecTrainModel::norm_rows(std::vector<float>& y, const std::vector<float>& x, int64_t w_off, int n) {
  rmsnorm_rows(y, x, &params_[w_off], s_.dim, s_.norm_eps, n);
}

void EncDecTrainModel::norm_back(float* dx, const float* dy, const std::vector<float>& x, int64_t w_off, int n) {
  rmsnorm_rows_backward(dx, &grads_[w_off], dy, x.data(), &params_[w_off], s_.dim, s_.norm_eps, n);
}

namespace {
struct Span {
  int q_off, q_len, k_off, k_len;
  int64_t p_off;
  std::vector<int> bucket;
};
}  // namespace

// The per-example spans of an attention kind over the packed batch, with bucket tables.
static std::vector<Span> spans_of(int kind, const std::vector<int>& src_off, const std::vector<int>& src_len,
                                  const std::vector<int>& tgt_off, const std::vector<int>& tgt_len,
                                  const EncDecTrainShape& s, int64_t* total) {
  std::vector<Span> out;
  int64_t p = 0;
  for (size_t b = 0; b < src_off.size(); b++) {
    Span sp;
    if (kind == 0) sp = {src_off[b], src_len[b], src_off[b], src_len[b], p, {}};
    else if (kind == 1) sp = {tgt_off[b], tgt_len[b], tgt_off[b], tgt_len[b], p, {}};
    else sp = {tgt_off[b], tgt_len[b], src_off[b], src_len[b], p, {}};
    if (kind != 2) {
      sp.bucket.resize(sp.q_len + sp.k_len - 1);
      for (int r = -(sp.q_len - 1); r < sp.k_len; r++)
        sp.bucket[r + sp.q_len - 1] = relative_position_bucket(r, s.rel_buckets, s.rel_max_distance, kind == 0);
    }
    p += (int64_t)s.n_heads * sp.q_len * sp.k_len;
    out.push_back(std::move(sp));
  }
  *total = p;
  return out;
}

// The forward arguments of one example's attention (a span of queries over its keys), shared by
// the forward and backward passes.
static BiasAttentionArgs span_args(const Span& sp, int dim, int n_heads, bool causal, const float* bias, const float* q,
                                   const float* k, const float* v, const float* out, const float* probs) {
  BiasAttentionArgs a;
  a.n_q = sp.q_len;
  a.n_kv = sp.k_len;
  a.n_heads = n_heads;
  a.head_dim = dim / n_heads;
  a.q = q + (int64_t)sp.q_off * dim;
  a.k = k + (int64_t)sp.k_off * dim;
  a.v = v + (int64_t)sp.k_off * dim;
  a.q_stride = a.kv_stride = a.out_stride = dim;
  a.out = const_cast<float*>(out) + (int64_t)sp.q_off * dim;
  a.probs = const_cast<float*>(probs) + sp.p_off;
  a.scale = 1.0f;
  a.causal = causal;
  a.bias = bias;
  a.bucket = bias ? sp.bucket.data() : nullptr;
  return a;
}

void EncDecTrainModel::attention(Kind kind, const float* q, const float* k, const float* v, float* out,
                                 std::vector<float>& probs) {
  int64_t total = 0;
  const std::vector<Span> spans = spans_of((int)kind, src_off_, src_len_, tgt_off_, tgt_len_, s_, &total);
  grow(probs, (size_t)total);
  const float* bias = kind == Kind::EncSelf   ? &params_[lay_.enc_bias]
                      : kind == Kind::DecSelf ? &params_[lay_.dec_bias]
                                              : nullptr;
  pool_->parallel_for(s_.n_heads, 1, [&](int h0, int h1, int) {
    for (const Span& sp : spans) {
      BiasAttentionArgs a = span_args(sp, s_.dim, s_.n_heads, kind == Kind::DecSelf, bias, q, k, v, out, probs.data());
      bias_attention_simd(a, h0, h1);
    }
  });
}

void EncDecTrainModel::attention_back(Kind kind, const float* q, const float* k, const float* v, const float* out,
                                      const float* probs, const float* dout, float* dq, float* dk, float* dv) {
  int64_t total = 0;
  const std::vector<Span> spans = spans_of((int)kind, src_off_, src_len_, tgt_off_, tgt_len_, s_, &total);
  const int D = s_.dim;
  const float* bias = kind == Kind::EncSelf   ? &params_[lay_.enc_bias]
                      : kind == Kind::DecSelf ? &params_[lay_.dec_bias]
                                              : nullptr;
  float* dbias = kind == Kind::EncSelf   ? &grads_[lay_.enc_bias]
                 : kind == Kind::DecSelf ? &grads_[lay_.dec_bias]
                                         : nullptr;
  pool_->parallel_for(s_.n_heads, 1, [&](int h0, int h1, int) {
    for (const Span& sp : spans) {
      BiasAttentionArgs a = span_args(sp, D, s_.n_heads, kind == Kind::DecSelf, bias, q, k, v, out, probs);
      a.dout = dout + (int64_t)sp.q_off * D;
      a.dq = dq + (int64_t)sp.q_off * D;
      a.dk = dk + (int64_t)sp.k_off * D;
      a.dv = dv + (int64_t)sp.k_off * D;
      a.dbias = dbias;
      bias_attention_backward_simd(a, h0, h1);
    }
  });
}

// The additive kernel's arguments for head h of one example's cross-attention span.
static AdditiveAttentionArgs additive_span_args(const Span& sp, const EncDecTrainShape& s, const float* P,
                                                const EncDecParamLayout::Layer& L, int h, const float* q,
                                                const float* k, const float* v, const float* out, const float* probs) {
  const int D = s.dim, hd = D / s.n_heads, da = s.additive_cross;
  AdditiveAttentionArgs a;
  a.n_q = sp.q_len;
  a.n_kv = sp.k_len;
  a.d_q = a.d_k = a.d_v = hd;
  a.d_att = da;
  a.q = q + (int64_t)sp.q_off * D + (int64_t)h * hd;
  a.k = k + (int64_t)sp.k_off * D + (int64_t)h * hd;
  a.values = v + (int64_t)sp.k_off * D + (int64_t)h * hd;
  a.q_stride = a.k_stride = a.values_stride = a.out_stride = D;
  a.w_q = P + L.cadd_wq + (int64_t)h * da * hd;
  a.w_k = P + L.cadd_wk + (int64_t)h * da * hd;
  a.v = P + L.cadd_v + (int64_t)h * da;
  a.out = const_cast<float*>(out) + (int64_t)sp.q_off * D + (int64_t)h * hd;
  a.probs = const_cast<float*>(probs) + sp.p_off + (int64_t)h * sp.q_len * sp.k_len;
  return a;
}

void EncDecTrainModel::additive_cross(const EncDecParamLayout::Layer& L, const float* q, const float* k, const float* v,
                                      float* out, std::vector<float>& probs) {
  int64_t total = 0;
  const std::vector<Span> spans = spans_of(2, src_off_, src_len_, tgt_off_, tgt_len_, s_, &total);
  grow(probs, (size_t)total);
  pool_->parallel_for(s_.n_heads, 1, [&](int h0, int h1, int) {
    for (const Span& sp : spans)
      for (int h = h0; h < h1; h++)
        attention_additive_simd(additive_span_args(sp, s_, params_.data(), L, h, q, k, v, out, probs.data()));
  });
}

void EncDecTrainModel::additive_cross_back(const EncDecParamLayout::Layer& L, const float* q, const float* k,
                                           const float* v, const float* out, const float* probs, const float* dout,
                                           float* dq, float* dk, float* dv) {
  int64_t total = 0;
  const std::vector<Span> spans = spans_of(2, src_off_, src_len_, tgt_off_, tgt_len_, s_, &total);
  const int D = s_.dim, hd = D / s_.n_heads, da = s_.additive_cross;
  const int64_t nw = (int64_t)da * hd;
  // Each head owns its parameters' gradient rows and its columns of dq, dk, dv: heads split freely.
  pool_->parallel_for(s_.n_heads, 1, [&](int h0, int h1, int) {
    std::vector<float> g(2 * nw + da);
    for (int h = h0; h < h1; h++)
      for (const Span& sp : spans) {
        const AdditiveAttentionArgs a = additive_span_args(sp, s_, params_.data(), L, h, q, k, v, out, probs);
        AdditiveAttentionGrads gr;
        gr.probs = a.probs;
        gr.out = a.out;
        gr.dout = dout + (int64_t)sp.q_off * D + (int64_t)h * hd;
        gr.dq = dq + (int64_t)sp.q_off * D + (int64_t)h * hd;
        gr.dk = dk + (int64_t)sp.k_off * D + (int64_t)h * hd;
        gr.dvalues = dv + (int64_t)sp.k_off * D + (int64_t)h * hd;
        gr.dw_q = g.data();
        gr.dw_k = g.data() + nw;
        gr.dv = g.data() + 2 * nw;
        attention_additive_backward_simd(a, gr);
        add_f32_simd(&grads_[L.cadd_wq + h * nw], g.data(), (int)nw);
        add_f32_simd(&grads_[L.cadd_wk + h * nw], g.data() + nw, (int)nw);
        add_f32_simd(&grads_[L.cadd_v + (int64_t)h * da], g.data() + 2 * nw, da);
      }
  });
}

void EncDecTrainModel::layer_forward(Acts& A, const EncDecParamLayout::Layer& L, std::vector<float>& x, bool dec) {
  const int D = s_.dim, F = s_.hidden_dim, n = dec ? Nt_ : Ns_;
  std::vector<float> tmp((size_t)n * D);
  A.x_in = x;
  norm_rows(A.xn1, x, L.attn_norm, n);
  grow(A.q, (size_t)n * D);
  grow(A.k, (size_t)n * D);
  grow(A.v, (size_t)n * D);
  grow(A.att, (size_t)n * D);
  matmul(A.q.data(), A.xn1.data(), L.wq, D, D, n);
  matmul(A.k.data(), A.xn1.data(), L.wk, D, D, n);
  matmul(A.v.data(), A.xn1.data(), L.wv, D, D, n);
  attention(dec ? Kind::DecSelf : Kind::EncSelf, A.q.data(), A.k.data(), A.v.data(), A.att.data(), A.probs);
  matmul(tmp.data(), A.att.data(), L.wo, D, D, n);
  for (size_t i = 0; i < x.size(); i++) x[i] += tmp[i];
  if (dec) {
    A.x_a = x;
    norm_rows(A.xnc, x, L.cross_norm, n);
    grow(A.cq, (size_t)n * D);
    grow(A.ck, (size_t)Ns_ * D);
    grow(A.cv, (size_t)Ns_ * D);
    grow(A.catt, (size_t)n * D);
    matmul(A.cq.data(), A.xnc.data(), L.cq, D, D, n);
    matmul(A.ck.data(), enc_out_.data(), L.ck, D, D, Ns_);
    matmul(A.cv.data(), enc_out_.data(), L.cv, D, D, Ns_);
    if (L.cadd_wq >= 0) additive_cross(L, A.cq.data(), A.ck.data(), A.cv.data(), A.catt.data(), A.cprobs);
    else attention(Kind::Cross, A.cq.data(), A.ck.data(), A.cv.data(), A.catt.data(), A.cprobs);
    matmul(tmp.data(), A.catt.data(), L.co, D, D, n);
    for (size_t i = 0; i < x.size(); i++) x[i] += tmp[i];
  }
  A.x_b = x;
  norm_rows(A.xn2, x, L.ffn_norm, n);
  grow(A.u, (size_t)n * F);
  matmul(A.u.data(), A.xn2.data(), L.w_up, F, D, n);
  A.h = A.u;
  for (int i = 0; i < n; i++) relu_simd(&A.h[(size_t)i * F], F);
  matmul(tmp.data(), A.h.data(), L.w_down, D, F, n);
  for (size_t i = 0; i < x.size(); i++) x[i] += tmp[i];
}

void EncDecTrainModel::layer_backward(Acts& A, const EncDecParamLayout::Layer& L, std::vector<float>& dx, bool dec) {
  const int D = s_.dim, F = s_.hidden_dim, n = dec ? Nt_ : Ns_;
  std::vector<float> dh((size_t)n * F), du((size_t)n * F), dxn((size_t)n * D), datt((size_t)n * D);
  // Feed-forward.
  matmul_back(dh.data(), false, dx.data(), A.h.data(), L.w_down, D, F, n);
  for (int i = 0; i < n; i++) relu_backward_simd(&du[(size_t)i * F], &dh[(size_t)i * F], &A.u[(size_t)i * F], F);
  matmul_back(dxn.data(), false, du.data(), A.xn2.data(), L.w_up, F, D, n);
  norm_back(dx.data(), dxn.data(), A.x_b, L.ffn_norm, n);
  // Cross-attention: gradients reach the encoder output through its keys and values.
  if (dec) {
    std::vector<float> dq((size_t)n * D, 0.0f), dk((size_t)Ns_ * D, 0.0f), dv((size_t)Ns_ * D, 0.0f);
    matmul_back(datt.data(), false, dx.data(), A.catt.data(), L.co, D, D, n);
    if (L.cadd_wq >= 0)
      additive_cross_back(L, A.cq.data(), A.ck.data(), A.cv.data(), A.catt.data(), A.cprobs.data(), datt.data(),
                          dq.data(), dk.data(), dv.data());
    else
      attention_back(Kind::Cross, A.cq.data(), A.ck.data(), A.cv.data(), A.catt.data(), A.cprobs.data(), datt.data(),
                     dq.data(), dk.data(), dv.data());
    matmul_back(dxn.data(), false, dq.data(), A.xnc.data(), L.cq, D, D, n);
    matmul_back(denc_out_.data(), true, dk.data(), enc_out_.data(), L.ck, D, D, Ns_);
    matmul_back(denc_out_.data(), true, dv.data(), enc_out_.data(), L.cv, D, D, Ns_);
    norm_back(dx.data(), dxn.data(), A.x_a, L.cross_norm, n);
  }
  // Self-attention.
  std::vector<float> dq((size_t)n * D, 0.0f), dk((size_t)n * D, 0.0f), dv((size_t)n * D, 0.0f);
  matmul_back(datt.data(), false, dx.data(), A.att.data(), L.wo, D, D, n);
  attention_back(dec ? Kind::DecSelf : Kind::EncSelf, A.q.data(), A.k.data(), A.v.data(), A.att.data(), A.probs.data(),
                 datt.data(), dq.data(), dk.data(), dv.data());
  matmul_back(dxn.data(), false, dq.data(), A.xn1.data(), L.wq, D, D, n);
  matmul_back(dxn.data(), true, dk.data(), A.xn1.data(), L.wk, D, D, n);
  matmul_back(dxn.data(), true, dv.data(), A.xn1.data(), L.wv, D, D, n);
  norm_back(dx.data(), dxn.data(), A.x_in, L.attn_norm, n);
}

double EncDecTrainModel::forward(const std::vector<std::vector<int>>& sources,
                                 const std::vector<std::vector<int>>& targets) {
  if (sources.empty() || sources.size() != targets.size())
    fail(ErrorCode::BadArgument, "a batch needs as many targets as sources, at least one");
  const int D = s_.dim, V = s_.vocab;
  src_ids_.clear();
  dec_in_.clear();
  dec_out_.clear();
  src_off_.clear();
  src_len_.clear();
  tgt_off_.clear();
  tgt_len_.clear();
  auto check = [&](const std::vector<int>& ids, const char* what) {
    if (ids.empty() || (int)ids.size() > s_.seq_len)
      fail(ErrorCode::BadArgument, std::string("a ") + what + " of " + std::to_string(ids.size()) +
                                       " tokens: must be 1.." + std::to_string(s_.seq_len));
    for (int t : ids)
      if (t < 0 || t >= V)
        fail(ErrorCode::BadArgument,
             "token id " + std::to_string(t) + " outside the vocabulary of " + std::to_string(V));
  };
  for (size_t b = 0; b < sources.size(); b++) {
    check(sources[b], "source");
    check(targets[b], "target");
    src_off_.push_back((int)src_ids_.size());
    src_len_.push_back((int)sources[b].size());
    src_ids_.insert(src_ids_.end(), sources[b].begin(), sources[b].end());
    tgt_off_.push_back((int)dec_in_.size());
    tgt_len_.push_back((int)targets[b].size());
    dec_in_.push_back(s_.decoder_start_id);
    dec_in_.insert(dec_in_.end(), targets[b].begin(), targets[b].end() - 1);
    dec_out_.insert(dec_out_.end(), targets[b].begin(), targets[b].end());
  }
  Ns_ = (int)src_ids_.size();
  Nt_ = (int)dec_in_.size();
  auto embed = [&](const std::vector<int>& ids) {
    std::vector<float> x(ids.size() * D);
    for (size_t i = 0; i < ids.size(); i++)
      std::memcpy(&x[i * D], &params_[lay_.tok_embed + (int64_t)ids[i] * D], D * sizeof(float));
    return x;
  };
  enc_.resize(s_.enc_layers);
  dec_.resize(s_.dec_layers);
  std::vector<float> x = embed(src_ids_);
  for (int l = 0; l < s_.enc_layers; l++) layer_forward(enc_[l], lay_.enc[l], x, false);
  enc_x_ = x;
  norm_rows(enc_out_, enc_x_, lay_.enc_norm, Ns_);
  x = embed(dec_in_);
  for (int l = 0; l < s_.dec_layers; l++) layer_forward(dec_[l], lay_.dec[l], x, true);
  dec_x_ = x;
  norm_rows(xf_, dec_x_, lay_.dec_norm, Nt_);
  grow(dlogits_, (size_t)Nt_ * V);
  matmul(dlogits_.data(), xf_.data(), lay_.tok_embed, V, D, Nt_);
  return mean_cross_entropy(pool_, dlogits_.data(), V, dec_out_.data(), Nt_);
}

void EncDecTrainModel::backward() {
  QKV_CHECK(Nt_ > 0, "backward() before forward()");
  const int D = s_.dim, V = s_.vocab;
  std::vector<float> dxf((size_t)Nt_ * D), dx((size_t)Nt_ * D, 0.0f);
  matmul_back(dxf.data(), false, dlogits_.data(), xf_.data(), lay_.tok_embed, V, D, Nt_);
  norm_back(dx.data(), dxf.data(), dec_x_, lay_.dec_norm, Nt_);
  denc_out_.assign((size_t)Ns_ * D, 0.0f);
  for (int l = s_.dec_layers - 1; l >= 0; l--) layer_backward(dec_[l], lay_.dec[l], dx, true);
  float* G = grads_.data();
  for (int i = 0; i < Nt_; i++) add_f32_simd(G + lay_.tok_embed + (int64_t)dec_in_[i] * D, &dx[(size_t)i * D], D);
  std::vector<float> dxe((size_t)Ns_ * D, 0.0f);
  norm_back(dxe.data(), denc_out_.data(), enc_x_, lay_.enc_norm, Ns_);
  for (int l = s_.enc_layers - 1; l >= 0; l--) layer_backward(enc_[l], lay_.enc[l], dxe, false);
  for (int i = 0; i < Ns_; i++) add_f32_simd(G + lay_.tok_embed + (int64_t)src_ids_[i] * D, &dxe[(size_t)i * D], D);
}

EncDecModelData EncDecTrainModel::view() const {
  EncDecModelData m;
  m.config = s_.model_config();
  m.encdec.n_dec_layers = s_.dec_layers;
  m.encdec.decoder_start_id = s_.decoder_start_id;
  m.config.attn_scale = 1.0f;
  if (s_.additive_cross > 0) m.encdec.cross_attn.assign(s_.dec_layers, AttnKind::Additive);
  const float* P = params_.data();
  const int64_t d = s_.dim, h = s_.hidden_dim;
  auto t = [&](int64_t off, int64_t rows, int64_t cols) {
    Tensor w;
    w.type = DType::F32;
    w.data = P + off;
    w.rows = rows;
    w.cols = cols;
    return w;
  };
  EncDecWeights& w = m.weights;
  w.tok_embed = t(lay_.tok_embed, s_.vocab, d);
  auto layer = [&](const EncDecParamLayout::Layer& L, bool dec, int l) {
    EncDecLayerWeights o;
    o.attn_norm = P + L.attn_norm;
    o.wq = t(L.wq, d, d);
    o.wk = t(L.wk, d, d);
    o.wv = t(L.wv, d, d);
    o.wo = t(L.wo, d, d);
    if (l == 0) o.rel_bias = P + (dec ? lay_.dec_bias : lay_.enc_bias);
    if (dec) {
      o.cross_norm = P + L.cross_norm;
      o.cq = t(L.cq, d, d);
      o.ck = t(L.ck, d, d);
      o.cv = t(L.cv, d, d);
      o.co = t(L.co, d, d);
      if (L.cadd_wq >= 0) o.cross_add = {P + L.cadd_wq, P + L.cadd_wk, P + L.cadd_v};
    }
    o.ffn_norm = P + L.ffn_norm;
    o.w_up = t(L.w_up, h, d);
    o.w_down = t(L.w_down, d, h);
    return o;
  };
  for (int l = 0; l < s_.enc_layers; l++) w.enc.push_back(layer(lay_.enc[l], false, l));
  for (int l = 0; l < s_.dec_layers; l++) w.dec.push_back(layer(lay_.dec[l], true, l));
  w.enc_norm = P + lay_.enc_norm;
  w.dec_norm = P + lay_.dec_norm;
  w.classifier = w.tok_embed;
  return m;
}

}  // namespace qkv
