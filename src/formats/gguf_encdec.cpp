// T5 GGUF files: hyperparameters (t5.*), encoder and decoder tensors as views, and the Unigram
// vocabulary. Every tensor's shape and type is checked before a view is made.
#include "gguf_encdec.h"

#include "../common.h"

namespace qkv {

namespace {
[[noreturn]] void bad(const std::string& m) { fail(ErrorCode::BadModel, "GGUF: " + m); }

// A (rows, cols) matrix of any supported type, or a (cols,) f32 vector (gguf_weight).
Tensor weight(const GgufFile& g, const std::string& name, int64_t rows, int64_t cols, bool required = true,
              bool vec = false) {
  return gguf_weight(g, name, rows, cols, required, vec, "it must be F32");
}
const float* vec(const GgufFile& g, const std::string& name, int64_t n, bool required = true) {
  return weight(g, name, 1, n, required, true).f32();
}

}  // namespace

bool gguf_is_encdec(const GgufFile& g) {
  const GgufValue* a = g.find("general.architecture");
  return a && a->kind == GgufKind::STRING && a->s == "t5";
}

EncDecModelData load_gguf_encdec(const GgufFile& g) {
  const std::string arch = g.get_string("general.architecture");
  if (arch != "t5") fail(ErrorCode::Unsupported, "GGUF architecture '" + arch + "' is not an encoder-decoder one (t5)");
  auto key = [&](const char* k) { return arch + "." + k; };
  EncDecModelData m;
  ModelConfig& c = m.config;
  c.arch = arch;
  c.dim = gguf_int(g.get_int(key("embedding_length")), key("embedding_length"));
  c.hidden_dim = gguf_int(g.get_int(key("feed_forward_length")), key("feed_forward_length"));
  c.n_layers = gguf_int(g.get_int(key("block_count")), key("block_count"));
  m.encdec.n_dec_layers = gguf_int(g.get_int_or(key("decoder_block_count"), c.n_layers), key("decoder_block_count"));
  c.n_heads = gguf_int(g.get_int(key("attention.head_count")), key("attention.head_count"));
  c.n_kv_heads = gguf_int(g.get_int_or(key("attention.head_count_kv"), c.n_heads), key("attention.head_count_kv"));
  c.seq_len = gguf_int(g.get_int_or(key("context_length"), 512), key("context_length"));
  if (c.n_heads <= 0) bad(key("attention.head_count") + " must be positive");
  if (g.find(key("attention.key_length"))) {  // T5: d_kv, heads need not split d_model
    c.head_dim = gguf_int(g.get_int(key("attention.key_length")), key("attention.key_length"));
    if (g.get_int_or(key("attention.value_length"), c.head_dim) != c.head_dim)
      fail(ErrorCode::Unsupported, "GGUF: " + key("attention.value_length") + " differs from the key length");
  } else {
    if (c.dim % c.n_heads != 0) bad(key("embedding_length") + " is not divisible by " + key("attention.head_count"));
    c.head_dim = c.dim / c.n_heads;
  }
  c.norm = NormKind::RMSNorm;
  c.norm_eps = (float)g.get_float_or(key("attention.layer_norm_rms_epsilon"), 1e-6);
  c.pos = PosKind::RelativeBucket;
  c.rel_buckets =
      gguf_int(g.get_int_or(key("attention.relative_buckets_count"), 32), key("attention.relative_buckets_count"));
  c.rel_max_distance = 128;  // not stored; llama.cpp and every T5 checkpoint use 128
  c.causal = false;
  c.ffn = g.find_tensor("enc.blk.0.ffn_gate.weight") ? FfnKind::GeGLU : FfnKind::ReLU;
  const GgufTensorInfo* emb = g.find_tensor("token_embd.weight");
  if (!emb || emb->rank() > 2) bad("tensor token_embd.weight is missing or not 2-D");
  c.vocab_size = gguf_int((int64_t)emb->dim(1), "the vocabulary size (token_embd.weight)");
  c.tied_classifier = g.find_tensor("output.weight") == nullptr;
  c.attn_scale = 1.0f;  // T5 does not scale q.k (it is folded into the weights)
  // Attention kinds per stack (docs/attention-kinds.md), their parameters under t5.attention.*.
  EncDecConfig& e = m.encdec;
  gguf_attention_kinds(g, key("attention.layer_kinds"), key("attention."), c.n_layers, e.enc_attn, c);
  gguf_attention_kinds(g, key("decoder.attention.layer_kinds"), key("attention."), m.encdec.n_dec_layers, e.dec_attn,
                       c);
  gguf_attention_kinds(g, key("cross_attention.layer_kinds"), key("attention."), m.encdec.n_dec_layers, e.cross_attn,
                       c);
  c.validate();
  m.encdec.decoder_start_id = g.find(key("decoder_start_token_id"))
                                  ? gguf_int(g.get_int(key("decoder_start_token_id")), key("decoder_start_token_id"))
                                  : 0;
  if (m.encdec.decoder_start_id >= c.vocab_size)
    bad(key("decoder_start_token_id") + " = " + std::to_string(m.encdec.decoder_start_id) +
        " is outside the vocabulary");

  m.storage = g.blob();
  EncDecWeights& w = m.weights;
  const int64_t d = c.dim, q = c.q_dim(), kv = c.kv_dim(), h = c.hidden_dim;
  w.tok_embed = weight(g, "token_embd.weight", c.vocab_size, d);
  auto layer = [&](const std::string& p, bool dec, int l) {
    EncDecLayerWeights L;
    L.attn_norm = vec(g, p + "attn_norm.weight", d);
    L.wq = weight(g, p + "attn_q.weight", q, d);
    L.wk = weight(g, p + "attn_k.weight", kv, d);
    L.wv = weight(g, p + "attn_v.weight", kv, d);
    L.wo = weight(g, p + "attn_o.weight", d, q);
    // The bias table is read as floats: a stored F16/BF16/quantized one is decoded once here.
    const Tensor rb = weight(g, p + "attn_rel_b.weight", c.rel_buckets, c.n_heads, l == 0);
    if (rb && rb.type == DType::F32) {
      L.rel_bias = rb.f32();
    } else if (rb) {
      if (qtype_block(rb.type) > 1 && c.n_heads % qtype_block(rb.type) != 0)
        bad("tensor " + p + "attn_rel_b.weight rows are not whole blocks");
      m.decoded.push_back(std::make_shared<std::vector<float>>((size_t)c.rel_buckets * c.n_heads));
      for (int r = 0; r < c.rel_buckets; r++)
        dequantize_row_ref(rb.type, rb.row(r), m.decoded.back()->data() + (size_t)r * c.n_heads, c.n_heads);
      L.rel_bias = m.decoded.back()->data();
    }
    L.self_add = gguf_additive_weights(
        g, p, "attn", EncDecConfig::kind_at(dec ? m.encdec.dec_attn : m.encdec.enc_attn, l) == AttnKind::Additive, c);
    L.cross_add = gguf_additive_weights(g, p, "cross_attn",
                                        dec && EncDecConfig::kind_at(m.encdec.cross_attn, l) == AttnKind::Additive, c);
    if (dec) {
      L.cross_norm = vec(g, p + "cross_attn_norm.weight", d);
      L.cq = weight(g, p + "cross_attn_q.weight", q, d);
      L.ck = weight(g, p + "cross_attn_k.weight", kv, d);
      L.cv = weight(g, p + "cross_attn_v.weight", kv, d);
      L.co = weight(g, p + "cross_attn_o.weight", d, q);
    }
    L.ffn_norm = vec(g, p + "ffn_norm.weight", d);
    if (c.ffn == FfnKind::GeGLU) L.w_gate = weight(g, p + "ffn_gate.weight", h, d);
    else if (g.find_tensor(p + "ffn_gate.weight"))
      bad("tensor " + p + "ffn_gate.weight is present but enc.blk.0 has none");
    L.w_up = weight(g, p + "ffn_up.weight", h, d);
    L.w_down = weight(g, p + "ffn_down.weight", d, h);
    return L;
  };
  for (int l = 0; l < c.n_layers; l++) w.enc.push_back(layer("enc.blk." + std::to_string(l) + ".", false, l));
  for (int l = 0; l < m.encdec.n_dec_layers; l++) w.dec.push_back(layer("dec.blk." + std::to_string(l) + ".", true, l));
  w.enc_norm = vec(g, "enc.output_norm.weight", d);
  w.dec_norm = vec(g, "dec.output_norm.weight", d);
  w.classifier = c.tied_classifier ? w.tok_embed : weight(g, "output.weight", c.vocab_size, d);
  return m;
}

Tokenizer load_gguf_unigram(const GgufFile& g) {
  const GgufValue& tv = g.get("tokenizer.ggml.tokens");
  if (tv.kind != GgufKind::ARRAY || tv.elem != GgufKind::STRING)
    bad("tokenizer.ggml.tokens must be an array of strings");
  std::vector<std::string> pieces;
  for (size_t i = 0; i < tv.size(); i++) pieces.push_back(tv.str_at(i));
  const size_t n = pieces.size();
  std::vector<float> scores(n, 0.0f);
  if (const GgufValue* s = g.find("tokenizer.ggml.scores")) {
    if (s->kind != GgufKind::ARRAY || s->size() != n ||
        !(n == 0 || s->elems_int() || s->elem == GgufKind::F32 || s->elem == GgufKind::F64))
      bad("tokenizer.ggml.scores must have one score per token");
    for (size_t i = 0; i < n; i++) scores[i] = (float)s->num_at(i);
  }
  std::vector<int> types;
  if (const GgufValue* t = g.find("tokenizer.ggml.token_type")) {
    if (t->kind != GgufKind::ARRAY || t->size() != n || !(n == 0 || t->elems_int()))
      bad("tokenizer.ggml.token_type must have one integer type per token");
    for (size_t i = 0; i < n; i++) types.push_back((int)t->int_at(i));
  }
  std::vector<uint8_t> charsmap;
  if (const GgufValue* cm = g.find("tokenizer.ggml.precompiled_charsmap")) {
    if (cm->kind != GgufKind::ARRAY || (cm->elem != GgufKind::U8 && cm->elem != GgufKind::I8))
      bad("tokenizer.ggml.precompiled_charsmap must be an array of bytes");
    charsmap.assign(cm->raw.begin(), cm->raw.end());  // u8 or i8: the bytes as they are
  }
  // llama.cpp's defaults for t5: EOS 1, UNK 2, no BOS; EOS appended.
  const int eos = gguf_token_id(g, "tokenizer.ggml.eos_token_id", 1, n),
            unk = gguf_token_id(g, "tokenizer.ggml.unknown_token_id", 2, n);
  const int bos = gguf_token_id(g, "tokenizer.ggml.bos_token_id", -1, n);
  if (unk < 0) bad("tokenizer.ggml.unknown_token_id is outside the vocabulary; a unigram tokenizer needs one");
  Tokenizer t =
      Tokenizer::from_unigram(std::move(pieces), std::move(scores), std::move(types), unk,
                              gguf_flag(g, "tokenizer.ggml.add_space_prefix", true),
                              gguf_flag(g, "tokenizer.ggml.remove_extra_whitespaces", false), std::move(charsmap));
  t.set_specials(bos, eos, gguf_flag(g, "tokenizer.ggml.add_bos_token", false) && bos >= 0,
                 gguf_flag(g, "tokenizer.ggml.add_eos_token", true), {});
  return t;
}

bool is_encdec_model(const std::shared_ptr<const Blob>& blob) {
  return blob && looks_like_gguf(blob->data(), blob->size()) && gguf_is_encdec(GgufFile::parse(blob));
}

EncDecModelData load_encdec_model(std::shared_ptr<const Blob> blob) {
  if (!blob || blob->size() == 0) fail(ErrorCode::BadModel, "model file is empty");
  if (!looks_like_gguf(blob->data(), blob->size()))
    fail(ErrorCode::Unsupported, "encoder-decoder models load from GGUF files (t5) only");
  return load_gguf_encdec(GgufFile::parse(std::move(blob)));
}

}  // namespace qkv
