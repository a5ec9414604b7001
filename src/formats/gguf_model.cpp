// GGUF architectures as rows of the layer-options table (llama, qwen2, qwen3, gpt2, phi3, gemma, gemma2, gemma3,
// granite, olmo2, stablelm, starcoder2, smollm3, minicpm, exaone, internlm2, command-r, cohere2; mixture of experts
// qwen3moe, olmoe, granitemoe; encoders bert, nomic-bert: kArchs), weights in F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q4_K, Q5_K or Q6_K, kept as stored (a fused QKV or gate+up matrix becomes row views). Tokenizers: SentencePiece
// and byte-level BPE.
#include "gguf_model.h"

#include <cctype>
#include <cmath>

#include "../common.h"
#include "../kernels/qdot.h"
#include "gguf_encdec.h"

namespace qkv {

namespace {
[[noreturn]] void bad(const std::string& m) { fail(ErrorCode::BadModel, "GGUF: " + m); }

// A (rows, cols) weight, or with rows 1 a (cols,) F32 vector (gguf_weight).
Tensor weight(const GgufFile& g, const std::string& name, int64_t rows, int64_t cols, bool required = true) {
  return gguf_weight(g, name, rows, cols, required, rows == 1, "norm weights must be F32");
}

// One row per supported architecture: the options it sets and the tensors it carries.
struct ArchRow {
  const char* name;
  NormKind norm;
  PosKind pos;
  FfnKind ffn;
  bool qkv_bias;            // attn_q/k/v.bias
  bool qk_norm;             // attn_q_norm / attn_k_norm (per head, before RoPE)
  bool fused_qkv;           // attn_qkv (rows q, then k, then v)
  bool all_bias;            // every linear layer and norm has a bias (GPT-2)
  bool fused_up;            // ffn_up holds the gate rows, then the up rows (Phi-3)
  bool embed_sqrt_dim;      // token embeddings scaled by sqrt(dim) (Gemma)
  bool post_norms = false;  // RMSNorms of the attention and feed-forward outputs before their residual adds
  // Sliding-window layers: l % p < p - 1 (llama.cpp's swa pattern; 0 = none): 2 puts the window on
  // the even layers (Gemma 2), 6 on five layers of each six (Gemma 3).
  int swa_pattern = 0;
  bool softcaps = false;       // attention scores and logits soft-capped, llama.cpp's defaults 50 and 30 (Gemma 2)
  float swa_rope_base = 0.0f;  // > 0: the sliding-window layers' RoPE base, unscaled (Gemma 3: 10000)
  bool encoder = false;        // BERT layout: bidirectional, post-norm, embedding norm, no LM head
  // Granite: embedding, residual, attention-score and logit multipliers from the *.embedding_scale,
  // *.residual_scale, *.attention.scale and *.logit_scale keys (1); MiniCPM: the same but for the
  // attention scale, every key required (2).
  int granite_scales = 0;
  bool no_pre_norms = false;   // no attn_norm / ffn_norm: the blocks read x as is (OLMo 2)
  bool qk_norm_whole = false;  // attn_q_norm / attn_k_norm span the whole projection, not one head (OLMo 2)
  bool opt_attn_bias = false;  // attn_q/k/v/output.bias where the file has them (Granite, StableLM)
  bool norm_bias = false;      // LayerNorm biases on attn_norm, ffn_norm and output_norm (StableLM)
  int nope_step = 0;  // > 0: layers l with (l + 1) % nope_step == 0 take no RoPE (SmolLM3: 4, llama.cpp's rule)
  // Command-R: parallel attention and feed-forward on one LayerNorm (no ffn_norm), logits times
  // *.logit_scale.
  bool parallel = false;
  // Mixture-of-experts feed-forwards (ffn_gate_inp, ffn_{gate,up,down}_exps): 1 takes the chosen
  // experts' probabilities as they are (OLMoE), 2 renormalises them to sum 1 (Qwen3-MoE, Granite-MoE).
  int moe = 0;
  // Cohere 2: sliding-window layers (three of each attention.sliding_window_pattern, 4) with RoPE,
  // the others global without RoPE; attention.sliding_window and logit_scale required; the
  // classifier is always the token embedding.
  bool swa_global_nope = false;
};
const ArchRow kArchs[] = {
    {"llama", NormKind::RMSNorm, PosKind::RopeAdjacent, FfnKind::SwiGLU, false, false, false, false, false, false},
    {"qwen2", NormKind::RMSNorm, PosKind::RopeHalves, FfnKind::SwiGLU, true, false, false, false, false, false},
    {"qwen3", NormKind::RMSNorm, PosKind::RopeHalves, FfnKind::SwiGLU, false, true, false, false, false, false},
    {"gpt2", NormKind::LayerNorm, PosKind::Learned, FfnKind::GELU, false, false, true, true, false, false},
    // Phi-3: QKV fused or not; llama.cpp ignores its sliding window, and so does qkv.
    {"phi3", NormKind::RMSNorm, PosKind::RopeHalves, FfnKind::SwiGLU, false, false, false, false, true, false},
    // Gemma: llama.cpp's converter stores the RMSNorm weights as (1 + w), so the norm is plain;
    // head width from attention.key_length (256 for gemma-2b and 7b, not dim / heads); tied output.
    {"gemma", NormKind::RMSNorm, PosKind::RopeHalves, FfnKind::GeGLU, false, false, false, false, false, true},
    // Gemma 2: Gemma plus RMSNorms of the attention and feed-forward outputs before their residual
    // adds, attention scores and logits soft-capped (cap * tanh(x / cap)), and a sliding window
    // on the even layers (llama.cpp's swa pattern for gemma2).
    {"gemma2", NormKind::RMSNorm, PosKind::RopeHalves, FfnKind::GeGLU, false, false, false, false, false, true, true, 2,
     true},
    // Gemma 3: Gemma 2's post-norms, plus per-head RMSNorms of Q and K before RoPE (as Qwen3), no
    // soft-caps, and a sliding window on five layers of each six (0-4, 6-10, ...), which take RoPE
    // base 10000 unscaled; the others take rope.freq_base and rope.scaling. Without a
    // sliding_window key every layer is global (llama.cpp's rule).
    {"gemma3", NormKind::RMSNorm, PosKind::RopeHalves, FfnKind::GeGLU, false, true, false, false, false, true, true, 6,
     false, 10000.0f},
    // Encoders (llama.cpp's names): BERT with learned positions and GELU; Nomic BERT with a fused
    // QKV, RoPE (NeoX halves) and SwiGLU.
    {"bert", NormKind::LayerNorm, PosKind::Learned, FfnKind::GELU, true, false, false, false, false, false, false, 0,
     false, 0.0f, true},
    {"nomic-bert", NormKind::LayerNorm, PosKind::RopeHalves, FfnKind::SwiGLU, false, false, true, false, false, false,
     false, 0, false, 0.0f, true},
    // Granite (3.x dense): Llama plus four multipliers (see granite_scales); RoPE off when
    // rope.scaling.finetuned is false, as llama.cpp reads it.
    {"granite", NormKind::RMSNorm, PosKind::RopeAdjacent, FfnKind::SwiGLU, false, false, false, false, false, false,
     false, 0, false, 0.0f, false, 1, false, false, true},
    // MiniCPM (1, 2): Granite's multipliers (llama.cpp runs it through its Granite graph).
    {"minicpm", NormKind::RMSNorm, PosKind::RopeAdjacent, FfnKind::SwiGLU, false, false, false, false, false, false,
     false, 0, false, 0.0f, false, 2, false, false, true},
    // EXAONE 3: Llama with NeoX RoPE; InternLM 2: Llama (its fused wqkv split by the converter).
    // Both take attention biases where the file has them.
    {"exaone", NormKind::RMSNorm, PosKind::RopeHalves, FfnKind::SwiGLU, false, false, false, false, false, false, false,
     0, false, 0.0f, false, 0, false, false, true},
    {"internlm2", NormKind::RMSNorm, PosKind::RopeAdjacent, FfnKind::SwiGLU, false, false, false, false, false, false,
     false, 0, false, 0.0f, false, 0, false, false, true},
    // OLMo 2: no pre-norms; RMSNorms of Q and K over the whole projection before RoPE (NeoX halves),
    // and of the attention and feed-forward outputs before their residual adds.
    {"olmo2", NormKind::RMSNorm, PosKind::RopeHalves, FfnKind::SwiGLU, false, true, false, false, false, false, true, 0,
     false, 0.0f, false, 0, true, true},
    // StableLM (2 1.6B, 3B, Zephyr): LayerNorms with biases, partial rotary (rope.dimension_count,
    // NeoX halves), optional Q/K/V biases. StableLM 2 12B's per-head Q/K norms and parallel
    // residual are refused by name.
    {"stablelm",
     NormKind::LayerNorm,
     PosKind::RopeHalves,
     FfnKind::SwiGLU,
     false,
     false,
     false,
     false,
     false,
     false,
     false,
     0,
     false,
     0.0f,
     false,
     0,
     false,
     false,
     true,
     true},
    // StarCoder 2: GPT-2's biases everywhere (LayerNorms, Q/K/V apart, output, non-gated GELU
    // feed-forward) with RoPE (NeoX halves) instead of learned positions.
    {"starcoder2", NormKind::LayerNorm, PosKind::RopeHalves, FfnKind::GELU, false, false, false, true, false, false},
    // SmolLM3: Llama with every fourth layer (3, 7, ...) attending without RoPE.
    {"smollm3",
     NormKind::RMSNorm,
     PosKind::RopeAdjacent,
     FfnKind::SwiGLU,
     false,
     false,
     false,
     false,
     false,
     false,
     false,
     0,
     false,
     0.0f,
     false,
     0,
     false,
     false,
     false,
     false,
     4},
    // Command-R (Cohere's Command-R 35B, Aya 23): LayerNorms without biases, adjacent-pair RoPE,
    // one norm feeding attention and feed-forward in parallel, logits times command-r.logit_scale.
    // Command-R+'s per-head Q/K norms are refused by name.
    {"command-r",
     NormKind::LayerNorm,
     PosKind::RopeAdjacent,
     FfnKind::SwiGLU,
     false,
     false,
     false,
     false,
     false,
     false,
     false,
     0,
     false,
     0.0f,
     false,
     0,
     false,
     false,
     true,
     false,
     0,
     true},
    // Mixture of experts, as llama.cpp's build_moe_ffn runs them: router softmax, top
    // expert_used_count of expert_count, SwiGLU experts. Qwen3-MoE: Qwen3's attention, expert
    // width expert_feed_forward_length; OLMoE: Q/K RMSNorms over the whole projection, NeoX RoPE;
    // Granite-MoE: Granite's multipliers (its shared-expert variant is refused by name).
    {"qwen3moe",
     NormKind::RMSNorm,
     PosKind::RopeHalves,
     FfnKind::SwiGLU,
     false,
     true,
     false,
     false,
     false,
     false,
     false,
     0,
     false,
     0.0f,
     false,
     0,
     false,
     false,
     false,
     false,
     0,
     false,
     2},
    {"olmoe",
     NormKind::RMSNorm,
     PosKind::RopeHalves,
     FfnKind::SwiGLU,
     false,
     true,
     false,
     false,
     false,
     false,
     false,
     0,
     false,
     0.0f,
     false,
     0,
     false,
     true,
     false,
     false,
     0,
     false,
     1},
    {"granitemoe",
     NormKind::RMSNorm,
     PosKind::RopeAdjacent,
     FfnKind::SwiGLU,
     false,
     false,
     false,
     false,
     false,
     false,
     false,
     0,
     false,
     0.0f,
     false,
     1,
     false,
     false,
     true,
     false,
     0,
     false,
     2},
    // Cohere 2 (Command R7B): Command-R's parallel blocks on one LayerNorm with interleaved local
    // (RoPE, sliding window) and global (no RoPE) layers.
    {"cohere2",
     NormKind::LayerNorm,
     PosKind::RopeAdjacent,
     FfnKind::SwiGLU,
     false,
     false,
     false,
     false,
     false,
     false,
     false,
     0,
     false,
     0.0f,
     false,
     0,
     false,
     false,
     false,
     false,
     0,
     true,
     0,
     true},
};

const float* vec(const GgufFile& g, const std::string& name, int64_t n, bool required = true) {
  return weight(g, name, 1, n, required).f32();
}

// A table whose rows are added as floats (position_embd, token_types): F32 only.
const float* f32_table(const GgufFile& g, const std::string& name, int64_t rows, int64_t cols) {
  const Tensor t = weight(g, name, rows, cols);
  if (t.type != DType::F32)
    fail(ErrorCode::Unsupported,
         "GGUF: tensor " + name + " is " + ggml_type_name(ggml_of_qtype(t.type)) + "; it must be F32");
  return t.f32();
}

// A 3-D tensor of n_experts matrices (rows, cols), ggml dims [cols, rows, n_experts], as one
// (n_experts * rows, cols) matrix of stacked views.
Tensor experts(const GgufFile& g, const std::string& name, int64_t n_experts, int64_t rows, int64_t cols) {
  const GgufTensorInfo* t = g.find_tensor(name);
  if (!t) bad("tensor " + name + " is missing");
  if (t->rank() != 3 || (int64_t)t->dim(0) != cols || (int64_t)t->dim(1) != rows || (int64_t)t->dim(2) != n_experts) {
    std::string got;
    for (uint64_t d : t->dims) got += (got.empty() ? "" : " x ") + std::to_string(d);
    bad("tensor " + name + " has shape [" + got + "], expected [" + std::to_string(cols) + " x " +
        std::to_string(rows) + " x " + std::to_string(n_experts) + "]");
  }
  DType type;
  if (!qtype_of_ggml(t->type, &type))
    fail(ErrorCode::Unsupported, "GGUF: tensor " + name + " is " + ggml_type_name(t->type) +
                                     "; qkv runs F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K");
  Tensor w;  // the parser checked the bytes lie within the file; rows of any type are whole blocks
  w.type = type;
  w.data = g.tensor_data(*t);
  w.rows = n_experts * rows;
  w.cols = cols;
  if (!w.data) {  // on the GPU only (a GPU-resident load)
    w.data = absent_placeholder();
    w.absent_offset = (int64_t)g.tensor_file_offset(*t);
    w.absent_part = t->part;
    return w;
  }
  w.finite_scales = qdot_uses_finite_scales() && qdot_scales_finite(type, w.data, w.rows, (int)cols);
  return w;
}

// Rows [r0, r0 + n) of a matrix: a view, no copy (rows of any type are whole blocks).
Tensor rows_of(const Tensor& t, int64_t r0, int64_t n) {
  Tensor v = t;
  if (t.resident()) v.data = static_cast<const uint8_t*>(t.data) + (size_t)r0 * t.row_bytes();
  else v.absent_offset += r0 * (int64_t)t.row_bytes();  // on the GPU only: where its rows start in the file
  v.rows = n;
  return v;
}
}  // namespace

const char* gguf_supported_archs() {
  return "llama, qwen2, qwen3, gpt2, phi3, gemma, gemma2, gemma3, granite, olmo2, stablelm, starcoder2, smollm3, minicpm, exaone, internlm2, command-r, qwen3moe, olmoe, granitemoe, cohere2, bert, nomic-bert";
}

namespace {
// The encoder half of the loader: BERT's tensor names (attn_output_norm and layer_output_norm
// after each residual, token_embd_norm over the embeddings, biases where the file has them).
void load_encoder_weights(const GgufFile& g, const ArchRow& row, LoadedModel& m) {
  const ModelConfig& c = m.config;
  ModelWeights& w = m.weights;
  const int64_t d = c.dim, q = c.q_dim(), kv = c.kv_dim(), h = c.hidden_dim;
  w.tok_embed = weight(g, "token_embd.weight", c.vocab_size, d);
  if (c.pos == PosKind::Learned) w.pos_embed = f32_table(g, "position_embd.weight", c.seq_len, d);
  if (c.n_token_types > 0) w.type_embed = f32_table(g, "token_types.weight", c.n_token_types, d);
  w.embed_norm = vec(g, "token_embd_norm.weight", d);
  w.embed_norm_b = vec(g, "token_embd_norm.bias", d, false);
  w.layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; l++) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights& L = w.layers[l];
    L.additive = gguf_additive_weights(g, p, "attn", c.attn_of(l) == AttnKind::Additive, c);
    if (row.fused_qkv || g.find_tensor(p + "attn_qkv.weight")) {
      const Tensor qkv = weight(g, p + "attn_qkv.weight", q + 2 * kv, d);
      L.wq = rows_of(qkv, 0, q);
      L.wk = rows_of(qkv, q, kv);
      L.wv = rows_of(qkv, q + kv, kv);
      if (const float* bias = vec(g, p + "attn_qkv.bias", q + 2 * kv, false)) {
        L.bq = bias;
        L.bk = bias + q;
        L.bv = bias + q + kv;
      }
    } else {
      L.wq = weight(g, p + "attn_q.weight", q, d);
      L.wk = weight(g, p + "attn_k.weight", kv, d);
      L.wv = weight(g, p + "attn_v.weight", kv, d);
      L.bq = vec(g, p + "attn_q.bias", q, false);
      L.bk = vec(g, p + "attn_k.bias", kv, false);
      L.bv = vec(g, p + "attn_v.bias", kv, false);
    }
    L.wo = weight(g, p + "attn_output.weight", d, q);
    L.bo = vec(g, p + "attn_output.bias", d, false);
    L.attn_norm = vec(g, p + "attn_output_norm.weight", d);
    L.attn_norm_b = vec(g, p + "attn_output_norm.bias", d, false);
    if (c.ffn == FfnKind::SwiGLU) L.w_gate = weight(g, p + "ffn_gate.weight", h, d);
    L.w_up = weight(g, p + "ffn_up.weight", h, d);
    L.b_up = vec(g, p + "ffn_up.bias", h, false);
    L.w_down = weight(g, p + "ffn_down.weight", d, h);
    L.b_down = vec(g, p + "ffn_down.bias", d, false);
    L.ffn_norm = vec(g, p + "layer_output_norm.weight", d);
    L.ffn_norm_b = vec(g, p + "layer_output_norm.bias", d, false);
  }
  if (c.pooling != PoolKind::Rank) return;
  // llama.cpp's classification head; a file with neither stage has no score to give.
  ModelWeights::RankHead& r = w.rank_head;
  r.cls = gguf_weight(g, "cls.weight", d, d, false, false, "");
  r.cls_b = vec(g, "cls.bias", d, false);
  if (const GgufTensorInfo* t = g.find_tensor("cls.output.weight")) {
    if (t->rank() > 2 || t->dim(0) != (uint64_t)d || t->dim(1) < 1 || t->dim(1) > 4096)
      fail(ErrorCode::BadModel, "GGUF: tensor cls.output.weight must be (dim, n) with 1 <= n <= 4096");
    const int64_t n = (int64_t)t->dim(1);
    r.out = gguf_weight(g, "cls.output.weight", n, d, true, false, "");
    r.out_b = vec(g, "cls.output.bias", n, false);
  }
  if (!r.cls && !r.out)
    fail(ErrorCode::BadModel,
         "GGUF: pooling_type 4 (rank) needs a classification head (cls.weight or cls.output.weight)");
}
}  // namespace

namespace {
// Granite's multipliers as llama.cpp reads them: logit_scale required (logits are divided by it),
// the others optional, 0 meaning none; rope.scaling.finetuned false turns RoPE off. MiniCPM
// (minicpm): embedding, residual and logit scales required, no attention scale.
template <class Key>
void apply_granite_scales(const GgufFile& g, const Key& key, bool minicpm, ModelConfig& c) {
  auto scale = [&](const char* k, bool required) -> double {
    if (!required && !g.find(key(k))) return 0.0;
    if (!g.find(key(k))) bad("key " + key(k) + " is missing (this architecture needs it)");
    const double v = g.get_float(key(k));
    if (!(v >= 0.0 && v < 1e6) || (required && v == 0.0)) bad(key(k) + " = " + std::to_string(v) + " is out of range");
    return v;
  };
  c.logit_scale = (float)(1.0 / scale("logit_scale", true));
  if (const double r = scale("residual_scale", minicpm)) c.residual_scale = (float)r;
  if (const double e = scale("embedding_scale", minicpm)) c.embed_scale = (float)e;
  if (minicpm) return;
  if (const double a = scale("attention.scale", false)) c.attn_scale = (float)a;
  if (const GgufValue* f = g.find(key("rope.scaling.finetuned"))) {
    if (f->kind != GgufKind::BOOL) bad(key("rope.scaling.finetuned") + " must be a bool");
    if (!f->u) c.pos = PosKind::None;
  }
}
}  // namespace

LoadedModel load_gguf_model(const GgufFile& g) {
  const std::string arch = g.get_string("general.architecture");
  const ArchRow* row = nullptr;
  for (const ArchRow& r : kArchs)
    if (arch == r.name) row = &r;
  if (!row && gguf_is_encdec(g))
    fail(ErrorCode::Unsupported,
         "GGUF architecture '" + arch +
             "' is an encoder-decoder model, which this operation does not take (it takes decoder-only "
             "models); generate with it through `qkv run` or loadModel()");
  if (!row && arch == "clip")
    fail(ErrorCode::Unsupported,
         "this GGUF is an image encoder (an mmproj / clip file), not a language model: embed images with it "
         "(`qkv embed-image`, loadModel() then embedImage())");
  if (!row)
    fail(ErrorCode::Unsupported,
         "GGUF architecture '" + arch + "' is not supported; supported: " + gguf_supported_archs());
  auto key = [&](const char* k) { return arch + "." + k; };
  ModelConfig c;
  c.arch = arch;
  c.dim = gguf_int(g.get_int(key("embedding_length")), key("embedding_length"));
  c.hidden_dim = gguf_int(g.get_int(key("feed_forward_length")), key("feed_forward_length"));
  c.n_layers = gguf_int(g.get_int(key("block_count")), key("block_count"));
  c.n_heads = gguf_int(g.get_int(key("attention.head_count")), key("attention.head_count"));
  c.n_kv_heads = gguf_int(g.get_int_or(key("attention.head_count_kv"), c.n_heads), key("attention.head_count_kv"));
  c.seq_len = gguf_int(g.get_int(key("context_length")), key("context_length"));
  if (c.n_heads <= 0) bad(key("attention.head_count") + " must be positive");
  if (g.find(key("attention.key_length"))) {  // Qwen3, Gemma: heads need not split the width
    c.head_dim = gguf_int(g.get_int(key("attention.key_length")), key("attention.key_length"));
    if (g.get_int_or(key("attention.value_length"), c.head_dim) != c.head_dim)
      fail(ErrorCode::Unsupported, "GGUF: " + key("attention.value_length") + " differs from the key length");
  } else {
    if (c.dim % c.n_heads != 0)
      bad(key("embedding_length") + " = " + std::to_string(c.dim) +
          " is not divisible by head_count = " + std::to_string(c.n_heads));
    c.head_dim = c.dim / c.n_heads;
  }
  c.norm = row->norm;
  c.norm_eps = (float)(row->norm == NormKind::RMSNorm ? g.get_float_or(key("attention.layer_norm_rms_epsilon"), 1e-5)
                                                      : g.get_float_or(key("attention.layer_norm_epsilon"), 1e-5));
  c.pos = row->pos;
  c.ffn = row->ffn;
  if (row->embed_sqrt_dim) c.embed_scale = std::sqrt((float)c.dim);
  const bool rope = c.pos == PosKind::RopeAdjacent || c.pos == PosKind::RopeHalves;
  if (rope) {
    c.rope_theta = (float)g.get_float_or(key("rope.freq_base"), 10000.0);
    c.n_rot = gguf_int(g.get_int_or(key("rope.dimension_count"), c.head_dim), key("rope.dimension_count"));
    {
      // As llama.cpp reads it: no type means linear, and rope.scaling.factor scales positions
      // for every type but none (longrope's factors are tensors: rope_factors_long/short).
      // yarn takes llama.cpp's defaults for these architectures (extrapolation factor 1, betas
      // 32 and 1; it reads no yarn_* keys for them).
      const GgufValue* s = g.find(key("rope.scaling.type"));
      const std::string type = !s ? "linear" : s->kind == GgufKind::STRING ? s->s : "?";
      if (type != "none" && type != "linear" && type != "yarn" && type != "longrope")
        fail(ErrorCode::Unsupported,
             "GGUF: rope scaling '" + type + "' is not supported (linear, yarn, longrope and none are)");
      if (type != "none" && g.find(key("rope.scaling.factor"))) {
        const double f = g.get_float(key("rope.scaling.factor"));
        if (!(f > 0.0 && f < 1e6)) bad(key("rope.scaling.factor") + " = " + std::to_string(f) + " must be positive");
        c.rope_freq_scale = (float)(1.0 / f);
      }
      c.rope_yarn = type == "yarn";
    }
    if (g.find(key("rope.scaling.attn_factor"))) {
      const double a = g.get_float(key("rope.scaling.attn_factor"));
      if (!(a > 0.0 && a < 1e3))
        bad(key("rope.scaling.attn_factor") + " = " + std::to_string(a) + " must be in (0, 1000)");
      c.rope_attn_factor = (float)a;
    }
    if (g.find(key("rope.scaling.original_context_length")))
      c.rope_orig_context =
          gguf_int(g.get_int(key("rope.scaling.original_context_length")), key("rope.scaling.original_context_length"));
  }
  // RoPE factor tensors other than the ones read below change RoPE in ways qkv does not know:
  // refused by name, not ignored.
  for (const GgufTensorInfo& t : g.tensors())
    if (t.name.find("rope_factors") != std::string::npos && t.name != "rope_factors_long.weight" &&
        t.name != "rope_factors_short.weight")
      fail(ErrorCode::Unsupported,
           "GGUF: tensor " + t.name +
               " (RoPE factors) is not supported; rope_freqs.weight and rope_factors_long/short.weight are");
  const GgufTensorInfo* emb = g.find_tensor("token_embd.weight");
  if (!emb || emb->rank() > 2) bad("tensor token_embd.weight is missing or not 2-D");
  c.vocab_size = gguf_int((int64_t)emb->dim(1), "the vocabulary size (token_embd.weight)");
  c.tied_classifier = g.find_tensor("output.weight") == nullptr;
  if (row->encoder) {
    const GgufValue* causal = g.find(key("attention.causal"));
    if (causal && causal->kind != GgufKind::BOOL) bad(key("attention.causal") + " must be a bool");
    c.causal = causal ? causal->u != 0 : false;
    c.post_norm = true;
    c.embed_norm = true;
    c.tied_classifier = false;
    if (const GgufTensorInfo* tt = g.find_tensor("token_types.weight")) {
      if (tt->rank() > 2) bad("tensor token_types.weight is not 2-D");
      c.n_token_types = gguf_int((int64_t)tt->dim(1), "the token type count (token_types.weight)");
    }
    const int64_t pool = g.get_int_or(key("pooling_type"), 0);
    switch (pool) {
      case 0: c.pooling = PoolKind::None; break;
      case 1: c.pooling = PoolKind::Mean; break;
      case 2: c.pooling = PoolKind::Cls; break;
      case 3: c.pooling = PoolKind::Last; break;
      case 4: c.pooling = PoolKind::Rank; break;
      default: bad(key("pooling_type") + " = " + std::to_string(pool) + " is not a pooling type (0..4)");
    }
  }
  auto cap = [&](const char* k, double def) {
    const double v = g.get_float_or(key(k), def);
    if (!(v >= 0.0 && v < 1e6)) bad(key(k) + " = " + std::to_string(v) + " is out of range");
    return (float)v;
  };
  if (row->softcaps) {  // llama.cpp's defaults where a key is absent
    c.attn_softcap = cap("attn_logit_softcapping", 50.0);
    c.logit_softcap = cap("final_logit_softcapping", 30.0);
  }
  if (row->swa_pattern > 0) {
    // Gemma 2 falls back to a 4096 window; Gemma 3 without the key has none (every layer global)
    // and then caps its logits if the file says so, as llama.cpp does.
    const int window = gguf_int(g.get_int_or(key("attention.sliding_window"), row->softcaps ? 4096 : 0),
                                key("attention.sliding_window"));
    if (window > 0) {
      c.layer_window.assign(c.n_layers, 0);
      for (int l = 0; l < c.n_layers; l++)
        if (l % row->swa_pattern < row->swa_pattern - 1) c.layer_window[l] = window;
      if (rope && row->swa_rope_base > 0.0f) {
        c.rope_theta_local = row->swa_rope_base;
        c.rope_freq_scale_local = 1.0f;
      }
    } else if (!row->softcaps) {
      c.logit_softcap = cap("final_logit_softcapping", 0.0);
    }
    // llama.cpp scales the 27B models' queries by 1/sqrt(dim / heads) (their query_pre_attn_scalar),
    // the others by 1/sqrt(head_dim); it tells a 27B model by its layer count (Gemma 2: 46, Gemma 3: 62).
    if (c.n_layers == (row->swa_pattern == 2 ? 46 : 62))
      c.attn_scale = 1.0f / std::sqrt((float)c.dim / (float)c.n_heads);
  }
  if (row->granite_scales) apply_granite_scales(g, key, row->granite_scales == 2, c);
  c.qk_norm_whole = row->qk_norm_whole;
  c.parallel_ffn = row->parallel;
  if (row->parallel && g.find(key("logit_scale"))) {  // llama.cpp: 0 (or no key) means none
    const double s = g.get_float(key("logit_scale"));
    if (!(s >= 0.0 && s < 1e6)) bad(key("logit_scale") + " = " + std::to_string(s) + " is out of range");
    if (s > 0.0) c.logit_scale = (float)s;
  }
  if (row->swa_global_nope) {
    for (const char* k : {"attention.sliding_window", "logit_scale"})
      if (!g.find(key(k))) bad("key " + key(k) + " is missing (this architecture needs it)");
    const int window = gguf_int(g.get_int(key("attention.sliding_window")), key("attention.sliding_window"));
    if (window <= 0) bad(key("attention.sliding_window") + " = " + std::to_string(window) + " must be positive");
    const GgufValue* pv = g.find(key("attention.sliding_window_pattern"));
    if (pv && pv->kind == GgufKind::ARRAY)
      fail(ErrorCode::Unsupported,
           "GGUF: " + key("attention.sliding_window_pattern") + " as a per-layer array is not supported");
    const int period =
        gguf_int(g.get_int_or(key("attention.sliding_window_pattern"), 4), key("attention.sliding_window_pattern"));
    if (period < 1 || period > c.n_layers + 1)
      bad(key("attention.sliding_window_pattern") + " = " + std::to_string(period) + " is out of range");
    c.layer_window.assign(c.n_layers, 0);
    c.layer_rope.assign(c.n_layers, 0);
    for (int l = 0; l < c.n_layers; l++)
      if (l % period < period - 1) c.layer_window[l] = window, c.layer_rope[l] = 1;
    // (rope.freq_base_swa, where a file has one, is left unread: llama.cpp's Cohere 2 graph rotates
    // every local layer with the model's one base.)
    c.tied_classifier = true;
  }
  if (row->moe) {
    // As llama.cpp reads them: expert_count and expert_used_count required; Qwen3-MoE's experts
    // are expert_feed_forward_length wide (else feed_forward_length / expert_used_count), the
    // others' feed_forward_length.
    for (const char* k : {"expert_count", "expert_used_count"})
      if (!g.find(key(k))) bad("key " + key(k) + " is missing (a mixture-of-experts model needs it)");
    c.n_experts = gguf_int(g.get_int(key("expert_count")), key("expert_count"));
    c.n_experts_used = gguf_int(g.get_int(key("expert_used_count")), key("expert_used_count"));
    if (c.n_experts <= 0 || c.n_experts > 512)
      bad(key("expert_count") + " = " + std::to_string(c.n_experts) + " (must be 1..512)");
    if (c.n_experts_used <= 0 || c.n_experts_used > c.n_experts)
      bad(key("expert_used_count") + " = " + std::to_string(c.n_experts_used) + " (must be 1.." +
          std::to_string(c.n_experts) + ")");
    if (arch == "qwen3moe")
      c.hidden_dim = g.find(key("expert_feed_forward_length"))
                         ? gguf_int(g.get_int(key("expert_feed_forward_length")), key("expert_feed_forward_length"))
                         : c.hidden_dim / c.n_experts_used;
    c.expert_norm_topk = row->moe == 2;
    if (g.get_int_or(key("expert_shared_feed_forward_length"), 0) != 0)
      fail(ErrorCode::Unsupported, "GGUF: " + key("expert_shared_feed_forward_length") +
                                       " (a shared expert, Granite-MoE shared) is not supported");
    const GgufValue* gating = g.find(key("expert_gating_func"));
    if (gating && g.get_int(key("expert_gating_func")) != 1)  // llama.cpp: 1 softmax, 2 sigmoid
      fail(ErrorCode::Unsupported, "GGUF: " + key("expert_gating_func") + " = " +
                                       std::to_string(g.get_int(key("expert_gating_func"))) +
                                       " is not supported (1, softmax, is)");
  }
  if (row->nope_step > 0) {
    c.layer_rope.assign(c.n_layers, 1);
    for (int l = 0; l < c.n_layers; l++) c.layer_rope[l] = (l + 1) % row->nope_step != 0;
  }
  gguf_attention_kinds(g, key("attention.layer_kinds"), key("attention."), c.n_layers, c.layer_attn, c);
  c.validate();

  LoadedModel m;
  m.config = c;
  m.storage = g.blob();
  m.weights_resident = !g.sparse();
  if (row->encoder) {
    load_encoder_weights(g, *row, m);
    return m;
  }
  ModelWeights& w = m.weights;
  const int64_t d = c.dim, q = c.q_dim(), kv = c.kv_dim(), h = c.hidden_dim;
  const bool b = row->all_bias;
  w.tok_embed = weight(g, "token_embd.weight", c.vocab_size, d);
  if (c.pos == PosKind::Learned) w.pos_embed = f32_table(g, "position_embd.weight", c.seq_len, d);
  // Per-frequency divisors: Llama 3.1+ (rope_freqs), LongRoPE (long and short; Phi-3 128k, Phi-3.5).
  auto rope_divisors = [&](const char* name) -> const float* {
    if (!rope || !g.find_tensor(name)) return nullptr;
    const float* f = vec(g, name, c.rot_dims() / 2);
    for (int i = 0; i < c.rot_dims() / 2; i++)
      if (!(f[i] > 0.0f && f[i] < 1e30f))
        bad(std::string("tensor ") + name + " holds " + std::to_string(f[i]) + " at " + std::to_string(i) +
            "; factors must be positive");
    return f;
  };
  w.rope_factors = rope_divisors("rope_freqs.weight");
  w.rope_factors_long = rope_divisors("rope_factors_long.weight");
  w.rope_factors_short = rope_divisors("rope_factors_short.weight");
  w.layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; l++) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights& L = w.layers[l];
    L.additive = gguf_additive_weights(g, p, "attn", c.attn_of(l) == AttnKind::Additive, c);
    if (!row->no_pre_norms) L.attn_norm = vec(g, p + "attn_norm.weight", d);
    if (b || row->norm_bias) L.attn_norm_b = vec(g, p + "attn_norm.bias", d);
    if (row->fused_qkv || g.find_tensor(p + "attn_qkv.weight")) {
      const Tensor qkv = weight(g, p + "attn_qkv.weight", q + 2 * kv, d);
      L.wq = rows_of(qkv, 0, q);
      L.wk = rows_of(qkv, q, kv);
      L.wv = rows_of(qkv, q + kv, kv);
      if (b) {
        const float* bias = vec(g, p + "attn_qkv.bias", q + 2 * kv);
        L.bq = bias;
        L.bk = bias + q;
        L.bv = bias + q + kv;
      }
    } else {
      L.wq = weight(g, p + "attn_q.weight", q, d);
      L.wk = weight(g, p + "attn_k.weight", kv, d);
      L.wv = weight(g, p + "attn_v.weight", kv, d);
      if (row->qkv_bias || b) {
        L.bq = vec(g, p + "attn_q.bias", q);
        L.bk = vec(g, p + "attn_k.bias", kv);
        L.bv = vec(g, p + "attn_v.bias", kv);
      }
    }
    if (row->qk_norm) {
      L.q_norm = vec(g, p + "attn_q_norm.weight", c.qk_norm_whole ? q : c.head_dim);
      L.k_norm = vec(g, p + "attn_k_norm.weight", c.qk_norm_whole ? kv : c.head_dim);
    }
    L.wo = weight(g, p + "attn_output.weight", d, q);
    if (b) L.bo = vec(g, p + "attn_output.bias", d);
    if (row->opt_attn_bias) {
      if (!L.bq) {
        L.bq = vec(g, p + "attn_q.bias", q, false);
        L.bk = vec(g, p + "attn_k.bias", kv, false);
        L.bv = vec(g, p + "attn_v.bias", kv, false);
      }
      L.bo = vec(g, p + "attn_output.bias", d, false);
      for (const char* t : {"ffn_gate.bias", "ffn_up.bias", "ffn_down.bias"})
        if (g.find_tensor(p + t))
          fail(ErrorCode::Unsupported,
               "GGUF: tensor " + p + t + " (a feed-forward bias in a gated feed-forward) is not supported");
    }
    if (row->norm_bias) {  // StableLM 2 12B's layout
      if (!row->qk_norm && g.find_tensor(p + "attn_q_norm.weight"))
        fail(ErrorCode::Unsupported,
             "GGUF: tensor " + p +
                 "attn_q_norm.weight (per-head LayerNorms of Q and K, StableLM 2 12B) is not supported");
      if (!g.find_tensor(p + "ffn_norm.weight"))
        fail(ErrorCode::Unsupported, "GGUF: " + arch + " without " + p +
                                         "ffn_norm.weight (a parallel residual, StableLM 2 12B) is not supported");
    }
    if (row->post_norms) {
      L.attn_post_norm = vec(g, p + "post_attention_norm.weight", d);
      L.ffn_post_norm = vec(g, p + "post_ffw_norm.weight", d);
    }
    if (row->parallel && (g.find_tensor(p + "attn_q_norm.weight") || g.find_tensor(p + "attn_k_norm.weight")))
      fail(ErrorCode::Unsupported,
           "GGUF: tensor " + p + "attn_q_norm.weight (per-head LayerNorms of Q and K, Command-R+) is not supported");
    if (!row->no_pre_norms && !row->parallel) L.ffn_norm = vec(g, p + "ffn_norm.weight", d);
    if (b || row->norm_bias) L.ffn_norm_b = vec(g, p + "ffn_norm.bias", d);
    if (row->moe) {
      const int64_t E = c.n_experts;
      L.router = weight(g, p + "ffn_gate_inp.weight", E, d);
      L.gate_exps = experts(g, p + "ffn_gate_exps.weight", E, h, d);
      L.up_exps = experts(g, p + "ffn_up_exps.weight", E, h, d);
      L.down_exps = experts(g, p + "ffn_down_exps.weight", E, d, h);
      continue;
    }
    if (row->fused_up) {
      const Tensor gate_up = weight(g, p + "ffn_up.weight", 2 * h, d);
      L.w_gate = rows_of(gate_up, 0, h);
      L.w_up = rows_of(gate_up, h, h);
    } else {
      if (c.ffn == FfnKind::SwiGLU || c.ffn == FfnKind::GeGLU) L.w_gate = weight(g, p + "ffn_gate.weight", h, d);
      L.w_up = weight(g, p + "ffn_up.weight", h, d);
    }
    L.w_down = weight(g, p + "ffn_down.weight", d, h);
    if (b) {
      L.b_up = vec(g, p + "ffn_up.bias", h);
      L.b_down = vec(g, p + "ffn_down.bias", d);
    }
  }
  w.final_norm = vec(g, "output_norm.weight", d);
  if (b || row->norm_bias) w.final_norm_b = vec(g, "output_norm.bias", d);
  w.classifier = c.tied_classifier ? w.tok_embed : weight(g, "output.weight", c.vocab_size, d);
  return m;
}

namespace {
std::vector<std::string> string_array(const GgufFile& g, const std::string& key) {
  const GgufValue& v = g.get(key);
  if (v.kind != GgufKind::ARRAY || v.elem != GgufKind::STRING) bad(key + " must be an array of strings");
  std::vector<std::string> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); i++) out.push_back(v.str_at(i));
  return out;
}

Tokenizer load_gguf_vocab(const GgufFile& g) {
  const std::string model = g.get_string("tokenizer.ggml.model");
  if (model == "t5") return load_gguf_unigram(g);
  if (model != "llama" && model != "gpt2" && model != "bert" && model != "rwkv" && model != "gemma4")
    fail(ErrorCode::Unsupported,
         "GGUF tokenizer '" + model +
             "' is not supported; supported: llama (SentencePiece), gpt2 (byte-level BPE), bert "
             "(WordPiece), t5 (Unigram), rwkv (RWKV World), gemma4 (BPE over UTF-8)");
  std::vector<std::string> pieces = string_array(g, "tokenizer.ggml.tokens");
  const size_t n = pieces.size();
  std::vector<int> types;
  if (const GgufValue* t = g.find("tokenizer.ggml.token_type")) {
    if (t->kind != GgufKind::ARRAY || t->size() != n || !(n == 0 || t->elems_int()))
      bad("tokenizer.ggml.token_type must have one integer type per token");
    for (size_t i = 0; i < n; i++) types.push_back((int)t->int_at(i));
  }
  if (model == "bert") {  // llama.cpp's defaults: [CLS] 101 (as BOS), [SEP] 102, [UNK] 100
    auto id_or = [&](int def) { return def < (int)n ? def : -1; };
    const int cls = gguf_token_id(g, "tokenizer.ggml.bos_token_id",
                                  gguf_token_id(g, "tokenizer.ggml.cls_token_id", id_or(101), n), n);
    const int sep = gguf_token_id(g, "tokenizer.ggml.seperator_token_id", id_or(102), n);
    const int unk = gguf_token_id(g, "tokenizer.ggml.unknown_token_id", id_or(100), n);
    return Tokenizer::from_wordpiece(std::move(pieces), std::move(types), cls, sep, unk,
                                     gguf_flag(g, "tokenizer.ggml.add_bos_token", true) && cls >= 0,
                                     gguf_flag(g, "tokenizer.ggml.add_sep_token", true) && sep >= 0);
  }
  if (model == "rwkv") {  // llama.cpp: no special ids, nothing added, unless the keys say so
    const int unk = gguf_token_id(g, "tokenizer.ggml.unknown_token_id", -1, n);
    Tokenizer t = Tokenizer::from_rwkv(std::move(pieces), std::move(types), unk);
    const int bos = gguf_token_id(g, "tokenizer.ggml.bos_token_id", -1, n),
              eos = gguf_token_id(g, "tokenizer.ggml.eos_token_id", -1, n);
    t.set_specials(bos, eos, gguf_flag(g, "tokenizer.ggml.add_bos_token", false) && bos >= 0,
                   gguf_flag(g, "tokenizer.ggml.add_eos_token", false),
                   {gguf_token_id(g, "tokenizer.ggml.eot_token_id", -1, n)});
    return t;
  }
  if (model == "gpt2" || model == "gemma4") {  // llama.cpp: gemma4 is a BPE whose pre-tokenizer is always gemma4
    const std::string pre = model == "gemma4"              ? std::string("gemma4")
                            : g.find("tokenizer.ggml.pre") ? g.get_string("tokenizer.ggml.pre")
                                                           : std::string("default");
    const PreTokenizer kind = pre_tokenizer_from_name(pre);
    const std::vector<std::string> merges = string_array(g, "tokenizer.ggml.merges");
    Tokenizer t =
        Tokenizer::from_bpe(std::move(pieces), std::move(types), merges, kind, pre_tokenizer_ignores_merges(kind));
    const int bos = gguf_token_id(g, "tokenizer.ggml.bos_token_id", -1, n),
              eos = gguf_token_id(g, "tokenizer.ggml.eos_token_id", -1, n);
    const int eot = gguf_token_id(g, "tokenizer.ggml.eot_token_id", -1, n),
              eom = gguf_token_id(g, "tokenizer.ggml.eom_token_id", -1, n);
    const bool add_bos = (gguf_flag(g, "tokenizer.ggml.add_bos_token", pre_tokenizer_adds_bos(kind)) ||
                          kind == PreTokenizer::Gemma4) &&  // llama.cpp forces it for Gemma 4
                         bos >= 0;
    t.set_specials(bos, eos, add_bos, gguf_flag(g, "tokenizer.ggml.add_eos_token", false), {eot, eom});
    return t;
  }
  std::vector<float> scores(n, 0.0f);
  if (const GgufValue* s = g.find("tokenizer.ggml.scores")) {
    if (s->kind != GgufKind::ARRAY || s->size() != n ||
        !(n == 0 || s->elems_int() || s->elem == GgufKind::F32 || s->elem == GgufKind::F64))
      bad("tokenizer.ggml.scores must have one score per token");
    for (size_t i = 0; i < n; i++) scores[i] = (float)s->num_at(i);
  }
  const int bos = gguf_token_id(g, "tokenizer.ggml.bos_token_id", 1, n),
            eos = gguf_token_id(g, "tokenizer.ggml.eos_token_id", 2, n);
  const int unk = gguf_token_id(g, "tokenizer.ggml.unknown_token_id", 0, n);
  if (bos < 0 || eos < 0) bad("tokenizer.ggml.bos_token_id / eos_token_id are outside the vocabulary");
  Tokenizer t = Tokenizer::from_spm_pieces(std::move(pieces), std::move(scores), std::move(types), bos, eos, unk,
                                           gguf_flag(g, "tokenizer.ggml.add_space_prefix", true));
  const int eot = gguf_token_id(g, "tokenizer.ggml.eot_token_id", -1, n);
  t.set_specials(bos, eos, gguf_flag(g, "tokenizer.ggml.add_bos_token", true),
                 gguf_flag(g, "tokenizer.ggml.add_eos_token", false), {eot});
  // llama.cpp strips the whitespace after Phi-3's special tokens (it goes by the model's name),
  // except after <unk>, <s> and <|endoftext|>.
  std::string name =
      g.find("general.name") && g.get("general.name").kind == GgufKind::STRING ? g.get_string("general.name") : "";
  for (char& ch : name) ch = (char)std::tolower((unsigned char)ch);
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    std::vector<int> rstrip;
    for (int id = 0; id < t.vocab_size(); id++) {
      const int ty = t.token_type(id);
      const std::string& p = t.piece(id);
      if ((ty == kTokControl || ty == kTokUserDefined || ty == kTokUnknown || p == "</s>") && p != "<unk>" &&
          p != "<s>" && p != "<|endoftext|>")
        rstrip.push_back(id);
    }
    t.set_rstrip(std::move(rstrip));
  }
  return t;
}

}  // namespace

Tokenizer load_gguf_tokenizer(const GgufFile& g) {
  Tokenizer t = load_gguf_vocab(g);
  if (!t.is_wordpiece())  // (WordPiece's is its [SEP], set with it)
    t.set_separator(gguf_token_id(g, "tokenizer.ggml.seperator_token_id", -1, (size_t)t.vocab_size()),
                    gguf_flag(g, "tokenizer.ggml.add_sep_token", false));
  if (const GgufValue* ct = g.find("tokenizer.chat_template")) {
    if (ct->kind != GgufKind::STRING) bad("tokenizer.chat_template must be a string");
    t.set_chat_template(ct->s);
  }
  return t;
}

}  // namespace qkv
