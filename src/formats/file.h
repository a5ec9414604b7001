// Reading model files natively: memory-mapped where the OS allows, read otherwise.
#pragma once
#include <memory>
#include <string>

#include "../model/weights.h"

namespace qkv {

// Throws Error(Io) naming the path and the OS error.
std::shared_ptr<const Blob> map_file(const std::string& path);

}  // namespace qkv
