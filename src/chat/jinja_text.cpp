// Jinja's text and grouping filters that chat templates use less often (groupby, slice,
// striptags, wordwrap, xmlattr, urlencode, filesizeformat), the filter and test tests, and
// Python's str.format, each as Jinja2 3.1 (with MarkupSafe and textwrap) defines it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "jinja_runtime.h"

namespace qkv::jinja {

namespace {

// Jinja2's built-in filter and test names (what `is filter` and `is test` look up), with
// transformers' tojson among the filters.
const char* const kFilterNames[] = {"abs",    "attr",       "batch",       "capitalize", "center",   "count",
                                    "d",      "default",    "dictsort",    "e",          "escape",   "filesizeformat",
                                    "first",  "float",      "forceescape", "format",     "groupby",  "indent",
                                    "int",    "items",      "join",        "last",       "length",   "list",
                                    "lower",  "map",        "max",         "min",        "pprint",   "random",
                                    "reject", "rejectattr", "replace",     "reverse",    "round",    "safe",
                                    "select", "selectattr", "slice",       "sort",       "string",   "striptags",
                                    "sum",    "title",      "tojson",      "trim",       "truncate", "unique",
                                    "upper",  "urlencode",  "urlize",      "wordcount",  "wordwrap", "xmlattr"};
const char* const kTestNames[] = {
    "!=",       "<",           "<=",          "==",      ">",       ">=",        "boolean",  "callable",
    "defined",  "divisibleby", "eq",          "equalto", "escaped", "even",      "false",    "filter",
    "float",    "ge",          "greaterthan", "gt",      "in",      "integer",   "iterable", "le",
    "lessthan", "lower",       "lt",          "mapping", "ne",      "none",      "number",   "odd",
    "sameas",   "sequence",    "string",      "test",    "true",    "undefined", "upper"};

template <size_t N>
bool listed(const char* const (&names)[N], const std::string& n) {
  for (const char* x : names)
    if (n == x) return true;
  return false;
}

void append_utf8(std::string& o, uint32_t cp) {
  if (cp < 0x80) {
    o += (char)cp;
  } else if (cp < 0x800) {
    o += (char)(0xc0 | cp >> 6);
    o += (char)(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    o += (char)(0xe0 | cp >> 12);
    o += (char)(0x80 | (cp >> 6 & 0x3f));
    o += (char)(0x80 | (cp & 0x3f));
  } else {
    o += (char)(0xf0 | cp >> 18);
    o += (char)(0x80 | (cp >> 12 & 0x3f));
    o += (char)(0x80 | (cp >> 6 & 0x3f));
    o += (char)(0x80 | (cp & 0x3f));
  }
}

bool ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// Python's html.unescape for the character references text commonly holds: &amp; &lt; &gt;
// &quot; &apos; &nbsp; and numeric ones; any other named reference is refused (Python knows
// 2231 of them), so the text is never silently left different.
std::string html_unescape(const std::string& s) {
  std::string o;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] != '&') {
      o += s[i];
      continue;
    }
    size_t j = i + 1;
    if (j < s.size() && s[j] == '#') {
      const bool hex = j + 1 < s.size() && (s[j + 1] == 'x' || s[j + 1] == 'X');
      size_t k = j + 1 + hex;
      uint64_t cp = 0;
      const size_t d0 = k;
      while (k < s.size() && (hex ? std::isxdigit((unsigned char)s[k]) : std::isdigit((unsigned char)s[k])) &&
             cp < 0x110000) {
        cp = cp * (hex ? 16 : 10) +
             (uint64_t)(std::isdigit((unsigned char)s[k]) ? s[k] - '0' : (s[k] | 0x20) - 'a' + 10);
        k++;
      }
      if (k == d0) {  // no digits: left as it is
        o += '&';
        continue;
      }
      if (k >= s.size() || s[k] != ';' || cp == 0 || cp >= 0x110000 || (cp >= 0xd800 && cp <= 0xdfff) ||
          (cp >= 0x80 && cp <= 0x9f) || (cp >= 0xfdd0 && cp <= 0xfdef) || (cp & 0xfffe) == 0xfffe || cp < 0x20)
        unsupported("striptags of the character reference '" + s.substr(i, std::min<size_t>(k - i + 1, 16)) + "'");
      append_utf8(o, (uint32_t)cp);
      i = k;
      continue;
    }
    size_t k = j;
    while (k < s.size() && std::isalnum((unsigned char)s[k])) k++;
    if (k == j) {
      o += '&';
      continue;
    }
    const std::string name = s.substr(j, k - j);
    const bool semi = k < s.size() && s[k] == ';';
    const char* rep = name == "amp"            ? "&"
                      : name == "lt"           ? "<"
                      : name == "gt"           ? ">"
                      : name == "quot"         ? "\""
                      : name == "nbsp"         ? "\xc2\xa0"
                      : name == "apos" && semi ? "'"
                                               : nullptr;
    if (!rep) unsupported("striptags of the character reference '&" + name.substr(0, 16) + "'");
    o += rep;
    i = semi ? k : k - 1;
  }
  return o;
}

// urllib.parse.quote's percent-encoding of UTF-8 (letters, digits and _.-~ kept, and `safe`).
std::string url_quote(const std::string& s, const char* safe) {
  std::string o;
  for (const unsigned char c : s) {
    if (std::isalnum(c) || std::strchr("_.-~", c) || (c && std::strchr(safe, c))) {
      o += (char)c;
    } else {
      char b[4];
      std::snprintf(b, sizeof b, "%%%02X", c);
      o += b;
    }
  }
  return o;
}

std::string markup_escape(const std::string& s) {
  std::string r;
  for (const char c : s) {
    if (c == '&') r += "&amp;";
    else if (c == '<') r += "&lt;";
    else if (c == '>') r += "&gt;";
    else if (c == '"') r += "&#34;";
    else if (c == '\'') r += "&#39;";
    else r += c;
  }
  return r;
}

// Digits grouped by `sep` every `n` from the right (Python's ',' and '_' options).
std::string grouped(const std::string& digits, char sep, int n) {
  std::string o;
  const size_t len = digits.size();
  for (size_t i = 0; i < len; i++) {
    if (i && (len - i) % n == 0) o += sep;
    o += digits[i];
  }
  return o;
}

// Python's str.isspace() for a code point (what the regex \s matches).
bool py_space(uint32_t c) {
  return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

// The code point at byte i of s and its length in *n (a stray byte stands for itself).
uint32_t decode(const std::string& s, size_t i, size_t* n) {
  const unsigned char c = (unsigned char)s[i];
  *n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
  for (size_t k = 1; k < *n; k++)
    if (i + k >= s.size() || ((unsigned char)s[i + k] & 0xc0) != 0x80) *n = 1;
  if (*n == 1) return c;
  uint32_t cp = c & (0x7f >> *n);
  for (size_t k = 1; k < *n; k++) cp = cp << 6 | ((unsigned char)s[i + k] & 0x3f);
  return cp;
}

// Python's pprint.pformat (width 80, indent 1, dicts sorted by key), which Jinja2's pprint is:
// a value's repr where it fits the line, else its items one per line, long strings in chunks.
class Pretty {
 public:
  std::string o;
  void format(const Value& v, int64_t indent, int64_t allowance, int level) {
    charge(64);
    const std::string rep = flat(v);
    if (cps(rep) > kWidth - indent - allowance) {
      if (v.k == Value::K::Dict && !v.is_ns && !v.is_loop) return dict(v, indent, allowance, level + 1);
      if (v.k == Value::K::List) return list(v, indent, allowance, level + 1);
      if (v.k == Value::K::Str) return str(v.s, indent, allowance, level + 1);
    }
    o += rep;
    if (o.size() > kMaxOutput) too_much("a string grows too long");
  }

 private:
  static constexpr int64_t kWidth = 80;
  static int64_t cps(const std::string& s) {
    int64_t n = 0;
    for (const char c : s) n += ((unsigned char)c & 0xc0) != 0x80;
    return n;
  }
  // pprint's key order: ints by value before strings (Python compares their type names then),
  // strings by code point.
  static std::vector<const Entry*> sorted(const Value& v) {
    std::vector<const Entry*> es;
    for (const Entry& e : *v.d) es.push_back(&e);
    charge(16 * es.size());
    std::stable_sort(es.begin(), es.end(), [](const Entry* a, const Entry* b) {
      if (a->int_key != b->int_key) return a->int_key;
      if (a->int_key) return std::strtoll(a->first.c_str(), nullptr, 10) < std::strtoll(b->first.c_str(), nullptr, 10);
      return a->first < b->first;
    });
    return es;
  }
  static std::string key_repr(const Entry& e) {
    std::string k;
    if (e.int_key) k = e.first;
    else repr_str(k, e.first);
    return k;
  }
  // pprint's one-line repr: Python's, with dict keys sorted (a namespace prints as its repr does).
  static std::string flat(const Value& v) {
    if (v.k == Value::K::Undef) return "Undefined";
    if (v.lazy) return repr(v);  // refuses: a generator's repr holds its address
    if (v.k == Value::K::Dict && !v.is_ns && !v.is_loop) {
      std::string r = "{";
      for (const Entry* e : sorted(v)) {
        if (r.size() > 1) r += ", ";
        r += key_repr(*e) + ": " + flat(e->second);
        if (r.size() > kMaxOutput) too_much("a string grows too long");
      }
      return r + "}";
    }
    if (v.k == Value::K::List) {
      std::string r = v.tuple ? "(" : "[";
      for (size_t i = 0; i < v.l->size(); i++) {
        r += (i ? ", " : "") + flat((*v.l)[i]);
        if (r.size() > kMaxOutput) too_much("a string grows too long");
      }
      if (v.tuple && v.l->size() == 1) r += ',';
      return r + (v.tuple ? ")" : "]");
    }
    return repr(v);
  }
  void dict(const Value& v, int64_t indent, int64_t allowance, int level) {
    o += '{';
    const std::vector<const Entry*> es = sorted(v);
    indent += 1;
    allowance += 1;
    for (size_t i = 0; i < es.size(); i++) {
      const bool last = i + 1 == es.size();
      const std::string k = key_repr(*es[i]);
      o += k + ": ";
      format(es[i]->second, indent + cps(k) + 2, last ? allowance : 1, level);
      if (!last) o += ",\n" + std::string((size_t)indent, ' ');
    }
    o += '}';
  }
  void list(const Value& v, int64_t indent, int64_t allowance, int level) {
    const std::string end = !v.tuple ? "]" : v.l->size() == 1 ? ",)" : ")";
    o += v.tuple ? '(' : '[';
    indent += 1;
    allowance += cps(end);
    for (size_t i = 0; i < v.l->size(); i++) {
      const bool last = i + 1 == v.l->size();
      if (i) o += ",\n" + std::string((size_t)indent, ' ');
      format((*v.l)[i], indent, last ? allowance : 1, level);
    }
    o += end;
  }
  static bool line_end(uint32_t c) {
    return c == '\n' || c == '\r' || c == 0xb || c == 0xc || (c >= 0x1c && c <= 0x1e) || c == 0x85 || c == 0x2028 ||
           c == 0x2029;
  }
  static std::string rep(const std::string& s) {
    std::string r;
    repr_str(r, s);
    return r;
  }
  // pprint's _pprint_str: each line (ends kept) as a repr, lines too long cut after whitespace;
  // several chunks at the top level go in parentheses.
  void str(const std::string& s, int64_t indent, int64_t allowance, int level) {
    charge(4 * s.size());
    if (s.empty()) {
      o += "''";
      return;
    }
    std::vector<std::string> lines;
    for (size_t i = 0, start = 0; i < s.size();) {
      size_t n;
      const uint32_t c = decode(s, i, &n);
      i += n;
      if (c == '\r' && i < s.size() && s[i] == '\n') i++;
      if (line_end(c) || i >= s.size()) lines.push_back(s.substr(start, i - start)), start = i;
    }
    if (level == 1) indent += 1, allowance += 1;
    const int64_t max_width = kWidth - indent;
    int64_t max_width1 = max_width;
    std::vector<std::string> chunks;
    for (size_t i = 0; i < lines.size(); i++) {
      const bool last_line = i + 1 == lines.size();
      if (last_line) max_width1 -= allowance;
      std::string r = rep(lines[i]);
      if (cps(r) <= max_width1) {
        chunks.push_back(std::move(r));
        continue;
      }
      std::vector<std::string> parts;  // runs of non-space then space, as re.findall(r'\S*\s*') gives
      const std::string& line = lines[i];
      for (size_t p = 0; p < line.size();) {
        size_t q = p, n;
        while (q < line.size() && !py_space(decode(line, q, &n))) q += n;
        while (q < line.size() && py_space(decode(line, q, &n))) q += n;
        parts.push_back(line.substr(p, q - p));
        p = q;
      }
      int64_t max_width2 = max_width;
      std::string current;
      for (size_t j = 0; j < parts.size(); j++) {
        tick_text(parts[j]);
        const std::string candidate = current + parts[j];
        if (j + 1 == parts.size() && last_line) max_width2 -= allowance;
        if (cps(rep(candidate)) > max_width2) {
          if (!current.empty()) chunks.push_back(rep(current));
          current = parts[j];
        } else {
          current = candidate;
        }
      }
      if (!current.empty()) chunks.push_back(rep(current));
    }
    if (chunks.size() == 1) {
      o += chunks[0];
      return;
    }
    if (level == 1) o += '(';
    for (size_t i = 0; i < chunks.size(); i++) o += (i ? "\n" + std::string((size_t)indent, ' ') : "") + chunks[i];
    if (level == 1) o += ')';
    if (o.size() > kMaxOutput) too_much("a string grows too long");
  }
  static void tick_text(const std::string& part) { charge(16 + part.size()); }
};

// ---- urlize: Jinja2 3.1's utils.urlize, its regexes written out as scans -----------------------

// \w approximately, as wordcount sees it: ASCII letters, digits and _, and every other character
// but Latin-1 punctuation, general punctuation and symbols, CJK punctuation and emoji.
bool word_cp(uint32_t cp) {
  if (cp < 0x80) return std::isalnum((int)cp) || cp == '_';
  return !((cp <= 0xbf && cp != 0xaa && cp != 0xb5 && cp != 0xba) || cp == 0xd7 || cp == 0xf7 ||
           (cp >= 0x2000 && cp <= 0x2bff) || (cp >= 0x3000 && cp <= 0x303f) || (cp >= 0x1f000 && cp <= 0x1faff) ||
           (cp >= 0xfe00 && cp <= 0xfe0f));
}
bool istarts(const std::string& s, size_t at, const char* pre) {
  const size_t n = std::strlen(pre);
  if (at + n > s.size()) return false;
  for (size_t k = 0; k < n; k++)
    if (std::tolower((unsigned char)s[at + k]) != pre[k]) return false;
  return true;
}
bool ascii_digit(char c) { return c >= '0' && c <= '9'; }
bool hex_digit(char c) { return ascii_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
// The end of a run from i of characters `in` accepts (whole UTF-8 sequences).
template <typename F>
size_t run(const std::string& s, size_t i, F in) {
  size_t n;
  while (i < s.size() && in(decode(s, i, &n))) i += n;
  return i;
}
// (?::[\d]{1,5})?(?:[/?#]\S*)?$ from p (the word holds no whitespace).
bool url_rest(const std::string& m, size_t p) {
  auto path = [&](size_t q) { return q == m.size() || m[q] == '/' || m[q] == '?' || m[q] == '#'; };
  if (path(p)) return true;
  if (m[p] != ':') return false;
  size_t q = p + 1;
  while (q < m.size() && ascii_digit(m[q])) q++;
  return q - p - 1 >= 1 && q - p - 1 <= 5 && path(q);
}
// Jinja2's _http_re (case-blind): scheme or www. with labels and a letters (or xn--) top-level
// domain; bare labels of 2..63 ending in a common top-level domain; or a scheme with an IPv4 or
// IPv6 address; then a port and a path.
bool http_like(const std::string& m) {
  auto label = [](uint32_t c) { return word_cp(c) || c == '%' || c == '-'; };
  const size_t scheme = istarts(m, 0, "https://") ? 8 : istarts(m, 0, "http://") ? 7 : 0;
  const size_t start = scheme ? scheme : istarts(m, 0, "www.") ? 4 : std::string::npos;
  if (start != std::string::npos) {
    for (size_t t = start;;) {  // t: after each possible run of labels
      const size_t letters = run(m, t, [](uint32_t c) { return c < 0x80 && std::isalpha((int)c); }) - t;
      for (size_t len = 2; len <= std::min<size_t>(63, letters); len++)
        if (url_rest(m, t + len)) return true;
      if (istarts(m, t, "xn--")) {
        size_t q = t + 4, n, count = 0;
        while (q < m.size() && count < 59) {
          const uint32_t c = decode(m, q, &n);
          if (!(word_cp(c) || c == '%')) break;
          q += n, count++;
          if (count >= 2 && url_rest(m, q)) return true;
        }
      }
      const size_t e = run(m, t, label);
      if (e == t || e >= m.size() || m[e] != '.') break;
      t = e + 1;
    }
  }
  static const char* const kTlds[] = {"com", "net", "int", "edu", "gov", "org", "info", "mil"};
  for (size_t t = 0;;) {  // ([\w%-]{2,63}\.)+ then a common top-level domain
    const size_t e = run(m, t, label);
    const size_t n = (size_t)std::count_if(m.begin() + (long)t, m.begin() + (long)e,
                                           [](char c) { return ((unsigned char)c & 0xc0) != 0x80; });
    if (n < 2 || n > 63 || e >= m.size() || m[e] != '.') break;
    t = e + 1;
    for (const char* tld : kTlds)
      if (istarts(m, t, tld) && url_rest(m, t + std::strlen(tld))) return true;
  }
  if (!scheme) return false;
  size_t p = scheme;
  if (p < m.size() && ascii_digit(m[p])) {  // IPv4
    for (int k = 0; k < 4; k++) {
      if (k && (p >= m.size() || m[p++] != '.')) return false;
      size_t q = p;
      while (q < m.size() && ascii_digit(m[q])) q++;
      if (q == p || q - p > 3) return false;
      p = q;
    }
    return url_rest(m, p);
  }
  if (p >= m.size() || m[p] != '[') return false;  // IPv6: ([\da-f]{0,4}:){2}([\da-f]{0,4}:?){1,6}]
  p++;
  for (int k = 0; k < 2; k++) {
    size_t q = p;
    while (q < m.size() && hex_digit(m[q])) q++;
    if (q - p > 4 || q >= m.size() || m[q] != ':') return false;
    p = q + 1;
  }
  int groups = 0;
  while (p < m.size() && m[p] != ']') {
    size_t q = p;
    while (q < m.size() && q - p < 4 && hex_digit(m[q])) q++;
    if (q < m.size() && m[q] == ':') q++;
    if (q == p) return false;
    p = q;
    groups++;
  }
  if (p >= m.size() || groups > 6) return false;
  return url_rest(m, p + 1);
}
// Jinja2's _email_re, ^\S+@\w[\w.-]*\.\w+$: only the last @ and the last dot can split it.
bool email_like(const std::string& m) {
  const size_t at = m.rfind('@');
  if (at == std::string::npos || at == 0) return false;
  const std::string d = m.substr(at + 1);
  const size_t dot = d.rfind('.');
  if (d.empty() || dot == std::string::npos || dot == 0 || dot + 1 == d.size()) return false;
  size_t n;
  if (!word_cp(decode(d, 0, &n))) return false;
  const std::string mid = d.substr(n, dot - std::min(n, dot));
  if (n > dot) return false;
  if (run(mid, 0, [](uint32_t c) { return word_cp(c) || c == '.' || c == '-'; }) != mid.size()) return false;
  return run(d, dot + 1, word_cp) == d.size();
}
size_t count_of(const std::string& s, const std::string& x) {
  size_t n = 0;
  for (size_t p = s.find(x); p != std::string::npos; p = s.find(x, p + x.size())) n++;
  return n;
}

// The text with its URLs and e-mail addresses as links, escaped as Markup; rel and target as
// attributes of the URL links, shown URLs cut to `trim` characters (none: whole).
std::string urlize(const std::string& text, const Value& trim, const std::string& rel, const std::string& target) {
  const std::string s = markup_escape(text);
  const std::string attrs = (rel.empty() ? "" : " rel=\"" + markup_escape(rel) + "\"") +
                            (target.empty() ? "" : " target=\"" + markup_escape(target) + "\"");
  auto shown = [&](const std::string& u) {
    if (trim.k != Value::K::Int) return u;
    std::vector<size_t> at;
    for (size_t i = 0; i < u.size(); i++)
      if (((unsigned char)u[i] & 0xc0) != 0x80) at.push_back(i);
    const int64_t len = (int64_t)at.size();
    if (len <= trim.i) return u;
    const int64_t keep = trim.i >= 0 ? trim.i : std::max<int64_t>(0, len + trim.i);
    return u.substr(0, keep < len ? at[(size_t)keep] : u.size()) + "...";
  };
  std::string out;
  for (size_t i = 0; i < s.size();) {
    size_t n;
    const bool space = py_space(decode(s, i, &n));
    const size_t j = run(s, i, [&](uint32_t c) { return py_space(c) == space; });
    std::string middle = s.substr(i, j - i), head, tail;
    i = j;
    charge(64 + 4 * middle.size());
    if (space) {
      out += middle;
      continue;
    }
    for (;;) {  // ^([(<]|&lt;)+
      if (!middle.empty() && (middle[0] == '(' || middle[0] == '<')) head += middle[0], middle.erase(0, 1);
      else if (middle.compare(0, 4, "&lt;") == 0) head += "&lt;", middle.erase(0, 4);
      else break;
    }
    size_t cut = middle.size();  // ([)>.,\n]|&gt;)+$
    for (;;) {
      if (cut && std::strchr(")>.,\n", middle[cut - 1])) cut--;
      else if (cut >= 4 && middle.compare(cut - 4, 4, "&gt;") == 0) cut -= 4;
      else break;
    }
    tail = middle.substr(cut);
    middle.resize(cut);
    for (const auto& pr : {std::make_pair("(", ")"), std::make_pair("<", ">"), std::make_pair("&lt;", "&gt;")}) {
      const size_t opens = count_of(middle, pr.first);
      if (opens <= count_of(middle, pr.second)) continue;
      const size_t moves = std::min(opens, count_of(tail, pr.second));
      for (size_t k = 0; k < moves; k++) {
        const size_t e = tail.find(pr.second) + std::strlen(pr.second);
        middle += tail.substr(0, e);
        tail.erase(0, e);
      }
    }
    if (http_like(middle)) {
      const bool has_scheme = middle.compare(0, 8, "https://") == 0 || middle.compare(0, 7, "http://") == 0;
      middle = "<a href=\"" + std::string(has_scheme ? "" : "https://") + middle + "\"" + attrs + ">" + shown(middle) +
               "</a>";
    } else if (middle.compare(0, 7, "mailto:") == 0 && email_like(middle.substr(7))) {
      middle = "<a href=\"" + middle + "\">" + middle.substr(7) + "</a>";
    } else if (middle.find('@') != std::string::npos && middle.compare(0, 4, "www.") != 0 && middle[0] != '@' &&
               middle.find(':') == std::string::npos && email_like(middle)) {
      middle = "<a href=\"mailto:" + middle + "\">" + middle + "</a>";
    }
    out += head + middle + tail;
    if (out.size() > kMaxOutput) too_much("a string grows too long");
  }
  return out;
}

}  // namespace

// Python's format(x, spec) for strings, integers and floats (format-spec mini-language:
// [[fill]align][sign][#][0][width][,|_][.precision][type]).
std::string Renderer::format_spec(const Value& x, const std::string& spec) {
  if (spec.empty()) return to_text(x);
  const std::vector<std::string> cs = chars(spec);
  size_t i = 0;
  std::string fill = " ";
  char align = 0;
  auto is_align = [](const std::string& c) { return c == "<" || c == ">" || c == "^" || c == "="; };
  if (cs.size() >= 2 && is_align(cs[1])) fill = cs[0], align = cs[1][0], i = 2;
  else if (!cs.empty() && is_align(cs[0])) align = cs[0][0], i = 1;
  auto at = [&](const char* set) { return i < cs.size() && cs[i].size() == 1 && std::strchr(set, cs[i][0]); };
  char sign = 0, group = 0, type = 0;
  bool alt = false, zero = false;
  if (at("+- ")) sign = cs[i++][0];
  if (at("#")) alt = true, i++;
  if (at("0")) zero = true, i++;
  std::string width, prec;
  while (at("0123456789")) width += cs[i++];
  if (at(",_")) group = cs[i++][0];
  bool has_prec = false;
  if (at(".")) {
    has_prec = true;
    i++;
    while (at("0123456789")) prec += cs[i++];
    if (prec.empty()) bad_template("format: a format spec with '.' but no precision");
  }
  if (at("bcdeEfFgGnosxX%")) type = cs[i++][0];
  if (i != cs.size()) bad_template("format: an invalid format spec '" + spec + "'");
  if (width.size() > 4 || prec.size() > 3) too_much("format: a width or precision past 9999");
  const int64_t w = width.empty() ? 0 : std::stoll(width), p = prec.empty() ? -1 : std::stoll(prec);
  if (zero && !align) fill = "0", align = '=';
  std::string body, prefix;
  if (x.k == Value::K::Str) {
    if (sign || alt || group || align == '=' || (type && type != 's'))
      bad_template("format: '" + spec + "' is not a format for a string");
    body = x.s;
    if (has_prec) {
      const std::vector<size_t> st = char_starts(body);
      const int64_t n = st.empty() ? (int64_t)body.size() : (int64_t)st.size() - 1;
      if (p < n) body.resize(st.empty() ? (size_t)p : st[(size_t)p]);
    }
    if (!align) align = '<';
  } else if (x.k == Value::K::Int || x.k == Value::K::Bool || x.k == Value::K::Float) {
    if (!align) align = '>';
    if (type == 'n' || type == 'c') unsupported(std::string("format: the type '") + type + "'");
    const bool integral = x.k != Value::K::Float && (!type || std::strchr("bdoxX", type));
    if (x.k == Value::K::Float && type && std::strchr("bdoxX", type))
      bad_template(std::string("format: '") + type + "' is not a format for a float");
    if (integral) {
      if (has_prec) bad_template("format: a precision is not allowed for an integer");
      const int64_t v = x.k == Value::K::Bool ? (int64_t)x.b : x.i;
      uint64_t m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
      const int base = type == 'b' ? 2 : type == 'o' ? 8 : type == 'x' || type == 'X' ? 16 : 10;
      std::string digits;
      do {
        digits.insert(digits.begin(), "0123456789abcdef"[m % base]);
        m /= base;
      } while (m);
      if (type == 'X')
        for (char& c : digits) c = (char)std::toupper((unsigned char)c);
      if (group == ',' && base != 10) bad_template("format: ',' with a non-decimal type");
      if (group) digits = grouped(digits, group, base == 10 ? 3 : 4);
      if (alt && base != 10) prefix = type == 'b' ? "0b" : type == 'o' ? "0o" : type == 'x' ? "0x" : "0X";
      body = digits;
      prefix = (v < 0 ? "-" : sign == '+' ? "+" : sign == ' ' ? " " : "") + prefix;
    } else {
      const double f = x.num();
      if (!type && !has_prec) {
        body = float_text(f);
        if (group) unsupported("format: digit grouping of a float without a type");
      } else {
        if (!type) unsupported("format: a float's precision without a type");
        const int pr = (int)(p < 0 ? 6 : p);
        const double v = type == '%' ? f * 100.0 : f;
        const char t = type == '%' ? 'f' : type;
        char buf[10200];
        const std::string cfmt = std::string("%") + (alt ? "#" : "") + ".*" + t;
        std::snprintf(buf, sizeof buf, cfmt.c_str(), pr, std::fabs(v));
        body = buf;
        if (type == '%') body += '%';
        if (group && std::isfinite(v)) {
          size_t e = 0;
          while (e < body.size() && std::isdigit((unsigned char)body[e])) e++;
          body = grouped(body.substr(0, e), group, 3) + body.substr(e);
        }
        prefix = std::signbit(v) && !std::isnan(v) ? "-" : sign == '+' ? "+" : sign == ' ' ? " " : "";
      }
      if (!type && !has_prec) {
        if (!body.empty() && body[0] == '-') prefix = "-", body = body.substr(1);
        else prefix = sign == '+' ? "+" : sign == ' ' ? " " : "";
      }
    }
  } else {
    bad_template("format: '" + spec + "' is not a format for " + brief(x));
  }
  const int64_t n = code_points(prefix) + code_points(body);
  if (n >= w) return prefix + body;
  std::string pad;
  const size_t k = (size_t)(w - n);
  auto fill_of = [&](size_t c) {
    std::string r;
    for (size_t j = 0; j < c; j++) r += fill;
    return r;
  };
  if (align == '<') return prefix + body + fill_of(k);
  if (align == '>') return fill_of(k) + prefix + body;
  if (align == '=') return prefix + fill_of(k) + body;
  return fill_of(k / 2) + prefix + body + fill_of(k - k / 2);
}

// Python's str.format: {} {0} {name} fields with .attr and [key] lookups, !s / !r and a format
// spec; {{ and }} for braces.
std::string Renderer::str_format(const std::string& fmt, const std::vector<Value>& a, const Kw& kw) {
  std::string o;
  size_t next = 0;
  bool manual = false, automatic = false;
  for (size_t i = 0; i < fmt.size(); i++) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        o += '}';
        i++;
        continue;
      }
      bad_template("format: a single '}' in the format string");
    }
    if (c != '{') {
      o += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      o += '{';
      i++;
      continue;
    }
    const size_t end = fmt.find('}', i);
    if (end == std::string::npos) bad_template("format: a '{' without its '}'");
    const std::string field = fmt.substr(i + 1, end - i - 1);
    if (field.find('{') != std::string::npos) unsupported("format: nested replacement fields");
    i = end;
    size_t colon = field.find(':'), bang = field.find('!');
    if (bang != std::string::npos && colon != std::string::npos && bang > colon) bang = std::string::npos;
    const size_t name_end = std::min(bang, colon);
    const std::string name = field.substr(0, name_end);
    char conv = 0;
    if (bang != std::string::npos) {
      const std::string cv = field.substr(bang + 1, (colon == std::string::npos ? field.size() : colon) - bang - 1);
      if (cv != "s" && cv != "r") {
        if (cv == "a") unsupported("format: the conversion !a");
        bad_template("format: an unknown conversion '!" + cv + "'");
      }
      conv = cv[0];
    }
    const std::string spec = colon == std::string::npos ? std::string() : field.substr(colon + 1);
    // The first part: an index, a keyword, or nothing (the next positional argument).
    size_t p = 0;
    while (p < name.size() && name[p] != '.' && name[p] != '[') p++;
    const std::string first = name.substr(0, p);
    Value v;
    if (first.empty() || first.find_first_not_of("0123456789") == std::string::npos) {
      size_t idx;
      if (first.empty()) {
        if (manual) bad_template("format: cannot switch from manual field numbering to automatic");
        automatic = true;
        idx = next++;
      } else {
        if (automatic) bad_template("format: cannot switch from automatic field numbering to manual");
        manual = true;
        if (first.size() > 6) bad_template("format: an index too large");
        idx = std::stoul(first);
      }
      if (idx >= a.size()) bad_template("format: replacement index " + std::to_string(idx) + " out of range");
      v = a[idx];
    } else {
      bool found = false;
      for (const auto& kv : kw)
        if (kv.first == first) v = kv.second, found = true;
      if (!found) bad_template("format: no argument named '" + first + "'");
    }
    while (p < name.size()) {  // .attr and [key] (digits: an index)
      tick();
      if (name[p] == '.') {
        size_t q = p + 1;
        while (q < name.size() && name[q] != '.' && name[q] != '[') q++;
        const Value* x = v.get(name.substr(p + 1, q - p - 1));
        if (!x) bad_template("format: no attribute '" + name.substr(p + 1, q - p - 1) + "'");
        v = *x;
        p = q;
      } else {
        const size_t q = name.find(']', p);
        if (q == std::string::npos) bad_template("format: a '[' without its ']'");
        const std::string key = name.substr(p + 1, q - p - 1);
        const Value* x = nullptr;
        if (!key.empty() && key.find_first_not_of("0123456789") == std::string::npos && key.size() < 10) {
          if (v.k == Value::K::List && !v.lazy) {
            const size_t k = std::stoul(key);
            x = k < v.l->size() ? &(*v.l)[k] : nullptr;
          } else {
            x = v.get(Value::integer(std::stoll(key)));
          }
        } else {
          x = v.get(key);
        }
        if (!x) bad_template("format: no item '" + key + "'");
        v = *x;
        p = q + 1;
      }
    }
    if (conv == 'r') v = Value::str(repr(v));
    else if (conv == 's') v = Value::str(to_text(v));
    o += format_spec(v, spec);
    if (o.size() > kMaxOutput) too_much("a string grows too long");
  }
  charge(o.size());
  return o;
}

bool Renderer::text_filter(const std::string& f, const Value& v, const std::vector<Value>& a, const Kw& kw,
                           Value* out) {
  std::string r;
  if (f == "pprint") {
    if (!a.empty() || !kw.empty()) bad_template("pprint takes no arguments");
    Pretty p;
    p.format(v, 0, 0, 0);
    *out = Value::str(std::move(p.o));
    return true;
  }
  if (f == "urlize") {  // rel gathers nofollow and the default policy's noopener, sorted
    only_kw("urlize", kw, {"trim_url_limit", "nofollow", "target", "rel", "extra_schemes"});
    const Value trim = arg(a, kw, 0, "trim_url_limit");
    if (trim.defined() && trim.k != Value::K::None && trim.k != Value::K::Int)
      bad_template("urlize: trim_url_limit must be an integer");
    const Value target = arg(a, kw, 2, "target"), rel = arg(a, kw, 3, "rel"), schemes = arg(a, kw, 4, "extra_schemes");
    if (schemes.defined() && schemes.k != Value::K::None) unsupported("urlize with extra_schemes");
    std::vector<std::string> parts = {"noopener"};
    if (truthy(arg(a, kw, 1, "nofollow", Value::boolean(false)))) parts.push_back("nofollow");
    if (rel.defined() && rel.k != Value::K::None) {
      const std::string rs = to_text(rel);
      for (size_t p = 0; p < rs.size();) {
        const size_t q = rs.find_first_of(" \t\n\r\f\v", p);
        if (q != p) parts.push_back(rs.substr(p, q == std::string::npos ? std::string::npos : q - p));
        if (q == std::string::npos) break;
        p = q + 1;
      }
    }
    std::sort(parts.begin(), parts.end());
    parts.erase(std::unique(parts.begin(), parts.end()), parts.end());
    std::string rel_text;
    for (const std::string& x : parts) rel_text += (rel_text.empty() ? "" : " ") + x;
    const std::string tgt = target.defined() && target.k != Value::K::None ? to_text(target) : "";
    *out = Value::str(urlize(to_text(v), trim, rel_text, tgt));
    return true;
  }
  if (f == "random") unsupported("the filter 'random' (its pick differs from run to run, so no rendering can match)");
  if (f == "groupby") {  // sorted by the attribute (case-blind unless case_sensitive), runs of equal keys
    only_kw("groupby", kw, {"attribute", "default", "case_sensitive"});
    const Value at = arg(a, kw, 0, "attribute");
    if (!at.defined()) bad_template("groupby needs an attribute");
    const Value dflt = arg(a, kw, 1, "default");
    const bool cs = truthy(arg(a, kw, 2, "case_sensitive", Value::boolean(false)));
    const std::string name = to_text(at);
    auto key = [&](const Value& x) {
      Value k = at.k == Value::K::Int ? (x.k == Value::K::List && !x.lazy && at.i >= 0 && (size_t)at.i < x.l->size()
                                             ? (*x.l)[(size_t)at.i]
                                             : Value())
                                      : attribute(x, name);
      if (!k.defined() && dflt.defined()) k = dflt;
      if (!k.defined()) bad_template("groupby: an item without the attribute '" + name + "'");
      return k;
    };
    auto cmp_key = [&](const Value& x) {
      Value k = key(x);
      if (!cs && k.k == Value::K::Str) k.s = lower(k.s);
      return k;
    };
    List items = items_of(v, "groupby");
    std::stable_sort(items.begin(), items.end(),
                     [&](const Value& x, const Value& y) { return sort_less(cmp_key(x), cmp_key(y), true); });
    List groups;
    for (size_t i = 0; i < items.size();) {
      const Value k = cmp_key(items[i]);
      List members;
      size_t j = i;
      while (j < items.size() && equal(cmp_key(items[j]), k)) members.push_back(items[j++]);
      Value g = pair(key(items[i]), Value::list(std::move(members)));
      g.group = true;
      groups.push_back(std::move(g));
      i = j;
    }
    *out = Value::list(std::move(groups));
    return true;
  }
  if (f == "slice") {  // n columns: the first len % n one longer, the others filled when fill_with is given
    only_kw("slice", kw, {"slices", "fill_with"});
    const int64_t n = as_int(arg(a, kw, 0, "slices"), "slice");
    if (n <= 0) bad_template("slice needs a positive count");
    if (n > 100000) too_much("slice into more than 100000 columns");
    const Value fill = arg(a, kw, 1, "fill_with");
    const List items = items_of(v, "slice");
    const int64_t len = (int64_t)items.size(), per = len / n, extra = len % n;
    List cols;
    int64_t offset = 0;
    for (int64_t s = 0; s < n; s++) {
      const int64_t start = offset + s * per;
      if (s < extra) offset++;
      const int64_t end = offset + (s + 1) * per;
      List col(items.begin() + start, items.begin() + end);
      if (fill.defined() && fill.k != Value::K::None && s >= extra) col.push_back(fill);
      charge(kItemCost * (col.size() + 1));
      cols.push_back(Value::list(std::move(col)));
    }
    *out = lazy(Value::list(std::move(cols)));
    return true;
  }
  if (f == "striptags") {  // comments, then tags removed; whitespace runs to one space; references unescaped
    std::string s = to_text(v);
    charge(s.size());
    for (const auto& mark : {std::make_pair("<!--", "-->"), std::make_pair("<", ">")}) {
      std::string kept;
      size_t p = 0;
      for (;;) {
        const size_t b = s.find(mark.first, p);
        const size_t e = b == std::string::npos ? b : s.find(mark.second, b);
        if (e == std::string::npos) break;
        kept.append(s, p, b - p);
        p = e + std::strlen(mark.second);
      }
      kept.append(s, p, std::string::npos);
      s = std::move(kept);
    }
    for (size_t i = 0; i < s.size();) {
      while (i < s.size() && ascii_space(s[i])) i++;
      size_t j = i;
      while (j < s.size() && !ascii_space(s[j])) j++;
      if (j > i) r += (r.empty() ? "" : " ") + s.substr(i, j - i);
      i = j;
    }
    *out = Value::str(html_unescape(r));
    return true;
  }
  if (f == "wordwrap") {  // textwrap.wrap per line: words moved whole, longer ones cut at the width
    only_kw("wordwrap", kw, {"width", "break_long_words", "wrapstring", "break_on_hyphens"});
    const int64_t width = as_int(arg(a, kw, 0, "width", Value::integer(79)), "wordwrap");
    const bool break_long = truthy(arg(a, kw, 1, "break_long_words", Value::boolean(true)));
    const Value wsv = arg(a, kw, 2, "wrapstring");
    const std::string wrap = wsv.defined() && wsv.k != Value::K::None ? as_str(wsv, "wordwrap") : "\n";
    const bool hyphens = truthy(arg(a, kw, 3, "break_on_hyphens", Value::boolean(true)));
    if (width <= 0) bad_template("wordwrap: invalid width " + std::to_string(width) + " (must be > 0)");
    const std::string s = to_text(v);
    if (hyphens && s.find('-') != std::string::npos)
      unsupported("wordwrap of text with hyphens (break_on_hyphens=false wraps it)");
    charge(s.size());
    std::vector<std::string> paragraphs;
    for (const std::string& line : split_lines(s)) {
      // Chunks: runs of ASCII whitespace and runs of the rest, as textwrap splits them.
      std::vector<std::string> chunks;
      for (size_t i = 0; i < line.size();) {
        const bool sp = ascii_space(line[i]);
        size_t j = i;
        while (j < line.size() && ascii_space(line[j]) == sp) j++;
        chunks.push_back(line.substr(i, j - i));
        i = j;
      }
      auto blank = [](const std::string& c) { return c.empty() || ascii_space(c[0]); };
      std::vector<std::string> lines;
      size_t k = 0;
      while (k < chunks.size()) {
        if (blank(chunks[k]) && !lines.empty()) k++;
        std::vector<std::string> cur;
        int64_t len = 0;
        while (k < chunks.size() && len + code_points(chunks[k]) <= width)
          len += code_points(chunks[k]), cur.push_back(chunks[k++]);
        if (k < chunks.size() && code_points(chunks[k]) > width) {
          if (break_long) {
            const int64_t room = width - len;  // 0 on a full line: an empty piece, dropped below as blank
            const std::vector<size_t> st = char_starts(chunks[k]);
            const size_t cut = st.empty() ? (size_t)room : st[(size_t)room];
            cur.push_back(chunks[k].substr(0, cut));
            chunks[k] = chunks[k].substr(cut);
          } else if (cur.empty()) {
            cur.push_back(chunks[k++]);
          }
        }
        if (!cur.empty() && blank(cur.back())) cur.pop_back();
        if (!cur.empty()) {
          std::string l;
          for (const std::string& c : cur) l += c;
          lines.push_back(std::move(l));
        }
        tick();
      }
      std::string p;
      for (size_t i = 0; i < lines.size(); i++) p += (i ? wrap : "") + lines[i];
      paragraphs.push_back(std::move(p));
      if (paragraphs.size() * 64 > kMaxOutput) too_much("wordwrap of too many lines");
    }
    for (size_t i = 0; i < paragraphs.size(); i++) r += (i ? wrap : "") + paragraphs[i];
    if (r.size() > kMaxOutput) too_much("a string grows too long");
    *out = Value::str(std::move(r));
    return true;
  }
  if (f == "xmlattr") {  // key="value" pairs, escaped, none and undefined values left out
    only_kw("xmlattr", kw, {"autospace"});
    if (v.k != Value::K::Dict) bad_template("xmlattr of " + brief(v));
    const bool autospace = truthy(arg(a, kw, 0, "autospace", Value::boolean(true)));
    for (const Entry& e : *v.d) {
      if (!e.second.defined() || e.second.k == Value::K::None) continue;
      for (const char c : e.first)
        if (ascii_space(c) || c == '/' || c == '>' || c == '=')
          bad_template("xmlattr: invalid character in attribute name: '" + e.first.substr(0, 40) + "'");
      r += (r.empty() ? "" : " ") + markup_escape(e.first) + "=\"" + markup_escape(to_text(e.second)) + "\"";
      if (r.size() > kMaxOutput) too_much("a string grows too long");
    }
    if (autospace && !r.empty()) r = " " + r;
    *out = Value::str(std::move(r));
    return true;
  }
  if (f == "urlencode") {  // a string: quoted, '/' kept; a dict or list of pairs: a query string
    if (v.k == Value::K::Dict || v.k == Value::K::List) {
      List pairs;
      if (v.k == Value::K::Dict)
        for (const Entry& e : *v.d) pairs.push_back(pair(key_value(e), e.second));
      else pairs = items_of(v, "urlencode");
      for (size_t i = 0; i < pairs.size(); i++) {
        const Value& pr = pairs[i];
        if (pr.k != Value::K::List || pr.l->size() != 2) bad_template("urlencode: an item that is not a pair");
        auto q = [&](const Value& x) { return replace_all(url_quote(to_text(x), ""), "%20", "+"); };
        r += (i ? "&" : "") + q((*pr.l)[0]) + "=" + q((*pr.l)[1]);
        if (r.size() > kMaxOutput) too_much("a string grows too long");
      }
    } else {
      r = url_quote(to_text(v), "/");
    }
    charge(r.size());
    *out = Value::str(std::move(r));
    return true;
  }
  if (f == "filesizeformat") {  // 1 Byte, N Bytes, then one decimal of kB, MB, ... (KiB, MiB, ... if binary)
    const bool binary = truthy(arg(a, kw, 0, "binary", Value::boolean(false)));
    double bytes;
    if (v.k == Value::K::Str) {
      char* end = nullptr;
      const std::string t = strip(v.s, ws(), true, true);
      bytes = std::strtod(t.c_str(), &end);
      if (t.empty() || *end) bad_template("filesizeformat of " + brief(v));
    } else if (v.number()) {
      bytes = v.num();
    } else {
      bad_template("filesizeformat of " + brief(v));
    }
    const double base = binary ? 1024 : 1000;
    static const char* const dec[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
    static const char* const bin[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
    char buf[400];
    if (bytes == 1) {
      r = "1 Byte";
    } else if (bytes < base) {
      if (!std::isfinite(bytes)) bad_template("filesizeformat of " + brief(v));
      r = std::to_string((long long)bytes) + " Bytes";
    } else {
      double unit = base * base;
      int k = 0;
      while (k < 7 && !(bytes < unit)) unit *= base, k++;
      std::snprintf(buf, sizeof buf, "%.1f %s", base * bytes / unit, binary ? bin[k] : dec[k]);
      r = buf;
    }
    *out = Value::str(std::move(r));
    return true;
  }
  return false;
}

bool Renderer::name_test(const std::string& t, const Value& v, bool* result) {
  if (t == "filter" || t == "test") {
    *result = v.k == Value::K::Str && (t == "filter" ? listed(kFilterNames, v.s) : listed(kTestNames, v.s));
    return true;
  }
  return false;
}

}  // namespace qkv::jinja
