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
#include "blocks.h"

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
  float* out = nullptr;  // (n_q, q_dim)
  int n_q = 0, n_kv = 0, q_pos0 = 0;
  bool causal = false;
  const float* rel_bias = nullptr;  // (buckets, heads) or null
  bool bidirectional = false;       // bucket kind
  float* probs = nullptr;           // (heads, n_q, n_kv) or null
  AttnKind kind = AttnKind::Softmax;
  const AdditiveWeights* add = nullptr;  // additive kind: its parameters
};

EncoderDecoder::EncoderDecoder(EncDecModelData model, int context, std::shared_ptr<ThreadPool> pool)
    : m_(std::move(model)), pool_(std::move(pool)) {
  const ModelConfig& c = m_.config;
  c.validate();
  const EncDecConfig& e = m_.encdec;
  if (e.n_dec_layers <= 0 || e.n_dec_layers > 1024)
    fail(ErrorCode::BadModel,
         "invalid model header: decoder layers = " + std::to_string(e.n_dec_layers) + " (must be 1..1024)");
  if (e.decoder_start_id < 0 || e.decoder_start_id >= c.vocab_size)
    fail(ErrorCode::BadModel, "invalid model header: decoder start token " + std::to_string(e.decoder_start_id) +
                                  " is outside the vocabulary of " + std::to_string(c.vocab_size));
  if ((int)m_.weights.enc.size() != c.n_layers || (int)m_.weights.dec.size() != e.n_dec_layers)
    fail(ErrorCode::BadModel, "encoder-decoder weights do not match the layer counts");
  if (c.pos == PosKind::RopeAdjacent || c.pos == PosKind::RopeHalves || c.pos == PosKind::Learned)
    fail(ErrorCode::Unsupported,
         std::string("encoder-decoder models take relative-bucket, sinusoidal or no positions, not ") +
             pos_kind_name(c.pos));
  if (c.pos == PosKind::RelativeBucket && (!m_.weights.enc[0].rel_bias || !m_.weights.dec[0].rel_bias))
    fail(ErrorCode::BadModel, "relative-bucket positions need the first encoder and decoder layers' bias tables");
  // Attention kinds: sized per stack, parameters present, no kind the relative bias cannot join.
  auto check_kinds = [&](const std::vector<AttnKind>& kinds, int n, const char* what, bool self) {
    if (!kinds.empty() && (int)kinds.size() != n)
      fail(ErrorCode::BadModel, std::string("invalid model header: ") + what + " attention kinds: " +
                                    std::to_string(kinds.size()) + " entries for " + std::to_string(n) + " layers");
    for (int l = 0; l < (int)kinds.size(); l++) {
      const std::string at = std::string(what) + " layer " + std::to_string(l) + ": " + attn_kind_name(kinds[l]);
      if (kinds[l] == AttnKind::Linear) fail(ErrorCode::Unsupported, at + " attention is not supported here");
      if (self && kinds[l] != AttnKind::Softmax && c.pos == PosKind::RelativeBucket)
        fail(ErrorCode::Unsupported, at + " attention cannot take the relative-position bias");
      if (kinds[l] == AttnKind::Additive) {
        if (c.additive_dim <= 0 || c.additive_dim > 4096)
          fail(ErrorCode::BadModel, "invalid model header: additive attention width = " +
                                        std::to_string(c.additive_dim) + " (must be 1..4096)");
        const EncDecLayerWeights& L = std::string(what) == "encoder" ? m_.weights.enc[l] : m_.weights.dec[l];
        const AdditiveWeights& w = self ? L.self_add : L.cross_add;
        if (!w.wq || !w.wk || !w.v) fail(ErrorCode::BadModel, at + " attention without its parameters");
      }
      if (kinds[l] == AttnKind::BlockSparse) c.sparse.validate();
    }
  };
  check_kinds(e.enc_attn, c.n_layers, "encoder", true);
  check_kinds(e.dec_attn, e.n_dec_layers, "decoder", true);
  check_kinds(e.cross_attn, e.n_dec_layers, "cross", false);
  if (!pool_) pool_ = std::make_shared<ThreadPool>(1);
  if (context < 0) fail(ErrorCode::BadArgument, "context must be positive, got " + std::to_string(context));
  ctx_ = context == 0 ? c.seq_len : context;
  if (ctx_ > c.seq_len)
    fail(ErrorCode::BadArgument,
         "context " + std::to_string(ctx_) + " exceeds the model's trained length " + std::to_string(c.seq_len));
  const uint64_t kv =
      checked_mul(checked_mul((uint64_t)e.n_dec_layers, (uint64_t)ctx_, "KV cache"), (uint64_t)c.kv_dim(), "KV cache");
  if (kv * 4 * sizeof(float) > kMaxCacheBytes)
    fail(ErrorCode::OutOfMemory, "the self- and cross-attention caches for context " + std::to_string(ctx_) +
                                     " would need " + format_bytes(kv * 4 * sizeof(float)) + "; use a smaller context");
  kv_.init(e.n_dec_layers, c.kv_dim(), ctx_, 64);
  cross_k_.resize(e.n_dec_layers);
  cross_v_.resize(e.n_dec_layers);
  logits_.resize(c.vocab_size);
}

void EncoderDecoder::matmul(float* y, int64_t ldy, const float* x, int64_t ldx, const Tensor& w, int n_tok) {
  in_.set(x, ldx, n_tok, {&w});
  in_.full(*pool_, y, ldy, w);
}

void EncoderDecoder::embed(const int* tokens, int n, int pos0, float* x) {
  const ModelConfig& c = m_.config;
  check_tokens(tokens, n, c.vocab_size);
  for (int t = 0; t < n; t++) {
    float* row = x + (int64_t)t * c.dim;
    dequantize_row_simd(m_.weights.tok_embed.type, m_.weights.tok_embed.row(tokens[t]), row, c.dim);
    if (c.embed_scale != 1.0f) scale_simd(row, c.embed_scale, c.dim);
    if (c.pos == PosKind::Sinusoidal) add_sinusoidal(row, c.dim, pos0 + t);
  }
}

const float* EncoderDecoder::sublayer_input(const float* x, const float* w, const float* b, int n) {
  if (m_.config.post_norm) return x;
  norm_rows(m_.config, xb_.data(), x, w, b, n);
  return xb_.data();
}

// Attention of a's kind (softmax: the flash kernel); with a relative-position bias table the
// scores get bias[bucket(key - query), head] before the softmax (softmax kind only).
void EncoderDecoder::run_attention(const Attn& a) {
  const ModelConfig& c = m_.config;
  const int H = c.n_heads, hd = c.head_dim;
  AttentionArgs f;
  f.n_q = a.n_q;
  f.n_kv = a.n_kv;
  f.n_heads = H;
  f.n_kv_heads = c.n_kv_heads;
  f.head_dim = hd;
  f.q = a.q;
  f.q_stride = c.q_dim();
  f.k = a.k;
  f.v = a.v;
  f.kv_stride = c.kv_dim();
  f.out = a.out;
  f.out_stride = c.q_dim();
  f.scale = c.attn_scale > 0.0f ? c.attn_scale : 1.0f / std::sqrt((float)hd);
  f.q_pos0 = a.q_pos0;
  f.causal = a.causal;
  f.probs = a.probs;
  if (a.rel_bias) {
    // The bucket of every key - query distance of this call, computed once for all heads.
    f.rel_off = a.q_pos0 + a.n_q;
    buckets_.resize((size_t)f.rel_off + a.n_kv);
    for (int r = -f.rel_off; r < a.n_kv; r++)
      buckets_[r + f.rel_off] = relative_position_bucket(r, c.rel_buckets, c.rel_max_distance, a.bidirectional);
    f.rel_bias = a.rel_bias;
    f.rel_bucket = buckets_.data();
  }
  static const AdditiveWeights none;
  const AdditiveWeights& add = a.add ? *a.add : none;
  if ((int64_t)H * a.n_q * a.n_kv * hd < kMinParallelWork) attend(c, a.kind, add, f, 0, H);
  else pool_->parallel_for(H, 1, [&](int h0, int h1, int) { attend(c, a.kind, add, f, h0, h1); });
}

void EncoderDecoder::ffn(const EncDecLayerWeights& L, float* x, int n) {
  const ModelConfig& c = m_.config;
  const int dim = c.dim, hid = c.hidden_dim;
  const float* in = sublayer_input(x, L.ffn_norm, L.ffn_norm_b, n);
  ffn_hidden(*pool_, in_, c.ffn, in, dim, n, L.w_up, L.w_gate, L.b_up, hid, hb_.data(), hb2_.data());
  stacked_products(*pool_, in_, hb_.data(), hid, n, {{xb2_.data(), dim, &L.w_down, L.b_down}});
  residual_add(c, x, xb2_.data(), L.ffn_norm, L.ffn_norm_b, n);
}

void EncoderDecoder::encode(const int* src, int n) {
  const ModelConfig& c = m_.config;
  const EncDecWeights& w = m_.weights;
  if (n <= 0) fail(ErrorCode::BadArgument, "the source needs at least one token");
  if (n > ctx_)
    fail(ErrorCode::BadArgument,
         "the source has " + std::to_string(n) + " tokens; the context holds " + std::to_string(ctx_));
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
  if (capture_) enc_attn_.start(c.n_layers, c.n_heads, n, n);
  else enc_attn_.clear();
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
    a.kind = EncDecConfig::kind_at(m_.encdec.enc_attn, l);
    a.add = &L.self_add;
    if (c.pos == PosKind::RelativeBucket) {
      a.rel_bias = L.rel_bias ? L.rel_bias : w.enc[0].rel_bias;
      a.bidirectional = true;
    }
    if (capture_) a.probs = enc_attn_.data.data() + (size_t)l * c.n_heads * n * n;
    run_attention(a);
    stacked_products(*pool_, in_, xb2_.data(), qd, n, {{xb_.data(), dim, &L.wo, L.bo}});
    residual_add(c, x, xb_.data(), L.attn_norm, L.attn_norm_b, n);
    ffn(L, x, n);
  }
  const float* out = x;
  if (w.enc_norm) {
    norm_rows(c, xb_.data(), x, w.enc_norm, w.enc_norm_b, n);
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
  check_tokens(tokens, n, c.vocab_size);
  kv_.reserve(pos + n);
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
      // Both records and the chunk buffer within the one limit.
      const uint64_t others = ((uint64_t)nd * H * n * n_src_ + (uint64_t)H * B0 * (pos + n + n_src_)) * sizeof(float);
      self_attn_.start(nd, H, n, pos + n, others);
      cross_attn_.start(nd, H, n, n_src_);
      probs.resize((size_t)H * B0 * std::max(pos + n, n_src_));
    } else {
      self_attn_.clear();
      cross_attn_.clear();
    }
  } catch (const std::bad_alloc&) {
    fail(ErrorCode::OutOfMemory, "not enough memory to decode " + std::to_string(n) + " tokens");
  }
  float* x = x_.data();
  for (int i0 = 0; i0 < n; i0 += kMaxBatch) {
    const int B = std::min(kMaxBatch, n - i0), p0 = pos + i0;
    embed(tokens + i0, B, p0, x);
    for (int l = 0; l < nd; l++) {
      const EncDecLayerWeights& L = w.dec[l];
      float* kc = kv_.k(l);
      float* vc = kv_.v(l);
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
      a.kind = EncDecConfig::kind_at(m_.encdec.dec_attn, l);
      a.add = &L.self_add;
      if (c.pos == PosKind::RelativeBucket) a.rel_bias = L.rel_bias ? L.rel_bias : w.dec[0].rel_bias;
      if (capture_) a.probs = probs.data();
      run_attention(a);
      if (capture_) self_attn_.place(l, probs.data(), i0, B, p0 + B);
      stacked_products(*pool_, in_, xb2_.data(), qd, B, {{xb_.data(), dim, &L.wo, L.bo}});
      residual_add(c, x, xb_.data(), L.attn_norm, L.attn_norm_b, B);
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
      ca.kind = EncDecConfig::kind_at(m_.encdec.cross_attn, l);
      ca.add = &L.cross_add;
      if (capture_) ca.probs = probs.data();
      run_attention(ca);
      if (capture_) cross_attn_.place(l, probs.data(), i0, B, n_src_);
      stacked_products(*pool_, in_, xb2_.data(), qd, B, {{xb_.data(), dim, &L.co, L.cbo}});
      residual_add(c, x, xb_.data(), L.cross_norm, L.cross_norm_b, B);
      ffn(L, x, B);
    }
    const bool last = i0 + B == n;
    if (!all_logits && !last) continue;
    const int first = all_logits ? 0 : B - 1, count = B - first;
    const float* fin = x + (int64_t)first * dim;
    if (w.dec_norm) {
      norm_rows(c, xb_.data(), fin, w.dec_norm, w.dec_norm_b, count);
      fin = xb_.data();
    }
    float* out = all_logits ? logits_.data() + (size_t)i0 * c.vocab_size : logits_.data();
    matmul(out, c.vocab_size, fin, dim, w.classifier, count);
  }
  return all_logits ? logits_.data() + (size_t)(n - 1) * c.vocab_size : logits_.data();
}

}  // namespace qkv
