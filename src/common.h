// Shared basics for every layer: the error type that crosses all APIs, checked arithmetic.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace qkv {

// Stable error codes; the JS layer maps them to QkvError.code strings.
enum class ErrorCode { BadModel, BadTokenizer, BadArgument, Unsupported, OutOfMemory, Io, Internal };

const char* error_code_name(ErrorCode c);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& msg) : std::runtime_error(msg), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

[[noreturn]] void fail(ErrorCode code, const std::string& msg);

// Hot-path invariant: cheap check that throws Internal instead of corrupting memory.
#define QKV_CHECK(cond, msg)                                                                                    \
  do {                                                                                                          \
    if (!(cond))                                                                                                \
      ::qkv::fail(::qkv::ErrorCode::Internal, std::string("internal check failed: ") + (msg) + " (" #cond ")"); \
  } while (0)

// a * b with overflow detection (sizes derived from untrusted headers).
bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out);
uint64_t checked_mul(uint64_t a, uint64_t b, const char* what);
uint64_t checked_add(uint64_t a, uint64_t b, const char* what);

std::string format_bytes(uint64_t n);

// One code point as UTF-8 (callers pass valid scalar values).
void append_utf8(std::string& out, uint32_t cp);

}  // namespace qkv
