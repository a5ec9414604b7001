// Forward pass: embeddings -> per layer (norm, attention over the KV cache, residual, norm,
// feed-forward, residual) -> final norm -> classifier. Every block kind comes from ModelConfig.
#include "transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "../common.h"
#include "../kernels/activation.h"
#include "../kernels/attention.h"
#include "../kernels/matmul.h"
#include "../kernels/norm.h"
#include "../kernels/rope.h"
#include "../vision/image.h"
#include "blocks.h"

namespace qkv {

static constexpr uint64_t kMaxKvCacheBytes = 16ull << 30;

Transformer::Transformer(LoadedModel model, int context, std::shared_ptr<ThreadPool> pool)
    : m_(std::move(model)), pool_(std::move(pool)) {
  const ModelConfig& c = m_.config;
  c.validate();
  if (c.pos == PosKind::RelativeBucket)
    fail(ErrorCode::Unsupported,
         "relative-bucket positions (T5) run in the encoder-decoder model (EncoderDecoder) only");
  for (int l = 0; l < c.n_layers; l++) {
    const AdditiveWeights& a = l < (int)m_.weights.layers.size() ? m_.weights.layers[l].additive : AdditiveWeights{};
    if (c.attn_of(l) == AttnKind::Additive && (!a.wq || !a.wk || !a.v))
      fail(ErrorCode::BadModel, "layer " + std::to_string(l) + ": additive attention without its parameters");
  }
  if (!pool_) pool_ = std::make_shared<ThreadPool>(1);
  if (context < 0) fail(ErrorCode::BadArgument, "context must be positive, got " + std::to_string(context));
  ctx_ = context == 0 ? c.seq_len : context;
  if (ctx_ > c.seq_len)
    fail(ErrorCode::BadArgument,
         "context " + std::to_string(ctx_) + " exceeds the model's trained length " + std::to_string(c.seq_len));
  // LongRoPE picks its factors by the context asked for, as llama.cpp does by n_ctx: the short
  // ones up to the original (pre-extension) context, the long ones above it.
  {
    const ModelWeights& w = m_.weights;
    const int orig = c.rope_orig_context > 0 ? c.rope_orig_context : c.seq_len;
    rope_factors_ = w.rope_factors                       ? w.rope_factors
                    : ctx_ > orig && w.rope_factors_long ? w.rope_factors_long
                                                         : w.rope_factors_short;
    rope_mscale_ = c.rope_attn_factor;
    if (c.rope_yarn) {
      yarn_ = rope_yarn_range(c.rot_dims(), orig, c.rope_theta);
      if (c.rope_theta_local > 0.0f) yarn_local_ = rope_yarn_range(c.rot_dims(), orig, c.rope_theta_local);
      // rope_angles multiplies by 1 + 0.1 ln(1 / freq_scale); llama.cpp divides that back out
      // when the factor 1 / freq_scale is at most 1, so that only an extension scales.
      const float f = 1.0f / c.rope_freq_scale;
      if (f <= 1.0f) rope_mscale_ /= 1.0f + 0.1f * std::log(f);
    }
  }
  uint64_t kv =
      checked_mul(checked_mul((uint64_t)c.n_layers, (uint64_t)ctx_, "KV cache"), (uint64_t)c.kv_dim(), "KV cache");
  if (kv * 2 * sizeof(float) > kMaxKvCacheBytes)
    fail(ErrorCode::OutOfMemory, "the KV cache for context " + std::to_string(ctx_) + " would need " +
                                     format_bytes(kv * 2 * sizeof(float)) + "; use a smaller context");
  kv_.init(c.n_layers, c.kv_dim(), ctx_, 256);
  try {
    const int B = kMaxBatch, wide = std::max(c.dim, c.q_dim());
    x_.resize((size_t)B * c.dim);
    xb_.resize((size_t)B * wide);
    xb2_.resize((size_t)B * wide);
    q_.resize((size_t)B * c.q_dim());
    hb_.resize((size_t)B * c.hidden_dim);
    hb2_.resize((size_t)B * c.hidden_dim);
    size_rope_tables(B);
    logits_.resize(c.vocab_size);
  } catch (const std::bad_alloc&) {
    fail(ErrorCode::OutOfMemory, "not enough memory for the activations of this model");
  }
}

void Transformer::matmul(float* y, int64_t ldy, const float* x, int64_t ldx, const Tensor& w, int n_tok) {
  in_.set(x, ldx, n_tok, {&w});
  in_.full(*pool_, y, ldy, w);
}

void Transformer::prepare(const int* tokens, int n, int pos, bool all_logits, bool rows, int first) {
  const ModelConfig& c = m_.config;
  if (!m_.weights.classifier)
    fail(ErrorCode::Unsupported,
         c.arch + " is an encoder without a language-model head: it gives embeddings (embed), not logits");
  if (n <= 0) fail(ErrorCode::BadArgument, "forward needs at least one token");
  if (pos < 0 || (int64_t)pos + n > ctx_)
    fail(ErrorCode::BadArgument, "positions " + std::to_string(pos) + ".." + std::to_string((int64_t)pos + n - 1) +
                                     " do not fit in the context of " + std::to_string(ctx_) + " tokens");
  if (rows) {
    for (int i = 0; i < n; i++)
      if (tokens[i] != kEmbeddingRow) check_tokens(tokens + i, 1, c.vocab_size);
  } else if (tokens) {
    check_tokens(tokens, n, c.vocab_size);
  }
  kv_.reserve(pos + n, first);
  if (all_logits) logits_.resize((size_t)n * c.vocab_size);
  else logits_.resize(c.vocab_size);
  if (!capture_) {
    attn_.clear();
    std::vector<float>().swap(chunk_probs_);
  } else {
    attn_.start(c.n_layers, c.n_heads, n, pos + n);
  }
}

// A GPU-resident model's matrices are not in the heap: the CPU forward cannot run it.
static void check_resident(const LoadedModel& m) {
  if (!m.weights_resident)
    fail(ErrorCode::Unsupported,
         "this model's weights are on the GPU only (loaded with weights: 'gpu'); the CPU cannot run it: load the "
         "model again (without weights: 'gpu' if it fits the WebAssembly heap)");
}

const float* Transformer::forward(const int* tokens, int n, int pos, bool all_logits, const float* rows) {
  const ModelConfig& c = m_.config;
  check_resident(m_);
  prepare(tokens, n, pos, all_logits, rows != nullptr);
  ext_rows_ = rows;
  for (int i = 0; i < n; i += kMaxBatch) {
    int b = std::min(kMaxBatch, n - i);
    bool last = i + b == n;
    float* out = all_logits ? logits_.data() + (size_t)i * c.vocab_size : logits_.data();
    if (all_logits || last) forward_chunk(tokens + i, b, pos + i, out, all_logits);
    else forward_chunk(tokens + i, b, pos + i, nullptr, false);
  }
  ext_rows_ = nullptr;
  return all_logits ? logits_.data() + (size_t)(n - 1) * c.vocab_size : logits_.data();
}

void Transformer::check_layer(int first, const char* what) const {
  const int L = m_.config.n_layers;
  if (first < 0 || first > L)
    fail(ErrorCode::BadArgument, std::string(what) + ": layer " + std::to_string(first) + " is outside 0.." +
                                     std::to_string(L) + " (the model has " + std::to_string(L) + " layers)");
  if (capture_)
    fail(ErrorCode::BadArgument, std::string(what) + ": capturing attention needs every layer in one forward()");
}

// A GPU-resident load with a partial offload holds the CPU's layers and the classifier in the heap.
static void check_resident_from(const LoadedModel& m, int first) {
  if (m.weights_resident) return;
  auto held = [](const Tensor& t) { return !t || t.resident(); };
  for (int l = first; l < m.config.n_layers; l++) {
    const LayerWeights& L = m.weights.layers[l];
    for (const Tensor* t :
         {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &L.router, &L.gate_exps, &L.up_exps, &L.down_exps})
      if (!held(*t))
        fail(ErrorCode::Unsupported,
             "layer " + std::to_string(l) + "'s weights are on the GPU only (weights: 'gpu'); the CPU cannot run it");
  }
  if (!held(m.weights.classifier))
    fail(ErrorCode::Unsupported, "the classifier is on the GPU only (weights: 'gpu'); the CPU cannot run it");
}

const float* Transformer::forward_hidden(const float* hidden, int n, int pos, int first, bool all_logits) {
  const ModelConfig& c = m_.config;
  check_layer(first, "forward_hidden");
  check_resident_from(m_, first);
  prepare(nullptr, n, pos, all_logits, false, first);
  for (int i = 0; i < n; i += kMaxBatch) {
    const int b = std::min(kMaxBatch, n - i);
    std::memcpy(x_.data(), hidden + (int64_t)i * c.dim, (size_t)b * c.dim * sizeof(float));
    cur_b_ = b;
    cur_pos_ = pos + i;
    chunk_rope(b, pos + i);
    for (int l = first; l < c.n_layers; l++) {
      layer_qkv(l);
      layer_attention(l);
      layer_rest(l);
    }
    const bool last = i + b == n;
    if (all_logits || last)
      chunk_logits(all_logits ? logits_.data() + (size_t)i * c.vocab_size : logits_.data(), all_logits);
  }
  return all_logits ? logits_.data() + (size_t)(n - 1) * c.vocab_size : logits_.data();
}

std::vector<float> Transformer::hidden_states(const int* tokens, int n, int pos, int last) {
  const ModelConfig& c = m_.config;
  check_resident(m_);
  check_layer(last, "hidden_states");
  prepare(tokens, n, pos, false, false);
  std::vector<float> out((size_t)n * c.dim);
  for (int i = 0; i < n; i += kMaxBatch) {
    const int b = std::min(kMaxBatch, n - i);
    chunk_embed(tokens + i, b, pos + i);
    for (int l = 0; l < last; l++) {
      layer_qkv(l);
      layer_attention(l);
      layer_rest(l);
    }
    std::memcpy(out.data() + (size_t)i * c.dim, x_.data(), (size_t)b * c.dim * sizeof(float));
  }
  return out;
}

void Transformer::size_rope_tables(int rows) {
  const ModelConfig& c = m_.config;
  const size_t n = (size_t)rows * (c.rot_dims() / 2 + 1);
  rope_cos_.resize(n);
  rope_sin_.resize(n);
  if (c.rope_theta_local > 0.0f) {
    rope_cos_local_.resize(n);
    rope_sin_local_.resize(n);
  }
}

void Transformer::reserve_rows(int rows) {
  if (rows <= rows_cap_ && kx_.size() >= (size_t)rows * m_.config.kv_dim()) return;
  const ModelConfig& c = m_.config;
  const int R = std::max(rows, rows_cap_), wide = std::max(c.dim, c.q_dim());
  try {
    x_.resize((size_t)R * c.dim);
    xb_.resize((size_t)R * wide);
    xb2_.resize((size_t)R * wide);
    q_.resize((size_t)R * c.q_dim());
    hb_.resize((size_t)R * c.hidden_dim);
    hb2_.resize((size_t)R * c.hidden_dim);
    kx_.resize((size_t)R * c.kv_dim());
    vx_.resize((size_t)R * c.kv_dim());
    size_rope_tables(R);
  } catch (const std::bad_alloc&) {
    fail(ErrorCode::OutOfMemory, "not enough memory for the activations of " + std::to_string(rows) + " tokens");
  }
  rows_cap_ = R;
}

const float* Transformer::encode(const int* tokens, const int* types, const int* lens, int n_seqs) {
  const ModelConfig& c = m_.config;
  check_resident(m_);
  if (n_seqs <= 0) fail(ErrorCode::BadArgument, "encode needs at least one text");
  int64_t total = 0;
  for (int s = 0; s < n_seqs; s++) {
    if (lens[s] <= 0) fail(ErrorCode::BadArgument, "text " + std::to_string(s) + " has no tokens");
    if (lens[s] > ctx_)
      fail(ErrorCode::BadArgument, "text " + std::to_string(s) + " has " + std::to_string(lens[s]) +
                                       " tokens; the context holds " + std::to_string(ctx_));
    total += lens[s];
  }
  if (total > encode_capacity())
    fail(ErrorCode::BadArgument, "encode got " + std::to_string(total) + " tokens in one call; at most " +
                                     std::to_string(encode_capacity()) + " (split the batch)");
  const int N = (int)total;
  if (c.is_vision()) fail(ErrorCode::Unsupported, c.arch + " is an image encoder: it takes images, not tokens");
  check_tokens(tokens, N, c.vocab_size);
  for (int i = 0; i < N; i++) {
    if (types && (types[i] < 0 || types[i] >= std::max(1, c.n_token_types)))
      fail(ErrorCode::BadArgument, "token type " + std::to_string(types[i]) + " is outside 0.." +
                                       std::to_string(std::max(1, c.n_token_types) - 1));
  }
  reserve_rows(N);
  row_pos_.resize(N);
  row_type_.assign(N, 0);
  seq_start_.assign(1, 0);
  for (int s = 0, r = 0; s < n_seqs; s++) {
    for (int i = 0; i < lens[s]; i++, r++) {
      row_pos_[r] = i;
      if (types) row_type_[r] = types[r];
    }
    seq_start_.push_back(seq_start_.back() + lens[s]);
  }
  struct Flag {  // encoding_ is set only while this call runs, whatever it throws
    bool& f;
    explicit Flag(bool& b) : f(b) { f = true; }
    ~Flag() { f = false; }
  } flag(encoding_);
  chunk_embed(tokens, N, 0);
  encode_layers(N);
  return x_.data();
}

void Transformer::encode_layers(int rows) {
  const ModelConfig& c = m_.config;
  for (int l = 0; l < c.n_layers; l++) {
    layer_qkv(l);
    layer_attention(l);
    layer_rest(l);
  }
  if (m_.weights.final_norm) norm_rows(c, x_.data(), x_.data(), m_.weights.final_norm, m_.weights.final_norm_b, rows);
}

int Transformer::image_rows(int height, int width) const {
  const ModelConfig& c = m_.config;
  if (!c.is_vision()) fail(ErrorCode::Unsupported, c.arch + " is not an image encoder");
  const int p = c.patch_size;
  if (height <= 0 || width <= 0 || height % p != 0 || width % p != 0)
    fail(ErrorCode::BadArgument, "image input is " + std::to_string(width) + "x" + std::to_string(height) +
                                     "; both sides must be positive multiples of the patch size " + std::to_string(p));
  const int64_t rows = (int64_t)(height / p) * (width / p) + (c.class_token ? 1 : 0);
  if (rows > encode_capacity() * 16)
    fail(ErrorCode::BadArgument, "image input " + std::to_string(width) + "x" + std::to_string(height) + " makes " +
                                     std::to_string(rows) + " patches; at most " +
                                     std::to_string(encode_capacity() * 16) + " (use a smaller image)");
  return (int)rows;
}

const float* Transformer::positions_for(int gh, int gw) {
  const ModelConfig& c = m_.config;
  if (gh == pos_gh_ && gw == pos_gw_) return pos_rows_.data();
  const int dim = c.dim, g = c.grid(), cls = c.class_token ? 1 : 0;
  const Tensor& t = m_.weights.pos_table;
  std::vector<float> table((size_t)t.rows * dim);
  for (int64_t r = 0; r < t.rows; r++) dequantize_row_simd(t.type, t.row(r), table.data() + r * dim, dim);
  pos_rows_.assign((size_t)(cls + gh * gw) * dim, 0.0f);
  if (cls) std::memcpy(pos_rows_.data(), table.data(), dim * sizeof(float));
  if (gh == g && gw == g) {
    std::memcpy(pos_rows_.data() + (int64_t)cls * dim, table.data() + (int64_t)cls * dim,
                (size_t)g * g * dim * sizeof(float));
  } else {
    // The patch rows as dim planes of (g, g), resampled to (gh, gw), back to rows.
    std::vector<float> planes((size_t)dim * g * g), out((size_t)dim * gh * gw);
    for (int i = 0; i < g * g; i++)
      for (int d = 0; d < dim; d++) planes[(size_t)d * g * g + i] = table[(size_t)(cls + i) * dim + d];
    resize_bicubic_torch(planes.data(), dim, g, g, out.data(), gh, gw);
    for (int i = 0; i < gh * gw; i++)
      for (int d = 0; d < dim; d++) pos_rows_[(size_t)(cls + i) * dim + d] = out[(size_t)d * gh * gw + i];
  }
  pos_gh_ = gh;
  pos_gw_ = gw;
  return pos_rows_.data();
}

const float* Transformer::encode_image(const float* pixels, int height, int width) {
  const ModelConfig& c = m_.config;
  const ModelWeights& w = m_.weights;
  const int N = image_rows(height, width);
  const int p = c.patch_size, C = c.n_channels, gh = height / p, gw = width / p, np = gh * gw, K = C * p * p;
  const int cls = c.class_token ? 1 : 0, dim = c.dim;
  reserve_rows(N);
  try {
    patches_.resize((size_t)np * K);
  } catch (const std::bad_alloc&) {
    fail(ErrorCode::OutOfMemory,
         "not enough memory for the patches of a " + std::to_string(width) + "x" + std::to_string(height) + " image");
  }
  // Unfold: patch (py, px) -> one row of (channel, row, column), the convolution kernel's layout.
  for (int py = 0; py < gh; py++)
    for (int px = 0; px < gw; px++) {
      float* row = patches_.data() + (int64_t)(py * gw + px) * K;
      for (int ch = 0; ch < C; ch++)
        for (int y = 0; y < p; y++)
          std::memcpy(row + (ch * p + y) * p, pixels + ((int64_t)ch * height + py * p + y) * width + px * p,
                      p * sizeof(float));
    }
  row_pos_.assign(N, 0);
  row_type_.assign(N, 0);
  seq_start_.assign({0, N});
  cur_b_ = N;
  cur_pos_ = 0;
  struct Flag {
    bool& f;
    explicit Flag(bool& b) : f(b) { f = true; }
    ~Flag() { f = false; }
  } flag(encoding_), flag_image(imaging_);
  if (capture_) attn_.start(c.n_layers, c.n_heads, N, N);
  else attn_.clear();
  float* x = x_.data();
  matmul(x + (int64_t)cls * dim, dim, patches_.data(), K, w.patch_embed, np);
  if (cls) std::memcpy(x, w.class_embed, dim * sizeof(float));
  const float* pos = positions_for(gh, gw);
  for (int r = 0; r < N; r++) {
    float* xr = x + (int64_t)r * dim;
    if (w.patch_bias && r >= cls) add_f32_simd(xr, w.patch_bias, dim);
    add_f32_simd(xr, pos + (int64_t)r * dim, dim);
  }
  if (w.embed_norm) norm_rows(c, x, x, w.embed_norm, w.embed_norm_b, N);
  encode_layers(N);
  return x_.data();
}

void Transformer::forward_chunk(const int* tokens, int B, int pos0, float* logits_out, bool all_logits) {
  chunk_embed(tokens, B, pos0);
  for (int l = 0; l < m_.config.n_layers; l++) {
    layer_qkv(l);
    layer_attention(l);
    layer_rest(l);
  }
  if (logits_out) chunk_logits(logits_out, all_logits);
}

void Transformer::chunk_embed(const int* tokens, int B, int pos0) {
  const ModelConfig& c = m_.config;
  const ModelWeights& w = m_.weights;
  const int dim = c.dim;
  cur_b_ = B;
  cur_pos_ = pos0;
  float* x = x_.data();
  // Embeddings (+ absolute positions).
  // (+ token type, then the embedding LayerNorm, for encoders that have them). Under encode()
  // positions restart at 0 for each text.
  auto pos_of = [&](int t) { return encoding_ ? row_pos_[t] : pos0 + t; };
  for (int t = 0; t < B; t++) {
    float* xt = x + (int64_t)t * dim;
    if (ext_rows_ && tokens[t] == kEmbeddingRow) {
      // A projected image row, already in the model's space: not scaled (as llama.cpp's graphs).
      std::memcpy(xt, ext_rows_, dim * sizeof(float));
      ext_rows_ += dim;
    } else {
      dequantize_row_simd(w.tok_embed.type, w.tok_embed.row(tokens[t]), xt, dim);
      if (c.embed_scale != 1.0f) scale_simd(xt, c.embed_scale, dim);
    }
    if (w.type_embed) add_f32_simd(xt, w.type_embed + (int64_t)(encoding_ ? row_type_[t] : 0) * dim, dim);
    if (c.pos == PosKind::Learned) add_f32_simd(xt, w.pos_embed + (int64_t)pos_of(t) * dim, dim);
    if (c.pos == PosKind::Sinusoidal) add_sinusoidal(xt, dim, pos_of(t));
    if (w.embed_norm) layernorm_simd(xt, xt, w.embed_norm, w.embed_norm_b, dim, c.norm_eps);
  }
  chunk_rope(B, pos0);
}

void Transformer::chunk_rope(int B, int pos0) {
  const ModelConfig& c = m_.config;
  const int half = c.rot_dims() / 2;
  auto pos_of = [&](int t) { return encoding_ ? row_pos_[t] : pos0 + t; };
  if (c.pos == PosKind::RopeAdjacent || c.pos == PosKind::RopeHalves)
    for (int t = 0; t < B; t++) {
      rope_table(pos_of(t), 1, false, rope_cos_.data() + (int64_t)t * half, rope_sin_.data() + (int64_t)t * half);
      if (c.rope_theta_local > 0.0f)
        rope_table(pos_of(t), 1, true, rope_cos_local_.data() + (int64_t)t * half,
                   rope_sin_local_.data() + (int64_t)t * half);
    }
}

void Transformer::rope_table(int pos0, int n, bool local, float* cos, float* sin) const {
  const ModelConfig& c = m_.config;
  const int half = c.rot_dims() / 2;
  for (int t = 0; t < n; t++) {
    float* co = cos + (int64_t)t * half;
    float* si = sin + (int64_t)t * half;
    if (!local)
      rope_angles(co, si, c.rot_dims(), pos0 + t, c.rope_theta, c.rope_freq_scale, rope_factors_, rope_mscale_,
                  c.rope_yarn ? &yarn_ : nullptr);
    else  // the sliding-window layers' own base (Gemma 3), without the global layers' factors
      rope_angles(co, si, c.rot_dims(), pos0 + t, c.rope_theta_local, c.rope_freq_scale_local, nullptr, rope_mscale_,
                  c.rope_yarn ? &yarn_local_ : nullptr);
  }
}

// Attention inputs: q for this chunk; k and v straight into the cache rows (or, encoding, into
// the call's own buffers).
void Transformer::layer_qkv(int l) {
  const ModelConfig& c = m_.config;
  const LayerWeights& L = m_.weights.layers[l];
  const int B = cur_b_, dim = c.dim, qd = c.q_dim(), kvd = c.kv_dim(), hd = c.head_dim, half = c.rot_dims() / 2;
  float* kc = encoding_ ? kx_.data() : kv_.k(l) + (int64_t)cur_pos_ * kvd;
  float* vc = encoding_ ? vx_.data() : kv_.v(l) + (int64_t)cur_pos_ * kvd;
  // Pre-norm: the block reads norm(x); post-norm: x itself (normalised after the residual).
  const float* in = x_.data();
  if (!c.post_norm && L.attn_norm) {
    norm_rows(c, xb_.data(), x_.data(), L.attn_norm, L.attn_norm_b, B);
    in = xb_.data();
  }
  // q, k and v in one section over their rows stacked; each chunk then finishes the columns it
  // wrote, for every token: bias, per-head RMSNorm (Qwen3), RoPE. Those two work on whole heads,
  // so then chunk bounds are multiples of the head size.
  const bool rope = c.rope_at(l);
  const auto rope_fn = c.pos == PosKind::RopeAdjacent ? rope_adjacent_simd : rope_halves_simd;
  const float* rcos = (c.local_rope(l) ? rope_cos_local_ : rope_cos_).data();
  const float* rsin = (c.local_rope(l) ? rope_sin_local_ : rope_sin_).data();
  float* ys[2] = {q_.data(), kc};
  const int64_t lds[2] = {qd, kvd};
  // Norms over the whole projection (OLMo 2) need whole rows: they and RoPE run after the products.
  const bool whole = c.qk_norm_whole;
  const float* head_norms[2] = {whole ? nullptr : L.q_norm, whole ? nullptr : L.k_norm};
  int grain = 16;
  if (!whole && (rope || L.q_norm || L.k_norm))
    while (grain % hd != 0) grain += 16;  // lcm(16, head_dim)
  stacked_products(
      *pool_, in_, in, dim, B, {{q_.data(), qd, &L.wq, L.bq}, {kc, kvd, &L.wk, L.bk}, {vc, kvd, &L.wv, L.bv}}, grain,
      [&](int i, int r0, int r1) {
        if (whole || i == 2 || (!rope && !head_norms[i])) return;  // v: bias only
        for (int t = 0; t < B; t++) {
          float* row = ys[i] + (int64_t)t * lds[i];
          for (int h = r0 / hd; head_norms[i] && h < r1 / hd; h++)
            rmsnorm_simd(row + h * hd, row + h * hd, head_norms[i], hd, c.norm_eps);
          if (rope)
            rope_fn(row + r0, (r1 - r0) / hd, hd, c.rot_dims(), rcos + (int64_t)t * half, rsin + (int64_t)t * half);
        }
      });
  for (int t = 0; whole && t < B; t++)
    for (int i = 0; i < 2; i++) {
      float* row = ys[i] + (int64_t)t * lds[i];
      const float* w = i == 0 ? L.q_norm : L.k_norm;
      if (w) rmsnorm_simd(row, row, w, (int)lds[i], c.norm_eps);
      if (rope) rope_fn(row, (int)lds[i] / hd, hd, c.rot_dims(), rcos + (int64_t)t * half, rsin + (int64_t)t * half);
    }
}

void Transformer::layer_attention(int l) {
  const ModelConfig& c = m_.config;
  const int B = cur_b_, qd = c.q_dim(), hd = c.head_dim;
  AttentionArgs a;
  a.n_q = B;
  a.n_kv = cur_pos_ + B;
  a.n_heads = c.n_heads;
  a.n_kv_heads = c.n_kv_heads;
  a.head_dim = hd;
  a.q = q_.data();
  a.q_stride = qd;
  a.k = kv_.k(l);
  a.v = kv_.v(l);
  a.kv_stride = c.kv_dim();
  a.out = xb2_.data();
  a.out_stride = qd;
  a.scale = c.attn_scale > 0.0f ? c.attn_scale : 1.0f / std::sqrt((float)hd);
  a.softcap = c.attn_softcap;
  a.q_pos0 = cur_pos_;
  a.causal = true;
  a.window = c.window_of(l);
  if (capture_ && (!encoding_ || imaging_)) {
    chunk_probs_.assign((size_t)c.n_heads * B * a.n_kv, 0.0f);
    a.probs = chunk_probs_.data();
  }
  const AttnKind kind = c.attn_of(l);
  const AdditiveWeights& add = m_.weights.layers[l].additive;
  auto kernel = [&](const AttentionArgs& sa, int h0, int h1) { attend(c, kind, add, sa, h0, h1); };
  if (encoding_) {
    // Packed texts: each (text, head) pair attends over its own text's rows only, which is the
    // block-diagonal (segment) mask without computing the blocks that are masked out.
    a.k = kx_.data();
    a.v = vx_.data();
    a.causal = c.causal;
    a.q_pos0 = 0;
    const int n_seqs = (int)seq_start_.size() - 1;
    int64_t work = 0;
    for (int s = 0; s < n_seqs; s++)
      work += (int64_t)(seq_start_[s + 1] - seq_start_[s]) * (seq_start_[s + 1] - seq_start_[s]);
    auto run = [&](int i0, int i1, int) {
      for (int i = i0; i < i1; i++) {
        const int s = i / c.n_heads, h = i % c.n_heads, r0 = seq_start_[s], n = seq_start_[s + 1] - r0;
        AttentionArgs sa = a;
        sa.n_q = sa.n_kv = n;
        sa.q = a.q + (int64_t)r0 * qd;
        sa.k = a.k + (int64_t)r0 * c.kv_dim();
        sa.v = a.v + (int64_t)r0 * c.kv_dim();
        sa.out = a.out + (int64_t)r0 * qd;
        kernel(sa, h, h + 1);
      }
    };
    if (work * c.n_heads * hd < kMinParallelWork) run(0, n_seqs * c.n_heads, 0);
    else pool_->parallel_for(n_seqs * c.n_heads, 1, run);
    return;
  }
  if ((int64_t)c.n_heads * B * a.n_kv * hd < kMinParallelWork) kernel(a, 0, c.n_heads);
  else pool_->parallel_for(c.n_heads, 1, [&](int h0, int h1, int) { kernel(a, h0, h1); });
}

// After attention (its output in xb2_): record probabilities, output projection, residual,
// feed-forward block, residual.
void Transformer::layer_rest(int l) {
  const ModelConfig& c = m_.config;
  const LayerWeights& L = m_.weights.layers[l];
  const int B = cur_b_, dim = c.dim, qd = c.q_dim(), hid = c.hidden_dim;
  float* x = x_.data();
  // This chunk's rows into the (layer, head, query, key) record of the whole call.
  if (capture_ && (!encoding_ || imaging_))
    attn_.place(l, chunk_probs_.data(), cur_pos_ - (attn_.n_kv - attn_.n_q), B, cur_pos_ + B);
  // Parallel (Command-R): the feed-forward reads the attention's normed input (still in xb_), and
  // the attention output is added after the feed-forward's.
  const bool parallel = c.parallel_ffn;
  if (!parallel) {
    residual_product(xb2_.data(), qd, L.wo, L.bo, L.attn_post_norm);
    if (c.post_norm) norm_rows(c, x, x, L.attn_norm, L.attn_norm_b, B);
  }

  const float* in = x;
  if (parallel) {
    if (L.attn_norm) in = xb_.data();
  } else if (!c.post_norm && L.ffn_norm) {
    norm_rows(c, xb_.data(), x, L.ffn_norm, L.ffn_norm_b, B);
    in = xb_.data();
  }
  if (c.is_moe()) {
    // The experts' sum into xb2_ (free: MoE layers are not parallel), then the residual.
    moe_ffn(*pool_, in_, c, L, in, B, xb2_.data(), moe_);
    for (int t = 0; t < B; t++) {
      float* o = xb2_.data() + (int64_t)t * dim;
      if (L.ffn_post_norm) rmsnorm_simd(o, o, L.ffn_post_norm, dim, c.norm_eps);
      if (c.residual_scale != 1.0f) scale_simd(o, c.residual_scale, dim);
      add_f32_simd(x + (int64_t)t * dim, o, dim);
    }
    return;
  }
  ffn_hidden(*pool_, in_, c.ffn, in, dim, B, L.w_up, L.w_gate, L.b_up, hid, hb_.data(), hb2_.data());
  residual_product(hb_.data(), hid, L.w_down, L.b_down, L.ffn_post_norm);
  if (parallel) residual_product(xb2_.data(), qd, L.wo, L.bo, L.attn_post_norm);
  if (c.post_norm) norm_rows(c, x, x, L.ffn_norm, L.ffn_norm_b, B);
}

// x += residual_scale * post_norm(in W^T + bias) for the chunk's tokens (output in xb_). Without
// the post-norm, which needs whole rows, each product chunk adds its own columns into x.
void Transformer::residual_product(const float* in, int64_t ld_in, const Tensor& w, const float* bias,
                                   const float* post_norm) {
  const ModelConfig& c = m_.config;
  const int B = cur_b_, dim = c.dim;
  float* x = x_.data();
  float* o = xb_.data();
  const float rs = c.residual_scale;
  stacked_products(*pool_, in_, in, ld_in, B, {{o, dim, &w, post_norm ? nullptr : bias}}, 16, [&](int, int r0, int r1) {
    for (int t = 0; t < B && !post_norm; t++) {
      if (rs != 1.0f) scale_simd(o + (int64_t)t * dim + r0, rs, r1 - r0);
      add_f32_simd(x + (int64_t)t * dim + r0, o + (int64_t)t * dim + r0, r1 - r0);
    }
  });
  for (int t = 0; t < B && post_norm; t++) {
    float* ot = o + (int64_t)t * dim;
    if (bias) add_f32_simd(ot, bias, dim);
    rmsnorm_simd(ot, ot, post_norm, dim, c.norm_eps);
    if (rs != 1.0f) scale_simd(ot, rs, dim);
    add_f32_simd(x + (int64_t)t * dim, ot, dim);
  }
}

// Final norm and classifier: every token of the chunk when all logits are wanted, else the last.
void Transformer::chunk_logits(float* logits_out, bool all_logits) {
  const ModelConfig& c = m_.config;
  if (!m_.weights.classifier)
    fail(ErrorCode::Unsupported,
         c.arch + " is an encoder without a language-model head: it gives embeddings, not logits");
  const int B = cur_b_, dim = c.dim, first = all_logits ? 0 : B - 1, count = B - first;
  norm_rows(c, xb_.data(), x_.data() + (int64_t)first * dim, m_.weights.final_norm, m_.weights.final_norm_b, count);
  matmul(logits_out, c.vocab_size, xb_.data(), dim, m_.weights.classifier, count);
  if (c.logit_scale != 1.0f) scale_simd(logits_out, c.logit_scale, (int)((int64_t)count * c.vocab_size));
  if (c.logit_softcap > 0.0f) {
    const float cap = c.logit_softcap;
    for (int64_t i = 0; i < (int64_t)count * c.vocab_size; i++) logits_out[i] = cap * std::tanh(logits_out[i] / cap);
  }
}

}  // namespace qkv
