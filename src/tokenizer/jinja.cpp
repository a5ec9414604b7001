// The chat-template Jinja subset of jinja.h: the template is cut into text and tags (whitespace
// controls applied there), tags are parsed into a tree of statements and expressions, and the
// tree is evaluated over dynamically typed values.
#include "jinja.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <cerrno>
#include <climits>
#include <cstring>
#include <cstdint>
#include <memory>

#include "../common.h"
#include "pretokenize.h"

namespace qkv {

namespace {

constexpr size_t kMaxOutput = 16u << 20;    // bytes of rendered text (and of any one string or printed value)
constexpr uint64_t kMaxWork = 1u << 28;      // evaluated nodes x 64, bytes of strings and list items made, items walked x 16
constexpr int kMaxDepth = 64;                // brackets inside one another in a tag, and nested blocks
constexpr int kMaxExprHeight = 128;          // an expression tree's height: chains (a.b.c, x|f|g, 1+1+1) count too
constexpr int kMaxValueDepth = 64;           // lists and dicts inside one another
constexpr int kMaxRenderDepth = 256;         // statements and expressions being evaluated at once (macros recurse)

// A template that is malformed or misuses a value: the model's template is at fault.
[[noreturn]] void bad_template(const std::string& what) { fail(ErrorCode::BadModel, "chat template: " + what); }

[[noreturn]] void unsupported(const std::string& what) {
  fail(ErrorCode::Unsupported, "chat template: " + what);
}

// ---- work ----------------------------------------------------------------------------------

// The work of the render in progress on this thread (render_jinja_chat resets it). Lists share
// their items, so a value can stand for far more than its making cost ([a, a, a, a] of such
// lists, twelve deep, is 8^12 items): whatever walks a value (printing, comparing, searching)
// is charged per item and byte it visits, so each walk stops at the budget.
thread_local uint64_t g_work = 0;

// What a hostile template runs into (a bound on work, output, nesting or size). The template
// comes with the model, so this is ErrorCode::BadModel, not the conversation's fault.
[[noreturn]] void too_much(const std::string& what) { fail(ErrorCode::BadModel, "chat template: " + what); }

void charge(uint64_t units) {
  g_work += units;
  if (g_work > kMaxWork) too_much("rendering takes too much work (the budget is " + std::to_string(kMaxWork >> 20) + "M units)");
}

// ---- values --------------------------------------------------------------------------------

struct Value;
struct Stmt;
struct Closure;
struct Entry;
using List = std::vector<Value>;
using Dict = std::vector<Entry>;  // insertion order, as Python's dict

struct Value {
  enum class K { Undef, None, Bool, Int, Float, Str, List, Dict, Func } k = K::Undef;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;  // Str; Func: its name
  const Stmt* macro = nullptr;  // Func: a template's macro (or a call block's body, for caller); null for a built-in
  std::shared_ptr<const Closure> closure;  // Func: a macro defined inside a block: the names there
  std::shared_ptr<List> l;
  std::shared_ptr<Dict> d;
  // Lists and dicts: how deeply they nest (0 for the rest), and whether a namespace is in them
  // (or is this). Only namespaces change after they are made, and a namespace cannot hold one,
  // so values cannot form cycles and nest at most about 2 x kMaxValueDepth deep: printing,
  // comparing and freeing them recurse that far at most.
  int depth = 0;
  bool has_ns = false;
  bool is_loop = false;  // the 'loop' variable of a for loop (has cycle())
  bool tuple = false;    // a list that Python would hold as a tuple: printed (a, b), never equal to a list
  // What Jinja2's map, select, reject, selectattr, rejectattr, unique, batch, reverse and items
  // give: a generator, not a list. It is always true, has no length, last item or index, equals
  // only itself, and cannot be printed or dumped (Jinja2 prints its address) until | list.
  bool lazy = false;

  static Value none() { Value v; v.k = K::None; return v; }
  static Value boolean(bool x) { Value v; v.k = K::Bool; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.k = K::Int; v.i = x; return v; }
  static Value real(double x) { Value v; v.k = K::Float; v.f = x; return v; }
  static Value str(std::string x) { Value v; v.k = K::Str; v.s = std::move(x); return v; }
  static Value list(List x = {}) {
    Value v;
    v.k = K::List;
    v.depth = 1;
    for (const Value& c : x) v.hold(c);
    v.l = std::make_shared<List>(std::move(x));
    return v;
  }
  static Value dict(Dict x = {});
  static Value func(std::string name, const Stmt* macro = nullptr) { Value v; v.k = K::Func; v.s = std::move(name); v.macro = macro; return v; }

  bool defined() const { return k != K::Undef; }
  bool number() const { return k == K::Int || k == K::Float || k == K::Bool; }
  double num() const { return k == K::Float ? f : k == K::Bool ? (double)b : (double)i; }
  // The entry under a string key (attributes, string subscripts), or under any key value.
  const Value* get(const std::string& key) const;
  const Value* get(const Value& key) const;
  // Notes that this list or dict holds c.
  void hold(const Value& c) {
    if (c.depth + 1 > depth) depth = c.depth + 1;
    if (depth > kMaxValueDepth) too_much("lists or dicts nested too deeply");
    has_ns = has_ns || c.has_ns;
  }
  void put(const std::string& key, Value v, bool int_key = false);
};

// A dict entry: a string key, or an integer one ({1: 'a'}) kept as its decimal text with
// int_key set, so that it prints, compares and is looked up as Jinja2's int key is.
struct Entry {
  Entry(std::string k, Value v, bool ik = false) : first(std::move(k)), second(std::move(v)), int_key(ik) {}
  std::string first;
  Value second;
  bool int_key = false;
};

// What making or copying one list item costs: the bytes it takes, so that the work budget also
// bounds the memory a render allocates (2^28 units: about 256 MB made in all).
constexpr uint64_t kItemCost = sizeof(Value);

Value Value::dict(Dict x) {
  Value v;
  v.k = K::Dict;
  v.depth = 1;
  for (const Entry& e : x) v.hold(e.second);
  v.d = std::make_shared<Dict>(std::move(x));
  return v;
}

const Value* Value::get(const std::string& key) const {
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
    if (e.int_key == int_key && e.first == key) { e.second = std::move(v); return; }
  d->emplace_back(key, std::move(v), int_key);
}

// A (key, value) tuple, as items() and dictsort give.
Value pair(Value a, Value b) {
  Value v = Value::list({std::move(a), std::move(b)});
  v.tuple = true;
  return v;
}

// A dict key as a value (what iterating a dict, keys() and items() give).
Value key_value(const Entry& e) { return e.int_key ? Value::integer(std::strtoll(e.first.c_str(), nullptr, 10)) : Value::str(e.first); }

// The scopes a macro defined inside a loop or another macro sees (as they were where it was defined).
struct Closure {
  std::vector<std::map<std::string, Value>> scopes;
};

bool truthy(const Value& v) {
  switch (v.k) {
    case Value::K::Undef: case Value::K::None: return false;
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
std::string float_text(double f, bool json = false) {
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

// How a value is printed: Python's repr() (json = false) or json.dumps (json = true) with
// Hugging Face's tojson options; printing stops once the text passes `limit` bytes.
struct Style {
  bool json = false, ascii = false, sort = false, pretty = false;
  std::string ind;  // pretty: one level's indent
  std::string isep = ", ", ksep = ": ";  // json: between items, between a key and its value
  size_t limit = kMaxOutput;
};

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
  if (v.lazy) bad_template("a generator (what map, select, reject, unique, batch, reverse and items give) cannot be printed or dumped: add | list");
  switch (v.k) {
    case Value::K::Undef: case Value::K::None: o += st.json ? "null" : "None"; break;
    case Value::K::Bool: o += st.json ? (v.b ? "true" : "false") : (v.b ? "True" : "False"); break;
    case Value::K::Int: o += std::to_string(v.i); break;
    case Value::K::Float: o += float_text(v.f, st.json); break;
    case Value::K::Str:
      if (st.json) json_quote(o, v.s, st.ascii);
      else repr_str(o, v.s);
      break;
    case Value::K::Func: o += v.macro ? "<Macro '" + v.s + "'>" : "<function " + v.s + ">"; break;
    case Value::K::List: case Value::K::Dict: {
      const bool list = v.k == Value::K::List;
      const size_t n = list ? v.l->size() : v.d->size();
      std::vector<const Entry*> order;  // a dict's entries, sorted by key for sort_keys
      if (!list) {
        for (const Entry& e : *v.d) order.push_back(&e);
        if (st.sort) {
          charge(16 * n);
          std::stable_sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
            if (a->int_key && b->int_key) return std::strtoll(a->first.c_str(), nullptr, 10) < std::strtoll(b->first.c_str(), nullptr, 10);
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
      break;
    }
  }
  return o.size() <= st.limit;
}

// Python's repr() of a value, failing past the output bound.
std::string repr(const Value& v, const Style& st = Style()) {
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
    case Value::K::Undef: case Value::K::None: return true;
    case Value::K::Str:
      charge(std::min(a.s.size(), b.s.size()));
      return a.s == b.s;
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

// ---- substring search ----------------------------------------------------------------------

// Knuth-Morris-Pratt: linear in the haystack and the needle whatever their contents (a plain
// search is O(n*m) on 'aaa...ab' in 'aaa...a'); one Finder serves every search of a split or a
// replace. Each search is charged the bytes it reads.
class Finder {
 public:
  explicit Finder(const std::string& needle) : n_(needle), fail_(needle.size() + 1, 0) {
    charge(needle.size());
    size_t k = 0;
    for (size_t i = 1; i < n_.size(); i++) {
      while (k > 0 && n_[i] != n_[k]) k = fail_[k];
      if (n_[i] == n_[k]) k++;
      fail_[i + 1] = k;
    }
  }
  // The first match at or after `from`, npos if none.
  size_t find(const std::string& hay, size_t from) const {
    if (n_.empty()) return from <= hay.size() ? from : std::string::npos;
    if (from >= hay.size() || hay.size() - from < n_.size()) return std::string::npos;
    size_t k = 0;
    for (size_t i = from; i < hay.size(); i++) {
      while (k > 0 && hay[i] != n_[k]) k = fail_[k];
      if (hay[i] == n_[k]) k++;
      if (k == n_.size()) {
        charge(i + 1 - from);
        return i + 1 - n_.size();
      }
    }
    charge(hay.size() - from);
    return std::string::npos;
  }

 private:
  const std::string& n_;
  std::vector<size_t> fail_;
};

size_t find_text(const std::string& hay, const std::string& needle, size_t from = 0) { return Finder(needle).find(hay, from); }

// ---- tags ----------------------------------------------------------------------------------

struct Piece {
  enum class T { Text, Expr, Stmt } t;
  std::string body;
  size_t at;  // offset in the template, for messages
};

// Where the tag whose body starts at `from` closes: the first `close` outside string literals
// (as Jinja's lexer reads a tag: '}}' inside a quoted string does not end it), npos if none.
// Comments have no strings.
size_t find_close(const std::string& src, size_t from, const char* close, bool strings) {
  int depth = 0;  // open brackets: '}}' inside {{ {'a': {'b': 1}} }} closes a dict, as in Jinja's lexer
  for (size_t i = from; i < src.size(); i++) {
    const char c = src[i];
    if (strings && (c == '(' || c == '[' || c == '{')) {
      depth++;
      continue;
    }
    if (strings && depth > 0 && (c == ')' || c == ']' || c == '}')) {
      depth--;
      continue;
    }
    if (c == close[0] && i + 1 < src.size() && src[i + 1] == close[1]) return i;
    if (strings && (c == '\'' || c == '"')) {
      size_t j = i + 1;
      while (j < src.size() && src[j] != c) j += src[j] == '\\' ? 2 : 1;
      if (j >= src.size()) return std::string::npos;
      i = j;
    }
  }
  return std::string::npos;
}

// Cuts the template into text and tags, applying '-' controls, trim_blocks (the newline after
// a statement or comment tag goes) and lstrip_blocks (spaces and tabs from the start of a line
// up to a statement or comment tag go).
std::vector<Piece> cut(const std::string& src) {
  std::vector<Piece> out;
  size_t pos = 0;
  bool strip_next = false, trim_next = false;
  auto add_text = [&](std::string text) {
    if (strip_next) {
      const size_t b = text.find_first_not_of(" \t\r\n");
      text = b == std::string::npos ? std::string() : text.substr(b);
    } else if (trim_next) {
      if (text.compare(0, 1, "\n") == 0) text.erase(0, 1);
      else if (text.compare(0, 2, "\r\n") == 0) text.erase(0, 2);
    }
    strip_next = trim_next = false;
    out.push_back({Piece::T::Text, std::move(text), pos});
  };
  while (pos <= src.size()) {
    size_t open = src.find('{', pos);
    while (open != std::string::npos && open + 1 < src.size() && src[open + 1] != '{' && src[open + 1] != '%' && src[open + 1] != '#')
      open = src.find('{', open + 1);
    if (open == std::string::npos || open + 1 >= src.size()) {
      add_text(src.substr(pos));
      break;
    }
    const char kind = src[open + 1];
    const char* close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    size_t inner = open + 2;
    const bool lstrip_ctl = inner < src.size() && src[inner] == '-';
    const bool keep_ws = inner < src.size() && src[inner] == '+';
    if (lstrip_ctl || keep_ws) inner++;
    const size_t end = find_close(src, inner, close, kind != '#');
    if (end == std::string::npos) bad_template("a tag opened at offset " + std::to_string(open) + " is never closed");
    std::string text = src.substr(pos, open - pos);
    if (lstrip_ctl) {
      const size_t e = text.find_last_not_of(" \t\r\n");
      text = e == std::string::npos ? std::string() : text.substr(0, e + 1);
    } else if (kind != '{' && !keep_ws) {
      // lstrip_blocks: only when nothing but spaces and tabs precede the tag on its line.
      // Only this text piece can hold the line's start: a tag before it on the same line means
      // something precedes this one. (Searching back past pos made long one-line templates quadratic.)
      size_t line = open;
      while (line > pos && src[line - 1] != '\n') line--;
      const bool at_line_start = line > pos || pos == 0 || src[pos - 1] == '\n';
      if (at_line_start && src.find_first_not_of(" \t", line) >= open) text.erase(line - pos);
    }
    add_text(std::move(text));
    size_t body_end = end;
    const bool rstrip_ctl = body_end > inner && src[body_end - 1] == '-';
    if (rstrip_ctl) body_end--;
    if (kind != '#') out.push_back({kind == '{' ? Piece::T::Expr : Piece::T::Stmt, src.substr(inner, body_end - inner), open});
    pos = end + 2;
    strip_next = rstrip_ctl;
    trim_next = !rstrip_ctl && kind != '{';
    if (pos >= src.size()) {
      break;
    }
  }
  return out;
}

// ---- expressions ---------------------------------------------------------------------------

// A hex digit's value, -1 for any other character.
int hex_digit(char c) {
  const unsigned char u = (unsigned char)c;
  return std::isdigit(u) ? u - '0' : std::isxdigit(u) ? std::tolower(u) - 'a' + 10 : -1;
}

// The escape at s[j] (a backslash) inside a string literal, as Jinja reads it (Python's
// unicode-escape): \newline joins lines, \\ \' \" \a \b \f \n \r \t \v, octal \ooo, \xhh,
// \uhhhh and \Uhhhhhhhh; any other backslash stays as it is. Appends to v; returns the index of
// the escape's last character.
size_t unescape(const std::string& s, size_t j, std::string* v) {
  const char e = s[j + 1];
  switch (e) {
    case '\n': return j + 1;
    case '\r': return j + 1 + (j + 2 < s.size() && s[j + 2] == '\n');
    case '\\': case '\'': case '"': *v += e; return j + 1;
    case 'a': *v += '\a'; return j + 1;
    case 'b': *v += '\b'; return j + 1;
    case 'f': *v += '\f'; return j + 1;
    case 'n': *v += '\n'; return j + 1;
    case 'r': *v += '\r'; return j + 1;
    case 't': *v += '\t'; return j + 1;
    case 'v': *v += '\v'; return j + 1;
    default: break;
  }
  if (e >= '0' && e <= '7') {
    uint32_t cp = 0;
    size_t k = j + 1;
    for (int n = 0; n < 3 && k < s.size() && s[k] >= '0' && s[k] <= '7'; n++, k++) cp = cp * 8 + (uint32_t)(s[k] - '0');
    append_utf8(*v, cp);
    return k - 1;
  }
  const int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
  if (digits == 0) {
    *v += '\\';  // not an escape: the backslash is kept and the character read as usual
    return j;
  }
  uint32_t cp = 0;
  for (int n = 0; n < digits; n++) {
    const size_t k = j + 2 + (size_t)n;
    const int h = k < s.size() ? hex_digit(s[k]) : -1;
    if (h < 0) bad_template(std::string("a truncated \\") + e + " escape in a string literal");
    cp = cp * 16 + (uint32_t)h;
  }
  if (cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) bad_template("an escape outside Unicode's scalar values");
  append_utf8(*v, cp);
  return j + 1 + (size_t)digits;
}

struct Tok {
  enum class T { Name, Str, Int, Float, Op, End } t;
  std::string s;
  int64_t i = 0;
  double f = 0;
};

std::vector<Tok> lex(const std::string& s) {
  std::vector<Tok> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') { i++; continue; }
    if (std::isalpha((unsigned char)c) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum((unsigned char)s[j]) || s[j] == '_')) j++;
      out.push_back({Tok::T::Name, s.substr(i, j - i)});
      i = j;
    } else if (std::isdigit((unsigned char)c)) {
      size_t j = i;
      while (j < s.size() && std::isdigit((unsigned char)s[j])) j++;
      bool real = false;
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit((unsigned char)s[j + 1])) {
        j++;
        while (j < s.size() && std::isdigit((unsigned char)s[j])) j++;
        real = true;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {  // an exponent: 1e20, 2.5e-7
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) k++;
        if (k < s.size() && std::isdigit((unsigned char)s[k])) {
          while (k < s.size() && std::isdigit((unsigned char)s[k])) k++;
          j = k;
          real = true;
        }
      }
      if (real) {
        Tok t{Tok::T::Float, s.substr(i, j - i)};
        t.f = std::strtod(t.s.c_str(), nullptr);
        out.push_back(t);
      } else {
        Tok t{Tok::T::Int, s.substr(i, j - i)};
        t.i = std::strtoll(t.s.c_str(), nullptr, 10);
        if (j - i > 18) unsupported("integer literal " + t.s + " is too long");
        out.push_back(t);
      }
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string v;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; j++) {
        if (s[j] == '\\' && j + 1 < s.size()) j = unescape(s, j, &v);
        else if (s[j] == '\r' && j + 1 < s.size() && s[j + 1] == '\n') continue;  // newlines normalised to \n
        else v += s[j];
      }
      if (j >= s.size()) bad_template("unterminated string literal");
      out.push_back({Tok::T::Str, std::move(v)});
      i = j + 1;
    } else {
      static const char* const ops[] = {"==", "!=", "<=", ">=", "//", "**", "(", ")", "[", "]", "{", "}", ".", ",", ":",
                                        "|", "~", "+", "-", "*", "/", "%", "<", ">", "="};
      bool found = false;
      for (const char* op : ops) {
        const size_t n = std::char_traits<char>::length(op);
        if (s.compare(i, n, op) == 0) {
          out.push_back({Tok::T::Op, op});
          i += n;
          found = true;
          break;
        }
      }
      if (!found) bad_template(std::string("unexpected character '") + c + "'");
    }
  }
  out.push_back({Tok::T::End, ""});
  return out;
}

struct Expr;
using ExprP = std::unique_ptr<Expr>;
struct Expr {
  enum class T { Lit, Var, Attr, Index, Slice, Call, Filter, Test, Neg, Not, Bin, Cond, ListLit, DictLit } t;
  Value lit;
  std::string name;  // Var, Attr, Call (method or function), Filter, Test, Bin (operator)
  std::vector<ExprP> a;  // operands; Call/Filter/Test: a[0] is the object (null for plain calls), then arguments
  std::vector<std::pair<std::string, ExprP>> kw;  // keyword arguments
  bool negate = false;  // Test: 'is not'; ListLit: a tuple
  int h = 1;  // the height of the tree under this node
};

// Nodes made by the parser of the current tag: a tag's expression tree is bounded (a chain like
// 1+1+1+... or a.b.c... grows it without nesting, and trees are freed and walked recursively).
constexpr int kMaxTagNodes = 4096;
thread_local int g_tag_nodes = 0;

ExprP node(Expr::T t) {
  if (++g_tag_nodes > kMaxTagNodes) too_much("an expression of more than 4096 parts");
  ExprP e(new Expr);
  e->t = t;
  return e;
}

// Hangs a child under a node, keeping the tree's height bounded at parse time: evaluating,
// walking and freeing a tree recurse as deep as it is high, and a chain (a.b.c..., x|f|g...,
// 1+1+1...) grows it without brackets. Small thread stacks (WebAssembly's workers) must hold that.
int height_of(const Expr* c) { return c ? c->h : 0; }
void grow(Expr* e, const Expr* c) {
  if (height_of(c) + 1 > e->h) {
    e->h = height_of(c) + 1;
    if (e->h > kMaxExprHeight) too_much("an expression more than " + std::to_string(kMaxExprHeight) + " levels deep (a chain of attributes, filters or operators)");
  }
}
void adopt(Expr* e, ExprP c) {
  grow(e, c.get());
  e->a.push_back(std::move(c));
}
void adopt(const ExprP& e, ExprP c) { adopt(e.get(), std::move(c)); }
void adopt_kw(Expr* e, std::string k, ExprP c) {
  grow(e, c.get());
  e->kw.emplace_back(std::move(k), std::move(c));
}

// The name a {% filter %} block's text goes under (no template can spell it).
const char* const kFilterInput = "\x01filter";

class Parser {
 public:
  explicit Parser(const std::string& s) : toks_(lex(s)) { g_tag_nodes = 0; }
  bool at_end() const { return toks_[p_].t == Tok::T::End; }
  bool is_name(const char* n) const { return toks_[p_].t == Tok::T::Name && toks_[p_].s == n; }
  bool is_op(const char* o) const { return toks_[p_].t == Tok::T::Op && toks_[p_].s == o; }
  std::string name() {
    if (toks_[p_].t != Tok::T::Name) bad("a name");
    return toks_[p_++].s;
  }
  void expect_op(const char* o) {
    if (!is_op(o)) bad(std::string("'") + o + "'");
    p_++;
  }
  bool accept_op(const char* o) { return is_op(o) ? (p_++, true) : false; }
  bool accept_name(const char* n) { return is_name(n) ? (p_++, true) : false; }
  void expect_end() {
    if (!at_end()) bad("the end of the tag");
  }

  ExprP expr() {
    Depth d(this);
    ExprP e = or_expr();
    if (is_name("if")) {
      p_++;
      ExprP c = node(Expr::T::Cond);
      ExprP cond = or_expr();
      ExprP other = accept_name("else") ? expr() : node(Expr::T::Lit);  // no else: undefined
      adopt(c, std::move(cond));
      adopt(c, std::move(e));
      adopt(c, std::move(other));
      return c;
    }
    return e;
  }
  // A for loop's target list or an expression without a ternary (for 'for x in y if c').
  ExprP or_expr() {
    ExprP e = and_expr();
    while (accept_name("or")) e = bin("or", std::move(e), and_expr());
    return e;
  }
  // The filters of a {% filter f(args) | g %} block, applied to the variable kFilterInput.
  ExprP filter_chain() {
    ExprP e = node(Expr::T::Var);
    e->name = kFilterInput;
    do {
      ExprP f = node(Expr::T::Filter);
      f->name = name();
      adopt(f, std::move(e));
      if (accept_op("(")) call_args(f.get());
      e = std::move(f);
    } while (accept_op("|"));
    return e;
  }

 private:
  struct Depth {
    explicit Depth(Parser* p) : p(p) {
      if (++p->depth_ > kMaxDepth) too_much("expressions nested too deeply");
    }
    ~Depth() { p->depth_--; }
    Parser* p;
  };
  [[noreturn]] void bad(const std::string& want) const {
    const Tok& t = toks_[p_];
    bad_template("expected " + want + ", found " + (t.t == Tok::T::End ? "the end" : "'" + t.s + "'"));
  }
  static ExprP bin(const char* op, ExprP l, ExprP r) {
    ExprP e = node(Expr::T::Bin);
    e->name = op;
    adopt(e, std::move(l));
    adopt(e, std::move(r));
    return e;
  }
  ExprP and_expr() {
    ExprP e = not_expr();
    while (accept_name("and")) e = bin("and", std::move(e), not_expr());
    return e;
  }
  ExprP not_expr() {
    if (accept_name("not")) {
      Depth d(this);
      ExprP e = node(Expr::T::Not);
      adopt(e, not_expr());
      return e;
    }
    return compare();
  }
  ExprP compare() {
    ExprP e = concat();
    for (;;) {
      static const char* const cmp[] = {"==", "!=", "<=", ">=", "<", ">"};
      const char* op = nullptr;
      for (const char* c : cmp)
        if (is_op(c)) op = c;
      if (op) {
        p_++;
        e = bin(op, std::move(e), concat());
      } else if (is_name("in")) {
        p_++;
        e = bin("in", std::move(e), concat());
      } else if (is_name("not") && toks_[p_ + 1].t == Tok::T::Name && toks_[p_ + 1].s == "in") {
        p_ += 2;
        e = bin("not in", std::move(e), concat());
      } else {
        return e;
      }
    }
  }
  ExprP concat() {
    ExprP e = add();
    while (accept_op("~")) e = bin("~", std::move(e), add());
    return e;
  }
  ExprP add() {
    ExprP e = mul();
    for (;;) {
      if (accept_op("+")) e = bin("+", std::move(e), mul());
      else if (accept_op("-")) e = bin("-", std::move(e), mul());
      else return e;
    }
  }
  ExprP mul() {
    ExprP e = unary();
    for (;;) {
      if (accept_op("*")) e = bin("*", std::move(e), unary());
      else if (accept_op("//")) e = bin("//", std::move(e), unary());
      else if (accept_op("/")) e = bin("/", std::move(e), unary());
      else if (accept_op("%")) e = bin("%", std::move(e), unary());
      else return e;
    }
  }
  // As Jinja2 reads it: the filters after a signed operand apply to the signed value (-3|abs is 3).
  ExprP unary(bool with_filter = true) {
    ExprP e;
    if (accept_op("-")) {
      Depth d(this);
      e = node(Expr::T::Neg);
      adopt(e, unary(false));
    } else if (accept_op("+")) {
      Depth d(this);
      e = unary(false);
    } else {
      e = postfix(primary());
    }
    return with_filter ? filtered(std::move(e)) : std::move(e);
  }
  void call_args(Expr* e) {
    if (accept_op(")")) return;
    do {
      if (toks_[p_].t == Tok::T::Name && toks_[p_ + 1].t == Tok::T::Op && toks_[p_ + 1].s == "=") {
        std::string k = name();
        p_++;
        adopt_kw(e, std::move(k), expr());
      } else {
        adopt(e, expr());
      }
    } while (accept_op(","));
    expect_op(")");
  }
  ExprP postfix(ExprP e) {
    for (;;) {
      if (accept_op(".")) {
        std::string n = name();
        if (accept_op("(")) {
          ExprP c = node(Expr::T::Call);
          c->name = n;
          adopt(c, std::move(e));
          call_args(c.get());
          e = std::move(c);
        } else {
          ExprP a = node(Expr::T::Attr);
          a->name = n;
          adopt(a, std::move(e));
          e = std::move(a);
        }
      } else if (accept_op("[")) {
        ExprP lo, hi, step;
        bool slice = false;
        if (!is_op(":")) lo = expr();
        if (accept_op(":")) {
          slice = true;
          if (!is_op(":") && !is_op("]")) hi = expr();
          if (accept_op(":") && !is_op("]")) step = expr();
        }
        expect_op("]");
        ExprP s = node(slice ? Expr::T::Slice : Expr::T::Index);
        adopt(s, std::move(e));
        adopt(s, std::move(lo));
        if (slice) {
          adopt(s, std::move(hi));
          adopt(s, std::move(step));
        }
        e = std::move(s);
      } else if (accept_op("(")) {
        if (e->t != Expr::T::Var) unsupported("only named functions can be called");
        ExprP c = node(Expr::T::Call);
        c->name = e->name;
        adopt(c, nullptr);
        call_args(c.get());
        e = std::move(c);
      } else {
        return e;
      }
    }
  }
  ExprP filtered(ExprP e) {
    for (;;) {
      if (accept_op("|")) {
        ExprP f = node(Expr::T::Filter);
        f->name = name();
        adopt(f, std::move(e));
        if (accept_op("(")) call_args(f.get());
        e = std::move(f);
      } else if (is_name("is")) {
        p_++;
        ExprP t = node(Expr::T::Test);
        t->negate = accept_name("not");
        t->name = name();
        adopt(t, std::move(e));
        if (accept_op("(")) {
          call_args(t.get());
        } else if (toks_[p_].t == Tok::T::Str || toks_[p_].t == Tok::T::Int || toks_[p_].t == Tok::T::Float) {
          adopt(t, primary());  // 'is eq 3', 'is divisibleby 2'
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }
  // The rest of a list or tuple: items separated by commas (one may end it), then `close`.
  void items(Expr* e, const char* close) {
    while (!accept_op(close)) {
      adopt(e, expr());
      if (!accept_op(",")) {
        expect_op(close);
        return;
      }
    }
  }
  ExprP primary() {
    Depth d(this);
    const Tok& t = toks_[p_];
    if (t.t == Tok::T::Str) {
      std::string s = t.s;
      p_++;
      while (toks_[p_].t == Tok::T::Str) s += toks_[p_++].s;  // adjacent literals join
      ExprP e = node(Expr::T::Lit);
      e->lit = Value::str(std::move(s));
      return e;
    }
    if (t.t == Tok::T::Int || t.t == Tok::T::Float) {
      ExprP e = node(Expr::T::Lit);
      e->lit = t.t == Tok::T::Int ? Value::integer(t.i) : Value::real(t.f);
      p_++;
      return e;
    }
    if (t.t == Tok::T::Name) {
      const std::string n = t.s;
      p_++;
      ExprP e = node(Expr::T::Lit);
      if (n == "true" || n == "True") e->lit = Value::boolean(true);
      else if (n == "false" || n == "False") e->lit = Value::boolean(false);
      else if (n == "none" || n == "None") e->lit = Value::none();
      else e->t = Expr::T::Var, e->name = n;
      return e;
    }
    if (accept_op("(")) {
      if (accept_op(")")) {  // () : an empty tuple
        ExprP t = node(Expr::T::ListLit);
        t->negate = true;
        return t;
      }
      ExprP e = expr();
      if (!accept_op(",")) {
        expect_op(")");
        return e;
      }
      ExprP t = node(Expr::T::ListLit);  // a tuple: a list marked as one (what loops, 'in' and filters see is the same)
      t->negate = true;
      adopt(t, std::move(e));
      items(t.get(), ")");
      return t;
    }
    if (accept_op("[")) {
      ExprP e = node(Expr::T::ListLit);
      items(e.get(), "]");
      return e;
    }
    if (accept_op("{")) {
      ExprP e = node(Expr::T::DictLit);
      if (!accept_op("}")) {
        do {
          if (is_op("}")) break;
          adopt(e, expr());
          expect_op(":");
          adopt(e, expr());
        } while (accept_op(","));
        expect_op("}");
      }
      return e;
    }
    bad("a value");
  }

  std::vector<Tok> toks_;
  size_t p_ = 0;
  int depth_ = 0;
};

// ---- statements ----------------------------------------------------------------------------

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;
struct Stmt {
  enum class T { Text, Out, If, For, Set, SetBlock, Macro, CallBlock, Break, Continue, FilterBlock } t;
  std::string text;                         // Text; Macro: its name
  ExprP e;                                  // Out, Set value, For iterable; CallBlock: the macro call
  std::vector<std::pair<ExprP, Body>> arms; // If: condition (null for else) and body
  std::vector<std::string> vars;            // For: loop names; Set, SetBlock: target name [, attribute]
  ExprP filter;                             // For: 'if' condition
  Body body, else_body;                     // For; SetBlock, Macro, CallBlock: the body
  // Macro and CallBlock (caller's parameters): parameter names and defaults (null: none), and
  // whether the body reads varargs / kwargs (Jinja then takes extra arguments into them).
  std::vector<std::pair<std::string, ExprP>> params;
  bool varargs = false, kwargs = false;
};

// Whether an expression or a body reads the variable `n` (outside macros defined inside it).
bool mentions(const Expr* e, const std::string& n) {
  if (!e) return false;
  if (e->t == Expr::T::Var && e->name == n) return true;
  for (const auto& x : e->a)
    if (mentions(x.get(), n)) return true;
  for (const auto& kv : e->kw)
    if (mentions(kv.second.get(), n)) return true;
  return false;
}
bool mentions(const Body& b, const std::string& n) {
  for (const auto& s : b) {
    if (s->t == Stmt::T::Macro) continue;
    if (mentions(s->e.get(), n) || mentions(s->filter.get(), n) || mentions(s->body, n) || mentions(s->else_body, n)) return true;
    for (const auto& arm : s->arms)
      if (mentions(arm.first.get(), n) || mentions(arm.second, n)) return true;
    for (const auto& pr : s->params)
      if (mentions(pr.second.get(), n)) return true;
  }
  return false;
}

class TreeBuilder {
 public:
  explicit TreeBuilder(const std::vector<Piece>& ps) : ps_(ps) {}
  Body build() {
    Body b = block({});
    if (i_ < ps_.size()) bad_template("'" + head(ps_[i_].body) + "' without its opening tag");
    return b;
  }

 private:
  static std::string head(const std::string& body) {
    Parser p(body);
    return p.at_end() ? std::string() : p.name();
  }
  // Statements up to one whose keyword is in `ends` (left unconsumed).
  Body block(std::initializer_list<const char*> ends) {
    if (++depth_ > kMaxDepth) too_much("blocks nested too deeply");
    Body out;
    while (i_ < ps_.size()) {
      const Piece& pc = ps_[i_];
      if (pc.t == Piece::T::Text) {
        if (!pc.body.empty()) {
          auto s = std::make_unique<Stmt>();
          s->t = Stmt::T::Text;
          s->text = pc.body;
          out.push_back(std::move(s));
        }
        i_++;
        continue;
      }
      if (pc.t == Piece::T::Expr) {
        Parser p(pc.body);
        auto s = std::make_unique<Stmt>();
        s->t = Stmt::T::Out;
        s->e = p.expr();
        p.expect_end();
        out.push_back(std::move(s));
        i_++;
        continue;
      }
      const std::string kw = head(pc.body);
      for (const char* e : ends)
        if (kw == e) {
          depth_--;
          return out;
        }
      i_++;
      Parser p(pc.body);
      p.name();
      if (kw == "if") {
        out.push_back(if_stmt(p));
      } else if (kw == "for") {
        out.push_back(for_stmt(p));
      } else if (kw == "set") {
        auto s = std::make_unique<Stmt>();
        s->t = Stmt::T::Set;
        s->vars.push_back(p.name());
        if (p.accept_op(".")) s->vars.push_back(p.name());
        if (p.accept_op("=")) {
          s->e = p.expr();
          p.expect_end();
        } else {  // {% set name %}...{% endset %}: the rendered body
          p.expect_end();
          s->t = Stmt::T::SetBlock;
          s->body = closed_block("endset", "{% set %}");
        }
        out.push_back(std::move(s));
      } else if (kw == "macro") {
        auto s = std::make_unique<Stmt>();
        s->t = Stmt::T::Macro;
        s->text = p.name();
        p.expect_op("(");
        params(p, s.get());
        p.expect_end();
        const int loops = loops_;
        loops_ = 0;  // a loop around a macro's definition is not around its body
        s->body = closed_block("endmacro", "{% macro %}");
        loops_ = loops;
        s->varargs = mentions(s->body, "varargs");
        s->kwargs = mentions(s->body, "kwargs");
        out.push_back(std::move(s));
      } else if (kw == "call") {
        // {% call(params) name(args) %}body{% endcall %}: the body is the macro's caller().
        auto s = std::make_unique<Stmt>();
        s->t = Stmt::T::CallBlock;
        if (p.accept_op("(")) params(p, s.get());
        s->e = p.expr();
        if (s->e->t != Expr::T::Call || s->e->a[0]) bad_template("{% call %} needs a macro call");
        p.expect_end();
        const int loops = loops_;
        loops_ = 0;
        s->body = closed_block("endcall", "{% call %}");
        loops_ = loops;
        s->varargs = mentions(s->body, "varargs");
        s->kwargs = mentions(s->body, "kwargs");
        out.push_back(std::move(s));
      } else if (kw == "filter") {  // {% filter f | g(args) %}...{% endfilter %}: the body's text through the filters
        auto s = std::make_unique<Stmt>();
        s->t = Stmt::T::FilterBlock;
        s->e = p.filter_chain();
        p.expect_end();
        s->body = closed_block("endfilter", "{% filter %}");
        out.push_back(std::move(s));
      } else if (kw == "break" || kw == "continue") {  // Hugging Face enables Jinja's loop controls
        if (loops_ == 0) bad_template("{% " + kw + " %} outside a loop");
        p.expect_end();
        auto s = std::make_unique<Stmt>();
        s->t = kw == "break" ? Stmt::T::Break : Stmt::T::Continue;
        out.push_back(std::move(s));
      } else if (kw == "generation" || kw == "endgeneration") {
        // Hugging Face's marker of assistant text: renders nothing.
      } else if (kw == "if" || kw == "elif" || kw == "else" || kw == "endif" || kw == "endfor" || kw == "endset" ||
                 kw == "endmacro" || kw == "endcall" || kw == "endfilter") {
        bad_template("'" + kw + "' without its opening tag");
      } else {
        unsupported("the '" + kw + "' statement");
      }
    }
    depth_--;
    return out;
  }
  // The statements up to {% end %} (consumed).
  Body closed_block(const char* end, const char* what) {
    Body b = block({end});
    if (i_ >= ps_.size()) bad_template(std::string() + what + " without {% " + end + " %}");
    Parser q(ps_[i_++].body);
    q.name();
    if (!q.at_end()) q.name();  // {% endmacro name %} may repeat the name
    q.expect_end();
    return b;
  }
  // A parameter list after its '(': names with optional '= default'.
  void params(Parser& p, Stmt* s) {
    if (!p.accept_op(")")) {
      do {
        std::string n = p.name();
        ExprP def = p.accept_op("=") ? p.expr() : nullptr;
        s->params.emplace_back(std::move(n), std::move(def));
      } while (p.accept_op(","));
      p.expect_op(")");
    }
  }
  std::unique_ptr<Stmt> if_stmt(Parser& p) {
    auto s = std::make_unique<Stmt>();
    s->t = Stmt::T::If;
    ExprP cond = p.expr();
    p.expect_end();
    for (;;) {
      Body b = block({"elif", "else", "endif"});
      s->arms.emplace_back(std::move(cond), std::move(b));
      if (i_ >= ps_.size()) bad_template("{% if %} without {% endif %}");
      Parser q(ps_[i_++].body);
      const std::string kw = q.name();
      if (kw == "endif") {
        q.expect_end();
        return s;
      }
      cond = kw == "elif" ? q.expr() : nullptr;
      q.expect_end();
      if (kw == "else") {
        Body e = block({"endif"});
        s->arms.emplace_back(nullptr, std::move(e));
        if (i_ >= ps_.size()) bad_template("{% if %} without {% endif %}");
        Parser r(ps_[i_++].body);
        r.name();
        r.expect_end();
        return s;
      }
    }
  }
  std::unique_ptr<Stmt> for_stmt(Parser& p) {
    auto s = std::make_unique<Stmt>();
    s->t = Stmt::T::For;
    s->vars.push_back(p.name());
    if (p.accept_op(",")) s->vars.push_back(p.name());
    if (!p.accept_name("in")) bad_template("expected 'in' in a for loop");
    s->e = p.or_expr();
    if (p.accept_name("if")) s->filter = p.or_expr();
    if (p.accept_name("recursive")) unsupported("recursive loops");
    p.expect_end();
    loops_++;
    s->body = block({"else", "endfor"});
    loops_--;
    if (i_ >= ps_.size()) bad_template("{% for %} without {% endfor %}");
    Parser q(ps_[i_++].body);
    if (q.name() == "else") {
      q.expect_end();
      s->else_body = block({"endfor"});
      if (i_ >= ps_.size()) bad_template("{% for %} without {% endfor %}");
      Parser r(ps_[i_++].body);
      r.name();
    }
    return s;
  }

  const std::vector<Piece>& ps_;
  size_t i_ = 0;
  int depth_ = 0;
  int loops_ = 0;  // for loops around the statements being read
};

// ---- evaluation ----------------------------------------------------------------------------

class Renderer {
 public:
  explicit Renderer(std::map<std::string, Value> globals) { scopes_.push_back(std::move(globals)); }

  // Runs statements until a {% break %} or {% continue %} (left in jump_ for the loop).
  void run(const Body& b) {
    for (const auto& s : b) {
      exec(*s);
      if (jump_ != Stmt::T::Text) return;
    }
  }
  std::string& out() { return out_; }

 private:
  void tick() { charge(64); }
  // What a computed value cost to make: its bytes or items.
  Value made(Value v) {
    if (v.k == Value::K::Str) charge(v.s.size());
    else if (v.k == Value::K::List) charge_items(*v.l);
    return v;
  }
  // What reading a stored value costs: a string is copied, a list or dict is shared (its items
  // are not copied, so they are not charged: a long list read once per loop pass stays linear).
  Value read(Value v) {
    charge(v.k == Value::K::Str ? v.s.size() : 16);
    return v;
  }
  // What copying these items costs: their strings are copied byte by byte (lists and dicts in
  // them are shared).
  void charge_items(const List& l) {
    uint64_t units = kItemCost * (uint64_t)l.size();
    for (const Value& x : l)
      if (x.k == Value::K::Str) units += x.s.size();
    charge(units);
  }
  void emit(const std::string& s) {
    if (out_.size() + s.size() > kMaxOutput) too_much("the rendered prompt is too long");
    out_ += s;
  }
  Value lookup(const std::string& n) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(n);
      if (f != it->end()) return f->second;
    }
    return Value();
  }

  // Bounds the renderer's recursion (macros can call themselves), so a hostile template cannot
  // exhaust the native stack.
  struct Nest {
    explicit Nest(Renderer* r) : r(r) {
      if (++r->nest_ > kMaxRenderDepth) too_much("macros or expressions nested too deeply");
    }
    ~Nest() { r->nest_--; }
    Renderer* r;
  };
  using Scope = std::map<std::string, Value>;

  // What a body renders, as a string (set blocks, macro and caller bodies).
  std::string capture(const Body& b) {
    std::string saved;
    std::swap(saved, out_);
    run(b);
    std::string r = std::move(out_);
    out_ = std::move(saved);
    return r;
  }
  void assign(const std::vector<std::string>& target, Value v) {
    if (target.size() == 1) {
      scopes_.back()[target[0]] = std::move(v);
      return;
    }
    Value ns = lookup(target[0]);
    if (ns.k != Value::K::Dict || !ns.has_ns) bad_template("cannot set an attribute of '" + target[0] + "', which is not a namespace");
    if (v.has_ns)
      bad_template("a namespace cannot hold a namespace or a macro defined inside a block (" + target[0] + "." + target[1] + ")");
    ns.put(target[1], std::move(v));
  }

  // A macro call's saved scopes (those of its call site), found by serial number by the caller()
  // of a {% call %} block.
  struct Frame {
    uint64_t serial;
    std::vector<Scope> scopes;
  };

  // Calls a macro (or, with m a call block, its caller body) with the call's arguments. A macro
  // sees the template's top-level names and its own; a caller body sees the names where its
  // {% call %} stands. Both get a scope of their own, holding the parameters.
  Value call_macro(const Value& f, const Expr& e, const Stmt* caller_body = nullptr) {
    const Stmt& m = *f.macro;
    const std::string name = m.t == Stmt::T::Macro ? m.text : "caller";
    const std::vector<Value> a = args(e);
    Scope local;
    List extra;
    Dict kw;
    if (a.size() > m.params.size() && !m.varargs)
      bad_template("macro '" + name + "' takes not more than " + std::to_string(m.params.size()) + " argument(s)");
    for (size_t i = 0; i < a.size(); i++) {
      if (i < m.params.size()) local[m.params[i].first] = a[i];
      else extra.push_back(a[i]);
    }
    for (const auto& kv : e.kw) {
      size_t i = 0;
      while (i < m.params.size() && m.params[i].first != kv.first) i++;
      if (i < m.params.size()) {
        if (i < a.size()) bad_template("macro '" + name + "' got multiple values for argument '" + kv.first + "'");
        local[kv.first] = eval(*kv.second);
      } else if (m.kwargs) {
        kw.emplace_back(kv.first, eval(*kv.second));
      } else {
        bad_template("macro '" + name + "' takes no keyword argument '" + kv.first + "'");
      }
    }
    // The scopes the body sees: a macro's stack is the globals alone (the caller's scopes wait
    // in `away`); a caller body gets back the scopes of its {% call %} site.
    std::vector<Scope> away(std::make_move_iterator(scopes_.begin() + 1), std::make_move_iterator(scopes_.end()));
    scopes_.resize(1);
    Frame* site = nullptr;
    if (m.t == Stmt::T::CallBlock) {
      for (Frame* fr : frames_)
        if (fr->serial == (uint64_t)f.i) site = fr;
      if (!site) bad_template("caller() used outside its macro call");
      for (auto& sc : site->scopes) scopes_.push_back(std::move(sc));
    }
    if (f.closure)
      for (const Scope& sc : f.closure->scopes) scopes_.push_back(sc);
    if (m.t == Stmt::T::CallBlock) local["caller"] = Value();  // a caller body has no caller of its own
    if (m.t == Stmt::T::Macro && f.closure) local[m.text] = f;  // its own name (not in the closure: no cycle)
    scopes_.push_back(std::move(local));
    for (const auto& pr : m.params) {
      Scope& top = scopes_.back();
      if (top.count(pr.first)) continue;
      top[pr.first] = pr.second ? eval(*pr.second) : Value();  // defaults see the earlier parameters
    }
    if (m.varargs) scopes_.back()["varargs"] = Value::list(std::move(extra));
    if (m.kwargs) scopes_.back()["kwargs"] = Value::dict(std::move(kw));
    Frame frame{++frame_serial_, std::move(away)};
    if (m.t == Stmt::T::Macro) {
      if (caller_body) {  // called by a {% call %} block: its body, as caller()
        Value c = Value::func("caller", caller_body);
        c.i = (int64_t)frame.serial;
        scopes_.back()["caller"] = c;
      }
      frames_.push_back(&frame);
    }
    std::string r = capture(m.body);
    if (m.t == Stmt::T::Macro) frames_.pop_back();
    if (site) {  // the {% call %} site's scopes go back to their frame
      site->scopes.clear();
      for (size_t i = 1; i + 1 < scopes_.size(); i++) site->scopes.push_back(std::move(scopes_[i]));
    }
    // (a closure's scopes are copies: what the body set there is dropped with them)
    scopes_.resize(1);
    for (auto& sc : frame.scopes) scopes_.push_back(std::move(sc));
    return Value::str(std::move(r));
  }

  void exec(const Stmt& s) {
    Nest guard(this);
    tick();
    switch (s.t) {
      case Stmt::T::Text: emit(s.text); break;
      case Stmt::T::Out: emit(to_text(eval(*s.e))); break;
      case Stmt::T::If:
        for (const auto& arm : s.arms)
          if (!arm.first || truthy(eval(*arm.first))) {
            run(arm.second);
            break;
          }
        break;
      case Stmt::T::Set: assign(s.vars, eval(*s.e)); break;
      case Stmt::T::Break: case Stmt::T::Continue: jump_ = s.t; break;
      case Stmt::T::SetBlock: assign(s.vars, made(Value::str(capture(s.body)))); break;
      case Stmt::T::FilterBlock: {
        Value text = made(Value::str(capture(s.body)));
        scopes_.emplace_back();
        scopes_.back()[kFilterInput] = std::move(text);
        const std::string r = to_text(eval(*s.e));
        scopes_.pop_back();
        emit(r);
        break;
      }
      case Stmt::T::Macro: {
        Value f = Value::func(s.text, &s);
        if (scopes_.size() > 1) {
          // The names where it is defined, copied (and charged as copies). Such a macro may not go
          // into a namespace (has_ns): a closure holding a namespace that holds the macro would
          // be a cycle, and chains of them would nest without bound.
          auto c = std::make_shared<Closure>(Closure{{scopes_.begin() + 1, scopes_.end()}});
          for (const auto& sc : c->scopes)
            for (const auto& kv : sc) charge(16 + kv.first.size() + (kv.second.k == Value::K::Str ? kv.second.s.size() : 0));
          f.closure = std::move(c);
          f.has_ns = true;
        }
        scopes_.back()[s.text] = std::move(f);
        break;
      }
      case Stmt::T::CallBlock: {
        Value f = lookup(s.e->name);
        if (f.k != Value::K::Func || !f.macro || f.macro->t != Stmt::T::Macro)
          bad_template("{% call %} of '" + s.e->name + "', which is not a macro");
        emit(call_macro(f, *s.e, &s).s);
        break;
      }
      case Stmt::T::For: {
        const Value it = eval(*s.e);
        List items;
        if (it.k == Value::K::List) items = *it.l, charge_items(items);
        else if (it.k == Value::K::Dict) for (const auto& kv : *it.d) items.push_back(key_value(kv));
        else if (it.k == Value::K::Str) for (char c : it.s) items.push_back(Value::str(std::string(1, c)));
        else if (it.defined() && it.k != Value::K::None) bad_template("a for loop over " + brief(it) + ", which is not a list");
        scopes_.emplace_back();
        if (s.filter) {  // the filter sees each item under the loop's names
          List kept;
          for (const Value& v : items) {
            bind(s.vars, v);
            if (truthy(eval(*s.filter))) kept.push_back(v);
          }
          items = std::move(kept);
        }
        const int64_t n = (int64_t)items.size();
        for (int64_t k = 0; k < n; k++) {
          scopes_.back().clear();  // as in Jinja, what one pass sets is gone in the next
          bind(s.vars, items[(size_t)k]);
          Value loop = Value::dict({{"index", Value::integer(k + 1)}, {"index0", Value::integer(k)},
                                    {"first", Value::boolean(k == 0)}, {"last", Value::boolean(k == n - 1)},
                                    {"length", Value::integer(n)}, {"revindex", Value::integer(n - k)},
                                    {"revindex0", Value::integer(n - k - 1)},
                                    {"previtem", k > 0 ? items[(size_t)k - 1] : Value()},
                                    {"nextitem", k + 1 < n ? items[(size_t)k + 1] : Value()}});
          loop.is_loop = true;
          scopes_.back()["loop"] = loop;
          run(s.body);
          const Stmt::T jump = jump_;
          jump_ = Stmt::T::Text;
          if (jump == Stmt::T::Break) break;
        }
        if (n == 0) run(s.else_body);
        scopes_.pop_back();
        break;
      }
    }
  }
  void bind(const std::vector<std::string>& vars, const Value& v) {
    if (vars.size() == 1) {
      scopes_.back()[vars[0]] = v;
      return;
    }
    if (v.k != Value::K::List || v.l->size() != vars.size())
      bad_template("cannot unpack " + brief(v) + " into " + std::to_string(vars.size()) + " names");
    for (size_t i = 0; i < vars.size(); i++) scopes_.back()[vars[i]] = (*v.l)[i];
  }

  static int64_t as_int(const Value& v, const char* what) {
    if (v.k == Value::K::Int || v.k == Value::K::Bool) return v.k == Value::K::Int ? v.i : v.b;
    if (v.k == Value::K::Float && std::isfinite(v.f) && std::fabs(v.f) < 9e18) return (int64_t)v.f;
    bad_template(std::string() + what + " needs an integer, not " + brief(v));
  }
  static std::string as_str(const Value& v, const char* what) {
    if (v.k != Value::K::Str) bad_template(std::string() + what + " needs a string, not " + brief(v));
    return v.s;
  }

  Value arith(const std::string& op, const Value& a, const Value& b) {
    if (op == "+" && a.k == Value::K::Str && b.k == Value::K::Str) {
      if (a.s.size() + b.s.size() > kMaxOutput) too_much("a string grows too long");
      return Value::str(a.s + b.s);
    }
    if (op == "+" && a.k == Value::K::List && b.k == Value::K::List && !a.lazy && !b.lazy) {
      List l = *a.l;
      l.insert(l.end(), b.l->begin(), b.l->end());
      return Value::list(std::move(l));
    }
    if (op == "*" && a.k == Value::K::Str && (b.k == Value::K::Int)) {
      if (a.s.empty() || b.i <= 0) return Value::str("");
      if (b.i > 0 && !a.s.empty() && (uint64_t)b.i > kMaxOutput / a.s.size()) too_much("a string grows too long");
      std::string r;
      for (int64_t k = 0; k < b.i; k++) r += a.s;
      return Value::str(std::move(r));
    }
    if (!a.number() || !b.number())
      bad_template("cannot apply '" + op + "' to " + brief(a) + " and " + brief(b));
    const bool ints = a.k != Value::K::Float && b.k != Value::K::Float;
    if (op == "/") {
      if (b.num() == 0) bad_template("division by zero");
      return Value::real(a.num() / b.num());
    }
    if (ints) {
      const int64_t x = a.k == Value::K::Int ? a.i : a.b, y = b.k == Value::K::Int ? b.i : b.b;
      int64_t r = 0;
      // Python's integers do not overflow; past 64 bits this is an error, not a wrapped value.
      const bool over = op == "+" ? __builtin_add_overflow(x, y, &r) : op == "-" ? __builtin_sub_overflow(x, y, &r)
                      : op == "*" ? __builtin_mul_overflow(x, y, &r) : (x == INT64_MIN && y == -1);
      if (over) bad_template("integer overflow in " + std::to_string(x) + " " + op + " " + std::to_string(y));
      if (op == "+" || op == "-" || op == "*") return Value::integer(r);
      if (y == 0) bad_template("division by zero");
      const int64_t q = x / y - ((x % y != 0) && ((x < 0) != (y < 0)));  // Python's floor division
      if (op == "//") return Value::integer(q);
      return Value::integer(x - q * y);
    }
    const double x = a.num(), y = b.num();
    if (op == "+") return Value::real(x + y);
    if (op == "-") return Value::real(x - y);
    if (op == "*") return Value::real(x * y);
    if (y == 0) bad_template("division by zero");
    if (op == "//") return Value::real(std::floor(x / y));
    return Value::real(x - std::floor(x / y) * y);
  }

  static bool less(const Value& a, const Value& b) {
    if (a.number() && b.number()) return a.num() < b.num();
    if (a.k == Value::K::Str && b.k == Value::K::Str) return a.s < b.s;
    bad_template("cannot order " + brief(a) + " and " + brief(b));
  }
  // Python's 'in', charged per item compared and byte searched.
  static bool contains(const Value& hay, const Value& needle) {
    if (hay.k == Value::K::Str) {
      if (needle.k != Value::K::Str) bad_template("'in <string>' needs a string on the left, not " + brief(needle));
      return find_text(hay.s, needle.s) != std::string::npos;
    }
    if (hay.k == Value::K::List) {
      for (const Value& v : *hay.l) {
        charge(16);
        if (equal(v, needle)) return true;
      }
      return false;
    }
    if (hay.k == Value::K::Dict) return hay.get(needle) != nullptr;
    if (!hay.defined() || hay.k == Value::K::None) return false;
    bad_template("'in' needs a string, list or dict, not " + brief(hay));
  }

  std::vector<Value> args(const Expr& e) {
    std::vector<Value> v;
    for (size_t i = 1; i < e.a.size(); i++) v.push_back(eval(*e.a[i]));
    return v;
  }

  // An indent given as a width (spaces) or as the string itself.
  static std::string indent_text(const Value& w) {
    if (w.k == Value::K::Str) {
      if (w.s.size() > 1000) too_much("an indent longer than 1000 characters");
      return w.s;
    }
    const int64_t n = as_int(w, "indent");
    if (n > 1000) too_much("an indent of " + std::to_string(n) + " spaces (at most 1000)");
    return std::string(n > 0 ? (size_t)n : 0, ' ');
  }
  // Python's str.splitlines(): \n, \r\n, \r, \v, \f, \x1c-\x1e, U+0085, U+2028 and U+2029 end lines.
  static std::vector<std::string> split_lines(const std::string& s) {
    std::vector<std::string> out;
    size_t start = 0, i = 0;
    while (i < s.size()) {
      const unsigned char c = (unsigned char)s[i];
      size_t len = 0;
      if (c == '\n' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) len = 1;
      else if (c == '\r') len = i + 1 < s.size() && s[i + 1] == '\n' ? 2 : 1;
      else if (c == 0xc2 && i + 1 < s.size() && (unsigned char)s[i + 1] == 0x85) len = 2;
      else if (c == 0xe2 && i + 2 < s.size() && (unsigned char)s[i + 1] == 0x80 && ((unsigned char)s[i + 2] == 0xa8 || (unsigned char)s[i + 2] == 0xa9)) len = 3;
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
  static std::string strip(const std::string& s, const std::string& chars, bool left, bool right) {
    bool in[256] = {};  // a table: strip's cost does not grow with the set of characters
    for (const unsigned char c : chars) in[c] = true;
    charge(chars.size());
    size_t b = 0, e = s.size();
    while (left && b < e && in[(unsigned char)s[b]]) b++;
    while (right && e > b && in[(unsigned char)s[e - 1]]) e--;
    charge(b + (s.size() - e));
    return s.substr(b, e - b);
  }
  // Python's str.replace (count < 0: every occurrence; an empty `from` matches between characters).
  static std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count = -1) {
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
  static std::string title(const std::string& s, bool all_words) {
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
  static std::string lower(std::string s) {
    for (char& c : s) c = (char)std::tolower((unsigned char)c);
    return s;
  }
  // The case changes Jinja has both as string methods and as filters (upper, lower, title,
  // capitalize): true with *out set when `op` is one.
  static bool recase(const std::string& op, const std::string& s, std::string* out) {
    if (op == "upper") *out = upper(s);
    else if (op == "lower") *out = lower(s);
    else if (op == "title") *out = title(s, true);
    else if (op == "capitalize") *out = title(s.substr(0, 1), false) + lower(s.size() > 1 ? s.substr(1) : "");
    else return false;
    return true;
  }
  static std::string upper(std::string s) {
    for (char& c : s) c = (char)std::toupper((unsigned char)c);
    return s;
  }
  static const std::string& ws() {
    static const std::string w = " \t\n\r\v\f";
    return w;
  }

  Value method(const Expr& e) {
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
      if ((m == "startswith" || m == "endswith") && a.size() == 1) {
        const std::string x = arg_str(0, m.c_str());
        const bool r = x.size() <= s.size() && (m == "startswith" ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0);
        return Value::boolean(r);
      }
      if (m == "replace" && a.size() >= 2) return Value::str(replace_all(s, arg_str(0, "replace"), arg_str(1, "replace")));
      if (m == "find" && a.size() == 1) {
        const size_t p = find_text(s, arg_str(0, "find"));
        return Value::integer(p == std::string::npos ? -1 : (int64_t)p);
      }
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
    unsupported("the method '" + m + "' of " + brief(obj));
  }

  Value call(const Expr& e) {
    if (e.a[0]) return method(e);
    const std::string& f = e.name;
    {
      const Value fv = lookup(f);
      if (fv.k == Value::K::Func && fv.macro) return call_macro(fv, e);
      if (f == "caller") bad_template("caller() outside a {% call %} block");
    }
    const std::vector<Value> a = args(e);
    if (f == "raise_exception") {
      // The template's own verdict on the conversation (roles that do not alternate, ...): the caller's error.
      fail(ErrorCode::BadArgument, "chat template: " + (a.empty() ? std::string("raise_exception()") : message_text(a[0])));
    }
    if (f == "namespace") {
      Value ns = Value::dict();
      ns.has_ns = true;
      for (const auto& kv : e.kw) ns.put(kv.first, eval(*kv.second));
      return ns;
    }
    if (f == "dict") {
      Value d = Value::dict();
      for (const auto& kv : e.kw) d.put(kv.first, eval(*kv.second));
      return d;
    }
    if (f == "range") {
      if (a.empty() || a.size() > 3) bad_template("range takes 1 to 3 integers");
      int64_t lo = 0, hi, step = 1;
      if (a.size() == 1) hi = as_int(a[0], "range");
      else lo = as_int(a[0], "range"), hi = as_int(a[1], "range");
      if (a.size() == 3) step = as_int(a[2], "range");
      if (step == 0) bad_template("range with a step of 0");
      // Its length, charged before anything is made (a long range is refused without building it).
      const long double len = step > 0 ? (hi > lo ? ((long double)hi - lo + step - 1) / step : 0) : (lo > hi ? ((long double)lo - hi - step - 1) / -step : 0);
      if (len > 1000000) too_much("range is too long");
      charge(kItemCost * (uint64_t)len);
      List l;
      for (int64_t v = lo; step > 0 ? v < hi : v > hi;) {
        if (l.size() >= 1000000) too_much("range is too long");
        l.push_back(Value::integer(v));
        if (__builtin_add_overflow(v, step, &v)) break;  // past the 64-bit range: past hi too
      }
      return Value::list(std::move(l));
    }
    if (f == "strftime_now") {
      const std::string fmt = a.empty() ? std::string("%Y-%m-%d") : as_str(a[0], "strftime_now");
      const std::time_t now = std::time(nullptr);
      std::tm tm{};
#if defined(_WIN32)
      localtime_s(&tm, &now);
#else
      localtime_r(&now, &tm);
#endif
      char buf[256];
      const size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
      return Value::str(std::string(buf, n));
    }
    unsupported("the function '" + f + "'");
  }

  using Kw = std::vector<std::pair<std::string, Value>>;
  Kw kwargs(const Expr& e) {
    Kw kw;
    for (const auto& kv : e.kw) kw.emplace_back(kv.first, eval(*kv.second));
    return kw;
  }
  Value filter(const Expr& e) {
    const Value v = eval(*e.a[0]);
    return apply_filter(e.name, v, args(e), kwargs(e));
  }
  // Positional argument i, or the keyword argument `name`, or dflt.
  static Value arg(const std::vector<Value>& a, const Kw& kw, size_t i, const char* name, Value dflt = Value()) {
    for (const auto& kv : kw)
      if (kv.first == name) return kv.second;
    return i < a.size() ? a[i] : dflt;
  }
  static void only_kw(const char* f, const Kw& kw, std::initializer_list<const char*> names) {
    for (const auto& kv : kw) {
      bool ok = false;
      for (const char* n : names) ok = ok || kv.first == n;
      if (!ok) bad_template(std::string("the filter '") + f + "' has no argument '" + kv.first + "'");
    }
  }
  // The items a filter iterates: a list's, a dict's keys, a string's characters (UTF-8
  // sequences kept whole); undefined and none give none, as Jinja2's filters that test the
  // sequence first do.
  static List items_of(const Value& v, const char* f) {
    List l;
    if (v.k == Value::K::List) {
      charge(kItemCost * v.l->size());
      return *v.l;
    }
    if (v.k == Value::K::Dict) for (const auto& kv : *v.d) l.push_back(key_value(kv));
    else if (v.k == Value::K::Str) for (const std::string& c : chars(v.s)) l.push_back(Value::str(c));
    else if (v.defined() && v.k != Value::K::None) bad_template(std::string("the filter '") + f + "' over " + brief(v));
    charge(kItemCost * l.size());
    return l;
  }
  // A string's characters (code points as UTF-8 sequences), as Python iterates a str.
  static std::vector<std::string> chars(const std::string& s) {
    std::vector<std::string> out;
    for (size_t i = 0; i < s.size();) {
      const size_t n = utf8_len(s, i);
      out.push_back(s.substr(i, n));
      i += n;
    }
    return out;
  }
  static size_t utf8_len(const std::string& s, size_t i) {
    const unsigned char c = (unsigned char)s[i];
    size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    for (size_t k = 1; k < n; k++)
      if (i + k >= s.size() || ((unsigned char)s[i + k] & 0xc0) != 0x80) return 1;
    return n;
  }
  static int64_t code_points(const std::string& s) {
    int64_t n = 0;
    for (const char c : s) n += ((unsigned char)c & 0xc0) != 0x80;
    return n;
  }
  // Python's sort order of two values (for sort, dictsort, min and max); case-blind on strings
  // unless cs.
  static bool sort_less(const Value& a, const Value& b, bool cs) {
    charge(16);
    if (!cs && a.k == Value::K::Str && b.k == Value::K::Str) return lower(a.s) < lower(b.s);
    return less(a, b);
  }
  // An item's attribute (a dotted path, as Jinja2's attribute= takes; digits index a list).
  static Value attribute(const Value& item, const std::string& path) {
    Value cur = item;
    size_t p = 0;
    for (;;) {
      const size_t q = path.find('.', p);
      const std::string part = path.substr(p, q == std::string::npos ? std::string::npos : q - p);
      const Value* next = cur.get(part);
      if (!next && cur.k == Value::K::List && !part.empty() && part.find_first_not_of("0123456789") == std::string::npos && part.size() < 10) {
        const size_t i = std::stoul(part);
        next = i < cur.l->size() ? &(*cur.l)[i] : nullptr;
      }
      if (!next) return Value();
      cur = *next;
      if (q == std::string::npos) return cur;
      p = q + 1;
    }
  }

  static Value lazy(Value v) {
    v.lazy = true;
    return v;
  }

  Value apply_filter(const std::string& f, const Value& v, const std::vector<Value>& a, const Kw& kw) {
    charge(64);
    std::string r;
    // Each filter reads only what it needs: no input is printed whole unless the filter prints it.
    if (f == "trim") return Value::str(strip(to_text(v), a.empty() ? ws() : as_str(a[0], "trim"), true, true));
    if ((f == "length" || f == "count" || f == "last") && v.lazy) bad_template("a generator has no " + std::string(f == "last" ? "last item" : "length") + ": add | list");
    if (f == "length" || f == "count") {
      if (v.k == Value::K::Str) return Value::integer(code_points(v.s));
      if (v.k == Value::K::List) return Value::integer((int64_t)v.l->size());
      if (v.k == Value::K::Dict) return Value::integer((int64_t)v.d->size());
      if (!v.defined()) return Value::integer(0);
      bad_template("length of " + brief(v));
    }
    if (f == "upper" || f == "lower" || f == "title" || f == "capitalize") {
      recase(f, to_text(v), &r);
      return Value::str(std::move(r));
    }
    if (f == "string") return v.k == Value::K::Str ? v : Value::str(to_text(v));
    if (f == "safe") return v;
    if (f == "escape" || f == "e" || f == "forceescape") {
      for (const char c : to_text(v)) {
        if (c == '&') r += "&amp;";
        else if (c == '<') r += "&lt;";
        else if (c == '>') r += "&gt;";
        else if (c == '"') r += "&#34;";
        else if (c == '\'') r += "&#39;";
        else r += c;
      }
      return Value::str(std::move(r));
    }
    if (f == "int") {
      const Value dflt = arg(a, kw, 0, "default", Value::integer(0));
      if (v.k == Value::K::Str) {
        const std::string t = strip(v.s, ws(), true, true);
        char* end = nullptr;
        errno = 0;
        const long long x = std::strtoll(t.c_str(), &end, 10);
        if (!t.empty() && end && *end == 0 && errno == 0) return Value::integer(x);
        const double d = std::strtod(t.c_str(), &end);  // Jinja2 tries float() next
        if (!t.empty() && end && *end == 0 && std::isfinite(d) && std::fabs(d) < 9e18) return Value::integer((int64_t)d);
        return dflt;
      }
      return v.number() ? Value::integer(as_int(v, "int")) : dflt;
    }
    if (f == "float") {
      if (v.k == Value::K::Str) {
        const std::string t = strip(v.s, ws(), true, true);
        char* end = nullptr;
        const double d = std::strtod(t.c_str(), &end);
        if (!t.empty() && end && *end == 0) return Value::real(d);
        return arg(a, kw, 0, "default", Value::real(0));
      }
      return v.number() ? Value::real(v.num()) : arg(a, kw, 0, "default", Value::real(0));
    }
    if (f == "abs") {
      if (v.k == Value::K::Int && v.i != INT64_MIN) return Value::integer(v.i < 0 ? -v.i : v.i);
      if (v.number()) return Value::real(std::fabs(v.num()));
      bad_template("abs of " + brief(v));
    }
    if (f == "first" || f == "last") {  // one item read, whatever the size
      if (v.k == Value::K::List) return v.l->empty() ? Value() : (f == "first" ? v.l->front() : v.l->back());
      if (v.k == Value::K::Str) {
        if (v.s.empty()) return Value();
        if (f == "first") return Value::str(v.s.substr(0, utf8_len(v.s, 0)));
        size_t i = v.s.size() - 1;
        while (i > 0 && ((unsigned char)v.s[i] & 0xc0) == 0x80 && v.s.size() - i < 4) i--;
        return Value::str(v.s.substr(utf8_len(v.s, i) == v.s.size() - i ? i : v.s.size() - 1));
      }
      if (v.k == Value::K::Dict) return v.d->empty() ? Value() : key_value(f == "first" ? v.d->front() : v.d->back());
      bad_template("" + f + " of " + brief(v));
    }
    if (f == "join") {
      only_kw("join", kw, {"d", "attribute"});
      const std::string sep = a.empty() ? std::string() : as_str(arg(a, kw, 0, "d"), "join");
      const Value at = arg(a, kw, 1, "attribute");
      const List l = items_of(v, "join");
      for (size_t i = 0; i < l.size(); i++) {
        if (i) r += sep;
        r += to_text(at.defined() && at.k != Value::K::None ? attribute(l[i], to_text(at)) : l[i]);
        if (r.size() > kMaxOutput) too_much("a string grows too long");
      }
      return Value::str(std::move(r));
    }
    if (f == "default" || f == "d") {
      const bool boolean = truthy(arg(a, kw, 1, "boolean", Value::boolean(false)));
      if (boolean ? truthy(v) : v.defined()) return v;
      return arg(a, kw, 0, "default_value", Value::str(""));
    }
    if (f == "tojson") {
      only_kw("tojson", kw, {"indent", "sort_keys", "ensure_ascii", "separators"});
      const Value indent = arg(a, kw, 0, "indent");
      Style st;
      st.json = true;
      st.sort = truthy(arg({}, kw, 9, "sort_keys"));
      st.ascii = truthy(arg({}, kw, 9, "ensure_ascii"));  // Hugging Face's tojson: ensure_ascii off unless asked
      st.pretty = indent.defined() && indent.k != Value::K::None;
      if (st.pretty) st.ind = indent_text(indent), st.isep = ",";
      const Value sep = arg({}, kw, 9, "separators");
      if (sep.defined() && sep.k != Value::K::None) {
        if (sep.k != Value::K::List || sep.l->size() != 2) bad_template("tojson's separators must be a pair of strings");
        st.isep = as_str((*sep.l)[0], "tojson's separators");
        st.ksep = as_str((*sep.l)[1], "tojson's separators");
        if (st.isep.size() > 100 || st.ksep.size() > 100) too_much("tojson's separators are longer than 100 bytes");
      }
      return Value::str(repr(v, st));
    }
    if (f == "indent") {  // Jinja 3's: every line but the first (unless first=true); blank lines only if blank=true
      only_kw("indent", kw, {"width", "first", "blank"});
      const std::string ind = indent_text(arg(a, kw, 0, "width", Value::integer(4)));
      const bool first = truthy(arg(a, kw, 1, "first", Value::boolean(false))), blank = truthy(arg(a, kw, 2, "blank", Value::boolean(false)));
      const std::vector<std::string> lines = split_lines(to_text(v) + "\n");
      for (size_t i = 0; i < lines.size(); i++) {
        if (i) r += "\n";
        if (i == 0 ? first : blank || !lines[i].empty()) r += ind;
        r += lines[i];
        if (r.size() > kMaxOutput) too_much("a string grows too long");
      }
      charge(r.size());
      return Value::str(std::move(r));
    }
    if (f == "unique") {  // first of each, strings compared case-blind unless case_sensitive=true
      only_kw("unique", kw, {"case_sensitive", "attribute"});
      const bool cs = truthy(arg(a, kw, 0, "case_sensitive", Value::boolean(false)));
      const Value attr = arg(a, kw, 1, "attribute");
      const List items = items_of(v, "unique");
      const std::string name = attr.defined() && attr.k != Value::K::None ? to_text(attr) : std::string();
      auto key = [&](const Value& x) {
        Value k = name.empty() ? x : attribute(x, name);
        if (!cs && k.k == Value::K::Str) k.s = lower(k.s);
        return k;
      };
      List out, seen;
      for (const Value& x : items) {
        const Value k = key(x);
        bool dup = false;
        for (const Value& y : seen) {
          charge(8);
          if (equal(k, y)) { dup = true; break; }
        }
        if (!dup) seen.push_back(k), out.push_back(x);
      }
      return lazy(Value::list(std::move(out)));
    }
    if (f == "list") return Value::list(items_of(v, "list"));
    if (f == "reverse") {
      if (v.k == Value::K::Str) {
        const std::vector<std::string> cs = chars(v.s);
        for (auto it = cs.rbegin(); it != cs.rend(); ++it) r += *it;
        return Value::str(std::move(r));
      }
      if (v.k == Value::K::List) return lazy(Value::list(List(v.l->rbegin(), v.l->rend())));
      bad_template("reverse of " + brief(v));
    }
    if (f == "replace" && a.size() >= 2) {
      const int64_t count = a.size() > 2 ? as_int(a[2], "replace") : -1;
      return Value::str(replace_all(to_text(v), as_str(a[0], "replace"), as_str(a[1], "replace"), count));
    }
    if (f == "select" || f == "reject" || f == "selectattr" || f == "rejectattr")
      return lazy(select(v, a, f.size() > 6, f[0] == 's'));
    if (f == "map") {
      const List items = items_of(v, "map");
      List l;
      const Value at = arg({}, kw, 9, "attribute");
      if (at.defined()) {
        const Value dflt = arg({}, kw, 9, "default");
        const std::string name = to_text(at);
        for (const Value& item : items) {
          const Value x = attribute(item, name);
          l.push_back(x.defined() ? x : dflt);
        }
      } else {
        if (a.empty()) bad_template("map needs a filter name or attribute=");
        const std::string g = as_str(a[0], "map");
        const std::vector<Value> rest(a.begin() + 1, a.end());
        for (const Value& item : items) l.push_back(apply_filter(g, item, rest, kw));
      }
      return lazy(Value::list(std::move(l)));
    }
    if (f == "items") {
      List l;
      if (v.k == Value::K::Dict) for (const auto& kv : *v.d) l.push_back(pair(key_value(kv), kv.second));
      else if (v.defined()) bad_template("items of " + brief(v));
      return lazy(Value::list(std::move(l)));
    }
    if (f == "dictsort") {  // (key, value) pairs, by key (or by='value'), case-blind unless case_sensitive
      only_kw("dictsort", kw, {"case_sensitive", "by", "reverse"});
      if (v.k != Value::K::Dict) bad_template("dictsort of " + brief(v));
      const bool cs = truthy(arg(a, kw, 0, "case_sensitive", Value::boolean(false)));
      const std::string by = to_text(arg(a, kw, 1, "by", Value::str("key")));
      if (by != "key" && by != "value") bad_template("dictsort can only sort by 'key' or 'value'");
      const bool rev = truthy(arg(a, kw, 2, "reverse", Value::boolean(false)));
      List l;
      for (const auto& kv : *v.d) l.push_back(pair(key_value(kv), kv.second));
      const size_t at = by == "key" ? 0 : 1;
      std::stable_sort(l.begin(), l.end(), [&](const Value& x, const Value& y) {
        return rev ? sort_less((*y.l)[at], (*x.l)[at], cs) : sort_less((*x.l)[at], (*y.l)[at], cs);
      });
      return Value::list(std::move(l));
    }
    if (f == "sort") {
      only_kw("sort", kw, {"reverse", "case_sensitive", "attribute"});
      const bool rev = truthy(arg(a, kw, 0, "reverse", Value::boolean(false)));
      const bool cs = truthy(arg(a, kw, 1, "case_sensitive", Value::boolean(false)));
      const Value at = arg(a, kw, 2, "attribute");
      const std::string name = at.defined() && at.k != Value::K::None ? to_text(at) : std::string();
      List l = items_of(v, "sort");
      std::stable_sort(l.begin(), l.end(), [&](const Value& x, const Value& y) {
        const Value kx = name.empty() ? x : attribute(x, name), ky = name.empty() ? y : attribute(y, name);
        return rev ? sort_less(ky, kx, cs) : sort_less(kx, ky, cs);
      });
      return Value::list(std::move(l));
    }
    if (f == "min" || f == "max") {
      only_kw(f.c_str(), kw, {"case_sensitive", "attribute"});
      const bool cs = truthy(arg(a, kw, 0, "case_sensitive", Value::boolean(false)));
      const Value at = arg(a, kw, 1, "attribute");
      const std::string name = at.defined() && at.k != Value::K::None ? to_text(at) : std::string();
      const List l = items_of(v, f.c_str());
      if (l.empty()) return Value();
      size_t best = 0;
      for (size_t i = 1; i < l.size(); i++) {
        const Value x = name.empty() ? l[i] : attribute(l[i], name), b = name.empty() ? l[best] : attribute(l[best], name);
        if (f == "min" ? sort_less(x, b, cs) : sort_less(b, x, cs)) best = i;
      }
      return l[best];
    }
    if (f == "sum") {
      only_kw("sum", kw, {"attribute", "start"});
      const Value at = arg(a, kw, 0, "attribute");
      Value total = arg(a, kw, 1, "start", Value::integer(0));
      for (const Value& x : items_of(v, "sum")) total = arith("+", total, at.defined() && at.k != Value::K::None ? attribute(x, to_text(at)) : x);
      return total;
    }
    if (f == "center") {
      const std::string s = to_text(v);
      const int64_t w = as_int(arg(a, kw, 0, "width", Value::integer(80)), "center");
      if (w > 10000) too_much("center's width is more than 10000");
      const int64_t n = code_points(s);
      if (w <= n) return Value::str(s);
      const int64_t pad = w - n, left = pad / 2 + (pad & w & 1);  // Python's str.center
      return Value::str(std::string((size_t)left, ' ') + s + std::string((size_t)(pad - left), ' '));
    }
    if (f == "wordcount") {  // runs of word characters (\w): letters, digits, _; symbols, punctuation and emoji end a word
      const std::string t = to_text(v);
      int64_t n = 0;
      bool in = false;
      for (size_t i = 0; i < t.size();) {
        const size_t len = utf8_len(t, i);
        uint32_t cp = (unsigned char)t[i];
        if (len > 1) {
          cp &= 0xff >> (len + 1);
          for (size_t k = 1; k < len; k++) cp = cp << 6 | ((unsigned char)t[i + k] & 0x3f);
        }
        const bool w = cp < 0x80 ? (std::isalnum((int)cp) || cp == '_')
                                 : !((cp >= 0x80 && cp <= 0xbf && cp != 0xaa && cp != 0xb5 && cp != 0xba) || cp == 0xd7 || cp == 0xf7 ||
                                     (cp >= 0x2000 && cp <= 0x2bff) || (cp >= 0x3000 && cp <= 0x303f) || (cp >= 0x1f000 && cp <= 0x1faff) ||
                                     (cp >= 0xfe00 && cp <= 0xfe0f));
        n += w && !in;
        in = w;
        i += len;
      }
      charge(t.size());
      return Value::integer(n);
    }
    if (f == "batch") {
      const int64_t n = as_int(arg(a, kw, 0, "linecount"), "batch");
      if (n <= 0) bad_template("batch needs a positive count");
      const Value fill = arg(a, kw, 1, "fill_with");
      List out, cur;
      for (const Value& x : items_of(v, "batch")) {
        cur.push_back(x);
        if ((int64_t)cur.size() == n) out.push_back(Value::list(std::move(cur))), cur.clear();
      }
      if (!cur.empty()) {
        if (fill.defined()) while ((int64_t)cur.size() < n) cur.push_back(fill);
        out.push_back(Value::list(std::move(cur)));
      }
      return lazy(Value::list(std::move(out)));
    }
    if (f == "attr") {
      const Value* p = v.get(as_str(arg(a, kw, 0, "name"), "attr"));
      return p ? *p : Value();
    }
    unsupported("the filter '" + f + "'");
  }

  bool test(const Expr& e) { return test_value(e.name, eval(*e.a[0]), args(e)); }
  bool test_value(const std::string& t, const Value& v, const std::vector<Value>& a) {
    if (t == "defined" || t == "undefined") return v.defined() == (t == "defined");
    if (t == "none") return v.k == Value::K::None;
    if (t == "string") return v.k == Value::K::Str;
    if (t == "number") return v.k == Value::K::Int || v.k == Value::K::Float;
    if (t == "integer") return v.k == Value::K::Int;
    if (t == "float") return v.k == Value::K::Float;
    if (t == "boolean") return v.k == Value::K::Bool;
    if (t == "true") return v.k == Value::K::Bool && v.b;
    if (t == "false") return v.k == Value::K::Bool && !v.b;
    if (t == "mapping") return v.k == Value::K::Dict;
    if (t == "iterable") return v.k == Value::K::List || v.k == Value::K::Dict || v.k == Value::K::Str;
    if (t == "sequence") return (v.k == Value::K::List && !v.lazy) || v.k == Value::K::Str;
    if (t == "callable") return v.k == Value::K::Func;
    if (t == "odd" || t == "even") return (as_int(v, t.c_str()) % 2 != 0) == (t == "odd");
    if ((t == "eq" || t == "equalto" || t == "==" || t == "sameas") && a.size() == 1) return equal(v, a[0]);
    if ((t == "ne" || t == "!=") && a.size() == 1) return !equal(v, a[0]);
    if (t == "in" && a.size() == 1) return contains(a[0], v);
    unsupported("the test '" + t + "'");
  }
  // select / reject / selectattr / rejectattr: the items (or their attribute) that pass a test
  // (or are truthy, without one).
  Value select(const Value& v, const std::vector<Value>& a, bool attr, bool keep) {
    if (!truthy(v)) return Value::list();  // Jinja2 tests the sequence first: none, undefined and empty ones give nothing
    const List items = items_of(v, "select");
    size_t i = 0;
    std::string name;
    if (attr) {
      if (a.empty()) bad_template("selectattr needs an attribute name");
      name = as_str(a[0], "selectattr");
      i = 1;
    }
    const std::string t = a.size() > i ? as_str(a[i], "select") : std::string();
    const std::vector<Value> rest(a.begin() + (long)std::min(a.size(), i + 1), a.end());
    List out;
    for (const Value& item : items) {
      tick();
      const Value x = attr ? attribute(item, name) : item;
      if ((t.empty() ? truthy(x) : test_value(t, x, rest)) == keep) out.push_back(item);
    }
    return Value::list(std::move(out));
  }

  Value index(const Expr& e) {
    const Value o = eval(*e.a[0]);
    const Value k = eval(*e.a[1]);
    if (o.lazy) return Value();  // a generator has no items by index
    if (o.k == Value::K::Dict) {
      const Value* v = o.get(k);
      return v ? *v : Value();
    }
    if (o.k == Value::K::List || o.k == Value::K::Str) {
      if (!k.number()) return Value();
      const std::vector<size_t> at = o.k == Value::K::Str ? char_starts(o.s) : std::vector<size_t>();
      const int64_t n = o.k == Value::K::List ? (int64_t)o.l->size() : at.empty() ? (int64_t)o.s.size() : (int64_t)at.size() - 1;
      int64_t i = as_int(k, "an index");
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value();
      return o.k == Value::K::List ? (*o.l)[(size_t)i] : Value::str(char_at(o.s, at, i));
    }
    return Value();
  }

  // Where each character (code point) of s starts, and s.size() at the end, as Python indexes a
  // str; empty for ASCII text, whose characters are its bytes.
  static std::vector<size_t> char_starts(const std::string& s) {
    std::vector<size_t> at;
    bool ascii = true;
    for (const char c : s) ascii = ascii && (unsigned char)c < 0x80;
    charge(s.size());
    if (ascii) return at;
    for (size_t i = 0; i < s.size(); i += utf8_len(s, i)) at.push_back(i);
    at.push_back(s.size());
    return at;
  }
  // Character k of s (0 <= k < its length), given char_starts(s).
  static std::string char_at(const std::string& s, const std::vector<size_t>& at, int64_t k) {
    if (at.empty()) return std::string(1, s[(size_t)k]);
    return s.substr(at[(size_t)k], at[(size_t)k + 1] - at[(size_t)k]);
  }

  Value slice(const Expr& e) {
    const Value o = eval(*e.a[0]);
    if (o.lazy) return Value();
    if (o.k != Value::K::List && o.k != Value::K::Str) bad_template("slicing " + brief(o));
    const std::vector<size_t> at = o.k == Value::K::Str ? char_starts(o.s) : std::vector<size_t>();
    const int64_t n = o.k == Value::K::List ? (int64_t)o.l->size() : at.empty() ? (int64_t)o.s.size() : (int64_t)at.size() - 1;
    const int64_t step = e.a[3] ? as_int(eval(*e.a[3]), "a slice step") : 1;
    if (step == 0) bad_template("a slice step of 0");
    auto bound = [&](const ExprP& x, int64_t dflt) {
      if (!x) return dflt;
      const Value v = eval(*x);
      if (v.k == Value::K::None) return dflt;
      int64_t i = as_int(v, "a slice bound");
      if (i < 0) i += n;
      return step > 0 ? std::min(std::max<int64_t>(i, 0), n) : std::min(std::max<int64_t>(i, -1), n - 1);
    };
    const int64_t lo = bound(e.a[1], step > 0 ? 0 : n - 1), hi = bound(e.a[2], step > 0 ? n : -1);
    List l;
    std::string s;
    for (int64_t i = lo; step > 0 ? i < hi : i > hi;) {
      if (o.k == Value::K::List) l.push_back((*o.l)[(size_t)i]);
      else if (at.empty()) s += o.s[(size_t)i];
      else s.append(o.s, at[(size_t)i], at[(size_t)i + 1] - at[(size_t)i]);
      if (__builtin_add_overflow(i, step, &i)) break;  // past either end
    }
    if (o.k == Value::K::List) {
      Value r = Value::list(std::move(l));
      r.tuple = o.tuple;
      return r;
    }
    return Value::str(std::move(s));
  }

  Value eval(const Expr& e) {
    Nest guard(this);
    tick();
    switch (e.t) {
      case Expr::T::Lit: return read(e.lit);
      // Values are copied out (strings by value): what a copy costs is charged.
      case Expr::T::Var: return read(lookup(e.name));
      case Expr::T::Attr: {
        const Value o = eval(*e.a[0]);
        const Value* v = o.get(e.name);
        return v ? read(*v) : Value();
      }
      case Expr::T::Index: return read(index(e));
      case Expr::T::Call: return made(call(e));
      case Expr::T::Slice: return made(slice(e));
      case Expr::T::Filter: return made(filter(e));
      case Expr::T::Test: return Value::boolean(test(e) != e.negate);
      case Expr::T::Neg: {
        const Value v = eval(*e.a[0]);
        if (v.k == Value::K::Int) {
          if (v.i == INT64_MIN) bad_template("integer overflow in -(" + std::to_string(v.i) + ")");
          return Value::integer(-v.i);
        }
        if (v.number()) return Value::real(-v.num());
        bad_template("cannot negate " + brief(v));
      }
      case Expr::T::Not: return Value::boolean(!truthy(eval(*e.a[0])));
      case Expr::T::Cond: return truthy(eval(*e.a[0])) ? eval(*e.a[1]) : eval(*e.a[2]);
      case Expr::T::ListLit: {
        List l;
        for (const auto& x : e.a) l.push_back(eval(*x));
        Value v = Value::list(std::move(l));
        v.tuple = e.negate;
        return v;
      }
      case Expr::T::DictLit: {
        Value d = Value::dict();
        for (size_t i = 0; i + 1 < e.a.size(); i += 2) {
          const Value k = eval(*e.a[i]);
          if (k.k == Value::K::Int || k.k == Value::K::Bool) d.put(std::to_string(k.k == Value::K::Int ? k.i : (int64_t)k.b), eval(*e.a[i + 1]), true);
          else d.put(as_str(k, "a dict key"), eval(*e.a[i + 1]));
        }
        return d;
      }
      case Expr::T::Bin: {
        const std::string& op = e.name;
        if (op == "and") {
          Value l = eval(*e.a[0]);
          return truthy(l) ? eval(*e.a[1]) : l;
        }
        if (op == "or") {
          Value l = eval(*e.a[0]);
          return truthy(l) ? l : eval(*e.a[1]);
        }
        const Value l = eval(*e.a[0]), r = eval(*e.a[1]);
        if (op == "~") {
          const std::string s = to_text(l) + to_text(r);
          if (s.size() > kMaxOutput) too_much("a string grows too long");
          return made(Value::str(s));
        }
        if (op == "==") return Value::boolean(equal(l, r));
        if (op == "!=") return Value::boolean(!equal(l, r));
        if (op == "<") return Value::boolean(less(l, r));
        if (op == ">") return Value::boolean(less(r, l));
        if (op == "<=") return Value::boolean(!less(r, l));
        if (op == ">=") return Value::boolean(!less(l, r));
        if (op == "in") return Value::boolean(contains(r, l));
        if (op == "not in") return Value::boolean(!contains(r, l));
        return made(arith(op, l, r));
      }
    }
    return Value();
  }

  std::vector<std::map<std::string, Value>> scopes_;
  std::vector<Frame*> frames_;  // macro calls in progress, innermost last
  Stmt::T jump_ = Stmt::T::Text;  // Break or Continue while one unwinds to its loop, else Text
  uint64_t frame_serial_ = 0;
  int nest_ = 0;
  std::string out_;
};

// ---- JSON in (template variables, message fields) -----------------------------------------

class JsonReader {
 public:
  JsonReader(const std::string& s, const char* what) : s_(s), what_(what) {}
  Value document() {
    Value v = value(0);
    space();
    if (i_ != s_.size()) bad("text after the value");
    return v;
  }

 private:
  [[noreturn]] void bad(const std::string& why) const {
    fail(ErrorCode::BadArgument, std::string(what_) + ": invalid JSON at byte " + std::to_string(i_) + " (" + why + ")");
  }
  void space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) i_++;
  }
  bool lit(const char* w) {
    const size_t n = std::strlen(w);
    if (s_.compare(i_, n, w) != 0) return false;
    i_ += n;
    return true;
  }
  unsigned hex4() {
    if (i_ + 4 > s_.size()) bad("a truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
      const char c = s_[i_++];
      const int h = hex_digit(c);
      if (h < 0) bad("a bad \\u escape");
      v = v * 16 + (unsigned)h;
    }
    return v;
  }
  std::string str() {
    std::string o;
    i_++;  // the opening quote
    for (;;) {
      if (i_ >= s_.size()) bad("an unterminated string");
      const char c = s_[i_++];
      if (c == '"') return o;
      if ((unsigned char)c < 0x20) bad("a control character in a string");
      if (c != '\\') {
        o += c;
        continue;
      }
      if (i_ >= s_.size()) bad("an unterminated string");
      const char e = s_[i_++];
      switch (e) {
        case '"': case '\\': case '/': o += e; break;
        case 'b': o += '\b'; break;
        case 'f': o += '\f'; break;
        case 'n': o += '\n'; break;
        case 'r': o += '\r'; break;
        case 't': o += '\t'; break;
        case 'u': {
          uint32_t cp = hex4();
          // A surrogate pair is one character; a lone surrogate (JSON.stringify writes them
          // escaped) becomes U+FFFD, as qkv's JS layer treats them in message text.
          if (cp >= 0xd800 && cp < 0xdc00) {
            const size_t at = i_;
            unsigned lo = 0;
            if (lit("\\u")) lo = hex4();
            if (lo >= 0xdc00 && lo < 0xe000) {
              cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else {
              i_ = at;
              cp = 0xfffd;
            }
          } else if (cp >= 0xdc00 && cp < 0xe000) {
            cp = 0xfffd;
          }
          append_utf8(o, cp);
          break;
        }
        default: bad(std::string("the escape \\") + e);
      }
    }
  }
  Value value(int depth) {
    if (depth > kMaxValueDepth) bad("nested too deeply");
    space();
    if (i_ >= s_.size()) bad("the end of the text where a value should be");
    const char c = s_[i_];
    if (c == '"') return Value::str(str());
    if (lit("true")) return Value::boolean(true);
    if (lit("false")) return Value::boolean(false);
    if (lit("null")) return Value::none();
    if (c == '[') {
      i_++;
      List l;
      space();
      if (i_ < s_.size() && s_[i_] == ']') return i_++, Value::list(std::move(l));
      for (;;) {
        l.push_back(value(depth + 1));
        space();
        if (i_ < s_.size() && s_[i_] == ',') { i_++; continue; }
        if (i_ < s_.size() && s_[i_] == ']') { i_++; return Value::list(std::move(l)); }
        bad("expected ',' or ']'");
      }
    }
    if (c == '{') {
      i_++;
      Dict d;
      std::map<std::string, size_t> at;  // a repeated key keeps its place and takes the last value, as Python's json
      space();
      if (i_ < s_.size() && s_[i_] == '}') return i_++, Value::dict();
      for (;;) {
        space();
        if (i_ >= s_.size() || s_[i_] != '"') bad("expected a key");
        std::string k = str();
        space();
        if (i_ >= s_.size() || s_[i_] != ':') bad("expected ':'");
        i_++;
        Value v = value(depth + 1);
        const auto f = at.find(k);
        if (f != at.end()) {
          d[f->second].second = std::move(v);
        } else {
          at.emplace(k, d.size());
          d.emplace_back(std::move(k), std::move(v));
        }
        space();
        if (i_ < s_.size() && s_[i_] == ',') { i_++; continue; }
        if (i_ < s_.size() && s_[i_] == '}') { i_++; return Value::dict(std::move(d)); }
        bad("expected ',' or '}'");
      }
    }
    if (c == '-' || std::isdigit((unsigned char)c)) {
      const size_t b = i_;
      if (s_[i_] == '-') i_++;
      bool real = false;
      while (i_ < s_.size() && (std::isdigit((unsigned char)s_[i_]) || s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E' ||
                                ((s_[i_] == '+' || s_[i_] == '-') && (s_[i_ - 1] == 'e' || s_[i_ - 1] == 'E')))) {
        real = real || !std::isdigit((unsigned char)s_[i_]);
        i_++;
      }
      const std::string t = s_.substr(b, i_ - b);
      char* end = nullptr;
      if (!real) {
        errno = 0;
        const long long v = std::strtoll(t.c_str(), &end, 10);
        if (errno == 0 && end && *end == 0) return Value::integer(v);
      }
      const double f = std::strtod(t.c_str(), &end);
      if (!end || *end != 0 || t == "-") bad("a malformed number");
      return Value::real(f);
    }
    bad(std::string("an unexpected character '") + c + "'");
  }

  const std::string& s_;
  const char* what_;
  size_t i_ = 0;
};

}  // namespace

std::string render_jinja_chat(const std::string& tmpl, const JinjaChatInput& in) {
  g_work = 0;
  // Jinja drops one newline at the very end of a template (keep_trailing_newline is off).
  size_t n = tmpl.size();
  if (n > 0 && tmpl[n - 1] == '\n') n -= n > 1 && tmpl[n - 2] == '\r' ? 2 : 1;
  const Body tree = TreeBuilder(cut(tmpl.substr(0, n))).build();
  List msgs;
  for (size_t i = 0; i < in.messages.size(); i++) {
    const JinjaMessage& m = in.messages[i];
    Value d = Value::dict({{"role", Value::str(m.role)}, {"content", Value::str(m.content)}});
    if (!m.fields_json.empty()) {  // tool_calls, name, reasoning_content, ...
      const std::string what = "chat message " + std::to_string(i);
      const Value f = JsonReader(m.fields_json, what.c_str()).document();
      if (f.k != Value::K::Dict) fail(ErrorCode::BadArgument, what + ": its fields must be a JSON object");
      for (const auto& kv : *f.d) {
        if (kv.first == "role" || kv.first == "content") fail(ErrorCode::BadArgument, what + ": role and content are not extra fields");
        d.put(kv.first, kv.second);
      }
    }
    msgs.push_back(std::move(d));
  }
  std::map<std::string, Value> g;
  g["messages"] = Value::list(std::move(msgs));
  g["add_generation_prompt"] = Value::boolean(in.add_generation_prompt);
  g["bos_token"] = Value::str(in.bos_token);
  g["eos_token"] = Value::str(in.eos_token);
  for (const char* f : {"raise_exception", "namespace", "range", "strftime_now", "dict"}) g[f] = Value::func(f);
  if (!in.vars_json.empty()) {  // tools, enable_thinking, documents, ...
    const Value vars = JsonReader(in.vars_json, "chat template variables").document();
    if (vars.k != Value::K::Dict) fail(ErrorCode::BadArgument, "chat template variables must be a JSON object");
    for (const auto& kv : *vars.d) {
      if (g.count(kv.first))
        fail(ErrorCode::BadArgument, "chat template variable '" + kv.first + "' is set by qkv itself (messages, add_generation_prompt, bos_token, eos_token and the functions)");
      g[kv.first] = kv.second;
    }
  }
  Renderer r(std::move(g));
  r.run(tree);
  return std::move(r.out());
}

}  // namespace qkv
