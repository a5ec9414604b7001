// Validation and description of model configurations.
#include "config.h"

#include <cstdio>

#include "../common.h"

namespace qkv {

const char* norm_kind_name(NormKind k) { return k == NormKind::RMSNorm ? "rmsnorm" : "layernorm"; }
const char* pos_kind_name(PosKind k) {
  switch (k) {
    case PosKind::None: return "none";
    case PosKind::RopeAdjacent: return "rope";
    case PosKind::RopeHalves: return "rope-neox";
    case PosKind::Learned: return "learned";
    case PosKind::Sinusoidal: return "sinusoidal";
    case PosKind::RelativeBucket: return "relative-buckets";
  }
  return "?";
}
const char* ffn_kind_name(FfnKind k) {
  switch (k) {
    case FfnKind::SwiGLU: return "swiglu";
    case FfnKind::GELU: return "gelu";
    case FfnKind::ReLU: return "relu";
    case FfnKind::GeGLU: return "geglu";
    case FfnKind::QuickGELU: return "quick-gelu";
  }
  return "?";
}

const char* attn_kind_name(AttnKind k) {
  switch (k) {
    case AttnKind::Softmax: return "softmax";
    case AttnKind::Linear: return "linear";
    case AttnKind::Additive: return "additive";
    case AttnKind::BlockSparse: return "block_sparse";
  }
  return "?";
}
const char* pool_kind_name(PoolKind k) {
  switch (k) {
    case PoolKind::None: return "none";
    case PoolKind::Mean: return "mean";
    case PoolKind::Cls: return "cls";
    case PoolKind::Last: return "last";
    case PoolKind::Rank: return "rank";
  }
  return "?";
}

static void need(bool ok, const std::string& msg) {
  if (!ok) fail(ErrorCode::BadModel, "invalid model header: " + msg);
}

void ModelConfig::validate() const {
  auto s = [](int v) { return std::to_string(v); };
  // Upper bounds keep every derived size far from overflow and refuse absurd headers early.
  need(dim > 0 && dim <= (1 << 16), "dim = " + s(dim) + " (must be 1..65536)");
  need(hidden_dim > 0 && hidden_dim <= (1 << 18), "hidden_dim = " + s(hidden_dim) + " (must be 1..262144)");
  need(n_layers > 0 && n_layers <= 1024, "n_layers = " + s(n_layers) + " (must be 1..1024)");
  need(n_heads > 0 && n_heads <= 1024, "n_heads = " + s(n_heads) + " (must be 1..1024)");
  need(n_kv_heads > 0 && n_kv_heads <= n_heads,
       "n_kv_heads = " + s(n_kv_heads) + " (must be 1..n_heads = " + s(n_heads) + ")");
  need(n_heads % n_kv_heads == 0, "n_heads = " + s(n_heads) + " is not a multiple of n_kv_heads = " + s(n_kv_heads));
  need(head_dim > 0 && head_dim <= 1024, "head_dim = " + s(head_dim) + " (must be 1..1024)");
  if (is_vision()) {
    need(vocab_size == 0, "an image encoder has no vocabulary (vocab_size = " + s(vocab_size) + ")");
    need(patch_size <= 1024, "patch_size = " + s(patch_size) + " (must be 1..1024)");
    need(image_size >= patch_size && image_size <= 4096 && image_size % patch_size == 0,
         "image_size = " + s(image_size) + " (must be a multiple of patch_size = " + s(patch_size) + ", at most 4096)");
    need(n_channels >= 1 && n_channels <= 4, "image channels = " + s(n_channels) + " (must be 1..4)");
    need(!causal, "image encoders are bidirectional");
    need(pos == PosKind::Learned, "image encoders take learned positions");
    need(seq_len == grid() * grid() + (class_token ? 1 : 0), "position rows = " + s(seq_len) + " for a " + s(grid()) +
                                                                 " x " + s(grid()) + " grid" +
                                                                 (class_token ? " and a class token" : ""));
    need(pooling == PoolKind::Cls || pooling == PoolKind::Mean, "image encoders pool by class token or mean");
    need(pooling != PoolKind::Cls || class_token, "class-token pooling needs a class token");
  } else {
    need(vocab_size > 0 && vocab_size <= (1 << 22), "vocab_size = " + s(vocab_size) + " (must be 1..4194304)");
  }
  need(seq_len > 0 && seq_len <= (1 << 20), "seq_len = " + s(seq_len) + " (must be 1..1048576)");
  need(sliding_window >= 0, "sliding_window = " + s(sliding_window));
  need(layer_attn.empty() || (int)layer_attn.size() == n_layers,
       "per-layer attention kinds: " + s((int)layer_attn.size()) + " entries for " + s(n_layers) + " layers");
  need(layer_window.empty() || (int)layer_window.size() == n_layers,
       "per-layer windows: " + s((int)layer_window.size()) + " entries for " + s(n_layers) + " layers");
  for (int w : layer_window) need(w >= 0, "per-layer window = " + s(w));
  if (has_attn(AttnKind::Additive))
    need(additive_dim > 0 && additive_dim <= 4096,
         "additive attention width = " + s(additive_dim) + " (must be 1..4096)");
  if (has_attn(AttnKind::BlockSparse)) {
    need(sparse.block >= 1 && sparse.block <= (1 << 16),
         "sparse block size = " + s(sparse.block) + " (must be 1..65536)");
    need(sparse.window_blocks >= 0 && sparse.window_blocks <= (1 << 20),
         "sparse window blocks = " + s(sparse.window_blocks) + " (must be 0..1048576)");
    need(sparse.global_tokens >= 0 && sparse.global_tokens <= (1 << 20),
         "sparse global tokens = " + s(sparse.global_tokens) + " (must be 0..1048576)");
    need(sparse.random_blocks >= 0 && sparse.random_blocks <= 1024,
         "sparse random blocks = " + s(sparse.random_blocks) + " (must be 0..1024)");
  }
  for (int l = 0; l < (int)layer_attn.size(); l++) {
    if (layer_attn[l] != AttnKind::Additive) continue;
    // The additive kernel takes no soft-cap, sliding window or relative-position bias.
    need(window_of(l) == 0 && attn_softcap == 0.0f && pos != PosKind::RelativeBucket,
         "layer " + s(l) + ": additive attention with a sliding window, soft-cap or relative-position bias");
  }
  need(layer_rope.empty() || (int)layer_rope.size() == n_layers,
       "per-layer RoPE flags: " + s((int)layer_rope.size()) + " entries for " + s(n_layers) + " layers");
  if (pos == PosKind::RopeAdjacent || pos == PosKind::RopeHalves) {
    int r = rot_dims();
    need(r % 2 == 0 && r <= head_dim,
         "rotary dims = " + s(r) + " (must be even and <= head_dim = " + s(head_dim) + ")");
    need(rope_theta > 0.0f, "rope theta must be positive");
    need(rope_attn_factor > 0.0f && rope_attn_factor < 1e3f, "rope attention factor must be in (0, 1000)");
    need(rope_orig_context >= 0, "rope original context must not be negative");
    need(!rope_yarn || rope_theta > 1.0f, "YaRN needs a rope theta above 1");
    need(!rope_yarn || (rope_freq_scale >= 0.01f && rope_freq_scale <= 100.0f),
         "YaRN scaling factor must be in [0.01, 100]");
    need(rope_theta_local >= 0.0f, "local rope theta must not be negative");
    need(rope_freq_scale_local > 0.0f, "local rope frequency scale must be positive");
  }
  need(n_token_types >= 0 && n_token_types <= 1024, "token types = " + s(n_token_types) + " (must be 0..1024)");
  need(embed_scale > 0.0f && embed_scale < 1e6f, "embedding scale out of range");
  need(attn_scale >= 0.0f && attn_scale < 1e6f, "attention scale out of range");
  need(attn_softcap >= 0.0f && attn_softcap < 1e6f, "attention soft-cap out of range");
  need(logit_softcap >= 0.0f && logit_softcap < 1e6f, "logit soft-cap out of range");
  need(residual_scale > 0.0f && residual_scale < 1e6f, "residual scale out of range");
  need(logit_scale > 0.0f && logit_scale < 1e6f, "logit scale out of range");
  need(!parallel_ffn || !post_norm, "parallel feed-forward blocks need pre-norms");
  if (pos == PosKind::RelativeBucket) {
    need(rel_buckets >= 4 && rel_buckets <= 4096,
         "relative position buckets = " + s(rel_buckets) + " (must be 4..4096)");
    need(rel_max_distance > rel_buckets / 2 && rel_max_distance <= (1 << 20),
         "relative position max distance = " + s(rel_max_distance) +
             " (must exceed buckets / 2 = " + s(rel_buckets / 2) + ")");
  }
  need(norm_eps >= 0.0f && norm_eps < 1.0f, "norm epsilon out of range");
  need(n_experts >= 0 && n_experts <= 512, "experts = " + s(n_experts) + " (must be 0..512)");
  if (n_experts > 0) {
    need(n_experts_used >= 1 && n_experts_used <= n_experts,
         "experts used per token = " + s(n_experts_used) + " (must be 1..experts = " + s(n_experts) + ")");
    need(ffn == FfnKind::SwiGLU, "mixture-of-experts feed-forwards are SwiGLU");
    need(causal && !parallel_ffn && !post_norm, "mixture-of-experts feed-forwards run in pre-norm decoders");
  }
}

std::string ModelConfig::describe() const {
  const std::string moe =
      n_experts > 0 ? ", " + std::to_string(n_experts_used) + " of " + std::to_string(n_experts) + " experts" : "";
  char buf[512];
  snprintf(buf, sizeof buf,
           "%s: dim %d, hidden %d, layers %d, heads %d, kv heads %d, head dim %d, vocab %d, context %d, "
           "%s, %s, %s, %s classifier%s%s%s",
           arch.c_str(), dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_dim, vocab_size, seq_len,
           norm_kind_name(norm), pos_kind_name(pos), ffn_kind_name(ffn), tied_classifier ? "tied" : "separate",
           causal ? "" : ", bidirectional encoder", post_norm ? ", post-norm" : "", moe.c_str());
  std::string out = buf;
  if (has_attn(AttnKind::Additive) || has_attn(AttnKind::BlockSparse) || has_attn(AttnKind::Linear)) {
    out += ", attention";
    for (int l = 0; l < (int)layer_attn.size(); l++) out += std::string(l ? "/" : " ") + attn_kind_name(layer_attn[l]);
    if (has_attn(AttnKind::BlockSparse))
      out += " (blocks of " + std::to_string(sparse.block) + ", window " + std::to_string(sparse.window_blocks) +
             ", global " + std::to_string(sparse.global_tokens) + ", random " + std::to_string(sparse.random_blocks) +
             ", seed " + std::to_string(sparse.seed) + ")";
    if (has_attn(AttnKind::Additive)) out += " (additive width " + std::to_string(additive_dim) + ")";
  }
  return out;
}

}  // namespace qkv
