// Encoder-decoder forward: encoder (embeddings -> per layer bidirectional self-attention and
// feed-forward -> final norm) once per source, then every decoder layer's cross K/V from its
// output; decoder (embeddings -> per layer causal self-attention over the cache,
// cross-attention over the source, feed-forward -> final norm -> classifier) per target token.
#include "encdec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "../common.h"
#include "../kernels/activation.h"
#include "../kernels/attention.h"
#include "../kernels/matmul.h"
#include "../kernels/norm.h"
#include "../kernels/softmax.h"

namespace qkv {

static constexpr uint64_t kMaxCacheBytes = 16ull << 30;

int relative_position_bucket(int rel, int n_buckets, int max_distance, bool bidirectional) {
  int64_t nb = n_buckets;
  int bucket = 0;
  if (bidirectional) {
    nb >>= 1;
    if (rel > 0) bucket += (int)nb;
    rel = std::abs(rel);
  } else {
    rel = -std::min(rel, 0);
  }
  const int64_t max_exact = nb >> 1;
  if (rel < max_exact) return bucket + rel;
  // The same float expression as llama.cpp (and, up to rounding, HF's), so boundaries agree.
  int large = (int)std::floor((float)max_exact + std::log((float)(1.0 * rel / max_exact)) * (float)(nb - max_exact) /
                                                       std::log((float)(1.0 * max_distance / max_exact)));
  large = std::min<int>(large, (int)nb - 1);
  return bucket + large;
}

struct EncoderDecoder::Attn {
  const float* q = nullptr;  // (n_q, q_dim)
  const float* k = nullptr;  // (n_kv, kv_dim)
  const float* v = nullptr;
  float* out = nullptr;      // (n_q, q_dim)
  int n_q = 0, n_kv = 0, q_pos0 = 0;
  bool causal = false;
  const float* rel_bias = nullptr;  // (buckets, heads) or null
  bool bidirectional = false;       // bucket kind
  float* probs = nullptr;           // (heads, n_q, n_kv) or null
};

EncoderDecoder::EncoderDecoder(EncDecModelData model, int context, std::shared_ptr<ThreadPool> pool)
    : m_(std::move(model)), pool_(std::move(pool)) {
  const ModelConfig& c = m_.config;
  c.validate();
  const EncDecConfig& e = m_.encdec;
  if (e.n_dec_layers <= 0 || e.n_dec_layers > 1024)
    fail(ErrorCode::BadModel, "invalid model header: decoder layers = " + std::to_string(e.n_dec_layers) + " (must be 1..1024)");
  if (e.decoder_start_id < 0 || e.decoder_start_id >= c.vocab_size)
    fail(ErrorCode::BadModel, "invalid model header: decoder start token " + std::to_string(e.decoder_start_id) +
                                  " is outside the vocabulary of " + std::to_string(c.vocab_size));
  if ((int)m_.weights.enc.size() != c.n_layers || (int)m_.weights.dec.size() != e.n_dec_layers)
    fail(ErrorCode::BadModel, "encoder-decoder weights do not match the layer counts");
  if (c.pos == PosKind::RopeAdjacent || c.pos == PosKind::RopeHalves || c.pos == PosKind::Learned)
    fail(ErrorCode::Unsupported, std::string("encoder-decoder models take relative-bucket, sinusoidal or no positions, not ") +
                                     pos_kind_name(c.pos));
  if (c.pos == PosKind::RelativeBucket && (!m_.weights.enc[0].rel_bias || !m_.weights.dec[0].rel_bias))
    fail(ErrorCode::BadModel, "relative-bucket positions need the first encoder and decoder layers' bias tables");
  if (!pool_) pool_ = std::make_shared<ThreadPool>(1);
  if (context < 0) fail(ErrorCode::BadArgument, "context must be positive, got " + std::to_string(context));
  ctx_ = context == 0 ? c.seq_len : context;
  if (ctx_ > c.seq_len)
    fail(ErrorCode::BadArgument, "context " + std::to_string(ctx_) + " exceeds the model's trained length " + std::to_string(c.seq_len));
  const uint64_t kv = checked_mul(checked_mul((uint64_t)e.n_dec_layers, (uint64_t)ctx_, "KV cache"), (uint64_t)c.kv_dim(), "KV cache");
  if (kv * 4 * sizeof(float) > kMaxCacheBytes)
    fail(ErrorCode::OutOfMemory, "the self- and cross-attention caches for context " + std::to_string(ctx_) + " would need " +
                                     format_bytes(kv * 4 * sizeof(float)) + "; use a smaller context");
  key_cache_.resize(e.n_dec_layers);
  value_cache_.resize(e.n_dec_layers);
  cross_k_.resize(e.n_dec_layers);
  cross_v_.resize(e.n_dec_layers);
  logits_.resize(c.vocab_size);
}

void EncoderDecoder::reserve_cache(int positions) {
  if (positions <= cache_cap_) return;
  const ModelConfig& c = m_.config;
  const int cap = std::max({positions, std::min(ctx_, 2 * cache_cap_), std::min(ctx_, 64)});
  try {
    for (auto* cache : {&key_cache_, &value_cache_})
      for (auto& layer : *cache) layer.resize((size_t)cap * c.kv_dim());
  } catch (const std::bad_alloc&) {
    fail(ErrorCode::OutOfMemory, "not enough memory to grow the decoder's KV cache to " + std::to_string(cap) + " positions");
  }
  cache_cap_ = cap;
}

void EncoderDecoder::matmul(float* y, int64_t ldy, const float* x, int64_t ldx, const Tensor& w, int n_tok) {
  in_.set(x, ldx, n_tok, {&w});
  in_.full(*pool_, y, ldy, w);
}

void EncoderDecoder::norm(float* y, const float* x, const float* w, const float* b, int n_tok) {
  const ModelConfig& c = m_.config;
  for (int t = 0; t < n_tok; t++) {
    if (c.norm == NormKind::RMSNorm) rmsnorm_simd(y + (int64_t)t * c.dim, x + (int64_t)t * c.dim, w, c.dim, c.norm_eps);
    else layernorm_simd(y + (int64_t)t * c.dim, x + (int64_t)t * c.dim, w, b, c.dim, c.norm_eps);
  }
}

// Sinusoidal encoding of "Attention Is All You Need" (as the decoder-only path adds it).
static void add_sinusoidal(float* x, int dim, int pos) {
  for (int i = 0; i < dim; i += 2) {
    float a = (float)pos / std::pow(10000.0f, (float)i / (float)dim);
    x[i] += std::sin(a);
    if (i + 1 < dim) x[i + 1] += std::cos(a);
  }
}

void EncoderDecoder::embed(const int* tokens, int n, int pos0, float* x) {
  const ModelConfig& c = m_.config;
  const float s = c.embed_scale;
  for (int t = 0; t < n; t++) {
    if (tokens[t] < 0 || tokens[t] >= c.vocab_size)
      fail(ErrorCode::BadArgument, "token id " + std::to_string(tokens[t]) + " is outside the vocabulary (0.." +
                                       std::to_string(c.vocab_size - 1) + ")");
    float* row = x + (int64_t)t * c.dim;
    dequantize_row_simd(m_.weights.tok_embed.type, m_.weights.tok_embed.row(tokens[t]), row, c.dim);
    if (s != 1.0f)
      for (int i = 0; i < c.dim; i++) row[i] *= s;
    if (c.pos == PosKind::Sinusoidal) add_sinusoidal(row, c.dim, pos0 + t);
  }
}

const float* EncoderDecoder::sublayer_input(const float* x, const float* w, const float* b, int n) {
  if (m_.config.post_norm) return x;
  norm(xb_.data(), x, w, b, n);
  return xb_.data();
}

void EncoderDecoder::residual(float* x, float* out, const float* w, const float* b, int n) {
  const int dim = m_.config.dim;
  for (int t = 0; t < n; t++) add_f32_simd(x + (int64_t)t * dim, out + (int64_t)t * dim, dim);
  if (m_.config.post_norm) norm(x, x, w, b, n);  // rows are independent: in place is safe
}

// Scaled dot-product attention; with a relative-position bias table the scores get
// bias[bucket(key - query), head] before the softmax (a direct, per-query computation);
// without one it is the flash kernel of the decoder-only path.
void EncoderDecoder::run_attention(const Attn& a) {
  const ModelConfig& c = m_.config;
  const int H = c.n_heads, hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim(), group = c.n_heads / c.n_kv_heads;
  const float scale = m_.config.attn_scale > 0.0f ? m_.config.attn_scale : 1.0f / std::sqrt((float)hd);
  const bool par = (int64_t)H * a.n_q * a.n_kv * hd >= kMinParallelWork;
  if (!a.rel_bias) {
    AttentionArgs f;
    f.n_q = a.n_q;
    f.n_kv = a.n_kv;
    f.n_heads = H;
    f.n_kv_heads = c.n_kv_heads;
    f.head_dim = hd;
    f.q = a.q;
    f.q_stride = qd;
    f.k = a.k;
    f.v = a.v;
    f.kv_stride = kvd;
    f.out = a.out;
    f.out_stride = qd;
    f.scale = scale;
    f.q_pos0 = a.q_pos0;
    f.causal = a.causal;
    f.probs = a.probs;
    if (!par) attention_flash(f, 0, H);
    else pool_->parallel_for(H, 1, [&](int h0, int h1, int) { attention_flash(f, h0, h1); });
    return;
  }
  // Bucket of every key - query distance of this call, computed once for all heads:
  // bucket_of[rel + off], rel in [-(q_pos0 + n_q - 1), n_kv - 1].
  const int off = a.q_pos0 + a.n_q;
  std::vector<int> bucket_of((size_t)off + a.n_kv);
  for (int r = -off; r < a.n_kv; r++)
    bucket_of[r + off] = relative_position_bucket(r, c.rel_buckets, c.rel_max_distance, a.bidirectional);
  auto heads = [&](int h0, int h1, int) {
    thread_local std::vector<float> p;
    if ((int)p.size() < a.n_kv) p.resize(a.n_kv);
    for (int h = h0; h < h1; h++) {
      const int kh = h / group;
      for (int i = 0; i < a.n_q; i++) {
        const int qpos = a.q_pos0 + i;
        const int n_vis = a.causal ? std::min(a.n_kv, qpos + 1) : a.n_kv;
        const float* qi = a.q + (int64_t)i * qd + h * hd;
        for (int j = 0; j < n_vis; j++)
          p[j] = scale * dot_row_simd(QType::F32, a.k + (int64_t)j * kvd + kh * hd, qi, hd) +
                 a.rel_bias[bucket_of[j - qpos + off] * H + h];
        float* o = a.out + (int64_t)i * qd + h * hd;
        std::fill(o, o + hd, 0.0f);
        if (n_vis > 0) softmax_simd(p.data(), n_vis);
        for (int j = 0; j < n_vis; j++) {
          const float* vj = a.v + (int64_t)j * kvd + kh * hd;
          const float pj = p[j];
          for (int d = 0; d < hd; d++) o[d] += pj * vj[d];
        }
        if (a.probs) {
          float* pr = a.probs + ((int64_t)h * a.n_q + i) * a.n_kv;
          std::copy(p.begin(), p.begin() + n_vis, pr);
          std::fill(pr + n_vis, pr + a.n_kv, 0.0f);
        }
      }
    }
  };
  if (!par) heads(0, H, 0);
  else pool_->parallel_for(H, 1, heads);
}

void EncoderDecoder::ffn(const EncDecLayerWeights& L, float* x, int n) {
  const ModelConfig& c = m_.config;
  const int dim = c.dim, hid = c.hidden_dim;
  const float* in = sublayer_input(x, L.ffn_norm, L.ffn_norm_b, n);
  matmul(hb2_.data(), hid, in, dim, L.w_up, n);
  if (c.ffn == FfnKind::SwiGLU || c.ffn == FfnKind::GeGLU) {
    matmul(hb_.data(), hid, in, dim, L.w_gate, n);
    for (int t = 0; t < n; t++) {
      float* g = hb_.data() + (int64_t)t * hid;
      const float* u = hb2_.data() + (int64_t)t * hid;
      if (c.ffn == FfnKind::SwiGLU) {
        swiglu_simd(g, u, hid);
      } else {
        gelu_simd(g, hid);
        for (int i = 0; i < hid; i++) g[i] *= u[i];
      }
    }
  } else {
    for (int t = 0; t < n; t++) {
      float* h = hb2_.data() + (int64_t)t * hid;
      if (L.b_up) add_f32_simd(h, L.b_up, hid);
      if (c.ffn == FfnKind::GELU) gelu_simd(h, hid);
      else relu_simd(h, hid);
    }
    std::swap(hb_, hb2_);
  }
  stacked_products(*pool_, in_, hb_.data(), hid, n, {{xb2_.data(), dim, &L.w_down, L.b_down}});
  residual(x, xb2_.data(), L.ffn_norm, L.ffn_norm_b, n);
}

void EncoderDecoder::encode(const int* src, int n) {
  const ModelConfig& c = m_.config;
  const EncDecWeights& w = m_.weights;
  if (n <= 0) fail(ErrorCode::BadArgument, "the source needs at least one token");
  if (n > ctx_)
    fail(ErrorCode::BadArgument, "the source has " + std::to_string(n) + " tokens; the context holds " + std::to_string(ctx_));
  const int dim = c.dim, qd = c.q_dim(), kvd = c.kv_dim(), wide = std::max(dim, qd);
  std::vector<float> k, v;
  try {
    x_.resize((size_t)n * dim);
    xb_.resize((size_t)n * wide);
    xb2_.resize((size_t)n * wide);
    q_.resize((size_t)n * qd);
    hb_.resize((size_t)n * c.hidden_dim);
    hb2_.resize((size_t)n * c.hidden_dim);
    k.resize((size_t)n * kvd);
    v.resize((size_t)n * kvd);
    for (int l = 0; l < m_.encdec.n_dec_layers; l++) {
      cross_k_[l].resize((size_t)n * kvd);
      cross_v_[l].resize((size_t)n * kvd);
    }
  } catch (const std::bad_alloc&) {
    fail(ErrorCode::OutOfMemory, "not enough memory to encode " + std::to_string(n) + " source tokens");
  }
  if (capture_) enc_attn_.assign((size_t)c.n_layers * c.n_heads * n * n, 0.0f);
  else std::vector<float>().swap(enc_attn_);
  n_src_ = 0;  // a failure below leaves no half-built source behind
  float* x = x_.data();
  embed(src, n, 0, x);
  for (int l = 0; l < c.n_layers; l++) {
    const EncDecLayerWeights& L = w.enc[l];
    const float* in = sublayer_input(x, L.attn_norm, L.attn_norm_b, n);
    stacked_products(*pool_, in_, in, dim, n,
                     {{q_.data(), qd, &L.wq, L.bq}, {k.data(), kvd, &L.wk, L.bk}, {v.data(), kvd, &L.wv, L.bv}});
    Attn a;
    a.q = q_.data();
    a.k = k.data();
    a.v = v.data();
    a.out = xb2_.data();
    a.n_q = a.n_kv = n;
    a.causal = false;  // the encoder sees the whole source
    if (c.pos == PosKind::RelativeBucket) {
      a.rel_bias = L.rel_bias ? L.rel_bias : w.enc[0].rel_bias;
      a.bidirectional = true;
    }
    if (capture_) a.probs = enc_attn_.data() + (size_t)l * c.n_heads * n * n;
    run_attention(a);
    stacked_products(*pool_, in_, xb2_.data(), qd, n, {{xb_.data(), dim, &L.wo, L.bo}});
    residual(x, xb_.data(), L.attn_norm, L.attn_norm_b, n);
    ffn(L, x, n);
  }
  const float* out = x;
  if (w.enc_norm) {
    norm(xb_.data(), x, w.enc_norm, w.enc_norm_b, n);
    out = xb_.data();
  }
  for (int l = 0; l < m_.encdec.n_dec_layers; l++) {
    const EncDecLayerWeights& L = w.dec[l];
    stacked_products(*pool_, in_, out, dim, n,
                     {{cross_k_[l].data(), kvd, &L.ck, L.cbk}, {cross_v_[l].data(), kvd, &L.cv, L.cbv}});
  }
  n_src_ = n;
}

const float* EncoderDecoder::decode(const int* tokens, int n, int pos, bool all_logits) {
  const ModelConfig& c = m_.config;
  const EncDecWeights& w = m_.weights;
  const int nd = m_.encdec.n_dec_layers, H = c.n_heads;
  if (n_src_ <= 0) fail(ErrorCode::BadArgument, "decode needs a source: call encode first");
  if (n <= 0) fail(ErrorCode::BadArgument, "decode needs at least one token");
  if (pos < 0 || (int64_t)pos + n > ctx_)
    fail(ErrorCode::BadArgument, "positions " + std::to_string(pos) + ".." + std::to_string((int64_t)pos + n - 1) +
                                     " do not fit in the context of " + std::to_string(ctx_) + " tokens");
  for (int i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size)
      fail(ErrorCode::BadArgument, "token id " + std::to_string(tokens[i]) + " is outside the vocabulary (0.." +
                                       std::to_string(c.vocab_size - 1) + ")");
  reserve_cache(pos + n);
  const int dim = c.dim, qd = c.q_dim(), kvd = c.kv_dim(), wide = std::max(dim, qd), B0 = std::min(n, kMaxBatch);
  std::vector<float> probs;
  try {
    if (x_.size() < (size_t)B0 * dim) x_.resize((size_t)B0 * dim);
    if (xb_.size() < (size_t)B0 * wide) xb_.resize((size_t)B0 * wide);
    if (xb2_.size() < (size_t)B0 * wide) xb2_.resize((size_t)B0 * wide);
    if (q_.size() < (size_t)B0 * qd) q_.resize((size_t)B0 * qd);
    if (hb_.size() < (size_t)B0 * c.hidden_dim) hb_.resize((size_t)B0 * c.hidden_dim);
    if (hb2_.size() < (size_t)B0 * c.hidden_dim) hb2_.resize((size_t)B0 * c.hidden_dim);
    logits_.resize(all_logits ? (size_t)n * c.vocab_size : (size_t)c.vocab_size);
    if (capture_) {
      const uint64_t bytes = ((uint64_t)nd * H * n * (uint64_t)(pos + n + n_src_) + (uint64_t)H * B0 * (pos + n + n_src_)) * 4;
      if (bytes > (1ull << 30))
        fail(ErrorCode::OutOfMemory, "capturing attention for " + std::to_string(n) + " queries would need " +
                                         format_bytes(bytes) + "; capture a shorter span");
      self_attn_.assign((size_t)nd * H * n * (pos + n), 0.0f);
      cross_attn_.assign((size_t)nd * H * n * n_src_, 0.0f);
      attn_n_q_ = n;
      attn_n_kv_ = pos + n;
      probs.resize((size_t)H * B0 * std::max(pos + n, n_src_));
    } else {
      std::vector<float>().swap(self_attn_);
      std::vector<float>().swap(cross_attn_);
      attn_n_q_ = attn_n_kv_ = 0;
    }
  } catch (const std::bad_alloc&) {
    fail(ErrorCode::OutOfMemory, "not enough memory to decode " + std::to_string(n) + " tokens");
  }
  // Copies one chunk's (H, B, keys) probabilities into rows q0.. of a (layers, H, n, keys) record.
  auto place = [&](std::vector<float>& rec, int l, int q0, int B, int keys, int rec_keys) {
    for (int h = 0; h < H; h++)
      for (int i = 0; i < B; i++)
        std::memcpy(rec.data() + (((int64_t)l * H + h) * n + q0 + i) * rec_keys, probs.data() + ((int64_t)h * B + i) * keys,
                    keys * sizeof(float));
  };
  float* x = x_.data();
  for (int i0 = 0; i0 < n; i0 += kMaxBatch) {
    const int B = std::min(kMaxBatch, n - i0), p0 = pos + i0;
    embed(tokens + i0, B, p0, x);
    for (int l = 0; l < nd; l++) {
      const EncDecLayerWeights& L = w.dec[l];
      float* kc = key_cache_[l].data();
      float* vc = value_cache_[l].data();
      // Causal self-attention: this chunk's keys/values go straight into the cache rows.
      const float* in = sublayer_input(x, L.attn_norm, L.attn_norm_b, B);
      stacked_products(*pool_, in_, in, dim, B,
                       {{q_.data(), qd, &L.wq, L.bq},
                        {kc + (int64_t)p0 * kvd, kvd, &L.wk, L.bk},
                        {vc + (int64_t)p0 * kvd, kvd, &L.wv, L.bv}});
      Attn a;
      a.q = q_.data();
      a.k = kc;
      a.v = vc;
      a.out = xb2_.data();
      a.n_q = B;
      a.n_kv = p0 + B;
      a.q_pos0 = p0;
      a.causal = true;
      if (c.pos == PosKind::RelativeBucket) a.rel_bias = L.rel_bias ? L.rel_bias : w.dec[0].rel_bias;
      if (capture_) a.probs = probs.data();
      run_attention(a);
      if (capture_) place(self_attn_, l, i0, B, p0 + B, pos + n);
      stacked_products(*pool_, in_, xb2_.data(), qd, B, {{xb_.data(), dim, &L.wo, L.bo}});
      residual(x, xb_.data(), L.attn_norm, L.attn_norm_b, B);
      // Cross-attention over the whole source (no mask, no position bias).
      in = sublayer_input(x, L.cross_norm, L.cross_norm_b, B);
      stacked_products(*pool_, in_, in, dim, B, {{q_.data(), qd, &L.cq, L.cbq}});
      Attn ca;
      ca.q = q_.data();
      ca.k = cross_k_[l].data();
      ca.v = cross_v_[l].data();
      ca.out = xb2_.data();
      ca.n_q = B;
      ca.n_kv = n_src_;
      ca.causal = false;
      if (capture_) ca.probs = probs.data();
      run_attention(ca);
      if (capture_) place(cross_attn_, l, i0, B, n_src_, n_src_);
      stacked_products(*pool_, in_, xb2_.data(), qd, B, {{xb_.data(), dim, &L.co, L.cbo}});
      residual(x, xb_.data(), L.cross_norm, L.cross_norm_b, B);
      ffn(L, x, B);
    }
    const bool last = i0 + B == n;
    if (!all_logits && !last) continue;
    const int first = all_logits ? 0 : B - 1, count = B - first;
    const float* fin = x + (int64_t)first * dim;
    if (w.dec_norm) {
      norm(xb_.data(), fin, w.dec_norm, w.dec_norm_b, count);
      fin = xb_.data();
    }
    float* out = all_logits ? logits_.data() + (size_t)i0 * c.vocab_size : logits_.data();
    matmul(out, c.vocab_size, fin, dim, w.classifier, count);
  }
  return all_logits ? logits_.data() + (size_t)(n - 1) * c.vocab_size : logits_.data();
}

}  // namespace qkv
