// mmproj / CLIP GGUF files: clip.vision.* hyperparameters and v.* tensors as views, every shape
// and type checked before a view is made.
#include "gguf_clip.h"

#include <array>
#include <cmath>

#include "../common.h"

namespace qkv {

namespace {
[[noreturn]] void bad(const std::string& m) { fail(ErrorCode::BadModel, "GGUF (mmproj): " + m); }

Tensor weight(const GgufFile& g, const std::string& name, int64_t rows, int64_t cols, bool required = true) {
  return gguf_weight(g, name, rows, cols, required, false, "");
}
const float* vec(const GgufFile& g, const std::string& name, int64_t n, bool required = true) {
  return gguf_weight(g, name, 1, n, required, true, "it must be F32").f32();
}
std::string shape_of(const GgufTensorInfo& t) {
  std::string s;
  for (uint64_t d : t.dims) s += (s.empty() ? "" : " x ") + std::to_string(d);
  return "[" + s + "]";
}

// The convolution kernel [patch, patch, channels, dim] as a (dim, channels * patch^2) matrix.
Tensor patch_kernel(const GgufFile& g, int p, int channels, int dim) {
  const char* name = "v.patch_embd.weight";
  const GgufTensorInfo* t = g.find_tensor(name);
  if (!t) bad(std::string("tensor ") + name + " is missing");
  if (t->rank() > 4 || (int64_t)t->dim(0) != p || (int64_t)t->dim(1) != p || (int64_t)t->dim(2) != channels ||
      (int64_t)t->dim(3) != dim)
    bad(std::string("tensor ") + name + " has shape " + shape_of(*t) + ", expected [" + std::to_string(p) + " x " +
        std::to_string(p) + " x " + std::to_string(channels) + " x " + std::to_string(dim) + "]");
  DType type;
  if (!qtype_of_ggml(t->type, &type) || (type != DType::F32 && type != DType::F16 && type != DType::BF16))
    fail(ErrorCode::Unsupported, std::string("GGUF (mmproj): tensor ") + name + " is " + ggml_type_name(t->type) +
                                     "; the patch kernel must be F32, F16 or BF16");
  Tensor w;
  w.type = type;
  w.data = g.tensor_data(*t);
  w.rows = dim;
  w.cols = (int64_t)channels * p * p;
  return w;
}

std::array<float, 3> triple(const GgufFile& g, const std::string& key, float def) {
  std::array<float, 3> out{def, def, def};
  const GgufValue* v = g.find(key);
  if (!v) return out;
  if (v->kind != GgufKind::ARRAY || v->size() != 3) bad(key + " must be an array of 3 numbers");
  for (size_t i = 0; i < 3; i++) {
    const double x = v->num_at(i);
    if (!std::isfinite(x)) bad(key + " holds a value that is not finite");
    out[i] = (float)x;
  }
  return out;
}
// The classifier head: weight, bias and labels must agree on the class count (the labels name them).
ImageClassifierHead load_head(const GgufFile& g, int64_t dim) {
  ImageClassifierHead head;
  const GgufTensorInfo* t = g.find_tensor("v.head.weight");
  const GgufValue* labels = g.find("clip.vision.labels");
  const bool has_bias = g.find_tensor("v.head.bias") != nullptr;
  if (!t) {
    if (labels) bad("clip.vision.labels is set but the tensor v.head.weight (the classifier head) is missing");
    if (has_bias) bad("tensor v.head.bias is present but v.head.weight (the classifier head) is missing");
    return head;
  }
  if (t->rank() != 2 || (int64_t)t->dim(0) != dim || t->dim(1) < 1 || t->dim(1) > (1u << 20))
    bad("tensor v.head.weight has shape " + shape_of(*t) + ", expected [" + std::to_string(dim) + " x n_classes]");
  const int64_t n = (int64_t)t->dim(1);
  head.weight = weight(g, "v.head.weight", n, dim);
  head.bias = vec(g, "v.head.bias", n);
  if (!labels) bad("the classifier head v.head.weight has no clip.vision.labels (one name per class)");
  if (labels->kind != GgufKind::ARRAY || labels->elem != GgufKind::STRING)
    bad("clip.vision.labels must be an array of strings");
  if ((int64_t)labels->size() != n)
    bad("clip.vision.labels holds " + std::to_string(labels->size()) + " names; v.head.weight has " +
        std::to_string(n) + " classes");
  head.labels.reserve((size_t)n);
  for (int64_t i = 0; i < n; i++) head.labels.push_back(labels->str_at((size_t)i));
  head.storage = g.blob();
  return head;
}
}  // namespace

bool gguf_is_clip(const GgufFile& g) {
  const GgufValue* a = g.find("general.architecture");
  return a && a->kind == GgufKind::STRING && a->s == "clip";
}

ImageModelData load_gguf_clip(const GgufFile& g) {
  if (!gguf_is_clip(g)) fail(ErrorCode::Unsupported, "not an image encoder (general.architecture is not clip)");
  if (!gguf_flag(g, "clip.has_vision_encoder", false))
    fail(ErrorCode::Unsupported, "this mmproj file has no vision encoder (clip.has_vision_encoder is not true)");
  auto key = [](const char* k) { return std::string("clip.vision.") + k; };
  auto num = [&](const char* k) { return gguf_int(g.get_int(key(k)), key(k)); };
  ImageModelData d;
  ModelConfig& c = d.model.config;
  c.arch = "clip";
  c.dim = num("embedding_length");
  c.hidden_dim = num("feed_forward_length");
  c.n_layers = num("block_count");
  c.n_heads = c.n_kv_heads = num("attention.head_count");
  if (c.n_heads <= 0 || c.dim % c.n_heads != 0)
    bad("embedding_length " + std::to_string(c.dim) + " is not a multiple of head_count " + std::to_string(c.n_heads));
  c.head_dim = c.dim / c.n_heads;
  c.patch_size = num("patch_size");
  c.image_size = num("image_size");
  if (c.patch_size <= 0) bad("clip.vision.patch_size must be positive");
  c.norm = NormKind::LayerNorm;
  c.norm_eps = (float)g.get_float_or(key("attention.layer_norm_epsilon"), 1e-5);
  c.pos = PosKind::Learned;
  c.causal = false;
  c.tied_classifier = false;
  c.vocab_size = 0;
  if (gguf_flag(g, "clip.use_silu", false))
    fail(ErrorCode::Unsupported, "GGUF (mmproj): SiLU vision feed-forwards (clip.use_silu) are not supported");
  c.ffn = gguf_flag(g, "clip.use_gelu", false) ? FfnKind::GELU : FfnKind::QuickGELU;
  ModelWeights& w = d.model.weights;
  c.class_token = g.find_tensor("v.class_embd") != nullptr;
  c.pooling = c.class_token ? PoolKind::Cls : PoolKind::Mean;
  const int grid = c.patch_size > 0 ? c.image_size / c.patch_size : 0;
  c.seq_len = grid * grid + (c.class_token ? 1 : 0);
  c.validate();  // sizes in range before any shape is derived from them
  const int64_t dm = c.dim, h = c.hidden_dim;
  w.patch_embed = patch_kernel(g, c.patch_size, c.n_channels, c.dim);
  w.patch_bias = vec(g, "v.patch_embd.bias", dm, false);
  if (c.class_token) w.class_embed = vec(g, "v.class_embd", dm);
  w.pos_table = weight(g, "v.position_embd.weight", c.seq_len, dm);
  if (w.pos_table.type != DType::F32 && w.pos_table.type != DType::F16 && w.pos_table.type != DType::BF16)
    fail(ErrorCode::Unsupported, "GGUF (mmproj): v.position_embd.weight must be F32, F16 or BF16");
  w.embed_norm = vec(g, "v.pre_ln.weight", dm, false);
  w.embed_norm_b = vec(g, "v.pre_ln.bias", dm, false);
  w.final_norm = vec(g, "v.post_ln.weight", dm, false);
  w.final_norm_b = vec(g, "v.post_ln.bias", dm, false);
  w.layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; l++) {
    const std::string p = "v.blk." + std::to_string(l) + ".";
    LayerWeights& L = w.layers[l];
    L.attn_norm = vec(g, p + "ln1.weight", dm);
    L.attn_norm_b = vec(g, p + "ln1.bias", dm, false);
    L.wq = weight(g, p + "attn_q.weight", dm, dm);
    L.wk = weight(g, p + "attn_k.weight", dm, dm);
    L.wv = weight(g, p + "attn_v.weight", dm, dm);
    L.wo = weight(g, p + "attn_out.weight", dm, dm);
    L.bq = vec(g, p + "attn_q.bias", dm, false);
    L.bk = vec(g, p + "attn_k.bias", dm, false);
    L.bv = vec(g, p + "attn_v.bias", dm, false);
    L.bo = vec(g, p + "attn_out.bias", dm, false);
    L.ffn_norm = vec(g, p + "ln2.weight", dm);
    L.ffn_norm_b = vec(g, p + "ln2.bias", dm, false);
    // llama.cpp's legacy converter wrote fc1 as ffn_down and fc2 as ffn_up; the shapes say which
    // is which (clip.cpp swaps them the same way).
    std::string up = p + "ffn_up.", down = p + "ffn_down.";
    const GgufTensorInfo* t = g.find_tensor(down + "weight");
    if (t && (int64_t)t->dim(0) == dm && (int64_t)t->dim(1) == h && h != dm) std::swap(up, down);
    L.w_up = weight(g, up + "weight", h, dm);
    L.b_up = vec(g, up + "bias", h, false);
    L.w_down = weight(g, down + "weight", dm, h);
    L.b_down = vec(g, down + "bias", dm, false);
  }
  if (const GgufTensorInfo* t = g.find_tensor("visual_projection.weight")) {
    const int64_t proj = t->dim(1);
    if (proj < 1 || proj > (1 << 16)) bad("visual_projection.weight has shape " + shape_of(*t));
    w.projection = weight(g, "visual_projection.weight", proj, dm);
  }
  d.head = load_head(g, dm);
  ImagePreprocess& pp = d.preprocess;
  pp.size = c.image_size;
  // CLIP's processor crops the centre of the shorter side's resize; SigLIP's squashes to a square.
  pp.mode = c.class_token ? ResizeMode::Crop : ResizeMode::Squash;
  const auto mean = triple(g, key("image_mean"), 0.5f), sd = triple(g, key("image_std"), 0.5f);
  for (int i = 0; i < 3; i++) {
    if (!(sd[i] > 0.0f)) bad(key("image_std") + " must be positive");
    pp.mean[i] = mean[i];
    pp.std[i] = sd[i];
  }
  if (const GgufValue* v = g.find("clip.projector_type"); v && v->kind == GgufKind::STRING) d.projector = v->s;
  d.model.storage = g.blob();
  return d;
}

VisionLanguageData load_gguf_vision_language(const GgufFile& g, int text_dim) {
  VisionLanguageData d;
  d.image = load_gguf_clip(g);
  VisionProjector& p = d.projector;
  p.type = d.image.projector;
  if (p.type.empty())
    fail(ErrorCode::Unsupported,
         "GGUF (mmproj): this file names no projector (clip.projector_type); "
         "it is an image encoder, not a vision-language model's mmproj");
  if (p.type != "mlp")
    fail(ErrorCode::Unsupported,
         "GGUF (mmproj): projector '" + p.type + "' is not supported in chat; qkv runs LLaVA-style 'mlp' projectors");
  if (g.find("clip.vision.feature_layer"))
    fail(ErrorCode::Unsupported, "GGUF (mmproj): stacked feature layers (clip.vision.feature_layer) are not supported");
  ModelConfig& c = d.image.model.config;
  // LLaVA reads the second-to-last layer's states: the last block never runs.
  if (c.n_layers < 2)
    bad("an 'mlp' projector reads the second-to-last layer; block_count is " + std::to_string(c.n_layers));
  c.n_layers -= 1;
  d.image.model.weights.layers.resize(c.n_layers);
  const GgufTensorInfo* t0 = g.find_tensor("mm.0.weight");
  if (!t0) bad("tensor mm.0.weight (the projector's first product) is missing");
  const int64_t hidden = t0->rank() >= 2 ? (int64_t)t0->dim(1) : 0;
  if (hidden < 1 || hidden > (1 << 20)) bad("tensor mm.0.weight has shape " + shape_of(*t0));
  p.w0 = weight(g, "mm.0.weight", hidden, c.dim);
  p.b0 = vec(g, "mm.0.bias", hidden);
  if (const GgufTensorInfo* t2 = g.find_tensor("mm.2.weight")) {
    const int64_t out = t2->rank() >= 2 ? (int64_t)t2->dim(1) : 0;
    if (out < 1 || out > (1 << 20)) bad("tensor mm.2.weight has shape " + shape_of(*t2));
    p.w2 = weight(g, "mm.2.weight", out, hidden);
    p.b2 = vec(g, "mm.2.bias", out);
  }
  if (p.out_dim() != text_dim)
    bad("the projector gives rows of " + std::to_string(p.out_dim()) +
        " values but the text model's embedding width is " + std::to_string(text_dim) +
        ": this mmproj belongs to another model");
  return d;
}

bool is_image_model(const std::shared_ptr<const Blob>& blob) {
  return blob && looks_like_gguf(blob->data(), blob->size()) && gguf_is_clip(GgufFile::parse(blob));
}

ImageModelData load_image_model(std::shared_ptr<const Blob> blob) {
  if (!blob || blob->size() == 0) fail(ErrorCode::BadModel, "model file is empty");
  if (!looks_like_gguf(blob->data(), blob->size()))
    fail(ErrorCode::Unsupported, "image encoders load from GGUF files (llama.cpp's mmproj / clip) only");
  return load_gguf_clip(GgufFile::parse(std::move(blob)));
}

VisionLanguageData load_vision_language(std::shared_ptr<const Blob> blob, int text_dim) {
  if (!blob || blob->size() == 0) fail(ErrorCode::BadModel, "mmproj file is empty");
  if (!looks_like_gguf(blob->data(), blob->size()))
    fail(ErrorCode::BadModel, "the mmproj is not a GGUF file (llama.cpp's mmproj)");
  const GgufFile g = GgufFile::parse(std::move(blob));
  if (!gguf_is_clip(g))
    fail(ErrorCode::BadModel, "the mmproj is a GGUF file but not an mmproj (general.architecture is not clip)");
  return load_gguf_vision_language(g, text_dim);
}

}  // namespace qkv
