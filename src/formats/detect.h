// What a file looks like, from its first bytes: the loaders check this first so that a wrong
// file is named for what it is (a text file, a tokenizer, safetensors) instead of being read as
// a corrupt model of the wrong format.
#pragma once
#include <cstdint>
#include <string>

namespace qkv {

enum class FileFormat {
  Empty,
  Gguf,              // "GGUF" magic
  Safetensors,       // u64 header length + a JSON object
  Llama2cTokenizer,  // llama2.c tokenizer.bin: max_token_length, then (score, len, bytes)...
  Zip,               // PK\3\4: a PyTorch .pt/.pth or any zip archive
  GitLfsPointer,     // "version https://git-lfs..." text standing in for the real file
  Html,              // a web page (a download that returned an error page)
  Text,              // UTF-8 text without NULs
  TooShort,          // 1..3 bytes: too short to say
  Binary,            // anything else: a llama2.c checkpoint has no magic, so it may be one
};

FileFormat detect_format(const uint8_t* data, uint64_t size);

// "a text file", "a safetensors file (Hugging Face weights)", ... for messages.
std::string describe_format(FileFormat f);

// The message for a file that is not a model: "the file looks like X, not a model (expected a
// GGUF model or a llama2.c checkpoint)[; advice]".
std::string not_a_model_message(FileFormat f);

}  // namespace qkv
