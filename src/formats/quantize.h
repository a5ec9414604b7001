// `qkv quantize`: re-encodes the weight matrices of a GGUF model to a block type, keeping its
// metadata (architecture keys, tokenizer) as they are. Architecture-agnostic: every tensor of
// the input is carried over, by name, in the same order.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "../kernels/quant.h"
#include "gguf.h"

namespace qkv {

struct QuantizedTensor {
  std::string name;
  uint32_t from = 0, to = 0;  // GGUF type numbers
  std::string note;           // why `to` differs from the requested type; empty when it does not
};

struct QuantizeResult {
  std::vector<uint8_t> bytes;  // the new GGUF file
  std::vector<QuantizedTensor> tensors;
};

// Policy (docs/quantizing.md):
//  - 1-D tensors (norm weights, biases) stay F32, and so do the tables whose rows the engine adds
//    as floats (position_embd, token_types);
//  - matrices become `type`, except:
//    * for Q4_K and Q5_K, the classifier (output.weight, or token_embd.weight when the classifier
//      is tied to it) is kept at Q6_K, as llama.cpp's Q4_K_M / Q5_K_M do: it is the tensor most
//      sensitive to quantization;
//    * for Q4_K and Q5_K, attn_v and ffn_down are kept at Q6_K in the layers llama.cpp's
//      Q4_K_M / Q5_K_M give more bits (first and last eighth, every third between), and a
//      fused attn_qkv goes one step up in every layer (Q5_K / Q6_K), as theirs do;
//    * rows that do not split into whole blocks fall back as llama.cpp does: Q4_K (256) -> Q5_0,
//      Q5_K -> Q5_1, Q6_K -> Q8_0 (blocks of 32), else F16. The note names the reason.
// The input may hold any type qkv reads; each row is decoded to f32 and re-encoded.
QuantizeResult quantize_gguf(const GgufFile& in, QType type);

// The same, streamed: `sink` receives the file's bytes in order (header, then each tensor's
// data in chunks of about 1M values, padded), so memory beyond the input is one chunk.
// `progress(done, total)` counts values re-encoded. Returns the per-tensor report.
using QuantizeSink = std::function<void(const std::vector<uint8_t>&)>;
using QuantizeProgress = std::function<void(uint64_t done, uint64_t total)>;
std::vector<QuantizedTensor> quantize_gguf_stream(const GgufFile& in, QType type, const QuantizeSink& sink,
                                                  const QuantizeProgress& progress = nullptr);

}  // namespace qkv
