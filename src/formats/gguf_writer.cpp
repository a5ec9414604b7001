// GGUF v3 writer.
#include "gguf_writer.h"

#include <cstring>

#include "../common.h"
#include "../kernels/quant.h"

namespace qkv {

namespace {
template <class T>
void put(std::vector<uint8_t>& o, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  o.insert(o.end(), b, b + sizeof(T));
}
void put_str(std::vector<uint8_t>& o, const std::string& s) {
  put<uint64_t>(o, s.size());
  o.insert(o.end(), s.begin(), s.end());
}
}  // namespace

void GgufWriter::add_string(const std::string& k, const std::string& v) {
  put_str(kv_, k);
  put<uint32_t>(kv_, 8);
  put_str(kv_, v);
  n_kv_++;
}
void GgufWriter::add_u32(const std::string& k, uint32_t v) {
  put_str(kv_, k);
  put<uint32_t>(kv_, 4);
  put(kv_, v);
  n_kv_++;
}
void GgufWriter::add_i32(const std::string& k, int32_t v) {
  put_str(kv_, k);
  put<uint32_t>(kv_, 5);
  put(kv_, v);
  n_kv_++;
}
void GgufWriter::add_f32(const std::string& k, float v) {
  put_str(kv_, k);
  put<uint32_t>(kv_, 6);
  put(kv_, v);
  n_kv_++;
}
void GgufWriter::add_bool(const std::string& k, bool v) {
  put_str(kv_, k);
  put<uint32_t>(kv_, 7);
  put<uint8_t>(kv_, v);
  n_kv_++;
}
void GgufWriter::add_strings(const std::string& k, const std::vector<std::string>& v) {
  put_str(kv_, k);
  put<uint32_t>(kv_, 9);
  put<uint32_t>(kv_, 8);
  put<uint64_t>(kv_, v.size());
  for (const auto& s : v) put_str(kv_, s);
  n_kv_++;
}
void GgufWriter::add_f32s(const std::string& k, const std::vector<float>& v) {
  put_str(kv_, k);
  put<uint32_t>(kv_, 9);
  put<uint32_t>(kv_, 6);
  put<uint64_t>(kv_, v.size());
  for (float x : v) put(kv_, x);
  n_kv_++;
}
void GgufWriter::add_i32s(const std::string& k, const std::vector<int32_t>& v) {
  put_str(kv_, k);
  put<uint32_t>(kv_, 9);
  put<uint32_t>(kv_, 5);
  put<uint64_t>(kv_, v.size());
  for (int32_t x : v) put(kv_, x);
  n_kv_++;
}

static void put_value(std::vector<uint8_t>& o, const GgufValue& v) {
  switch (v.kind) {
    case GgufKind::U8:
    case GgufKind::BOOL: put<uint8_t>(o, (uint8_t)v.u); break;
    case GgufKind::I8: put<int8_t>(o, (int8_t)v.i); break;
    case GgufKind::U16: put<uint16_t>(o, (uint16_t)v.u); break;
    case GgufKind::I16: put<int16_t>(o, (int16_t)v.i); break;
    case GgufKind::U32: put<uint32_t>(o, (uint32_t)v.u); break;
    case GgufKind::I32: put<int32_t>(o, (int32_t)v.i); break;
    case GgufKind::U64: put<uint64_t>(o, v.u); break;
    case GgufKind::I64: put<int64_t>(o, v.i); break;
    case GgufKind::F32: put<float>(o, (float)v.f); break;
    case GgufKind::F64: put<double>(o, v.f); break;
    case GgufKind::STRING: put_str(o, v.s); break;
    case GgufKind::ARRAY:
      put<uint32_t>(o, (uint32_t)v.elem);
      put<uint64_t>(o, v.size());
      if (v.elem == GgufKind::ARRAY)
        for (const GgufValue& e : v.arr) put_value(o, e);
      else if (v.elem == GgufKind::STRING)
        for (size_t i = 0; i < v.size(); i++) put_str(o, v.str_at(i));
      else o.insert(o.end(), v.raw.begin(), v.raw.end());
      break;
  }
}

void GgufWriter::add_value(const std::string& k, const GgufValue& v) {
  put_str(kv_, k);
  put<uint32_t>(kv_, (uint32_t)v.kind);
  put_value(kv_, v);
  n_kv_++;
}

void GgufWriter::add_tensor_f32(const std::string& name, std::vector<uint64_t> dims, const float* data) {
  add_tensor(name, std::move(dims), data, QType::F32);
}

void encode_row(QType type, const float* src, uint8_t* dst, int cols) {
  const size_t rb = qtype_row_bytes(type, cols);
  switch (type) {
    case QType::F32: std::memcpy(dst, src, rb); break;
    case QType::F16:
      for (int i = 0; i < cols; i++) {
        uint16_t h = f32_to_f16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      break;
    case QType::BF16:
      for (int i = 0; i < cols; i++) {  // round to nearest even
        uint32_t b;
        std::memcpy(&b, &src[i], 4);
        uint16_t h = (uint16_t)((b + 0x7fff + ((b >> 16) & 1)) >> 16);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      break;
    case QType::Q8_0: quantize_row_q8_0(src, dst, cols); break;
    case QType::Q4_0: quantize_row_q4_0(src, dst, cols); break;
    case QType::Q4_1: quantize_row_q4_1(src, dst, cols); break;
    case QType::Q5_0: quantize_row_q5_0(src, dst, cols); break;
    case QType::Q5_1: quantize_row_q5_1(src, dst, cols); break;
    case QType::Q4_K: quantize_row_q4_k(src, dst, cols); break;
    case QType::Q5_K: quantize_row_q5_k(src, dst, cols); break;
    case QType::Q6_K: quantize_row_q6_k(src, dst, cols); break;
    default: fail(ErrorCode::Unsupported, std::string("no encoder for ") + qtype_name(type));
  }
}

void GgufWriter::add_tensor(const std::string& name, std::vector<uint64_t> dims, const float* data, QType type) {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  const int cols = (int)dims[0];
  const uint64_t rows = n / cols;
  if (cols % qtype_block(type) != 0)
    fail(ErrorCode::BadArgument, "tensor " + name + ": rows of " + std::to_string(cols) + " do not split into blocks");
  const size_t rb = qtype_row_bytes(type, cols);
  const uint32_t gt = ggml_of_qtype(type);
  T t{name, std::move(dims), gt, std::vector<uint8_t>(rows * rb), rows * rb};
  for (uint64_t r = 0; r < rows; r++) encode_row(type, data + r * cols, t.bytes.data() + r * rb, cols);
  tensors_.push_back(std::move(t));
}

const char* qtype_names() { return "q8_0|q4_0|q4_1|q5_0|q5_1|q4_k|q5_k|f16|bf16|f32"; }

QType parse_qtype(const std::string& s) {
  if (s == "f32") return QType::F32;
  if (s == "f16") return QType::F16;
  if (s == "bf16") return QType::BF16;
  if (s == "q8_0") return QType::Q8_0;
  if (s == "q4_0") return QType::Q4_0;
  if (s == "q4_1") return QType::Q4_1;
  if (s == "q5_0") return QType::Q5_0;
  if (s == "q5_1") return QType::Q5_1;
  if (s == "q4_k") return QType::Q4_K;
  if (s == "q5_k") return QType::Q5_K;
  fail(ErrorCode::BadArgument, "unknown weight type '" + s + "' (one of " + qtype_names() + ")");
}

void GgufWriter::add_tensor_info(const std::string& name, std::vector<uint64_t> dims, QType type) {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  const int cols = (int)dims[0];
  if (cols % qtype_block(type) != 0)
    fail(ErrorCode::BadArgument, "tensor " + name + ": rows of " + std::to_string(cols) + " do not split into blocks");
  const uint64_t size = n / cols * qtype_row_bytes(type, cols);
  tensors_.push_back(T{name, std::move(dims), ggml_of_qtype(type), {}, size});
}

std::vector<uint8_t> GgufWriter::header(uint32_t alignment) const {
  std::vector<uint8_t> o;
  o.insert(o.end(), {'G', 'G', 'U', 'F'});
  put<uint32_t>(o, 3);
  put<uint64_t>(o, tensors_.size());
  put<uint64_t>(o, n_kv_ + 1);
  o.insert(o.end(), kv_.begin(), kv_.end());
  put_str(o, "general.alignment");
  put<uint32_t>(o, 4);
  put<uint32_t>(o, alignment);
  uint64_t off = 0;
  for (const T& t : tensors_) {
    put_str(o, t.name);
    put<uint32_t>(o, (uint32_t)t.dims.size());
    for (uint64_t d : t.dims) put<uint64_t>(o, d);
    put<uint32_t>(o, t.ggml_type);
    put<uint64_t>(o, off);
    off += (t.size + alignment - 1) / alignment * alignment;
  }
  o.resize((o.size() + alignment - 1) / alignment * alignment, 0);
  return o;
}

std::vector<uint8_t> GgufWriter::finish(uint32_t alignment) const {
  std::vector<uint8_t> o = header(alignment);
  for (const T& t : tensors_) {
    if (t.bytes.size() != t.size) fail(ErrorCode::BadArgument, "tensor " + t.name + " has no data to write");
    o.insert(o.end(), t.bytes.begin(), t.bytes.end());
    o.resize((o.size() + alignment - 1) / alignment * alignment, 0);
  }
  return o;
}

void add_t5_tokenizer(GgufWriter& w, const std::vector<std::string>& pieces, const std::vector<float>& scores,
                      const std::vector<int32_t>& types, bool add_space_prefix, bool add_eos) {
  w.add_string("tokenizer.ggml.model", "t5");
  w.add_strings("tokenizer.ggml.tokens", pieces);
  w.add_f32s("tokenizer.ggml.scores", scores);
  w.add_i32s("tokenizer.ggml.token_type", types);
  w.add_u32("tokenizer.ggml.eos_token_id", 1);
  w.add_u32("tokenizer.ggml.unknown_token_id", 2);
  w.add_u32("tokenizer.ggml.padding_token_id", 0);
  w.add_bool("tokenizer.ggml.add_space_prefix", add_space_prefix);
  w.add_bool("tokenizer.ggml.add_bos_token", false);
  w.add_bool("tokenizer.ggml.add_eos_token", add_eos);
}

void add_spm_tokenizer(GgufWriter& w, const Tokenizer& tok, const std::vector<std::string>& extra_control) {
  // llama2.c's tokenizer.bin spells spaces as ' '; SentencePiece in GGUF as U+2581.
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (int i = 0; i < tok.vocab_size(); i++) {
    std::string p;
    for (char ch : tok.piece(i)) p += ch == ' ' ? std::string("\xE2\x96\x81") : std::string(1, ch);
    pieces.push_back(p);
    scores.push_back(tok.score(i));
    types.push_back(i == 0 ? 2 : (i == 1 || i == 2) ? 3 : tok.byte_value(i) >= 0 ? 6 : 1);
  }
  for (const std::string& e : extra_control) {
    pieces.push_back(e);
    scores.push_back(0.0f);
    types.push_back(3);
  }
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_strings("tokenizer.ggml.tokens", pieces);
  w.add_f32s("tokenizer.ggml.scores", scores);
  w.add_i32s("tokenizer.ggml.token_type", types);
  w.add_u32("tokenizer.ggml.bos_token_id", tok.bos_id());
  w.add_u32("tokenizer.ggml.eos_token_id", tok.eos_id());
  w.add_u32("tokenizer.ggml.unknown_token_id", 0);
}

void add_attention_kinds(GgufWriter& w, const std::string& kinds_key, const std::string& prefix,
                         const std::vector<AttnKind>& kinds, const ModelConfig& c) {
  if (kinds.empty()) return;
  std::vector<std::string> names;
  bool additive = false, sparse = false;
  for (AttnKind k : kinds) {
    names.push_back(attn_kind_name(k));
    additive |= k == AttnKind::Additive;
    sparse |= k == AttnKind::BlockSparse;
  }
  w.add_strings(kinds_key, names);
  if (additive) w.add_u32(prefix + "additive.length", c.additive_dim);
  if (sparse) {
    w.add_u32(prefix + "sparse.block_size", c.sparse.block);
    w.add_u32(prefix + "sparse.window_blocks", c.sparse.window_blocks);
    w.add_u32(prefix + "sparse.global_tokens", c.sparse.global_tokens);
    w.add_u32(prefix + "sparse.random_blocks", c.sparse.random_blocks);
    if (c.sparse.seed > 0xffffffffu) fail(ErrorCode::Unsupported, "sparse pattern seeds above 2^32 cannot be written");
    w.add_u32(prefix + "sparse.seed", (uint32_t)c.sparse.seed);
  }
}

void add_additive_tensors(GgufWriter& w, const std::string& p, const char* name, const AdditiveWeights& a,
                          const ModelConfig& c) {
  const uint64_t rows = (uint64_t)c.n_heads * c.additive_dim, hd = c.head_dim;
  const std::string base = p + name + "_add_";
  w.add_tensor_f32(base + "q.weight", {hd, rows}, a.wq);
  w.add_tensor_f32(base + "k.weight", {hd, rows}, a.wk);
  w.add_tensor_f32(base + "v.weight", {(uint64_t)c.additive_dim, (uint64_t)c.n_heads}, a.v);
}

std::vector<uint8_t> llama2c_to_gguf(const LoadedModel& m, const Tokenizer& tok, const std::string& name, QType type) {
  const ModelConfig& c = m.config;
  if (c.arch != "llama") fail(ErrorCode::Unsupported, "only llama models can be converted");
  if (m.weights.tok_embed.type != QType::F32) fail(ErrorCode::Unsupported, "only f32 models can be converted");
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_string("general.name", name);
  w.add_u32("llama.context_length", c.seq_len);
  w.add_u32("llama.embedding_length", c.dim);
  w.add_u32("llama.feed_forward_length", c.hidden_dim);
  w.add_u32("llama.block_count", c.n_layers);
  w.add_u32("llama.attention.head_count", c.n_heads);
  w.add_u32("llama.attention.head_count_kv", c.n_kv_heads);
  w.add_u32("llama.rope.dimension_count", c.rot_dims());
  w.add_f32("llama.rope.freq_base", c.rope_theta);
  w.add_f32("llama.attention.layer_norm_rms_epsilon", c.norm_eps);
  add_attention_kinds(w, "llama.attention.layer_kinds", "llama.attention.", c.layer_attn, c);
  add_spm_tokenizer(w, tok);
  const ModelWeights& W = m.weights;
  const uint64_t d = c.dim, q = c.q_dim(), kv = c.kv_dim(), h = c.hidden_dim, V = c.vocab_size;
  // Block types need rows that split into whole blocks; other matrices fall back to f16.
  const QType wanted = type;
  auto typed = [&](uint64_t cols) { return cols % qtype_block(wanted) == 0 ? wanted : QType::F16; };
  w.add_tensor("token_embd.weight", {d, V}, W.tok_embed.f32(), typed(d));
  for (int l = 0; l < c.n_layers; l++) {
    const LayerWeights& L = W.layers[l];
    const std::string p = "blk." + std::to_string(l) + ".";
    w.add_tensor_f32(p + "attn_norm.weight", {d}, L.attn_norm);
    w.add_tensor(p + "attn_q.weight", {d, q}, L.wq.f32(), typed(d));
    w.add_tensor(p + "attn_k.weight", {d, kv}, L.wk.f32(), typed(d));
    w.add_tensor(p + "attn_v.weight", {d, kv}, L.wv.f32(), typed(d));
    w.add_tensor(p + "attn_output.weight", {q, d}, L.wo.f32(), typed(q));
    if (c.attn_of(l) == AttnKind::Additive) add_additive_tensors(w, p, "attn", L.additive, c);
    w.add_tensor_f32(p + "ffn_norm.weight", {d}, L.ffn_norm);
    w.add_tensor(p + "ffn_gate.weight", {d, h}, L.w_gate.f32(), typed(d));
    w.add_tensor(p + "ffn_down.weight", {h, d}, L.w_down.f32(), typed(h));
    w.add_tensor(p + "ffn_up.weight", {d, h}, L.w_up.f32(), typed(d));
  }
  w.add_tensor_f32("output_norm.weight", {d}, W.final_norm);
  if (!c.tied_classifier) w.add_tensor("output.weight", {d, V}, W.classifier.f32(), typed(d));
  return w.finish();
}

}  // namespace qkv
