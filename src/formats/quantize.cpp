// GGUF -> GGUF re-encoding of weight matrices (see quantize.h for the policy).
#include "quantize.h"

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
    case QType::BF16: return 32;
    default: return -1;
  }
}
}  // namespace

QuantizeResult quantize_gguf(const GgufFile& in, QType type) {
  if (type == QType::Q5_K || type == QType::Q6_K)
    fail(ErrorCode::Unsupported, "quantizing to Q5_K/Q6_K is not supported (q8_0, q4_0, q4_k and the other 32-blocks are)");
  GgufWriter w;
  for (const auto& [key, value] : in.metadata()) {
    if (key == "general.alignment" || key == "general.file_type") continue;  // the writer sets these
    w.add_value(key, value);
  }
  if (file_type_of(type) >= 0) w.add_u32("general.file_type", (uint32_t)file_type_of(type));

  const bool tied = in.find_tensor("output.weight") == nullptr;
  QuantizeResult res;
  std::vector<float> values;
  for (const GgufTensorInfo& t : in.tensors()) {
    QType from;
    if (!qtype_of_ggml(t.type, &from))
      fail(ErrorCode::Unsupported, std::string("tensor ") + t.name + " is " + ggml_type_name(t.type) + ", which qkv cannot decode");
    const uint64_t cols = t.dims[0], rows = t.elements() / cols;
    if (cols > (1u << 30)) fail(ErrorCode::Unsupported, "tensor " + t.name + " has rows too long to re-encode");
    QuantizedTensor r{t.name, t.type, 0, ""};
    QType to = type;
    if (t.dims.size() == 1 || t.name == "position_embd.weight" || t.name == "token_types.weight") {
      to = QType::F32;  // norms, and the tables the engine adds rows of as floats
    } else {
      if (type == QType::Q4_K && (t.name == "output.weight" || (tied && t.name == "token_embd.weight"))) {
        // As llama.cpp's Q4_K_M: the classifier at Q6_K, or Q8_0 where rows are not 256-blocks.
        to = cols % qtype_block(QType::Q6_K) == 0 ? QType::Q6_K : QType::Q8_0;
        r.note = std::string("the classifier is kept at ") + (to == QType::Q6_K ? "Q6_K" : "Q8_0");
      }
      if (cols % qtype_block(to) != 0) {
        const std::string why = "rows of " + std::to_string(cols) + " do not split into " +
                                ggml_type_name(ggml_of_qtype(to)) + " blocks of " + std::to_string(qtype_block(to));
        to = to == QType::Q4_K && cols % 32 == 0 ? QType::Q5_0 : QType::F16;
        r.note = why + ", so " + ggml_type_name(ggml_of_qtype(to));
      }
    }
    r.to = ggml_of_qtype(to);
    values.resize(t.elements());
    const uint8_t* src = in.tensor_data(t);
    const size_t rb = qtype_row_bytes(from, (int)cols);
    for (uint64_t i = 0; i < rows; i++) dequantize_row_ref(from, src + i * rb, values.data() + i * cols, (int)cols);
    w.add_tensor(t.name, t.dims, values.data(), to);
    res.tensors.push_back(std::move(r));
  }
  res.bytes = w.finish((uint32_t)in.alignment());
  return res;
}

}  // namespace qkv
