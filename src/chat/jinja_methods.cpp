// Jinja's methods (Python's str, dict and list methods that templates call) and the string
// helpers the filters share.
#include <algorithm>
#include <cmath>

#include "jinja_runtime.h"

namespace qkv::jinja {

std::string Renderer::indent_text(const Value& w) {
  if (w.k == Value::K::Str) {
    if (w.s.size() > 1000) too_much("an indent longer than 1000 characters");
    return w.s;
  }
  const int64_t n = as_int(w, "indent");
  if (n > 1000) too_much("an indent of " + std::to_string(n) + " spaces (at most 1000)");
  return std::string(n > 0 ? (size_t)n : 0, ' ');
}

std::vector<std::string> Renderer::split_lines(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  while (i < s.size()) {
    const unsigned char c = (unsigned char)s[i];
    size_t len = 0;
    if (c == '\n' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) len = 1;
    else if (c == '\r') len = i + 1 < s.size() && s[i + 1] == '\n' ? 2 : 1;
    else if (c == 0xc2 && i + 1 < s.size() && (unsigned char)s[i + 1] == 0x85) len = 2;
    else if (c == 0xe2 && i + 2 < s.size() && (unsigned char)s[i + 1] == 0x80 &&
             ((unsigned char)s[i + 2] == 0xa8 || (unsigned char)s[i + 2] == 0xa9))
      len = 3;
    if (len == 0) {
      i++;
      continue;
    }
    out.push_back(s.substr(start, i - start));
    i += len;
    start = i;
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

std::string Renderer::strip(const std::string& s, const std::string& chars, bool left, bool right) {
  bool in[256] = {};  // a table: strip's cost does not grow with the set of characters
  for (const unsigned char c : chars) in[c] = true;
  charge(chars.size());
  size_t b = 0, e = s.size();
  while (left && b < e && in[(unsigned char)s[b]]) b++;
  while (right && e > b && in[(unsigned char)s[e - 1]]) e--;
  charge(b + (s.size() - e));
  return s.substr(b, e - b);
}

std::string Renderer::replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  std::string r;
  size_t p = 0, q;
  const Finder finder(from);
  while (count != 0 && (q = finder.find(s, p)) != std::string::npos) {
    r.append(s, p, q - p);
    r += to;
    if (r.size() > kMaxOutput) too_much("a string grows too long");
    count--;
    if (from.empty()) {
      if (q >= s.size()) return r;
      const size_t n = utf8_len(s, q);
      r.append(s, q, n);
      p = q + n;
    } else {
      p = q + from.size();
    }
  }
  r.append(s, p, std::string::npos);
  if (r.size() > kMaxOutput) too_much("a string grows too long");
  charge(r.size());
  return r;
}

std::string Renderer::title(const std::string& s, bool all_words) {
  std::string r = s;
  bool start = true;
  for (char& c : r) {
    if (std::isalpha((unsigned char)c)) {
      c = start ? (char)std::toupper((unsigned char)c) : (char)std::tolower((unsigned char)c);
      start = false;
    } else if (all_words) {
      start = true;
    }
  }
  return r;
}

std::string Renderer::lower(std::string s) {
  for (char& c : s) c = (char)std::tolower((unsigned char)c);
  return s;
}

bool Renderer::recase(const std::string& op, const std::string& s, std::string* out) {
  if (op == "upper") *out = upper(s);
  else if (op == "lower") *out = lower(s);
  else if (op == "title") *out = title(s, true);
  else if (op == "capitalize") *out = title(s.substr(0, 1), false) + lower(s.size() > 1 ? s.substr(1) : "");
  else return false;
  return true;
}

std::string Renderer::upper(std::string s) {
  for (char& c : s) c = (char)std::toupper((unsigned char)c);
  return s;
}

const std::string& Renderer::ws() {
  static const std::string w = " \t\n\r\v\f";
  return w;
}

Value Renderer::method(const Expr& e) {
  const Value obj = eval(*e.a[0]);
  const std::vector<Value> a = args(e);
  const std::string& m = e.name;
  auto arg_str = [&](size_t i, const char* what) { return as_str(a.at(i), what); };
  if (obj.k == Value::K::Str) {
    const std::string& s = obj.s;
    if (m == "strip" || m == "lstrip" || m == "rstrip") {
      const std::string chars = a.empty() || a[0].k == Value::K::None ? ws() : arg_str(0, "strip");
      return Value::str(strip(s, chars, m != "rstrip", m != "lstrip"));
    }
    std::string r;
    if (a.empty() && recase(m, s, &r)) return Value::str(std::move(r));
    if (m == "format") return Value::str(str_format(s, a, kwargs(e)));
    if ((m == "startswith" || m == "endswith") && a.size() == 1 && a[0].k != Value::K::List) {
      const std::string x = arg_str(0, m.c_str());
      const bool r = x.size() <= s.size() && (m == "startswith" ? s.compare(0, x.size(), x) == 0
                                                                : s.compare(s.size() - x.size(), x.size(), x) == 0);
      return Value::boolean(r);
    }
    if (m == "replace" && a.size() >= 2)
      return Value::str(replace_all(s, arg_str(0, "replace"), arg_str(1, "replace")));

    if (m == "split") {
      List parts;
      int64_t max = a.size() > 1 ? as_int(a[1], "split") : -1;
      if (a.empty() || a[0].k == Value::K::None) {  // runs of whitespace, none at the ends
        size_t p = s.find_first_not_of(ws());
        while (p != std::string::npos) {
          if (max == 0) {
            parts.push_back(Value::str(strip(s.substr(p), ws(), false, true)));
            break;
          }
          const size_t q = s.find_first_of(ws(), p);
          parts.push_back(Value::str(s.substr(p, q == std::string::npos ? std::string::npos : q - p)));
          max--;
          p = q == std::string::npos ? q : s.find_first_not_of(ws(), q);
        }
      } else {
        const std::string sep = arg_str(0, "split");
        if (sep.empty()) bad_template("split with an empty separator");
        size_t p = 0, q;
        const Finder finder(sep);
        while (max != 0 && (q = finder.find(s, p)) != std::string::npos) {
          parts.push_back(Value::str(s.substr(p, q - p)));
          p = q + sep.size();
          max--;
        }
        parts.push_back(Value::str(s.substr(p)));
      }
      return Value::list(std::move(parts));
    }
    Value out;
    if (str_method(s, m, a, &out)) return out;
  } else if (obj.k == Value::K::List && !obj.lazy && (m == "count" || m == "index") && a.size() == 1) {
    int64_t n = 0;
    for (size_t i = 0; i < obj.l->size(); i++) {
      if (!equal((*obj.l)[i], a[0])) continue;
      if (m == "index") return Value::integer((int64_t)i);
      n++;
    }
    if (m == "index") bad_template(brief(a[0]) + " is not in the list");
    return Value::integer(n);
  } else if (obj.k == Value::K::Dict) {
    const Value* i0 = obj.get("index0");
    if (m == "cycle" && obj.is_loop && i0 && i0->k == Value::K::Int && i0->i >= 0 && !a.empty())  // loop.cycle
      return a[(size_t)(i0->i % (int64_t)a.size())];
    if (m == "get" && !a.empty()) {
      const Value* v = obj.get(arg_str(0, "get"));
      return v ? *v : a.size() > 1 ? a[1] : Value::none();
    }
    if (m == "items" || m == "keys" || m == "values") {
      List l;
      for (const auto& kv : *obj.d)
        l.push_back(m == "keys" ? key_value(kv) : m == "values" ? kv.second : pair(key_value(kv), kv.second));
      return Value::list(std::move(l));
    }
  }
  // What Hugging Face's ImmutableSandboxedEnvironment refuses: the methods that change a list or dict.
  static const char* const mutating[] = {"append", "extend", "insert", "pop",        "remove", "reverse",
                                         "sort",   "clear",  "update", "setdefault", "popitem"};
  if (obj.k == Value::K::List || obj.k == Value::K::Dict)
    for (const char* x : mutating)
      if (m == x) bad_template("the sandbox forbids changing " + brief(obj) + " with ." + m + "()");
  unsupported("the method '" + m + "' of " + brief(obj));
}

std::vector<std::string> Renderer::chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_len(s, i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

size_t Renderer::utf8_len(const std::string& s, size_t i) {
  const unsigned char c = (unsigned char)s[i];
  size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
  for (size_t k = 1; k < n; k++)
    if (i + k >= s.size() || ((unsigned char)s[i + k] & 0xc0) != 0x80) return 1;
  return n;
}

int64_t Renderer::code_points(const std::string& s) {
  int64_t n = 0;
  for (const char c : s) n += ((unsigned char)c & 0xc0) != 0x80;
  return n;
}

namespace {

// ASCII character classes, as Python's str.is...() tests see ASCII text.
bool all_of(const std::string& s, int (*cls)(int)) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (!cls(c)) return false;
  return true;
}
int is_py_space(int c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

}  // namespace

bool Renderer::str_method(const std::string& s, const std::string& m, const std::vector<Value>& a, Value* out) {
  auto text = [&](size_t i) { return as_str(a.at(i), m.c_str()); };
  // Python indexes a str by character: a byte offset counted in code points.
  auto at = [&](size_t byte) {
    return Value::integer(byte == std::string::npos ? -1 : code_points(s.substr(0, byte)));
  };
  if ((m == "startswith" || m == "endswith") && a.size() == 1 && a[0].k == Value::K::List) {  // a tuple of prefixes
    bool any = false;
    for (const Value& x : *a[0].l) {
      const std::string t = as_str(x, m.c_str());
      any = any || (t.size() <= s.size() && (m == "startswith" ? s.compare(0, t.size(), t) == 0
                                                               : s.compare(s.size() - t.size(), t.size(), t) == 0));
    }
    *out = Value::boolean(any);
    return true;
  }
  if ((m == "find" || m == "rfind" || m == "index" || m == "rindex") && a.size() == 1) {
    const std::string t = text(0);
    size_t p = std::string::npos;
    if (m == "find" || m == "index") {
      p = find_text(s, t);
    } else {
      const Finder f(t);
      for (size_t q = f.find(s, 0); q != std::string::npos; q = f.find(s, q + std::max<size_t>(1, utf8_len(s, q)))) {
        p = q;
        if (q >= s.size()) break;
      }
    }
    if (p == std::string::npos && m[m.size() - 1] == 'x') bad_template("substring " + brief(a[0]) + " not found");
    *out = at(p);
    return true;
  }
  if (m == "count" && a.size() == 1) {
    const std::string t = text(0);
    int64_t n = 0;
    if (t.empty()) {
      n = code_points(s) + 1;
    } else {
      const Finder f(t);
      for (size_t q = f.find(s, 0); q != std::string::npos; q = f.find(s, q + t.size())) n++;
    }
    *out = Value::integer(n);
    return true;
  }
  if (m == "splitlines" && a.empty()) {
    List l;
    for (auto& x : split_lines(s)) l.push_back(Value::str(std::move(x)));
    *out = Value::list(std::move(l));
    return true;
  }
  if (m == "rsplit") {
    int64_t max = a.size() > 1 ? as_int(a[1], "rsplit") : -1;
    List parts;
    if (a.empty() || a[0].k == Value::K::None) {  // runs of whitespace, from the right
      size_t end = s.find_last_not_of(ws());
      while (end != std::string::npos) {
        if (max == 0) {
          parts.push_back(Value::str(s.substr(0, end + 1)));
          break;
        }
        const size_t b = s.find_last_of(ws(), end);
        parts.push_back(
            Value::str(s.substr(b == std::string::npos ? 0 : b + 1, b == std::string::npos ? end + 1 : end - b)));
        max--;
        end = b == std::string::npos ? b : s.find_last_not_of(ws(), b);
      }
    } else {
      const std::string sep = text(0);
      if (sep.empty()) bad_template("rsplit with an empty separator");
      size_t end = s.size();
      while (max != 0 && end >= sep.size()) {
        const size_t q = s.rfind(sep, end - sep.size());
        if (q == std::string::npos) break;
        charge(end - q);
        parts.push_back(Value::str(s.substr(q + sep.size(), end - q - sep.size())));
        end = q;
        max--;
      }
      parts.push_back(Value::str(s.substr(0, end)));
    }
    std::reverse(parts.begin(), parts.end());
    *out = Value::list(std::move(parts));
    return true;
  }
  if (a.empty() &&
      (m == "isdigit" || m == "isdecimal" || m == "isnumeric" || m == "isalpha" || m == "isalnum" || m == "isspace")) {
    int (*cls)(int) = m == "isalpha"   ? +[](int c) { return (int)std::isalpha(c); }
                      : m == "isalnum" ? +[](int c) { return (int)std::isalnum(c); }
                      : m == "isspace" ? is_py_space
                                       : +[](int c) { return (int)std::isdigit(c); };
    *out = Value::boolean(all_of(s, cls));
    return true;
  }
  if (a.empty() && (m == "isupper" || m == "islower")) {  // a cased character, and none of the other case
    bool cased = false, other = false;
    for (unsigned char c : s) {
      cased = cased || (m == "isupper" ? std::isupper(c) : std::islower(c));
      other = other || (m == "isupper" ? std::islower(c) : std::isupper(c));
    }
    *out = Value::boolean(cased && !other);
    return true;
  }
  if (a.empty() && m == "swapcase") {
    std::string r = s;
    for (char& c : r)
      c = std::isupper((unsigned char)c) ? (char)std::tolower((unsigned char)c) : (char)std::toupper((unsigned char)c);
    *out = Value::str(std::move(r));
    return true;
  }
  if (a.empty() && m == "casefold") {
    *out = Value::str(lower(s));
    return true;
  }
  if (m == "join" && a.size() == 1) {
    std::string r;
    const List items = a[0].k == Value::K::Str ? List() : items_of(a[0], "join");
    if (a[0].k == Value::K::Str) {
      for (const std::string& c : chars(a[0].s)) r += (r.empty() ? "" : s) + c;
    } else {
      for (size_t i = 0; i < items.size(); i++) {
        if (items[i].k != Value::K::Str)
          bad_template("str.join: item " + std::to_string(i) + " is " + brief(items[i]) + ", not a string");
        if (i) r += s;
        r += items[i].s;
        if (r.size() > kMaxOutput) too_much("a string grows too long");
      }
    }
    *out = Value::str(std::move(r));
    return true;
  }
  if ((m == "ljust" || m == "rjust" || m == "center" || m == "zfill") &&
      (a.size() == 1 || (a.size() == 2 && m != "zfill"))) {
    const int64_t w = as_int(a[0], m.c_str());
    if (w > 10000) too_much(m + "'s width is more than 10000");
    const std::string fill = m == "zfill" ? "0" : a.size() == 2 ? text(1) : " ";
    if (code_points(fill) != 1) bad_template(m + ": the fill character must be exactly one character long");
    const int64_t n = code_points(s);
    std::string r;
    if (w <= n) {
      r = s;
    } else {
      const int64_t pad = w - n, left = m == "ljust" ? 0 : m == "center" ? pad / 2 + (pad & w & 1) : pad;
      auto rep = [&](int64_t k) {
        std::string o;
        for (int64_t i = 0; i < k; i++) o += fill;
        return o;
      };
      const bool sign = m == "zfill" && !s.empty() && (s[0] == '-' || s[0] == '+');
      r = sign ? s.substr(0, 1) + rep(left) + s.substr(1) : rep(left) + s + rep(pad - left);
    }
    *out = Value::str(std::move(r));
    return true;
  }
  if ((m == "partition" || m == "rpartition") && a.size() == 1) {
    const std::string sep = text(0);
    if (sep.empty()) bad_template(m + " with an empty separator");
    const size_t p = m == "partition" ? find_text(s, sep) : s.rfind(sep);
    List l;
    if (p == std::string::npos) {
      l = m == "partition" ? List{Value::str(s), Value::str(""), Value::str("")}
                           : List{Value::str(""), Value::str(""), Value::str(s)};
    } else {
      l = {Value::str(s.substr(0, p)), Value::str(sep), Value::str(s.substr(p + sep.size()))};
    }
    *out = Value::list(std::move(l));
    out->tuple = true;
    return true;
  }
  if ((m == "removeprefix" || m == "removesuffix") && a.size() == 1) {
    const std::string t = text(0);
    const bool has = t.size() <= s.size() && (m == "removeprefix" ? s.compare(0, t.size(), t) == 0
                                                                  : s.compare(s.size() - t.size(), t.size(), t) == 0);
    *out = Value::str(!has ? s : m == "removeprefix" ? s.substr(t.size()) : s.substr(0, s.size() - t.size()));
    return true;
  }
  return false;
}

}  // namespace qkv::jinja
