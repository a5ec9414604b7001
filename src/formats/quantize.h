// `qkv quantize`: re-encodes the weight matrices of a GGUF model to a block type, keeping its
// metadata (architecture keys, tokenizer) as they are. Architecture-agnostic: every tensor of
// the input is carried over, by name, in the same order.
#pragma once
#include <cstdint>
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

// Policy (the README's `qkv quantize` section):
//  - 1-D tensors (norm weights, biases) stay F32, and so do the tables whose rows the engine adds
//    as floats (position_embd, token_types);
//  - matrices become `type`, except:
//    * for Q4_K, the classifier (output.weight, or token_embd.weight when the classifier is tied
//      to it) is kept at Q8_0: it is the tensor most sensitive to quantization (llama.cpp keeps
//      it at Q6_K for the same reason; qkv writes no Q6_K yet);
//    * rows that do not split into whole blocks fall back: Q4_K (256) -> Q5_0 (32) -> F16,
//      Q8_0/Q4_0/... (32) -> F16. The note names the reason.
// The input may hold any type qkv reads; each row is decoded to f32 and re-encoded.
QuantizeResult quantize_gguf(const GgufFile& in, QType type);

}  // namespace qkv
