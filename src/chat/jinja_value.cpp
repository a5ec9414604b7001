// Jinja values: dict access, truth, Python's repr() and json.dumps printing, and equality.
#include "jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace qkv::jinja {

Value Value::dict(Dict x) {
  Value v;
  v.k = K::Dict;
  v.depth = 1;
  for (const Entry& e : x) v.hold(e.second);
  v.d = std::make_shared<Dict>(std::move(x));
  return v;
}

const Value* Value::get(const std::string& key) const {
  if (k == K::List && group) return key == "grouper" ? &(*l)[0] : key == "list" ? &(*l)[1] : nullptr;
  if (k != K::Dict) return nullptr;
  charge(d->size());
  for (const Entry& e : *d)
    if (!e.int_key && e.first == key) return &e.second;
  return nullptr;
}

// A key that is not a string or an integer (or bool, which Python's dicts take as 0 and 1) is in no dict.
const Value* Value::get(const Value& key) const {
  if (key.k == K::Str) return get(key.s);
  if (k != K::Dict || (key.k != K::Int && key.k != K::Bool)) return nullptr;
  const std::string t = std::to_string(key.k == K::Int ? key.i : (int64_t)key.b);
  charge(d->size());
  for (const Entry& e : *d)
    if (e.int_key && e.first == t) return &e.second;
  return nullptr;
}

void Value::put(const std::string& key, Value v, bool int_key) {
  hold(v);
  charge(d->size());
  for (Entry& e : *d)
    if (e.int_key == int_key && e.first == key) {
      e.second = std::move(v);
      return;
    }
  d->emplace_back(key, std::move(v), int_key);
}

// A (key, value) tuple, as items() and dictsort give.
Value pair(Value a, Value b) {
  Value v = Value::list({std::move(a), std::move(b)});
  v.tuple = true;
  return v;
}

// A dict key as a value (what iterating a dict, keys() and items() give).
Value key_value(const Entry& e) {
  return e.int_key ? Value::integer(std::strtoll(e.first.c_str(), nullptr, 10)) : Value::str(e.first);
}

bool truthy(const Value& v) {
  switch (v.k) {
    case Value::K::Undef:
    case Value::K::None: return false;
    case Value::K::Bool: return v.b;
    case Value::K::Int: return v.i != 0;
    case Value::K::Float: return v.f != 0;
    case Value::K::Str: return !v.s.empty();
    case Value::K::List: return v.lazy || !v.l->empty();
    case Value::K::Dict: return !v.d->empty();
    case Value::K::Func: return true;
  }
  return false;
}

// A string as json.dumps writes it; ascii: every non-ASCII character as \uXXXX (surrogate pairs
// past U+FFFF), as ensure_ascii=True does.
void json_quote(std::string& o, const std::string& s, bool ascii) {
  o += '"';
  for (size_t i = 0; i < s.size(); i++) {
    const unsigned char c = (unsigned char)s[i];
    switch (c) {
      case '"': o += "\\\""; continue;
      case '\\': o += "\\\\"; continue;
      case '\n': o += "\\n"; continue;
      case '\r': o += "\\r"; continue;
      case '\t': o += "\\t"; continue;
      case '\b': o += "\\b"; continue;
      case '\f': o += "\\f"; continue;
      default: break;
    }
    char b[16];
    if (c < 0x20) {
      snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else if (c < 0x80 || !ascii) {
      o += (char)c;
    } else {
      // Decodes one UTF-8 sequence (the text is valid UTF-8 or was made so); a stray byte is U+FFFD.
      const int n = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
      uint32_t cp = n == 3 ? c & 7 : n == 2 ? c & 15 : c & 31;
      bool ok = n > 0 && i + (size_t)n < s.size();
      for (int k = 1; ok && k <= n; k++) {
        const unsigned char x = (unsigned char)s[i + (size_t)k];
        ok = (x & 0xc0) == 0x80;
        cp = cp << 6 | (x & 0x3f);
      }
      if (ok) i += (size_t)n;
      else cp = 0xfffd;
      if (cp >= 0x10000) {
        snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xd800 + ((cp - 0x10000) >> 10), 0xdc00 + ((cp - 0x10000) & 0x3ff));
      } else {
        snprintf(b, sizeof b, "\\u%04x", cp);
      }
      o += b;
    }
  }
  o += '"';
}

// Python's repr() of a float (json: json.dumps's, which spells nan and inf as NaN and Infinity).
std::string float_text(double f, bool json) {
  if (std::isnan(f)) return json ? "NaN" : "nan";
  if (std::isinf(f)) return f > 0 ? (json ? "Infinity" : "inf") : (json ? "-Infinity" : "-inf");
  char b[32];
  snprintf(b, sizeof b, "%.17g", f);
  for (int p = 1; p <= 17; p++) {  // the shortest text that reads back as f (Python's repr)
    char t[32];
    snprintf(t, sizeof t, "%.*g", p, f);
    if (std::strtod(t, nullptr) == f) {
      snprintf(b, sizeof b, "%s", t);
      break;
    }
  }
  std::string s = b;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// Python's repr() of a string: single quotes unless it holds ' and no ".
void repr_str(std::string& o, const std::string& s) {
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  o += q;
  for (const char c : s) {
    const unsigned char u = (unsigned char)c;
    if (c == q || c == '\\') o += '\\', o += c;
    else if (c == '\n') o += "\\n";
    else if (c == '\r') o += "\\r";
    else if (c == '\t') o += "\\t";
    else if (u < 0x20 || u == 0x7f) {
      char b[8];
      snprintf(b, sizeof b, "\\x%02x", u);
      o += b;
    } else {
      o += c;
    }
  }
  o += q;
}

// Appends the printed value to o, charged per item and byte; false once o passes st.limit
// (the text is then cut short and the caller decides what that means).
bool dump(std::string& o, const Value& v, const Style& st, int level) {
  charge(8 + (v.k == Value::K::Str ? v.s.size() : 0));
  if (v.lazy)
    bad_template(
        "a generator (what map, select, reject, unique, batch, reverse and items give) cannot be printed or dumped: add | list");
  switch (v.k) {
    case Value::K::Undef:
    case Value::K::None: o += st.json ? "null" : "None"; break;
    case Value::K::Bool: o += st.json ? (v.b ? "true" : "false") : (v.b ? "True" : "False"); break;
    case Value::K::Int: o += std::to_string(v.i); break;
    case Value::K::Float: o += float_text(v.f, st.json); break;
    case Value::K::Str:
      if (st.json) json_quote(o, v.s, st.ascii);
      else repr_str(o, v.s);
      break;
    case Value::K::Func: o += v.macro ? "<Macro '" + v.s + "'>" : "<function " + v.s + ">"; break;
    case Value::K::List:
    case Value::K::Dict: {
      if (v.is_ns && st.json) bad_template("a namespace cannot be dumped as JSON (json.dumps refuses it)");
      if (v.is_ns) o += "<Namespace ";  // Jinja2's Namespace repr: its attributes' dict, in order
      const bool list = v.k == Value::K::List;
      const size_t n = list ? v.l->size() : v.d->size();
      std::vector<const Entry*> order;  // a dict's entries, sorted by key for sort_keys
      if (!list) {
        for (const Entry& e : *v.d) order.push_back(&e);
        if (st.sort) {
          charge(16 * n);
          std::stable_sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
            if (a->int_key && b->int_key)
              return std::strtoll(a->first.c_str(), nullptr, 10) < std::strtoll(b->first.c_str(), nullptr, 10);
            return a->first < b->first;
          });
        }
      }
      const bool paren = v.tuple && !st.json;  // Python prints a tuple (a, b), a 1-tuple (a,)
      o += paren ? '(' : list ? '[' : '{';
      const bool pretty = st.json && st.pretty && n > 0;
      for (size_t i = 0; i < n; i++) {
        if (i) o += st.json ? st.isep : ", ";
        if (pretty) {
          o += '\n';
          for (int k = 0; k <= level; k++) o += st.ind;
        }
        if (list) {
          if (!dump(o, (*v.l)[i], st, level + 1)) return false;
        } else {
          const Entry& e = *order[i];
          charge(8 + e.first.size());
          if (e.int_key) st.json ? (o += '"', o += e.first, o += '"') : o += e.first;
          else if (st.json) json_quote(o, e.first, st.ascii);
          else repr_str(o, e.first);
          o += st.json ? st.ksep : ": ";
          if (!dump(o, e.second, st, level + 1)) return false;
        }
        if (o.size() > st.limit) return false;
      }
      if (pretty) {
        o += '\n';
        for (int k = 0; k < level; k++) o += st.ind;
      }
      if (paren && n == 1) o += ',';
      o += paren ? ')' : list ? ']' : '}';
      if (v.is_ns) o += '>';
      break;
    }
  }
  return o.size() <= st.limit;
}

// Python's repr() of a value, failing past the output bound.
std::string repr(const Value& v, const Style& st) {
  std::string o;
  if (!dump(o, v, st, 0)) too_much("a value prints longer than " + std::to_string(st.limit >> 20) + " MB");
  return o;
}

// What {{ v }} prints (Python's str()).
std::string to_text(const Value& v) {
  switch (v.k) {
    case Value::K::Undef: return "";
    case Value::K::None: return "None";
    case Value::K::Bool: return v.b ? "True" : "False";
    case Value::K::Int: return std::to_string(v.i);
    case Value::K::Float: return float_text(v.f);
    case Value::K::Str: return v.s;
    default: return repr(v);
  }
}

// A value as error messages quote it: its repr, cut to 60 bytes (however large the value).
std::string brief(const Value& v) {
  Style st;
  st.limit = 60;
  std::string r;
  if (!dump(r, v, st, 0) || r.size() > 60) r = r.substr(0, 57) + "...";
  return r;
}

// A text for an error message (raise_exception's): what {{ v }} prints (bounded and charged as
// {{ v }} is), cut to 2000 bytes.
std::string message_text(const Value& v) {
  std::string r = to_text(v);
  if (r.size() > 2000) r = r.substr(0, 1997) + "...";
  return r;
}

// Python's ==. The same shared list or dict is equal to itself without a walk (Python compares
// items by identity first too); other walks are charged per item.
bool equal(const Value& a, const Value& b) {
  if (a.number() && b.number()) return a.num() == b.num();
  if (a.k != b.k) return false;
  switch (a.k) {
    case Value::K::Undef:
    case Value::K::None: return true;
    case Value::K::Str: charge(std::min(a.s.size(), b.s.size())); return a.s == b.s;
    case Value::K::Func: return a.s == b.s && a.macro == b.macro;
    case Value::K::List:
      if (a.l == b.l) return true;
      if (a.tuple != b.tuple || a.lazy || b.lazy) return false;
      if (a.l->size() != b.l->size()) return false;
      for (size_t i = 0; i < a.l->size(); i++) {
        charge(16);
        if (!equal((*a.l)[i], (*b.l)[i])) return false;
      }
      return true;
    case Value::K::Dict:
      if (a.d == b.d) return true;
      if (a.d->size() != b.d->size()) return false;
      for (const Entry& e : *a.d) {
        const Value* o = e.int_key ? b.get(Value::integer(std::strtoll(e.first.c_str(), nullptr, 10))) : b.get(e.first);
        if (!o || !equal(e.second, *o)) return false;
      }
      return true;
    default: return false;
  }
}

}  // namespace qkv::jinja
