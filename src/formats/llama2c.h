// llama2.c checkpoints (.bin, "legacy" export: 7-int header, f32 weights, optional freq_cis
// block, shared or separate classifier).
#pragma once
#include <memory>

#include "../model/weights.h"

namespace qkv {

// Validates the header and every size against the blob's length, then returns weight views
// into the blob. Throws Error(BadModel) naming the problem.
LoadedModel load_llama2c(std::shared_ptr<const Blob> blob);

// True when the bytes look like a llama2.c legacy checkpoint header (used to pick a loader).
bool looks_like_llama2c(const uint8_t* data, uint64_t size);

}  // namespace qkv
