// Error type and checked arithmetic used by every loader.
#include "common.h"

#include <cstdio>

namespace qkv {

const char* error_code_name(ErrorCode c) {
  switch (c) {
    case ErrorCode::BadModel: return "bad_model";
    case ErrorCode::BadTokenizer: return "bad_tokenizer";
    case ErrorCode::BadArgument: return "bad_argument";
    case ErrorCode::Unsupported: return "unsupported";
    case ErrorCode::OutOfMemory: return "out_of_memory";
    case ErrorCode::Io: return "io";
    case ErrorCode::Internal: return "internal";
  }
  return "internal";
}

void fail(ErrorCode code, const std::string& msg) { throw Error(code, msg); }

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > UINT64_MAX / a) return true;
  *out = a * b;
  return false;
}

uint64_t checked_mul(uint64_t a, uint64_t b, const char* what) {
  uint64_t r;
  if (mul_overflows(a, b, &r)) fail(ErrorCode::BadModel, std::string("size of ") + what + " overflows");
  return r;
}

uint64_t checked_add(uint64_t a, uint64_t b, const char* what) {
  if (b > UINT64_MAX - a) fail(ErrorCode::BadModel, std::string("size of ") + what + " overflows");
  return a + b;
}

std::string format_bytes(uint64_t n) {
  char buf[64];
  if (n >= (1ull << 30)) snprintf(buf, sizeof buf, "%.2f GiB", n / double(1ull << 30));
  else if (n >= (1ull << 20)) snprintf(buf, sizeof buf, "%.2f MiB", n / double(1ull << 20));
  else if (n >= (1ull << 10)) snprintf(buf, sizeof buf, "%.1f KiB", n / double(1ull << 10));
  else snprintf(buf, sizeof buf, "%llu B", (unsigned long long)n);
  return buf;
}

void append_utf8(std::string& o, uint32_t cp) {
  if (cp < 0x80) {
    o += (char)cp;
  } else if (cp < 0x800) {
    o += (char)(0xC0 | (cp >> 6));
    o += (char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    o += (char)(0xE0 | (cp >> 12));
    o += (char)(0x80 | ((cp >> 6) & 0x3F));
    o += (char)(0x80 | (cp & 0x3F));
  } else {
    o += (char)(0xF0 | (cp >> 18));
    o += (char)(0x80 | ((cp >> 12) & 0x3F));
    o += (char)(0x80 | ((cp >> 6) & 0x3F));
    o += (char)(0x80 | (cp & 0x3F));
  }
}

}  // namespace qkv
