// The JSON reader and writer shared by every layer that reads JSON.
#include "json.h"

namespace qkv {

namespace {

class Reader {
 public:
  Reader(const std::string& s, const char* what, ErrorCode code) : s_(s), what_(what), code_(code) {}
  Json document() {
    Json v = value(0);
    ws();
    if (i_ != s_.size()) bad("unexpected text after the document");
    return v;
  }

 private:
  const std::string& s_;
  const char* what_;
  ErrorCode code_;
  size_t i_ = 0;
  [[noreturn]] void bad(const std::string& why) const {
    fail(code_, std::string(what_) + ": invalid JSON at byte " + std::to_string(i_) + " (" + why + ")");
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) i_++;
  }
  bool lit(const char* w) {
    const size_t n = std::char_traits<char>::length(w);
    if (s_.compare(i_, n, w) != 0) return false;
    i_ += n;
    return true;
  }
  uint32_t hex4() {
    if (i_ + 4 > s_.size()) bad("short \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
      const char c = s_[i_++];
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) bad("bad \\u escape");
      v = v * 16 + (uint32_t)d;
    }
    return v;
  }
  std::string str() {
    i_++;  // opening quote
    std::string o;
    for (;;) {
      if (i_ >= s_.size()) bad("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return o;
      if ((unsigned char)c < 0x20) bad("control character in a string");
      if (c != '\\') {
        o += c;
        continue;
      }
      if (i_ >= s_.size()) bad("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"':
        case '\\':
        case '/': o += e; break;
        case 'b': o += '\b'; break;
        case 'f': o += '\f'; break;
        case 'n': o += '\n'; break;
        case 'r': o += '\r'; break;
        case 't': o += '\t'; break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && s_.compare(i_, 2, "\\u") == 0) {
            i_ += 2;
            const uint32_t lo = hex4();
            cp = (lo >= 0xDC00 && lo < 0xE000) ? 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00) : 0xFFFD;
          } else if (cp >= 0xD800 && cp < 0xE000) {
            cp = 0xFFFD;
          }
          append_utf8(o, cp);
          break;
        }
        default: bad(std::string("bad escape \\") + e);
      }
    }
  }
  Json value(int depth) {
    if (depth > 256) bad("nested too deeply");
    ws();
    if (i_ >= s_.size()) bad("unexpected end");
    Json v;
    const char c = s_[i_];
    if (c == '{') {
      v.k = Json::Obj;
      i_++;
      ws();
      if (i_ < s_.size() && s_[i_] == '}') {
        i_++;
        return v;
      }
      for (;;) {
        ws();
        if (i_ >= s_.size() || s_[i_] != '"') bad("expected a key");
        std::string key = str();
        ws();
        if (i_ >= s_.size() || s_[i_] != ':') bad("expected ':'");
        i_++;
        v.obj.emplace_back(std::move(key), value(depth + 1));
        ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          i_++;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == '}') {
          i_++;
          return v;
        }
        bad("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v.k = Json::Arr;
      i_++;
      ws();
      if (i_ < s_.size() && s_[i_] == ']') {
        i_++;
        return v;
      }
      for (;;) {
        v.arr.push_back(value(depth + 1));
        ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          i_++;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == ']') {
          i_++;
          return v;
        }
        bad("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.k = Json::Str;
      v.s = str();
      return v;
    }
    if (lit("true")) {
      v.k = Json::Bool;
      v.b = true;
      return v;
    }
    if (lit("false")) {
      v.k = Json::Bool;
      return v;
    }
    if (lit("null")) return v;
    const size_t b = i_;
    if (i_ < s_.size() && s_[i_] == '-') i_++;
    while (i_ < s_.size() && ((s_[i_] >= '0' && s_[i_] <= '9') || s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E' ||
                              s_[i_] == '+' || s_[i_] == '-'))
      i_++;
    if (i_ == b) bad(std::string("unexpected character '") + c + "'");
    v.k = Json::Num;
    v.s = s_.substr(b, i_ - b);
    return v;
  }
};

}  // namespace

Json parse_json(const std::string& text, const char* what, ErrorCode code) {
  return Reader(text, what, code).document();
}

std::string json_text(const Json& v) {
  switch (v.k) {
    case Json::Null: return "null";
    case Json::Bool: return v.b ? "true" : "false";
    case Json::Num: return v.s;
    case Json::Str: {
      std::string o = "\"";
      for (unsigned char c : v.s) {
        if (c == '"') o += "\\\"";
        else if (c == '\\') o += "\\\\";
        else if (c == '\n') o += "\\n";
        else if (c == '\r') o += "\\r";
        else if (c == '\t') o += "\\t";
        else if (c == '\b') o += "\\b";
        else if (c == '\f') o += "\\f";
        else if (c < 0x20) {
          static const char* hx = "0123456789abcdef";
          o += "\\u00";
          o += hx[c >> 4];
          o += hx[c & 15];
        } else {
          o += (char)c;
        }
      }
      return o + "\"";
    }
    case Json::Arr: {
      std::string o = "[";
      for (size_t i = 0; i < v.arr.size(); i++) o += (i ? "," : "") + json_text(v.arr[i]);
      return o + "]";
    }
    case Json::Obj: {
      std::string o = "{";
      for (size_t i = 0; i < v.obj.size(); i++) {
        Json k;
        k.k = Json::Str;
        k.s = v.obj[i].first;
        o += (i ? "," : "") + json_text(k) + ":" + json_text(v.obj[i].second);
      }
      return o + "}";
    }
  }
  return "null";
}

}  // namespace qkv
