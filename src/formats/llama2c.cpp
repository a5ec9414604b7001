// llama2.c legacy checkpoint loader. Layout after the header (all f32):
//   token_embedding (vocab, dim), rms_att (L, dim), wq (L, dim, dim), wk (L, kv_dim, dim),
//   wv (L, kv_dim, dim), wo (L, dim, dim), rms_ffn (L, dim), w1 (L, hidden, dim),
//   w2 (L, dim, hidden), w3 (L, hidden, dim), rms_final (dim),
//   [freq_cis_real, freq_cis_imag (seq_len, head_dim/2) each: legacy, unused],
//   [wcls (vocab, dim) when the header's vocab_size is negative]
#include "llama2c.h"

#include <cstring>
#include <string>

#include "../common.h"

namespace qkv {

namespace {
struct Header {
  int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
};
constexpr uint64_t kHeaderBytes = sizeof(Header);
static_assert(kHeaderBytes == 28, "llama2.c header is 7 int32");
}  // namespace

bool looks_like_llama2c(const uint8_t* data, uint64_t size) {
  if (size < kHeaderBytes) return false;
  Header h;
  std::memcpy(&h, data, sizeof h);
  return h.dim > 0 && h.hidden_dim > 0 && h.n_layers > 0 && h.n_heads > 0 && h.vocab_size != 0 && h.seq_len > 0 &&
         h.n_kv_heads > 0 && h.n_kv_heads <= h.n_heads && h.dim % h.n_heads == 0;
}

LoadedModel load_llama2c(std::shared_ptr<const Blob> blob) {
  const uint64_t size = blob->size();
  if (size < kHeaderBytes)
    fail(ErrorCode::BadModel,
         "llama2.c checkpoint is truncated: " + std::to_string(size) + " bytes, less than the 28-byte header");
  Header h;
  std::memcpy(&h, blob->data(), sizeof h);

  if (h.vocab_size == INT32_MIN)
    fail(ErrorCode::BadModel, "invalid model header: vocab_size = " + std::to_string(h.vocab_size));
  ModelConfig c;
  c.arch = "llama";
  c.dim = h.dim;
  c.hidden_dim = h.hidden_dim;
  c.n_layers = h.n_layers;
  c.n_heads = h.n_heads;
  c.n_kv_heads = h.n_kv_heads;
  c.vocab_size = h.vocab_size < 0 ? -h.vocab_size : h.vocab_size;
  c.seq_len = h.seq_len;
  c.tied_classifier = h.vocab_size > 0;
  c.norm = NormKind::RMSNorm;
  c.norm_eps = 1e-5f;
  c.pos = PosKind::RopeAdjacent;
  c.rope_theta = 10000.0f;
  c.ffn = FfnKind::SwiGLU;
  if (c.n_heads > 0 && c.dim > 0 && c.dim % c.n_heads != 0)
    fail(ErrorCode::BadModel, "invalid model header: dim = " + std::to_string(c.dim) +
                                  " is not divisible by n_heads = " + std::to_string(c.n_heads));
  c.head_dim = c.n_heads > 0 ? c.dim / c.n_heads : 0;
  c.validate();
  if (c.head_dim % 2 != 0)
    fail(ErrorCode::BadModel,
         "invalid model header: head size " + std::to_string(c.head_dim) + " is odd; rotary embedding needs pairs");

  // Every size in elements, computed in 64 bits (validate() bounds keep these far from overflow).
  const uint64_t dim = c.dim, hid = c.hidden_dim, L = c.n_layers, kvd = c.kv_dim(), V = c.vocab_size;
  const uint64_t body = V * dim + L * dim + L * dim * dim * 2 + L * dim * kvd * 2 + L * dim + L * hid * dim * 3 + dim;
  const uint64_t freq = (uint64_t)c.seq_len * (c.head_dim / 2) * 2;
  const uint64_t cls = c.tied_classifier ? 0 : V * dim;
  const uint64_t with_freq = kHeaderBytes + 4 * (body + freq + cls);
  const uint64_t without_freq = kHeaderBytes + 4 * (body + cls);
  bool has_freq;
  if (size == with_freq) has_freq = true;
  else if (size == without_freq) has_freq = false;
  else if (size < without_freq)
    fail(ErrorCode::BadModel, "llama2.c checkpoint is truncated: the header (" + c.describe() + ") needs " +
                                  std::to_string(without_freq) + " bytes (" + std::to_string(with_freq) +
                                  " with the freq_cis block), the file has " + std::to_string(size));
  else
    fail(ErrorCode::BadModel, "llama2.c checkpoint size " + std::to_string(size) + " bytes matches neither layout " +
                                  "the header implies (" + std::to_string(with_freq) + " with the freq_cis block, " +
                                  std::to_string(without_freq) + " without); the header or file is corrupt");

  LoadedModel m;
  m.config = c;
  m.storage = blob;
  const float* p = reinterpret_cast<const float*>(blob->data() + kHeaderBytes);
  auto take = [&p](uint64_t n) {
    const float* r = p;
    p += n;
    return r;
  };
  auto mat = [](const float* d, int64_t rows, int64_t cols) {
    Tensor t;
    t.type = DType::F32;
    t.data = d;
    t.rows = rows;
    t.cols = cols;
    return t;
  };
  ModelWeights& w = m.weights;
  w.tok_embed = mat(take(V * dim), V, dim);
  w.layers.resize(L);
  const float* rms_att = take(L * dim);
  const float* wq = take(L * dim * dim);
  const float* wk = take(L * dim * kvd);
  const float* wv = take(L * dim * kvd);
  const float* wo = take(L * dim * dim);
  const float* rms_ffn = take(L * dim);
  const float* w1 = take(L * hid * dim);
  const float* w2 = take(L * dim * hid);
  const float* w3 = take(L * hid * dim);
  for (uint64_t l = 0; l < L; l++) {
    LayerWeights& lw = w.layers[l];
    lw.attn_norm = rms_att + l * dim;
    lw.wq = mat(wq + l * dim * dim, dim, dim);
    lw.wk = mat(wk + l * dim * kvd, kvd, dim);
    lw.wv = mat(wv + l * dim * kvd, kvd, dim);
    lw.wo = mat(wo + l * dim * dim, dim, dim);
    lw.ffn_norm = rms_ffn + l * dim;
    lw.w_gate = mat(w1 + l * hid * dim, hid, dim);
    lw.w_down = mat(w2 + l * dim * hid, dim, hid);
    lw.w_up = mat(w3 + l * hid * dim, hid, dim);
  }
  w.final_norm = take(dim);
  if (has_freq) take(freq);
  w.classifier = c.tied_classifier ? w.tok_embed : mat(take(V * dim), V, dim);
  return m;
}

}  // namespace qkv
