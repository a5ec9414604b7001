// Byte-level BPE pre-tokenizers of GGUF models (tokenizer.ggml.pre): hand-written scanners that
// split text exactly as the named regular expressions do (leftmost match, alternatives in order,
// greedy runs with the regex's backtracking worked out by hand), over Unicode categories.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace qkv {

enum class PreTokenizer {
  Gpt2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  Default, // llama.cpp's fallback: [\p{P}$+<=>^~|]+ , then Gpt2, then \p{N}+, then [0-9]{3}
  Llama3,  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  Qwen2,   // Llama3 with \p{N} (single digits) in place of \p{N}{1,3}
  Smollm,  // \p{N} (each digit alone), then Gpt2
};

// The tokenizer.ggml.pre name -> kind; throws Error(Unsupported) listing the known names.
PreTokenizer pre_tokenizer_from_name(const std::string& name);
const char* pre_tokenizer_names();

// Unicode general-category class of a code point: 1 letter, 2 number, 3 punctuation, 0 other.
int unicode_class(uint32_t cp);
bool unicode_is_space(uint32_t cp);

// UTF-8 -> code points; invalid bytes become U+FFFD (one per byte), as llama.cpp decodes them.
std::vector<uint32_t> utf8_to_codepoints(const std::string& s);
void append_utf8(std::string& out, uint32_t cp);

// GPT-2's byte-level alphabet: printable bytes stand for themselves, the others are moved to
// U+0100 upwards in byte order, so every byte is one visible character.
uint32_t gpt2_byte_to_cp(uint8_t b);
int gpt2_cp_to_byte(uint32_t cp);  // -1 if cp is not one of those 256 characters

// Splits text into pre-tokens (UTF-8 strings whose concatenation is the text's code points).
std::vector<std::string> pre_tokenize(const std::string& text, PreTokenizer kind);

}  // namespace qkv
