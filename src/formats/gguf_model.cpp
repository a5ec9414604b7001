// GGUF architectures as rows of the layer-options table. So far: llama (RMSNorm, RoPE with
// adjacent pairs as llama.cpp stores llama weights, SwiGLU, grouped-query heads); weights in
// F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K or Q6_K, kept as stored.
#include "gguf_model.h"

#include "../common.h"

namespace qkv {

const char* gguf_supported_archs() { return "llama"; }

namespace {
[[noreturn]] void bad(const std::string& m) { fail(ErrorCode::BadModel, "GGUF: " + m); }

int to_int(int64_t v, const std::string& key) {
  if (v < 0 || v > (1 << 30)) bad("key " + key + " = " + std::to_string(v) + " is out of range");
  return (int)v;
}

// A (rows, cols) weight; GGUF lists dims fastest first, so ne = [cols, rows].
Tensor weight(const GgufFile& g, const std::string& name, int64_t rows, int64_t cols, bool required = true) {
  const GgufTensorInfo* t = g.find_tensor(name);
  if (!t) {
    if (required) bad("tensor " + name + " is missing");
    return Tensor();
  }
  const bool vec = rows == 1;
  const bool shape_ok = vec ? (t->dims.size() == 1 && (int64_t)t->dims[0] == cols)
                            : (t->dims.size() == 2 && (int64_t)t->dims[0] == cols && (int64_t)t->dims[1] == rows);
  if (!shape_ok) {
    std::string got;
    for (uint64_t d : t->dims) got += (got.empty() ? "" : " x ") + std::to_string(d);
    bad("tensor " + name + " has shape [" + got + "], expected [" + std::to_string(cols) +
        (vec ? "" : " x " + std::to_string(rows)) + "]");
  }
  DType type;
  switch (t->type) {
    case 0: type = DType::F32; break;
    case 1: type = DType::F16; break;
    case 30: type = DType::BF16; break;
    case 8: type = DType::Q8_0; break;
    case 2: type = DType::Q4_0; break;
    case 3: type = DType::Q4_1; break;
    case 6: type = DType::Q5_0; break;
    case 7: type = DType::Q5_1; break;
    case 12: type = DType::Q4_K; break;
    case 13: type = DType::Q5_K; break;
    case 14: type = DType::Q6_K; break;
    default:
      fail(ErrorCode::Unsupported, std::string("GGUF: tensor ") + name + " is " + ggml_type_name(t->type) +
                                       "; qkv runs F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K");
  }
  if (vec && type != DType::F32)
    fail(ErrorCode::Unsupported, std::string("GGUF: tensor ") + name + " is " + ggml_type_name(t->type) + "; norm weights must be F32");
  Tensor w;
  w.type = type;
  w.data = g.tensor_data(*t);
  w.rows = rows;
  w.cols = cols;
  return w;
}
}  // namespace

LoadedModel load_gguf_model(const GgufFile& g) {
  const std::string arch = g.get_string("general.architecture");
  if (arch != "llama")
    fail(ErrorCode::Unsupported, "GGUF architecture '" + arch + "' is not supported; supported: " + gguf_supported_archs());
  auto key = [&](const char* k) { return arch + "." + k; };
  ModelConfig c;
  c.arch = arch;
  c.dim = to_int(g.get_int(key("embedding_length")), key("embedding_length"));
  c.hidden_dim = to_int(g.get_int(key("feed_forward_length")), key("feed_forward_length"));
  c.n_layers = to_int(g.get_int(key("block_count")), key("block_count"));
  c.n_heads = to_int(g.get_int(key("attention.head_count")), key("attention.head_count"));
  c.n_kv_heads = to_int(g.get_int_or(key("attention.head_count_kv"), c.n_heads), key("attention.head_count_kv"));
  c.seq_len = to_int(g.get_int(key("context_length")), key("context_length"));
  if (c.n_heads <= 0 || c.dim % c.n_heads != 0)
    bad(key("embedding_length") + " = " + std::to_string(c.dim) + " is not divisible by head_count = " + std::to_string(c.n_heads));
  c.head_dim = c.dim / c.n_heads;
  c.norm = NormKind::RMSNorm;
  c.norm_eps = (float)g.get_float_or(key("attention.layer_norm_rms_epsilon"), 1e-5);
  c.pos = PosKind::RopeAdjacent;
  c.rope_theta = (float)g.get_float_or(key("rope.freq_base"), 10000.0);
  c.n_rot = to_int(g.get_int_or(key("rope.dimension_count"), c.head_dim), key("rope.dimension_count"));
  if (const GgufValue* s = g.find(key("rope.scaling.type"))) {
    if (s->kind == GgufKind::STRING && s->s == "linear")
      c.rope_freq_scale = (float)(1.0 / g.get_float(key("rope.scaling.factor")));
    else if (!(s->kind == GgufKind::STRING && s->s == "none"))
      fail(ErrorCode::Unsupported, "GGUF: rope scaling '" + s->s + "' is not supported yet (linear and none are)");
  }
  c.ffn = FfnKind::SwiGLU;
  const GgufTensorInfo* emb = g.find_tensor("token_embd.weight");
  if (!emb || emb->dims.size() != 2) bad("tensor token_embd.weight is missing or not 2-D");
  c.vocab_size = to_int((int64_t)emb->dims[1], "the vocabulary size (token_embd.weight)");
  c.tied_classifier = g.find_tensor("output.weight") == nullptr;
  c.validate();

  LoadedModel m;
  m.config = c;
  m.storage = g.blob();
  ModelWeights& w = m.weights;
  const int64_t d = c.dim, q = c.q_dim(), kv = c.kv_dim(), h = c.hidden_dim;
  w.tok_embed = weight(g, "token_embd.weight", c.vocab_size, d);
  w.layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; l++) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights& L = w.layers[l];
    L.attn_norm = weight(g, p + "attn_norm.weight", 1, d).f32();
    L.wq = weight(g, p + "attn_q.weight", q, d);
    L.wk = weight(g, p + "attn_k.weight", kv, d);
    L.wv = weight(g, p + "attn_v.weight", kv, d);
    L.wo = weight(g, p + "attn_output.weight", d, q);
    L.ffn_norm = weight(g, p + "ffn_norm.weight", 1, d).f32();
    L.w_gate = weight(g, p + "ffn_gate.weight", h, d);
    L.w_down = weight(g, p + "ffn_down.weight", d, h);
    L.w_up = weight(g, p + "ffn_up.weight", h, d);
  }
  w.final_norm = weight(g, "output_norm.weight", 1, d).f32();
  w.classifier = c.tied_classifier ? w.tok_embed : weight(g, "output.weight", c.vocab_size, d);
  return m;
}

Tokenizer load_gguf_tokenizer(const GgufFile& g) {
  const std::string model = g.get_string("tokenizer.ggml.model");
  if (model != "llama")
    fail(ErrorCode::Unsupported, "GGUF tokenizer '" + model + "' is not supported yet (SentencePiece 'llama' is)");
  const GgufValue& toks = g.get("tokenizer.ggml.tokens");
  if (toks.kind != GgufKind::ARRAY || toks.elem != GgufKind::STRING) bad("tokenizer.ggml.tokens must be an array of strings");
  std::vector<std::string> pieces;
  pieces.reserve(toks.arr.size());
  for (const GgufValue& v : toks.arr) pieces.push_back(v.s);
  std::vector<float> scores(pieces.size(), 0.0f);
  if (const GgufValue* s = g.find("tokenizer.ggml.scores")) {
    if (s->kind != GgufKind::ARRAY || s->arr.size() != pieces.size()) bad("tokenizer.ggml.scores must have one score per token");
    for (size_t i = 0; i < pieces.size(); i++) scores[i] = (float)(s->arr[i].is_float() ? s->arr[i].f : (double)s->arr[i].i);
  }
  std::vector<int> types;
  if (const GgufValue* t = g.find("tokenizer.ggml.token_type")) {
    if (t->kind != GgufKind::ARRAY || t->arr.size() != pieces.size()) bad("tokenizer.ggml.token_type must have one type per token");
    for (const GgufValue& v : t->arr) types.push_back((int)v.i);
  }
  const int bos = (int)g.get_int_or("tokenizer.ggml.bos_token_id", 1);
  const int eos = (int)g.get_int_or("tokenizer.ggml.eos_token_id", 2);
  const int unk = (int)g.get_int_or("tokenizer.ggml.unknown_token_id", 0);
  bool prefix = true;
  if (const GgufValue* a = g.find("tokenizer.ggml.add_space_prefix")) prefix = a->u != 0;
  return Tokenizer::from_spm_pieces(std::move(pieces), std::move(scores), std::move(types), bos, eos, unk, prefix);
}

}  // namespace qkv
