// Format detection from the first bytes; see detect.h.
#include "detect.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "llama2c.h"

namespace qkv {

namespace {

bool starts_with(const uint8_t* d, uint64_t n, const char* s) {
  const size_t k = std::strlen(s);
  return n >= k && std::memcmp(d, s, k) == 0;
}

int32_t i32_at(const uint8_t* d, uint64_t off) {
  int32_t v;
  std::memcpy(&v, d + off, 4);
  return v;
}

// Valid UTF-8 with no NUL and no control bytes other than whitespace, over the first 4 KiB (a
// multi-byte character cut at the window's end is allowed).
bool looks_like_text(const uint8_t* d, uint64_t n) {
  const uint64_t m = n < 4096 ? n : 4096;
  for (uint64_t i = 0; i < m;) {
    const uint8_t b = d[i];
    if (b < 0x80) {
      if (b < 0x20 && b != '\t' && b != '\n' && b != '\r' && b != '\f') return false;
      if (b == 0x7f) return false;
      i++;
      continue;
    }
    const int len = (b & 0xe0) == 0xc0 ? 2 : (b & 0xf0) == 0xe0 ? 3 : (b & 0xf8) == 0xf0 ? 4 : 0;
    if (len == 0 || b == 0xc0 || b == 0xc1 || b > 0xf4) return false;
    for (int k = 1; k < len; k++) {
      if (i + k >= m) return m < n;  // cut by the window, not by the file
      if ((d[i + k] & 0xc0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

// safetensors: u64 little-endian header length, then that many bytes of JSON starting with '{'.
bool looks_like_safetensors(const uint8_t* d, uint64_t n) {
  if (n < 10) return false;
  uint64_t len;
  std::memcpy(&len, d, 8);
  return len >= 2 && len <= n - 8 && d[8] == '{' && (d[9] == '"' || d[9] == '}' || d[9] == ' ' || d[9] == '\n');
}

// llama2.c tokenizer.bin: a small max_token_length, then entries of finite score, length in
// 1..max_token_length and that many bytes; the first few entries must all fit.
bool looks_like_llama2c_tokenizer(const uint8_t* d, uint64_t n) {
  if (n < 12) return false;
  const int32_t max_len = i32_at(d, 0);
  if (max_len < 1 || max_len > 4096) return false;
  uint64_t off = 4;
  int entries = 0;
  while (entries < 8 && off + 8 <= n) {
    float score;
    std::memcpy(&score, d + off, 4);
    const int32_t len = i32_at(d, off + 4);
    if (!std::isfinite(score) || len < 1 || len > max_len || off + 8 + (uint64_t)len > n) return false;
    off += 8 + (uint64_t)len;
    entries++;
  }
  return entries >= 1 && (entries == 8 || off == n);
}

bool looks_like_html(const uint8_t* d, uint64_t n) {
  uint64_t i = 0;
  while (i < n && (d[i] == ' ' || d[i] == '\n' || d[i] == '\r' || d[i] == '\t')) i++;
  if (i + 5 > n || d[i] != '<') return false;
  std::string head(reinterpret_cast<const char*>(d + i), (size_t)std::min<uint64_t>(n - i, 15));
  for (char& c : head) c = (char)std::tolower((unsigned char)c);
  return head.rfind("<!doctype html", 0) == 0 || head.rfind("<html", 0) == 0 || head.rfind("<head", 0) == 0;
}

}  // namespace

FileFormat detect_format(const uint8_t* d, uint64_t n) {
  if (n == 0) return FileFormat::Empty;
  if (starts_with(d, n, "GGUF")) return FileFormat::Gguf;
  if (n < 4) return FileFormat::TooShort;
  if (starts_with(d, n, "PK\x03\x04")) return FileFormat::Zip;
  if (looks_like_safetensors(d, n)) return FileFormat::Safetensors;
  if (starts_with(d, n, "version https://git-lfs")) return FileFormat::GitLfsPointer;
  if (looks_like_text(d, n)) return looks_like_html(d, n) ? FileFormat::Html : FileFormat::Text;
  // A plausible llama2.c header wins: the tokenizer test below is the weaker one.
  if (!looks_like_llama2c(d, n) && looks_like_llama2c_tokenizer(d, n)) return FileFormat::Llama2cTokenizer;
  return FileFormat::Binary;
}

std::string describe_format(FileFormat f) {
  switch (f) {
    case FileFormat::Empty: return "an empty file";
    case FileFormat::Gguf: return "a GGUF file";
    case FileFormat::Safetensors: return "a safetensors file (Hugging Face weights)";
    case FileFormat::Llama2cTokenizer: return "a llama2.c tokenizer (tokenizer.bin)";
    case FileFormat::Zip: return "a zip archive (a PyTorch .pt/.pth checkpoint?)";
    case FileFormat::GitLfsPointer: return "a Git LFS pointer (a small text file standing in for the real one)";
    case FileFormat::Html: return "a web page (HTML)";
    case FileFormat::Text: return "a text file";
    case FileFormat::TooShort: return "a file of fewer than 4 bytes";
    case FileFormat::Binary: return "a binary file of no known format";
  }
  return "an unknown file";
}

std::string not_a_model_message(FileFormat f) {
  if (f == FileFormat::Empty)
    return "the model file is empty (0 bytes); expected a GGUF model or a llama2.c checkpoint";
  std::string m =
      "the file looks like " + describe_format(f) + ", not a model (expected GGUF or a llama2.c checkpoint)";
  switch (f) {
    case FileFormat::Llama2cTokenizer: return m + "; pass a tokenizer with -z (options.tokenizer in JS)";
    case FileFormat::GitLfsPointer: return m + "; fetch the real file (git lfs pull)";
    case FileFormat::Html: return m + "; the download may have returned an error page";
    case FileFormat::Safetensors:
      return m +
             "; load the checkpoint's directory (config.json, tokenizer.json and the safetensors; in JS all its files) instead";
    case FileFormat::Zip: return m + "; convert it to GGUF first (llama.cpp's convert_hf_to_gguf.py)";
    default: return m;
  }
}

}  // namespace qkv
