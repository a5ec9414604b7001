// Pre-tokenizer scanners. Each matcher returns the length of the match at position p of the
// fragment [p, e) (0 = none), trying the regex's alternatives in order; a stage splits every
// fragment into its matches and the unmatched text between them, as llama.cpp's regex split does.
#include "pretokenize.h"

#include <algorithm>
#include <utility>

#include "../common.h"

namespace qkv {

namespace {
struct Range {
  uint32_t first, last;
  uint8_t cls;
};
const Range kRanges[] = {
#include "unicode_table.inc"
};

using Cps = std::vector<uint32_t>;
using Frags = std::vector<std::pair<size_t, size_t>>;
using Matcher = size_t (*)(const Cps&, size_t, size_t);

bool is_l(uint32_t c) { return unicode_class(c) == 1; }
bool is_n(uint32_t c) { return unicode_class(c) == 2; }
bool is_other(uint32_t c) { return !unicode_is_space(c) && unicode_class(c) != 1 && unicode_class(c) != 2; }
bool is_crlf(uint32_t c) { return c == '\r' || c == '\n'; }
uint32_t lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

size_t run(const Cps& s, size_t p, size_t e, bool (*pred)(uint32_t)) {
  size_t q = p;
  while (q < e && pred(s[q])) q++;
  return q - p;
}

// 's 't 're 've 'm 'll 'd (case-insensitive for the Llama 3 family).
size_t contraction(const Cps& s, size_t p, size_t e, bool fold) {
  if (s[p] != '\'' || p + 1 >= e) return 0;
  auto f = [&](uint32_t c) { return fold ? lower(c) : c; };
  const uint32_t a = f(s[p + 1]);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (p + 2 >= e) return 0;
  const uint32_t b = f(s[p + 2]);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// ` ?X+`: an optional space, then a run of class X.
size_t space_then_run(const Cps& s, size_t p, size_t e, bool (*pred)(uint32_t)) {
  const size_t q = p + (s[p] == ' ' ? 1 : 0);
  const size_t n = q < e ? run(s, q, e, pred) : 0;
  return n ? q - p + n : 0;
}

// `\s+(?!\S)|\s+`: a whitespace run, leaving its last character to the next word unless the
// run ends the fragment.
size_t trailing_space(const Cps& s, size_t p, size_t e) {
  const size_t k = run(s, p, e, unicode_is_space);
  if (k == 0) return 0;
  if (p + k == e || k == 1) return k;
  return k - 1;
}

size_t match_gpt2(const Cps& s, size_t p, size_t e) {
  if (size_t n = contraction(s, p, e, false)) return n;
  if (size_t n = space_then_run(s, p, e, is_l)) return n;
  if (size_t n = space_then_run(s, p, e, is_n)) return n;
  if (size_t n = space_then_run(s, p, e, is_other)) return n;
  return trailing_space(s, p, e);
}

size_t match_llama3_family(const Cps& s, size_t p, size_t e, size_t max_digits) {
  if (size_t n = contraction(s, p, e, true)) return n;
  const uint32_t c = s[p];
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (!is_crlf(c) && !is_l(c) && !is_n(c) && p + 1 < e && is_l(s[p + 1])) return 1 + run(s, p + 1, e, is_l);
  if (is_l(c)) return run(s, p, e, is_l);
  // \p{N}{1,max}
  if (is_n(c)) return std::min(run(s, p, e, is_n), max_digits);
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  if (size_t n = space_then_run(s, p, e, is_other)) return n + run(s, p + n, e, is_crlf);
  // \s*[\r\n]+ : the whitespace run up to its last CR/LF
  const size_t k = run(s, p, e, unicode_is_space);
  for (size_t j = k; j > 0; j--)
    if (is_crlf(s[p + j - 1])) return j;
  return trailing_space(s, p, e);
}

size_t match_llama3(const Cps& s, size_t p, size_t e) { return match_llama3_family(s, p, e, 3); }
size_t match_qwen2(const Cps& s, size_t p, size_t e) { return match_llama3_family(s, p, e, 1); }
size_t match_one_number(const Cps& s, size_t p, size_t e) { return is_n(s[p]) ? 1 : 0; }
size_t match_numbers(const Cps& s, size_t p, size_t e) { return run(s, p, e, is_n); }
size_t match_three_digits(const Cps& s, size_t p, size_t e) {
  auto d = [](uint32_t c) { return c >= '0' && c <= '9'; };
  return p + 3 <= e && d(s[p]) && d(s[p + 1]) && d(s[p + 2]) ? 3 : 0;
}
bool is_default_punct(uint32_t c) {
  return unicode_class(c) == 3 || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' || c == '~' ||
         c == '|';
}
size_t match_punct(const Cps& s, size_t p, size_t e) { return run(s, p, e, is_default_punct); }

Frags split(const Cps& s, const Frags& in, Matcher m) {
  Frags out;
  for (auto [b, e] : in) {
    size_t p = b, pending = b;
    while (p < e) {
      const size_t n = m(s, p, e);
      if (n == 0) {
        p++;
        continue;
      }
      if (pending < p) out.emplace_back(pending, p);
      out.emplace_back(p, p + n);
      p += n;
      pending = p;
    }
    if (pending < e) out.emplace_back(pending, e);
  }
  return out;
}
}  // namespace

int unicode_class(uint32_t cp) {
  const Range* end = kRanges + sizeof kRanges / sizeof kRanges[0];
  const Range* r = std::upper_bound(kRanges, end, cp, [](uint32_t c, const Range& x) { return c < x.first; });
  if (r == kRanges) return 0;
  --r;
  return cp <= r->last ? r->cls : 0;
}

bool unicode_is_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::vector<uint32_t> utf8_to_codepoints(const std::string& s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char b = s[i];
    size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (size_t k = 1; ok && k < len; k++) {
      const unsigned char c = s[i + k];
      if ((c & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (!ok) {
      out.push_back(0xFFFD);
      i++;
      continue;
    }
    out.push_back(cp);
    i += len;
  }
  return out;
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

uint32_t gpt2_byte_to_cp(uint8_t b) {
  static const std::vector<uint32_t> table = [] {
    std::vector<uint32_t> t(256);
    uint32_t next = 256;
    for (int i = 0; i < 256; i++) {
      const bool printable = (i >= 0x21 && i <= 0x7E) || (i >= 0xA1 && i <= 0xAC) || (i >= 0xAE && i <= 0xFF);
      t[i] = printable ? (uint32_t)i : next++;
    }
    return t;
  }();
  return table[b];
}

int gpt2_cp_to_byte(uint32_t cp) {
  static const std::vector<int> inverse = [] {
    std::vector<int> v(512, -1);
    for (int b = 0; b < 256; b++) v[gpt2_byte_to_cp((uint8_t)b)] = b;
    return v;
  }();
  return cp < inverse.size() ? inverse[cp] : -1;
}

// Each pre-tokenizer with the names llama.cpp maps onto its regex (the first is ours; others are
// other families' names for the same one, e.g. Falcon 3's "falcon3" is Llama 3's).
namespace {
struct PreNames {
  PreTokenizer kind;
  std::vector<const char*> names;
};
const std::vector<PreNames>& pre_names() {
  static const std::vector<PreNames> t = {
      {PreTokenizer::Gpt2, {"gpt-2", "gpt2", "phi-2", "mellum", "a.x-4.0", "gigachat", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de"}},
      {PreTokenizer::Default, {"default"}},
      {PreTokenizer::Llama3, {"llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"}},
      {PreTokenizer::Qwen2, {"qwen2", "deepseek-r1-qwen", "kormo"}},
      {PreTokenizer::Smollm, {"smollm"}},
  };
  return t;
}
}  // namespace

// "gpt-2 (gpt2, phi-2, ...), default, llama-bpe (...), ..."
const char* pre_tokenizer_names() {
  static const std::string text = [] {
    std::string r;
    for (const PreNames& p : pre_names()) {
      r += (r.empty() ? "" : ", ") + std::string(p.names[0]);
      for (size_t i = 1; i < p.names.size(); i++) r += (i == 1 ? " (" : ", ") + std::string(p.names[i]);
      if (p.names.size() > 1) r += ")";
    }
    return r;
  }();
  return text.c_str();
}

PreTokenizer pre_tokenizer_from_name(const std::string& n) {
  if (n.empty()) return PreTokenizer::Default;
  for (const PreNames& p : pre_names())
    for (const char* m : p.names)
      if (n == m) return p.kind;
  fail(ErrorCode::Unsupported,
       "GGUF pre-tokenizer '" + n + "' (tokenizer.ggml.pre) is not supported; supported: " + pre_tokenizer_names());
}

std::vector<std::string> pre_tokenize(const std::string& text, PreTokenizer kind) {
  const Cps s = utf8_to_codepoints(text);
  Frags f{{0, s.size()}};
  if (s.empty()) return {};
  switch (kind) {
    case PreTokenizer::Gpt2: f = split(s, f, match_gpt2); break;
    case PreTokenizer::Default:
      f = split(s, f, match_punct);
      f = split(s, f, match_gpt2);
      f = split(s, f, match_numbers);
      f = split(s, f, match_three_digits);
      break;
    case PreTokenizer::Llama3: f = split(s, f, match_llama3); break;
    case PreTokenizer::Qwen2: f = split(s, f, match_qwen2); break;
    case PreTokenizer::Smollm:
      f = split(s, f, match_one_number);
      f = split(s, f, match_gpt2);
      break;
  }
  std::vector<std::string> out;
  out.reserve(f.size());
  for (auto [b, e] : f) {
    std::string w;
    for (size_t i = b; i < e; i++) append_utf8(w, s[i]);
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace qkv
