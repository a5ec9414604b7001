// One entry point for model bytes of any supported format.
#pragma once
#include <memory>

#include "../model/weights.h"

namespace qkv {

// Detects the format and loads it. Throws Error(BadModel / Unsupported) saying what was found.
LoadedModel load_model(std::shared_ptr<const Blob> blob);

}  // namespace qkv
