// The shared model building blocks (blocks.h).
#include "blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "../common.h"
#include "../kernels/activation.h"
#include "../kernels/matmul.h"
#include "../kernels/norm.h"
#include "../kernels/softmax.h"

namespace qkv {

void norm_rows(const ModelConfig& c, float* y, const float* x, const float* w, const float* b, int n) {
  for (int t = 0; t < n; t++) {
    if (c.norm == NormKind::RMSNorm) rmsnorm_simd(y + (int64_t)t * c.dim, x + (int64_t)t * c.dim, w, c.dim, c.norm_eps);
    else layernorm_simd(y + (int64_t)t * c.dim, x + (int64_t)t * c.dim, w, b, c.dim, c.norm_eps);
  }
}

void residual_add(const ModelConfig& c, float* x, const float* out, const float* w, const float* b, int n) {
  for (int t = 0; t < n; t++) add_f32_simd(x + (int64_t)t * c.dim, out + (int64_t)t * c.dim, c.dim);
  if (c.post_norm) norm_rows(c, x, x, w, b, n);  // rows are independent: in place is safe
}

void add_sinusoidal(float* x, int dim, int pos) {
  for (int i = 0; i < dim; i += 2) {
    float a = (float)pos / std::pow(10000.0f, (float)i / (float)dim);
    x[i] += std::sin(a);
    if (i + 1 < dim) x[i + 1] += std::cos(a);
  }
}

void attend(const ModelConfig& c, AttnKind kind, const AdditiveWeights& w, const AttentionArgs& a, int h0, int h1) {
  switch (kind) {
    case AttnKind::Softmax: attention_flash(a, h0, h1); return;
    case AttnKind::Linear: attention_linear(a, h0, h1); return;
    case AttnKind::BlockSparse: attention_block_sparse(a, c.sparse, h0, h1); return;
    case AttnKind::Additive: break;
  }
  for (int h = h0; h < h1; h++) attention_additive_simd(additive_head_args(c, w, a, h));
}

AdditiveAttentionArgs additive_head_args(const ModelConfig& c, const AdditiveWeights& w, const AttentionArgs& a,
                                         int h) {
  const int hd = a.head_dim, da = c.additive_dim, g = h / (a.n_heads / a.n_kv_heads);
  AdditiveAttentionArgs d;
  d.n_q = a.n_q;
  d.n_kv = a.n_kv;
  d.d_q = d.d_k = d.d_v = hd;
  d.d_att = da;
  d.q = a.q + (int64_t)h * hd;
  d.q_stride = a.q_stride;
  d.k = a.k + (int64_t)g * hd;
  d.k_stride = a.kv_stride;
  d.values = a.v + (int64_t)g * hd;
  d.values_stride = a.kv_stride;
  d.w_q = w.wq + (int64_t)h * da * hd;
  d.w_k = w.wk + (int64_t)h * da * hd;
  d.v = w.v + (int64_t)h * da;
  d.out = a.out + (int64_t)h * hd;
  d.out_stride = a.out_stride;
  d.q_pos0 = a.q_pos0;
  d.causal = a.causal;
  d.key_valid = a.key_valid;
  if (a.probs) d.probs = a.probs + (int64_t)h * a.n_q * a.n_kv;
  return d;
}

void check_tokens(const int* tokens, int n, int vocab_size) {
  for (int i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= vocab_size)
      fail(ErrorCode::BadArgument, "token id " + std::to_string(tokens[i]) + " is outside the vocabulary (0.." +
                                       std::to_string(vocab_size - 1) + ")");
}

void ffn_hidden(ThreadPool& pool, ProductInput& in, FfnKind kind, const float* x, int dim, int n, const Tensor& w_up,
                const Tensor& w_gate, const float* b_up, int hidden, float* out, float* tmp) {
  const bool glu = kind == FfnKind::SwiGLU || kind == FfnKind::GeGLU;
  const auto glu_fn = kind == FfnKind::SwiGLU ? swiglu_simd : geglu_simd;
  if (glu) in.set(x, dim, n, {&w_up, &w_gate});
  else in.set(x, dim, n, {&w_up});
  for_rows(pool, (int64_t)hidden * dim * n * (glu ? 2 : 1), hidden, 16, n, [&](int r0, int r1, int) {
    if (glu) {
      in.rows(tmp, hidden, w_up, r0, r1);
      in.rows(out, hidden, w_gate, r0, r1);
    } else {
      in.rows(out, hidden, w_up, r0, r1);
    }
    for (int t = 0; t < n; t++) {
      float* o = out + (int64_t)t * hidden + r0;
      if (glu) {
        glu_fn(o, tmp + (int64_t)t * hidden + r0, r1 - r0);
        continue;
      }
      if (b_up) add_f32_simd(o, b_up + r0, r1 - r0);
      if (kind == FfnKind::GELU) gelu_simd(o, r1 - r0);
      else if (kind == FfnKind::QuickGELU) quick_gelu_simd(o, r1 - r0);
      else relu_simd(o, r1 - r0);
    }
  });
}

// Rows [r0, r0 + n) of a stacked matrix: a view (rows of any type are whole blocks).
static Tensor rows_view(const Tensor& t, int64_t r0, int64_t n) {
  Tensor v = t;
  v.data = static_cast<const uint8_t*>(t.data) + (size_t)r0 * t.row_bytes();
  v.rows = n;
  return v;
}

void moe_ffn(ThreadPool& pool, ProductInput& in, const ModelConfig& c, const LayerWeights& L, const float* x, int n,
             float* out, MoeScratch& s) {
  const int E = c.n_experts, K = c.n_experts_used, dim = c.dim, hid = c.hidden_dim;
  s.logits.resize((size_t)n * E);
  s.chosen.resize((size_t)n * K);
  s.weight.resize((size_t)n * K);
  stacked_products(pool, in, x, dim, n, {{s.logits.data(), E, &L.router}});
  std::vector<int> order(E);
  for (int t = 0; t < n; t++) {
    float* p = s.logits.data() + (int64_t)t * E;
    softmax_simd(p, E);
    for (int e = 0; e < E; e++) order[e] = e;
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [&](int a, int b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float sum = 0.0f;
    for (int k = 0; k < K; k++) {
      s.chosen[(size_t)t * K + k] = order[k];
      sum += s.weight[(size_t)t * K + k] = p[order[k]];
    }
    if (c.expert_norm_topk) {  // llama.cpp clamps the sum to f16's smallest normal
      const float d = std::max(sum, 6.103515625e-5f);
      for (int k = 0; k < K; k++) s.weight[(size_t)t * K + k] /= d;
    }
  }
  s.ye.resize((size_t)n * K * dim);
  s.xe.resize((size_t)n * dim);
  s.out.resize((size_t)n * dim);
  s.he.resize((size_t)n * hid);
  s.he2.resize((size_t)n * hid);
  for (int e = 0; e < E; e++) {
    s.rows.clear();  // (token, rank) slots that chose e
    for (int i = 0; i < n * K; i++)
      if (s.chosen[i] == e) s.rows.push_back(i);
    const int m = (int)s.rows.size();
    if (m == 0) continue;
    for (int r = 0; r < m; r++)
      std::memcpy(s.xe.data() + (int64_t)r * dim, x + (int64_t)(s.rows[r] / K) * dim, dim * sizeof(float));
    const Tensor gate = rows_view(L.gate_exps, (int64_t)e * hid, hid), up = rows_view(L.up_exps, (int64_t)e * hid, hid);
    const Tensor down = rows_view(L.down_exps, (int64_t)e * dim, dim);
    ffn_hidden(pool, in, FfnKind::SwiGLU, s.xe.data(), dim, m, up, gate, nullptr, hid, s.he.data(), s.he2.data());
    stacked_products(pool, in, s.he.data(), hid, m, {{s.out.data(), dim, &down}});
    for (int r = 0; r < m; r++) {
      float* y = s.ye.data() + (int64_t)s.rows[r] * dim;
      std::memcpy(y, s.out.data() + (int64_t)r * dim, dim * sizeof(float));
      scale_simd(y, s.weight[s.rows[r]], dim);
    }
  }
  for (int t = 0; t < n; t++) {
    float* o = out + (int64_t)t * dim;
    std::memcpy(o, s.ye.data() + (int64_t)t * K * dim, dim * sizeof(float));
    for (int k = 1; k < K; k++) add_f32_simd(o, s.ye.data() + ((int64_t)t * K + k) * dim, dim);
  }
}

void KvCache::init(int layers, int kv_dim, int context, int min_step) {
  k_.assign(layers, {});
  v_.assign(layers, {});
  cap_ = 0;
  low_ = layers;
  kv_dim_ = kv_dim;
  ctx_ = context;
  min_step_ = min_step;
}

void KvCache::reserve(int positions, int first) {
  const size_t lo = std::min((size_t)std::max(first, 0), k_.size());
  if (positions <= cap_ && lo >= low_) return;
  const int cap = positions <= cap_ ? cap_ : std::max({positions, std::min(ctx_, 2 * cap_), std::min(ctx_, min_step_)});
  const uint64_t per_layer = (uint64_t)cap * kv_dim_;
  try {
    for (size_t l = std::min(lo, low_); l < k_.size(); l++) {
      k_[l].resize(per_layer);
      v_[l].resize(per_layer);
    }
  } catch (const std::bad_alloc&) {
    fail(ErrorCode::OutOfMemory, "not enough memory to grow the KV cache to " + std::to_string(cap) + " positions (" +
                                     format_bytes(per_layer * (k_.size() - std::min(lo, low_)) * 2 * sizeof(float)) +
                                     "); use a smaller context");
  }
  cap_ = cap;
  low_ = std::min(lo, low_);
}

void AttentionRecord::start(int layers, int n_heads, int queries, int keys, uint64_t extra_bytes) {
  const uint64_t bytes = (uint64_t)layers * n_heads * queries * (uint64_t)keys * sizeof(float) + extra_bytes;
  if (bytes > (1ull << 30))
    fail(ErrorCode::OutOfMemory, "capturing attention for " + std::to_string(queries) + " queries over " +
                                     std::to_string(keys) + " keys would need " + format_bytes(bytes) +
                                     "; capture a shorter span");
  heads = n_heads;
  n_q = queries;
  n_kv = keys;
  data.assign((size_t)layers * n_heads * queries * keys, 0.0f);
}

void AttentionRecord::clear() {
  std::vector<float>().swap(data);  // no stale maps from an earlier captured call
  n_q = n_kv = 0;
}

void AttentionRecord::place(int l, const float* probs, int q0, int B, int keys) {
  for (int h = 0; h < heads; h++)
    for (int i = 0; i < B; i++)
      std::memcpy(data.data() + (((int64_t)l * heads + h) * n_q + q0 + i) * n_kv, probs + ((int64_t)h * B + i) * keys,
                  keys * sizeof(float));
}

}  // namespace qkv
