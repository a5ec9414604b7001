// Reading model files natively: memory-mapped where the OS allows, read otherwise.
#pragma once
#include <memory>
#include <string>

#include "../model/weights.h"

namespace qkv {

// Throws Error(Io) naming the path and the OS error.
std::shared_ptr<const Blob> map_file(const std::string& path);

// A model file; for the first file of a split GGUF model (NAME-00001-of-0000N.gguf) all N
// files, as one SplitBlob. Naming another part, or a missing part, is Error(Io) saying which.
std::shared_ptr<const Blob> map_model_file(const std::string& path);

}  // namespace qkv
