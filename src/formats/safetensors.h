// safetensors (Hugging Face weights): u64 header length, a JSON header naming each tensor's
// dtype, shape and [begin, end) in the data section, then the data. Every field is validated
// against the file before a view is made; tensors are views into the file (no copy).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../model/weights.h"

namespace qkv {

struct SafetensorsTensor {
  std::string name;
  QType type = QType::F32;        // F32, F16 or BF16 (when supported)
  std::string dtype;              // as the header names it
  bool supported = true;          // false: a dtype qkv does not run (I64 position ids, F8, ...), refused if used
  std::vector<uint64_t> shape;    // slowest first, as safetensors lists it ([rows, cols])
  const uint8_t* data = nullptr;  // into the file
  uint64_t bytes = 0;
  uint64_t elements() const;
};

// Parses one file; `what` names it in errors ("model-00001-of-00002.safetensors"). Throws
// Error(BadModel) naming the problem (truncated header, offsets outside the data or overlapping,
// a size that does not match the shape), Error(Unsupported) for a dtype the format does not
// define. Tensors of dtypes qkv does not run are listed with supported = false.
std::vector<SafetensorsTensor> parse_safetensors(const Blob& blob, const std::string& what);

}  // namespace qkv
