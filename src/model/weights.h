// Weights as views into the model's bytes (no copy), and the owner that keeps them alive.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "../kernels/quant.h"
#include "config.h"

namespace qkv {

// Bytes of a model file, wherever they live (a heap buffer, a memory map, the WASM heap).
class Blob {
 public:
  virtual ~Blob() = default;
  virtual const uint8_t* data() const = 0;
  virtual uint64_t size() const = 0;
};

// The files of one model split by llama.cpp's gguf-split (NAME-00001-of-0000N.gguf, ...), in
// order. As a Blob it is the first file (what format detection reads); GgufFile::parse reads
// them all, and whatever keeps this alive keeps every part alive.
class SplitBlob : public Blob {
 public:
  explicit SplitBlob(std::vector<std::shared_ptr<const Blob>> parts) : parts_(std::move(parts)) {}
  const uint8_t* data() const override { return parts_.empty() ? nullptr : parts_[0]->data(); }
  uint64_t size() const override { return parts_.empty() ? 0 : parts_[0]->size(); }
  const std::vector<std::shared_ptr<const Blob>>& parts() const { return parts_; }

 private:
  std::vector<std::shared_ptr<const Blob>> parts_;
};

// The bytes of every file of a model (size() of a SplitBlob is its first file's).
inline uint64_t model_bytes(const Blob& b) {
  const auto* split = dynamic_cast<const SplitBlob*>(&b);
  if (!split) return b.size();
  uint64_t n = 0;
  for (const auto& p : split->parts()) n += p->size();
  return n;
}

// A model file of which only the header and some byte ranges are in memory (a GPU-resident
// load: the large tensors' bytes went from the source straight to GPU buffers). As a Blob it is
// the header's bytes with the whole file's length, so offsets are still checked against the file.
class SparseBlob : public Blob {
 public:
  SparseBlob(std::shared_ptr<const Blob> head, uint64_t size) : head_(std::move(head)), size_(size) {}
  const uint8_t* data() const override { return head_->data(); }
  uint64_t size() const override { return size_; }
  uint64_t head_size() const { return head_->size() < size_ ? head_->size() : size_; }
  // Bytes of the file held from `offset` on (ranges must not overlap; checked by the caller).
  void add(uint64_t offset, std::shared_ptr<const Blob> bytes) { ranges_.push_back({offset, std::move(bytes)}); }
  // The file's bytes [offset, offset + n) when one held range covers them, else null.
  const uint8_t* find(uint64_t offset, uint64_t n) const {
    for (const Range& r : ranges_)
      if (offset >= r.offset && offset - r.offset <= r.bytes->size() && n <= r.bytes->size() - (offset - r.offset))
        return r.bytes->data() + (offset - r.offset);
    return nullptr;
  }
  // Bytes held in memory: the header and every range.
  uint64_t held_bytes() const {
    uint64_t n = head_size();
    for (const Range& r : ranges_) n += r.bytes->size();
    return n;
  }

 private:
  struct Range {
    uint64_t offset;
    std::shared_ptr<const Blob> bytes;
  };
  std::shared_ptr<const Blob> head_;
  uint64_t size_;
  std::vector<Range> ranges_;
};

class VectorBlob : public Blob {
 public:
  explicit VectorBlob(std::vector<uint8_t> v) : v_(std::move(v)) {}
  const uint8_t* data() const override { return v_.data(); }
  uint64_t size() const override { return v_.size(); }

 private:
  std::vector<uint8_t> v_;
};

// Element types of weight matrices: every QType (F32, F16, BF16, Q8_0 ... Q6_K), kept as stored.
using DType = QType;

// A 2-D weight matrix (rows, cols), row-major, of element type `type`, kept as stored.
struct Tensor {
  DType type = DType::F32;
  const void* data = nullptr;
  int64_t rows = 0, cols = 0;
  bool finite_scales = false;  // every f16 scale is finite (checked on load in WASM builds; see qdot.h)
  // Not in memory (a GPU-resident load): data is a placeholder never read (the CPU forward refuses
  // such a model); the bytes lie at this offset of file `absent_part` of the model.
  int64_t absent_offset = -1;
  uint32_t absent_part = 0;
  bool resident() const { return absent_offset < 0; }
  const float* f32() const { return static_cast<const float*>(data); }
  size_t row_bytes() const { return qtype_row_bytes(type, (int)cols); }
  const void* row(int64_t r) const { return static_cast<const uint8_t*>(data) + (size_t)r * row_bytes(); }
  explicit operator bool() const { return data != nullptr; }
};

// Additive attention's parameters (f32; head h's block at h * additive_dim rows): W_q and W_k
// (n_heads * additive_dim, head_dim) each, v (n_heads, additive_dim).
struct AdditiveWeights {
  const float *wq = nullptr, *wk = nullptr, *v = nullptr;
};

struct LayerWeights {
  const float* attn_norm = nullptr;    // (dim,) before attention (none: x as is, OLMo 2); post-norm: after its residual
  const float* attn_norm_b = nullptr;  // (dim,) LayerNorm only
  Tensor wq, wk, wv, wo;               // (q_dim, dim), (kv_dim, dim), (kv_dim, dim), (dim, q_dim)
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr, *bo = nullptr;  // optional biases
  // (dim,) RMSNorm of the attention / feed-forward output before its residual add (Gemma 2).
  const float *attn_post_norm = nullptr, *ffn_post_norm = nullptr;
  AdditiveWeights additive;                          // additive attention layers only
  const float *q_norm = nullptr, *k_norm = nullptr;  // (head_dim,) per-head RMSNorm of q and k before RoPE (Qwen3);
                                                     // (q_dim,), (kv_dim,) with qk_norm_whole
  const float* ffn_norm = nullptr;  // (dim,) before the feed-forward (none: x as is); post-norm: after its residual
  const float* ffn_norm_b = nullptr;
  Tensor w_gate, w_down, w_up;  // (hidden, dim), (dim, hidden), (hidden, dim); w_gate unused by GELU/ReLU
  const float *b_up = nullptr, *b_down = nullptr;
  // Mixture of experts (config.n_experts > 0; w_gate/w_up/w_down then empty): the router
  // (n_experts, dim) and every expert's matrices stacked, expert e's rows at e * hidden (gate, up)
  // and e * dim (down): (n_experts * hidden, dim) x2, (n_experts * dim, hidden).
  Tensor router, gate_exps, up_exps, down_exps;
};

struct ModelWeights {
  Tensor tok_embed;                     // (vocab, dim)
  const float* pos_embed = nullptr;     // (seq_len, dim) for PosKind::Learned
  const float* rope_factors = nullptr;  // (n_rot/2,) optional: divides each RoPE frequency (GGUF rope_freqs)
  // LongRoPE (Phi-3 128k, Phi-3.5): per-frequency divisors for contexts up to / above
  // config.rope_orig_context. rope_factors, when present, takes precedence (as in llama.cpp).
  const float *rope_factors_short = nullptr, *rope_factors_long = nullptr;
  const float* type_embed = nullptr;  // (n_token_types, dim) encoders: token-type (segment) rows
  const float *embed_norm = nullptr, *embed_norm_b = nullptr;  // (dim,) LayerNorm of the embeddings (BERT)
  // Vision Transformers (config.is_vision()): the patch projection (dim, n_channels * patch^2) and
  // its bias (dim,), the class token (dim,), the learned positions (seq_len, dim) in any float
  // type, and an optional projection of the pooled vector (proj_dim, dim) (CLIP's
  // visual_projection). embed_norm is the norm before the first layer (CLIP's pre_ln).
  Tensor patch_embed, pos_table, projection;
  const float *patch_bias = nullptr, *class_embed = nullptr;
  std::vector<LayerWeights> layers;
  const float* final_norm = nullptr;  // (dim,); null for encoders without one (BERT)
  const float* final_norm_b = nullptr;
  Tensor classifier;  // (vocab, dim); equals tok_embed when tied; empty for encoders
  // Rerankers (llama.cpp's cls / cls.output): score = out(tanh(cls x + cls_b)) + out_b, each
  // stage optional, on the first token's state.
  struct RankHead {
    Tensor cls, out;  // (dim, dim), (n_out, dim)
    const float *cls_b = nullptr, *out_b = nullptr;
  } rank_head;
};

// A loaded model: configuration, weights, and the bytes the weights point into.
struct LoadedModel {
  ModelConfig config;
  ModelWeights weights;
  std::shared_ptr<const Blob> storage;
  // False when some weights are not in memory (a GPU-resident load): no CPU forward can run.
  bool weights_resident = true;
};

// What a Tensor that is not in memory points at (never read).
inline const void* absent_placeholder() {
  static const uint64_t none = 0;
  return &none;
}

}  // namespace qkv
