// What a model is: its sizes and, per layer, which kind of each block it uses. A family that
// differs from Llama is a different row of these options, not a different forward pass.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../kernels/attention_sparse.h"

namespace qkv {

enum class NormKind { RMSNorm, LayerNorm };
// RelativeBucket: T5's learned per-head bias on attention scores, indexed by the bucketed
// key - query distance (no absolute position in the residual stream).
enum class PosKind { None, RopeAdjacent, RopeHalves, Learned, Sinusoidal, RelativeBucket };
// SwiGLU: silu(x W_gate) * (x W_up); GeGLU: gelu_tanh(x W_gate) * (x W_up) (Gemma, T5 v1.1
// "gated-gelu"); GELU/ReLU/QuickGELU: act(x W_up + b) (QuickGELU: x sigmoid(1.702 x), OpenAI CLIP).
enum class FfnKind { SwiGLU, GELU, ReLU, GeGLU, QuickGELU };
// Softmax: scaled dot-product attention. Linear: the elu+1 feature-map kernel (linear attention).
// Additive: Bahdanau's v . tanh(W_q q + W_k k) per head (LayerWeights::add_*). BlockSparse:
// softmax attention over ModelConfig::sparse's pattern of key blocks only.
enum class AttnKind { Softmax, Linear, Additive, BlockSparse };
// How an encoder turns its per-token states into one vector per text (GGUF *.pooling_type).
// Rank: a reranker (llama.cpp's rank pooling): the first token's state through the
// classification head (ModelWeights::rank_head), one score per text.
enum class PoolKind { None, Mean, Cls, Last, Rank };

const char* norm_kind_name(NormKind k);
const char* pos_kind_name(PosKind k);
const char* ffn_kind_name(FfnKind k);
const char* attn_kind_name(AttnKind k);
const char* pool_kind_name(PoolKind k);

struct ModelConfig {
  std::string arch = "llama";  // family name, for messages and model info
  int dim = 0;                 // residual stream width
  int hidden_dim = 0;          // feed-forward inner width
  int n_layers = 0;
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // key/value heads (< n_heads: grouped-query attention)
  int head_dim = 0;    // dim / n_heads unless the format says otherwise
  int vocab_size = 0;
  int seq_len = 0;  // trained context length

  NormKind norm = NormKind::RMSNorm;
  float norm_eps = 1e-5f;
  PosKind pos = PosKind::RopeAdjacent;
  float rope_theta = 10000.0f;
  float rope_freq_scale = 1.0f;   // linear position scaling
  float rope_attn_factor = 1.0f;  // multiplies RoPE's cos and sin (GGUF rope.scaling.attn_factor)
  int rope_orig_context =
      0;  // LongRoPE: contexts above this take the long factors; YaRN: the pre-extension context (0 = seq_len)
  // YaRN (rope.scaling.type yarn; Qwen 2.5/3 long-context files): the low frequencies take
  // rope_freq_scale, the high ones keep their unscaled angle, a ramp between (see rope.h's
  // rope_yarn_range, from rope_orig_context), and cos and sin take 1 + 0.1 ln(1 / rope_freq_scale).
  bool rope_yarn = false;
  // RoPE of the sliding-window layers where it differs from the others' (Gemma 3's local layers:
  // base 10000, unscaled, while its global layers take rope_theta and rope_freq_scale).
  // 0 = the same as every layer's.
  float rope_theta_local = 0.0f;
  float rope_freq_scale_local = 1.0f;
  int n_rot = 0;  // rotated dims per head (0 = head_dim)
  FfnKind ffn = FfnKind::SwiGLU;
  bool causal = true;  // false: bidirectional (encoders)
  bool post_norm =
      false;  // true: x = norm(x + sublayer(x)) (original Transformer, BERT); false: x = x + sublayer(norm(x))
  int rel_buckets = 32;         // PosKind::RelativeBucket: buckets (half per direction when bidirectional)
  int rel_max_distance = 128;   // distances from here on share the last bucket
  bool tied_classifier = true;  // classifier shares the token embedding matrix
  float embed_scale = 1.0f;     // token embeddings are multiplied by this (Gemma: sqrt(dim))
  float attn_scale = 0.0f;      // attention score scale; 0 = 1/sqrt(head_dim)
  float attn_softcap = 0.0f;    // > 0: scores capped as softcap * tanh(s / softcap) (Gemma 2)
  float logit_softcap = 0.0f;   // > 0: logits capped the same way (Gemma 2)
  float residual_scale = 1.0f;  // each block's output is multiplied by this before its residual add (Granite)
  float logit_scale = 1.0f;     // logits are multiplied by this (Granite: 1 / its logit_scale key)
  // q_norm / k_norm are RMSNorms over the whole q and k projections (q_dim, kv_dim wide), not per
  // head (OLMo 2).
  bool qk_norm_whole = false;
  // The feed-forward reads the attention's normed input, not the residual after attention, and
  // both outputs are added to x (parallel blocks: Command-R).
  bool parallel_ffn = false;
  int sliding_window = 0;  // > 0: attend only to the last `sliding_window` positions
  // Per layer, when not empty (n_layers entries): attention kind and sliding window (0 = full),
  // overriding Softmax and sliding_window.
  std::vector<AttnKind> layer_attn;
  std::vector<int> layer_window;
  AttnKind attn_of(int l) const { return layer_attn.empty() ? AttnKind::Softmax : layer_attn[l]; }
  bool has_attn(AttnKind k) const {
    for (AttnKind a : layer_attn)
      if (a == k) return true;
    return false;
  }
  // Additive layers: width of the tanh layer of every head (rows of its W_q and W_k).
  int additive_dim = 0;
  // BlockSparse layers: the key-block pattern they all follow.
  BlockSparsePattern sparse;
  int window_of(int l) const { return layer_window.empty() ? sliding_window : layer_window[l]; }
  // Per layer, when not empty: 0 where the layer skips RoPE (its attention has no positions;
  // SmolLM3's every fourth layer), 1 where it rotates as pos says.
  std::vector<uint8_t> layer_rope;
  bool rope_at(int l) const {
    return (pos == PosKind::RopeAdjacent || pos == PosKind::RopeHalves) && (layer_rope.empty() || layer_rope[l]);
  }

  // Mixture of experts (n_experts > 0): a router (ffn_gate_inp) scores the experts per token,
  // softmax over all of them, the n_experts_used best run (each a SwiGLU feed-forward of
  // hidden_dim) and their outputs are summed weighted by their probabilities, renormalised to sum
  // 1 first when expert_norm_topk (Qwen3-MoE, Granite-MoE; OLMoE takes them as they are).
  int n_experts = 0;
  int n_experts_used = 0;
  bool expert_norm_topk = false;
  bool is_moe() const { return n_experts > 0; }

  // Encoders: token-type (segment) embedding rows added to every token (0 = none; BERT: 2),
  // a LayerNorm over the embeddings before the first layer (BERT), and the pooling embed() uses
  // when not told otherwise.
  int n_token_types = 0;
  bool embed_norm = false;
  PoolKind pooling = PoolKind::None;
  bool is_encoder() const { return !causal; }

  // Vision Transformers (patch_size > 0; Transformer::encode_image): the image, (n_channels, h, w)
  // floats, is cut into patch_size x patch_size patches, each flattened (channel, row, column)
  // and projected by ModelWeights::patch_embed (the stride = patch convolution as one product);
  // an optional class token goes first; positions are learned rows (pos_table) for a square
  // grid of image_size / patch_size patches a side, interpolated for other grids. vocab_size is 0.
  int patch_size = 0;
  int image_size = 0;
  int n_channels = 3;
  bool class_token = false;
  bool is_vision() const { return patch_size > 0; }
  int grid() const { return is_vision() ? image_size / patch_size : 0; }  // patches a side at image_size

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  int rot_dims() const { return n_rot > 0 ? n_rot : head_dim; }
  // Does layer l take the local RoPE (rope_theta_local)?
  bool local_rope(int l) const { return rope_theta_local > 0.0f && window_of(l) > 0; }

  // Throws Error(BadModel) naming the first impossible value.
  void validate() const;
  std::string describe() const;
};

}  // namespace qkv
