// JSON as the project reads it (schemas, chat-template variables, Hugging Face configs and
// tokenizers): a small DOM that keeps key order and number text, bounded in depth.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "common.h"

namespace qkv {

struct Json {
  enum K { Null, Bool, Num, Str, Arr, Obj } k = Null;
  bool b = false;
  std::string s;  // Str: the string; Num: the number's text
  std::vector<Json> arr;
  std::vector<std::pair<std::string, Json>> obj;
  const Json* get(const std::string& key) const {
    for (const auto& kv : obj)
      if (kv.first == key) return &kv.second;
    return nullptr;
  }
};

// Parses a whole document; errors are `code` with "<what>: invalid JSON at byte N (...)".
Json parse_json(const std::string& text, const char* what, ErrorCode code = ErrorCode::BadArgument);

// Compact JSON text of a value, as JSON.stringify writes it.
std::string json_text(const Json& v);

}  // namespace qkv
