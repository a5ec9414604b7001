// GGUF -> GGUF re-encoding of weight matrices (see quantize.h for the policy), streamed: the
// header is written from the plan, then each tensor a chunk of rows at a time.
#include "quantize.h"

#include <algorithm>

#include "../common.h"
#include "gguf_writer.h"

namespace qkv {

namespace {
// llama.cpp's general.file_type numbers (informational: loaders read the tensor types).
int file_type_of(QType t) {
  switch (t) {
    case QType::F32: return 0;
    case QType::F16: return 1;
    case QType::Q4_0: return 2;
    case QType::Q4_1: return 3;
    case QType::Q8_0: return 7;
    case QType::Q5_0: return 8;
    case QType::Q5_1: return 9;
    case QType::Q4_K: return 15;  // "Q4_K_M"-like: a mix with a higher-precision classifier
    case QType::Q5_K: return 17;  // "Q5_K_M"-like
    case QType::BF16: return 32;
    default: return -1;
  }
}

// llama.cpp's use_more_bits: the first and last eighth of the layers, and every third between.
bool more_bits(int layer, int n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

// The layer number of "blk.N.<rest>" (and rest), or -1.
int layer_of(const std::string& name, std::string* rest) {
  if (name.compare(0, 4, "blk.") != 0) return -1;
  size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4 || dot > 10) return -1;
  int l = 0;
  for (size_t i = 4; i < dot; i++) {
    if (name[i] < '0' || name[i] > '9') return -1;
    l = l * 10 + (name[i] - '0');
  }
  *rest = name.substr(dot + 1);
  return l;
}

struct Planned {
  const GgufTensorInfo* info;
  QType from, to;
  QuantizedTensor report;
};

std::vector<Planned> plan(const GgufFile& in, QType type) {
  const bool tied = in.find_tensor("output.weight") == nullptr;
  int n_layers = 0;
  for (const GgufTensorInfo& t : in.tensors()) {
    std::string rest;
    n_layers = std::max(n_layers, layer_of(t.name, &rest) + 1);
  }
  const bool kquant = type == QType::Q4_K || type == QType::Q5_K;
  const std::string mix = type == QType::Q4_K ? "Q4_K_M" : "Q5_K_M";
  std::vector<Planned> out;
  for (const GgufTensorInfo& t : in.tensors()) {
    Planned p{&t, QType::F32, type, {t.name, t.type, 0, ""}};
    if (!qtype_of_ggml(t.type, &p.from))
      fail(ErrorCode::Unsupported,
           std::string("tensor ") + t.name + " is " + ggml_type_name(t.type) + ", which qkv cannot decode");
    if (t.dims.empty() || t.dims[0] == 0) fail(ErrorCode::BadModel, "tensor " + t.name + " has no elements");
    const uint64_t cols = t.dims[0];
    if (cols > (1u << 30)) fail(ErrorCode::Unsupported, "tensor " + t.name + " has rows too long to re-encode");
    QType& to = p.to;
    std::string& note = p.report.note;
    if (t.rank() == 1 || t.name == "position_embd.weight" || t.name == "token_types.weight") {
      to = QType::F32;  // norms, and the tables the engine adds rows of as floats
    } else if (kquant) {
      std::string rest;
      const int l = layer_of(t.name, &rest);
      if (t.name == "output.weight" || (tied && t.name == "token_embd.weight")) {
        // As llama.cpp's Q4_K_M / Q5_K_M: the classifier at Q6_K, the most sensitive tensor.
        to = QType::Q6_K;
        note = "the classifier is kept at Q6_K";
      } else if (l >= 0 && (rest == "attn_v.weight" || rest == "ffn_down.weight") && more_bits(l, n_layers)) {
        // Q4_K_M and Q5_K_M also keep attn_v and ffn_down at Q6_K in the first and last eighth
        // of the layers and every third layer between (llama.cpp's use_more_bits).
        to = QType::Q6_K;
        note = "kept at Q6_K in this layer, as " + mix + " does";
      } else if (rest == "attn_qkv.weight") {
        // A fused Q/K/V matrix (GPT-2, Phi-3) holds attn_v: one step up in every layer, as
        // llama.cpp gives attn_qkv (Q4_K_M: Q5_K, Q5_K_M: Q6_K).
        to = type == QType::Q4_K ? QType::Q5_K : QType::Q6_K;
        note = std::string("the fused Q/K/V matrix is kept at ") + ggml_type_name(ggml_of_qtype(to)) + ", as " + mix +
               " does";
      }
    }
    if (cols % qtype_block(to) != 0) {
      const std::string why = "rows of " + std::to_string(cols) + " do not split into " +
                              ggml_type_name(ggml_of_qtype(to)) + " blocks of " + std::to_string(qtype_block(to));
      // llama.cpp's fallbacks: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0 (blocks of 32), else F16.
      const QType alt = to == QType::Q4_K   ? QType::Q5_0
                        : to == QType::Q5_K ? QType::Q5_1
                        : to == QType::Q6_K ? QType::Q8_0
                                            : QType::F16;
      to = cols % qtype_block(alt) == 0 ? alt : QType::F16;
      note = (note.empty() ? "" : note + "; ") + why + ", so " + ggml_type_name(ggml_of_qtype(to));
    }
    p.report.to = ggml_of_qtype(to);
    out.push_back(std::move(p));
  }
  return out;
}
}  // namespace

std::vector<QuantizedTensor> quantize_gguf_stream(const GgufFile& in, QType type, const QuantizeSink& sink,
                                                  const QuantizeProgress& progress) {
  if (type == QType::Q6_K)
    fail(ErrorCode::Unsupported,
         "quantizing to Q6_K alone is not supported (q8_0, q4_0, q4_k, q5_k and the 32-blocks are)");
  std::vector<Planned> ps = plan(in, type);
  GgufWriter w;
  for (const auto& [key, value] : in.metadata()) {
    if (key == "general.alignment" || key == "general.file_type") continue;  // the writer sets these
    if (key.rfind("split.", 0) == 0) continue;                               // a split input becomes one output file
    w.add_value(key, value);
  }
  if (file_type_of(type) >= 0) w.add_u32("general.file_type", (uint32_t)file_type_of(type));
  for (const Planned& p : ps) w.add_tensor_info(p.info->name, p.info->dims, p.to);
  const uint32_t align = (uint32_t)in.alignment();
  sink(w.header(align));

  uint64_t total = 0, done = 0;
  for (const Planned& p : ps) total += p.info->elements();
  // Rows are decoded and re-encoded in chunks of about 1M values: memory stays small whatever
  // the tensor's size.
  std::vector<float> values;
  std::vector<uint8_t> bytes;
  for (const Planned& p : ps) {
    const GgufTensorInfo& t = *p.info;
    const uint64_t cols = t.dims[0], rows = t.elements() / cols;
    const uint64_t chunk = std::max<uint64_t>(1, (1u << 20) / cols);
    const uint8_t* src = in.tensor_data(t);
    const size_t rb_in = qtype_row_bytes(p.from, (int)cols);
    uint64_t written = 0;
    for (uint64_t r0 = 0; r0 < rows; r0 += chunk) {
      const uint64_t n = std::min(chunk, rows - r0);
      values.resize(n * cols);
      for (uint64_t i = 0; i < n; i++)
        dequantize_row_ref(p.from, src + (r0 + i) * rb_in, values.data() + i * cols, (int)cols);
      GgufWriter one;  // the writer's row encoders, on this chunk only
      one.add_tensor("chunk", {cols, n}, values.data(), p.to);
      bytes = one.tensor_bytes(0);
      written += bytes.size();
      sink(bytes);
      done += n * cols;
      if (progress) progress(done, total);
    }
    const uint64_t pad = (written + align - 1) / align * align - written;
    if (pad) sink(std::vector<uint8_t>(pad, 0));
  }
  std::vector<QuantizedTensor> report;
  for (Planned& p : ps) report.push_back(std::move(p.report));
  return report;
}

QuantizeResult quantize_gguf(const GgufFile& in, QType type) {
  QuantizeResult res;
  res.tensors = quantize_gguf_stream(
      in, type, [&](const std::vector<uint8_t>& b) { res.bytes.insert(res.bytes.end(), b.begin(), b.end()); });
  return res;
}

}  // namespace qkv
