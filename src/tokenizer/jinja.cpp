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

constexpr size_t kMaxOutput = 16u << 20;    // bytes of rendered text (and of any one string)
constexpr uint64_t kMaxWork = 1u << 28;      // evaluated nodes x 64 + bytes of strings and list items made
constexpr int kMaxDepth = 64;                // nesting of expressions and of blocks
constexpr int kMaxValueDepth = 64;           // lists and dicts inside one another
constexpr int kMaxRenderDepth = 256;         // statements and expressions being evaluated at once (macros recurse)

[[noreturn]] void unsupported(const std::string& what) {
  fail(ErrorCode::Unsupported, "chat template: " + what);
}

// ---- values --------------------------------------------------------------------------------

struct Value;
struct Stmt;
struct Closure;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion order, as Python's dict

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
  static Value dict(Dict x = {}) {
    Value v;
    v.k = K::Dict;
    v.depth = 1;
    for (const auto& kv : x) v.hold(kv.second);
    v.d = std::make_shared<Dict>(std::move(x));
    return v;
  }
  static Value func(std::string name, const Stmt* macro = nullptr) { Value v; v.k = K::Func; v.s = std::move(name); v.macro = macro; return v; }

  bool defined() const { return k != K::Undef; }
  bool number() const { return k == K::Int || k == K::Float || k == K::Bool; }
  double num() const { return k == K::Float ? f : k == K::Bool ? (double)b : (double)i; }
  const Value* get(const std::string& key) const {
    if (k != K::Dict) return nullptr;
    for (const auto& kv : *d)
      if (kv.first == key) return &kv.second;
    return nullptr;
  }
  // Notes that this list or dict holds c.
  void hold(const Value& c) {
    if (c.depth + 1 > depth) depth = c.depth + 1;
    if (depth > kMaxValueDepth) fail(ErrorCode::BadArgument, "chat template: lists or dicts nested too deeply");
    has_ns = has_ns || c.has_ns;
  }
  void put(const std::string& key, Value v) {
    hold(v);
    for (auto& kv : *d)
      if (kv.first == key) { kv.second = std::move(v); return; }
    d->emplace_back(key, std::move(v));
  }
};

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
    case Value::K::List: return !v.l->empty();
    case Value::K::Dict: return !v.d->empty();
    case Value::K::Func: return true;
  }
  return false;
}

std::string json_quote(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\r': o += "\\r"; break;
      case '\t': o += "\\t"; break;
      case '\b': o += "\\b"; break;
      case '\f': o += "\\f"; break;
      default:
        if (c < 0x20) {
          char b[8];
          snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += (char)c;
        }
    }
  }
  return o + "\"";
}

std::string float_text(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
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

std::string repr(const Value& v, bool json);

// What {{ v }} prints (Python's str()).
std::string to_text(const Value& v) {
  switch (v.k) {
    case Value::K::Undef: return "";
    case Value::K::None: return "None";
    case Value::K::Bool: return v.b ? "True" : "False";
    case Value::K::Int: return std::to_string(v.i);
    case Value::K::Float: return float_text(v.f);
    case Value::K::Str: return v.s;
    default: return repr(v, false);
  }
}

// Python's repr() (json = false) or json.dumps (json = true) of a value.
std::string repr(const Value& v, bool json) {
  switch (v.k) {
    case Value::K::Undef: case Value::K::None: return json ? "null" : "None";
    case Value::K::Bool: return json ? (v.b ? "true" : "false") : (v.b ? "True" : "False");
    case Value::K::Str: {
      if (json) return json_quote(v.s);
      const char q = v.s.find('\'') != std::string::npos && v.s.find('"') == std::string::npos ? '"' : '\'';
      std::string o(1, q);
      for (char c : v.s) {
        if (c == q || c == '\\') o += '\\';
        if (c == '\n') { o += "\\n"; continue; }
        o += c;
      }
      return o + q;
    }
    case Value::K::List: {
      std::string o = "[";
      for (size_t i = 0; i < v.l->size(); i++) o += (i ? ", " : "") + repr((*v.l)[i], json);
      return o + "]";
    }
    case Value::K::Dict: {
      std::string o = "{";
      bool first = true;
      for (const auto& kv : *v.d) {
        o += (first ? "" : ", ") + repr(Value::str(kv.first), json) + ": " + repr(kv.second, json);
        first = false;
      }
      return o + "}";
    }
    case Value::K::Func: return v.macro ? "<Macro '" + v.s + "'>" : "<function " + v.s + ">";
    default: return to_text(v);
  }
}

// json.dumps(v, indent=..., sort_keys=...) as Hugging Face's tojson calls it (ensure_ascii off):
// with an indent, each item on its own line under `ind` per level and ',' / ': ' separators;
// without, one line with ', ' / ': '.
std::string json_dump(const Value& v, bool pretty, const std::string& ind, bool sort, int level) {
  const bool list = v.k == Value::K::List, dict = v.k == Value::K::Dict;
  if ((!list && !dict) || (list ? v.l->empty() : v.d->empty())) return repr(v, true);
  std::vector<std::pair<std::string, const Value*>> items;  // (key, value); keys sort as they are, then are quoted
  if (list) for (const Value& x : *v.l) items.emplace_back(std::string(), &x);
  else for (const auto& kv : *v.d) items.emplace_back(kv.first, &kv.second);
  if (dict && sort) std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string inner;
  if (pretty) for (int i = 0; i <= level; i++) inner += ind;
  std::string o(1, list ? '[' : '{');
  for (size_t i = 0; i < items.size(); i++) {
    o += i ? (pretty ? ",\n" : ", ") : (pretty ? "\n" : "");
    o += inner;
    if (dict) o += json_quote(items[i].first) + ": ";
    o += json_dump(*items[i].second, pretty, ind, sort, level + 1);
    if (o.size() > kMaxOutput) fail(ErrorCode::BadArgument, "chat template: a string grows too long");
  }
  if (pretty) {
    o += "\n";
    for (int i = 0; i < level; i++) o += ind;
  }
  return o + (list ? ']' : '}');
}

// A value as error messages quote it: its repr, cut to 60 bytes.
std::string brief(const Value& v) {
  std::string r = repr(v, false);
  if (r.size() > 60) r = r.substr(0, 57) + "...";
  return r;
}

bool equal(const Value& a, const Value& b) {
  if (a.number() && b.number()) return a.num() == b.num();
  if (a.k != b.k) return false;
  switch (a.k) {
    case Value::K::Undef: case Value::K::None: return true;
    case Value::K::Str: return a.s == b.s;
    case Value::K::Func: return a.s == b.s && a.macro == b.macro;
    case Value::K::List:
      if (a.l->size() != b.l->size()) return false;
      for (size_t i = 0; i < a.l->size(); i++)
        if (!equal((*a.l)[i], (*b.l)[i])) return false;
      return true;
    case Value::K::Dict:
      if (a.d->size() != b.d->size()) return false;
      for (const auto& kv : *a.d) {
        const Value* o = b.get(kv.first);
        if (!o || !equal(kv.second, *o)) return false;
      }
      return true;
    default: return false;
  }
}

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
    if (end == std::string::npos) fail(ErrorCode::BadArgument, "chat template: a tag opened at offset " + std::to_string(open) + " is never closed");
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
    if (h < 0) fail(ErrorCode::BadArgument, std::string("chat template: a truncated \\") + e + " escape in a string literal");
    cp = cp * 16 + (uint32_t)h;
  }
  if (cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) fail(ErrorCode::BadArgument, "chat template: an escape outside Unicode's scalar values");
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
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit((unsigned char)s[j + 1])) {
        j++;
        while (j < s.size() && std::isdigit((unsigned char)s[j])) j++;
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
      if (j >= s.size()) fail(ErrorCode::BadArgument, "chat template: unterminated string literal");
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
      if (!found) fail(ErrorCode::BadArgument, std::string("chat template: unexpected character '") + c + "'");
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
  bool negate = false;  // Test: 'is not'
};

// Nodes made by the parser of the current tag: a tag's expression tree is bounded (a chain like
// 1+1+1+... or a.b.c... grows it without nesting, and trees are freed and walked recursively).
constexpr int kMaxTagNodes = 4096;
thread_local int g_tag_nodes = 0;

ExprP node(Expr::T t) {
  if (++g_tag_nodes > kMaxTagNodes) fail(ErrorCode::BadArgument, "chat template: an expression of more than 4096 parts");
  ExprP e(new Expr);
  e->t = t;
  return e;
}

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
      c->a.push_back(std::move(cond));
      c->a.push_back(std::move(e));
      c->a.push_back(std::move(other));
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

 private:
  struct Depth {
    explicit Depth(Parser* p) : p(p) {
      if (++p->depth_ > kMaxDepth) fail(ErrorCode::BadArgument, "chat template: expressions nested too deeply");
    }
    ~Depth() { p->depth_--; }
    Parser* p;
  };
  [[noreturn]] void bad(const std::string& want) const {
    const Tok& t = toks_[p_];
    fail(ErrorCode::BadArgument, "chat template: expected " + want + ", found " + (t.t == Tok::T::End ? "the end" : "'" + t.s + "'"));
  }
  static ExprP bin(const char* op, ExprP l, ExprP r) {
    ExprP e = node(Expr::T::Bin);
    e->name = op;
    e->a.push_back(std::move(l));
    e->a.push_back(std::move(r));
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
      e->a.push_back(not_expr());
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
  ExprP unary() {
    if (accept_op("-")) {
      Depth d(this);
      ExprP e = node(Expr::T::Neg);
      e->a.push_back(unary());
      return e;
    }
    if (accept_op("+")) return unary();
    return filtered(postfix(primary()));
  }
  void call_args(Expr* e) {
    if (accept_op(")")) return;
    do {
      if (toks_[p_].t == Tok::T::Name && toks_[p_ + 1].t == Tok::T::Op && toks_[p_ + 1].s == "=") {
        std::string k = name();
        p_++;
        e->kw.emplace_back(std::move(k), expr());
      } else {
        e->a.push_back(expr());
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
          c->a.push_back(std::move(e));
          call_args(c.get());
          e = std::move(c);
        } else {
          ExprP a = node(Expr::T::Attr);
          a->name = n;
          a->a.push_back(std::move(e));
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
        s->a.push_back(std::move(e));
        s->a.push_back(std::move(lo));
        if (slice) {
          s->a.push_back(std::move(hi));
          s->a.push_back(std::move(step));
        }
        e = std::move(s);
      } else if (accept_op("(")) {
        if (e->t != Expr::T::Var) unsupported("only named functions can be called");
        ExprP c = node(Expr::T::Call);
        c->name = e->name;
        c->a.push_back(nullptr);
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
        f->a.push_back(std::move(e));
        if (accept_op("(")) call_args(f.get());
        e = std::move(f);
      } else if (is_name("is")) {
        p_++;
        ExprP t = node(Expr::T::Test);
        t->negate = accept_name("not");
        t->name = name();
        t->a.push_back(std::move(e));
        if (accept_op("(")) {
          call_args(t.get());
        } else if (toks_[p_].t == Tok::T::Str || toks_[p_].t == Tok::T::Int || toks_[p_].t == Tok::T::Float) {
          t->a.push_back(primary());  // 'is eq 3', 'is divisibleby 2'
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
      e->a.push_back(expr());
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
      if (accept_op(")")) return node(Expr::T::ListLit);  // () : an empty tuple
      ExprP e = expr();
      if (!accept_op(",")) {
        expect_op(")");
        return e;
      }
      ExprP t = node(Expr::T::ListLit);  // a tuple, held as a list (what loops, 'in' and filters see is the same)
      t->a.push_back(std::move(e));
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
          e->a.push_back(expr());
          expect_op(":");
          e->a.push_back(expr());
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
  enum class T { Text, Out, If, For, Set, SetBlock, Macro, CallBlock, Break, Continue } t;
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
    if (i_ < ps_.size()) fail(ErrorCode::BadArgument, "chat template: '" + head(ps_[i_].body) + "' without its opening tag");
    return b;
  }

 private:
  static std::string head(const std::string& body) {
    Parser p(body);
    return p.at_end() ? std::string() : p.name();
  }
  // Statements up to one whose keyword is in `ends` (left unconsumed).
  Body block(std::initializer_list<const char*> ends) {
    if (++depth_ > kMaxDepth) fail(ErrorCode::BadArgument, "chat template: blocks nested too deeply");
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
        if (s->e->t != Expr::T::Call || s->e->a[0]) fail(ErrorCode::BadArgument, "chat template: {% call %} needs a macro call");
        p.expect_end();
        const int loops = loops_;
        loops_ = 0;
        s->body = closed_block("endcall", "{% call %}");
        loops_ = loops;
        s->varargs = mentions(s->body, "varargs");
        s->kwargs = mentions(s->body, "kwargs");
        out.push_back(std::move(s));
      } else if (kw == "break" || kw == "continue") {  // Hugging Face enables Jinja's loop controls
        if (loops_ == 0) fail(ErrorCode::BadArgument, "chat template: {% " + kw + " %} outside a loop");
        p.expect_end();
        auto s = std::make_unique<Stmt>();
        s->t = kw == "break" ? Stmt::T::Break : Stmt::T::Continue;
        out.push_back(std::move(s));
      } else if (kw == "generation" || kw == "endgeneration") {
        // Hugging Face's marker of assistant text: renders nothing.
      } else if (kw == "if" || kw == "elif" || kw == "else" || kw == "endif" || kw == "endfor" || kw == "endset" ||
                 kw == "endmacro" || kw == "endcall") {
        fail(ErrorCode::BadArgument, "chat template: '" + kw + "' without its opening tag");
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
    if (i_ >= ps_.size()) fail(ErrorCode::BadArgument, std::string("chat template: ") + what + " without {% " + end + " %}");
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
      if (i_ >= ps_.size()) fail(ErrorCode::BadArgument, "chat template: {% if %} without {% endif %}");
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
        if (i_ >= ps_.size()) fail(ErrorCode::BadArgument, "chat template: {% if %} without {% endif %}");
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
    if (!p.accept_name("in")) fail(ErrorCode::BadArgument, "chat template: expected 'in' in a for loop");
    s->e = p.or_expr();
    if (p.accept_name("if")) s->filter = p.or_expr();
    if (p.accept_name("recursive")) unsupported("recursive loops");
    p.expect_end();
    loops_++;
    s->body = block({"else", "endfor"});
    loops_--;
    if (i_ >= ps_.size()) fail(ErrorCode::BadArgument, "chat template: {% for %} without {% endfor %}");
    Parser q(ps_[i_++].body);
    if (q.name() == "else") {
      q.expect_end();
      s->else_body = block({"endfor"});
      if (i_ >= ps_.size()) fail(ErrorCode::BadArgument, "chat template: {% for %} without {% endfor %}");
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
  void charge(uint64_t units) {
    work_ += units;
    if (work_ > kMaxWork) fail(ErrorCode::BadArgument, "chat template: rendering takes too much work");
  }
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
    uint64_t units = 16 * (uint64_t)l.size();
    for (const Value& x : l)
      if (x.k == Value::K::Str) units += x.s.size();
    charge(units);
  }
  void emit(const std::string& s) {
    if (out_.size() + s.size() > kMaxOutput) fail(ErrorCode::BadArgument, "chat template: the rendered prompt is too long");
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
      if (++r->nest_ > kMaxRenderDepth) fail(ErrorCode::BadArgument, "chat template: macros or expressions nested too deeply");
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
    if (ns.k != Value::K::Dict || !ns.has_ns) fail(ErrorCode::BadArgument, "chat template: cannot set an attribute of '" + target[0] + "', which is not a namespace");
    if (v.has_ns)
      fail(ErrorCode::BadArgument, "chat template: a namespace cannot hold a namespace or a macro defined inside a block (" + target[0] + "." + target[1] + ")");
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
      fail(ErrorCode::BadArgument, "chat template: macro '" + name + "' takes not more than " + std::to_string(m.params.size()) + " argument(s)");
    for (size_t i = 0; i < a.size(); i++) {
      if (i < m.params.size()) local[m.params[i].first] = a[i];
      else extra.push_back(a[i]);
    }
    for (const auto& kv : e.kw) {
      size_t i = 0;
      while (i < m.params.size() && m.params[i].first != kv.first) i++;
      if (i < m.params.size()) {
        if (i < a.size()) fail(ErrorCode::BadArgument, "chat template: macro '" + name + "' got multiple values for argument '" + kv.first + "'");
        local[kv.first] = eval(*kv.second);
      } else if (m.kwargs) {
        kw.emplace_back(kv.first, eval(*kv.second));
      } else {
        fail(ErrorCode::BadArgument, "chat template: macro '" + name + "' takes no keyword argument '" + kv.first + "'");
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
      if (!site) fail(ErrorCode::BadArgument, "chat template: caller() used outside its macro call");
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
          fail(ErrorCode::BadArgument, "chat template: {% call %} of '" + s.e->name + "', which is not a macro");
        emit(call_macro(f, *s.e, &s).s);
        break;
      }
      case Stmt::T::For: {
        const Value it = eval(*s.e);
        List items;
        if (it.k == Value::K::List) items = *it.l, charge_items(items);
        else if (it.k == Value::K::Dict) for (const auto& kv : *it.d) items.push_back(Value::str(kv.first));
        else if (it.k == Value::K::Str) for (char c : it.s) items.push_back(Value::str(std::string(1, c)));
        else if (it.defined() && it.k != Value::K::None) fail(ErrorCode::BadArgument, "chat template: a for loop over " + brief(it) + ", which is not a list");
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
      fail(ErrorCode::BadArgument, "chat template: cannot unpack " + brief(v) + " into " + std::to_string(vars.size()) + " names");
    for (size_t i = 0; i < vars.size(); i++) scopes_.back()[vars[i]] = (*v.l)[i];
  }

  static int64_t as_int(const Value& v, const char* what) {
    if (v.k == Value::K::Int || v.k == Value::K::Bool) return v.k == Value::K::Int ? v.i : v.b;
    if (v.k == Value::K::Float && std::isfinite(v.f) && std::fabs(v.f) < 9e18) return (int64_t)v.f;
    fail(ErrorCode::BadArgument, std::string("chat template: ") + what + " needs an integer, not " + brief(v));
  }
  static std::string as_str(const Value& v, const char* what) {
    if (v.k != Value::K::Str) fail(ErrorCode::BadArgument, std::string("chat template: ") + what + " needs a string, not " + brief(v));
    return v.s;
  }

  Value arith(const std::string& op, const Value& a, const Value& b) {
    if (op == "+" && a.k == Value::K::Str && b.k == Value::K::Str) {
      if (a.s.size() + b.s.size() > kMaxOutput) fail(ErrorCode::BadArgument, "chat template: a string grows too long");
      return Value::str(a.s + b.s);
    }
    if (op == "+" && a.k == Value::K::List && b.k == Value::K::List) {
      List l = *a.l;
      l.insert(l.end(), b.l->begin(), b.l->end());
      return Value::list(std::move(l));
    }
    if (op == "*" && a.k == Value::K::Str && (b.k == Value::K::Int)) {
      if (a.s.empty() || b.i <= 0) return Value::str("");
      if (b.i > 0 && !a.s.empty() && (uint64_t)b.i > kMaxOutput / a.s.size()) fail(ErrorCode::BadArgument, "chat template: a string grows too long");
      std::string r;
      for (int64_t k = 0; k < b.i; k++) r += a.s;
      return Value::str(std::move(r));
    }
    if (!a.number() || !b.number())
      fail(ErrorCode::BadArgument, "chat template: cannot apply '" + op + "' to " + brief(a) + " and " + brief(b));
    const bool ints = a.k != Value::K::Float && b.k != Value::K::Float;
    if (op == "/") {
      if (b.num() == 0) fail(ErrorCode::BadArgument, "chat template: division by zero");
      return Value::real(a.num() / b.num());
    }
    if (ints) {
      const int64_t x = a.k == Value::K::Int ? a.i : a.b, y = b.k == Value::K::Int ? b.i : b.b;
      int64_t r = 0;
      // Python's integers do not overflow; past 64 bits this is an error, not a wrapped value.
      const bool over = op == "+" ? __builtin_add_overflow(x, y, &r) : op == "-" ? __builtin_sub_overflow(x, y, &r)
                      : op == "*" ? __builtin_mul_overflow(x, y, &r) : (x == INT64_MIN && y == -1);
      if (over) fail(ErrorCode::BadArgument, "chat template: integer overflow in " + std::to_string(x) + " " + op + " " + std::to_string(y));
      if (op == "+" || op == "-" || op == "*") return Value::integer(r);
      if (y == 0) fail(ErrorCode::BadArgument, "chat template: division by zero");
      const int64_t q = x / y - ((x % y != 0) && ((x < 0) != (y < 0)));  // Python's floor division
      if (op == "//") return Value::integer(q);
      return Value::integer(x - q * y);
    }
    const double x = a.num(), y = b.num();
    if (op == "+") return Value::real(x + y);
    if (op == "-") return Value::real(x - y);
    if (op == "*") return Value::real(x * y);
    if (y == 0) fail(ErrorCode::BadArgument, "chat template: division by zero");
    if (op == "//") return Value::real(std::floor(x / y));
    return Value::real(x - std::floor(x / y) * y);
  }

  static bool less(const Value& a, const Value& b) {
    if (a.number() && b.number()) return a.num() < b.num();
    if (a.k == Value::K::Str && b.k == Value::K::Str) return a.s < b.s;
    fail(ErrorCode::BadArgument, "chat template: cannot order " + brief(a) + " and " + brief(b));
  }
  static bool contains(const Value& hay, const Value& needle) {
    if (hay.k == Value::K::Str) return needle.k == Value::K::Str && hay.s.find(needle.s) != std::string::npos;
    if (hay.k == Value::K::List) {
      for (const Value& v : *hay.l)
        if (equal(v, needle)) return true;
      return false;
    }
    if (hay.k == Value::K::Dict) return needle.k == Value::K::Str && hay.get(needle.s) != nullptr;
    if (!hay.defined() || hay.k == Value::K::None) return false;
    fail(ErrorCode::BadArgument, "chat template: 'in' needs a string, list or dict, not " + brief(hay));
  }

  std::vector<Value> args(const Expr& e) {
    std::vector<Value> v;
    for (size_t i = 1; i < e.a.size(); i++) v.push_back(eval(*e.a[i]));
    return v;
  }

  // An indent given as a width (spaces) or as the string itself.
  static std::string indent_text(const Value& w) {
    if (w.k == Value::K::Str) {
      if (w.s.size() > 1000) fail(ErrorCode::BadArgument, "chat template: an indent longer than 1000 characters");
      return w.s;
    }
    const int64_t n = as_int(w, "indent");
    if (n > 1000) fail(ErrorCode::BadArgument, "chat template: an indent of " + std::to_string(n) + " spaces (at most 1000)");
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
    size_t b = 0, e = s.size();
    while (left && b < e && chars.find(s[b]) != std::string::npos) b++;
    while (right && e > b && chars.find(s[e - 1]) != std::string::npos) e--;
    return s.substr(b, e - b);
  }
  static std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    if (from.empty()) return s;
    std::string r;
    size_t p = 0, q;
    while ((q = s.find(from, p)) != std::string::npos) {
      r += s.substr(p, q - p) + to;
      if (r.size() > kMaxOutput) fail(ErrorCode::BadArgument, "chat template: a string grows too long");
      p = q + from.size();
    }
    return r + s.substr(p);
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
        const size_t p = s.find(arg_str(0, "find"));
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
          if (sep.empty()) fail(ErrorCode::BadArgument, "chat template: split with an empty separator");
          size_t p = 0, q;
          while (max != 0 && (q = s.find(sep, p)) != std::string::npos) {
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
          l.push_back(m == "keys" ? Value::str(kv.first) : m == "values" ? kv.second : Value::list({Value::str(kv.first), kv.second}));
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
      if (f == "caller") fail(ErrorCode::BadArgument, "chat template: caller() outside a {% call %} block");
    }
    const std::vector<Value> a = args(e);
    if (f == "raise_exception") {
      fail(ErrorCode::BadArgument, "chat template: " + (a.empty() ? std::string("raise_exception()") : to_text(a[0])));
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
      if (a.empty() || a.size() > 3) fail(ErrorCode::BadArgument, "chat template: range takes 1 to 3 integers");
      int64_t lo = 0, hi, step = 1;
      if (a.size() == 1) hi = as_int(a[0], "range");
      else lo = as_int(a[0], "range"), hi = as_int(a[1], "range");
      if (a.size() == 3) step = as_int(a[2], "range");
      if (step == 0) fail(ErrorCode::BadArgument, "chat template: range with a step of 0");
      List l;
      for (int64_t v = lo; step > 0 ? v < hi : v > hi;) {
        if (l.size() >= 1000000) fail(ErrorCode::BadArgument, "chat template: range is too long");
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

  Value filter(const Expr& e) {
    const Value v = eval(*e.a[0]);
    const std::vector<Value> a = args(e);
    const std::string& f = e.name;
    if (f == "trim") return Value::str(strip(to_text(v), a.empty() ? ws() : as_str(a[0], "trim"), true, true));
    if (f == "length" || f == "count") {
      if (v.k == Value::K::Str) return Value::integer((int64_t)v.s.size());
      if (v.k == Value::K::List) return Value::integer((int64_t)v.l->size());
      if (v.k == Value::K::Dict) return Value::integer((int64_t)v.d->size());
      if (!v.defined()) return Value::integer(0);
      fail(ErrorCode::BadArgument, "chat template: length of " + brief(v));
    }
    std::string r;
    if (recase(f, to_text(v), &r)) return Value::str(std::move(r));
    if (f == "string") return Value::str(to_text(v));
    if (f == "safe") return v;
    if (f == "int") {
      if (v.k == Value::K::Str) return Value::integer(std::strtoll(v.s.c_str(), nullptr, 10));
      return v.number() ? Value::integer(as_int(v, "int")) : Value::integer(0);
    }
    if (f == "float") return Value::real(v.k == Value::K::Str ? std::strtod(v.s.c_str(), nullptr) : v.number() ? v.num() : 0.0);
    if (f == "first" || f == "last") {
      if (v.k == Value::K::List) return v.l->empty() ? Value() : (f == "first" ? v.l->front() : v.l->back());
      if (v.k == Value::K::Str) return v.s.empty() ? Value() : Value::str(std::string(1, f == "first" ? v.s.front() : v.s.back()));
      fail(ErrorCode::BadArgument, "chat template: " + f + " of " + brief(v));
    }
    if (f == "join") {
      const std::string sep = a.empty() ? std::string() : as_str(a[0], "join");
      if (v.k != Value::K::List) fail(ErrorCode::BadArgument, "chat template: join of " + brief(v));
      std::string r;
      for (size_t i = 0; i < v.l->size(); i++) {
        r += (i ? sep : "") + to_text((*v.l)[i]);
        if (r.size() > kMaxOutput) fail(ErrorCode::BadArgument, "chat template: a string grows too long");
      }
      return Value::str(std::move(r));
    }
    if (f == "default" || f == "d") {
      const bool boolean = a.size() > 1 && truthy(a[1]);
      if (boolean ? truthy(v) : v.defined()) return v;
      return a.empty() ? Value::str("") : a[0];
    }
    if (f == "tojson") {
      Value indent = a.empty() ? Value() : a[0];
      bool sort = false;
      for (const auto& kv : e.kw) {
        if (kv.first == "indent") indent = eval(*kv.second);
        else if (kv.first == "sort_keys") sort = truthy(eval(*kv.second));
        else if (kv.first != "ensure_ascii" || truthy(eval(*kv.second))) unsupported("tojson's argument '" + kv.first + "'");
      }
      const bool pretty = indent.defined() && indent.k != Value::K::None;
      return Value::str(json_dump(v, pretty, pretty ? indent_text(indent) : std::string(), sort, 0));
    }
    if (f == "indent") {  // Jinja 3's: every line but the first (unless first=true); blank lines only if blank=true
      Value width = a.empty() ? Value::integer(4) : a[0];
      bool first = a.size() > 1 && truthy(a[1]), blank = a.size() > 2 && truthy(a[2]);
      for (const auto& kv : e.kw) {
        if (kv.first == "width") width = eval(*kv.second);
        else if (kv.first == "first") first = truthy(eval(*kv.second));
        else if (kv.first == "blank") blank = truthy(eval(*kv.second));
        else fail(ErrorCode::BadArgument, "chat template: indent has no argument '" + kv.first + "'");
      }
      const std::string ind = indent_text(width);
      const std::vector<std::string> lines = split_lines(to_text(v) + "\n");
      std::string r;
      for (size_t i = 0; i < lines.size(); i++) {
        if (i) r += "\n";
        if (i == 0 ? first : blank || !lines[i].empty()) r += ind;
        r += lines[i];
        if (r.size() > kMaxOutput) fail(ErrorCode::BadArgument, "chat template: a string grows too long");
      }
      return Value::str(std::move(r));
    }
    if (f == "unique") {  // first of each, strings compared case-blind unless case_sensitive=true
      bool cs = a.size() > 0 && truthy(a[0]);
      Value attr = a.size() > 1 ? a[1] : Value();
      for (const auto& kv : e.kw) {
        if (kv.first == "case_sensitive") cs = truthy(eval(*kv.second));
        else if (kv.first == "attribute") attr = eval(*kv.second);
        else fail(ErrorCode::BadArgument, "chat template: unique has no argument '" + kv.first + "'");
      }
      List items;
      if (v.k == Value::K::List) items = *v.l;
      else if (v.k == Value::K::Str) for (char c : v.s) items.push_back(Value::str(std::string(1, c)));
      else if (v.k == Value::K::Dict) for (const auto& kv : *v.d) items.push_back(Value::str(kv.first));
      else fail(ErrorCode::BadArgument, "chat template: unique of " + brief(v));
      const std::string name = attr.defined() && attr.k != Value::K::None ? as_str(attr, "unique") : std::string();
      auto key = [&](const Value& x) {
        const Value* p = name.empty() ? &x : x.get(name);
        Value k = p ? *p : Value();
        if (!cs && k.k == Value::K::Str) k.s = lower(k.s);
        return k;
      };
      List out, seen;
      for (const Value& x : items) {
        tick();
        const Value k = key(x);
        bool dup = false;
        for (const Value& y : seen) {
          charge(8);
          if (equal(k, y)) { dup = true; break; }
        }
        if (!dup) seen.push_back(k), out.push_back(x);
      }
      return Value::list(std::move(out));
    }
    if (f == "list") {
      if (v.k == Value::K::List) return v;
      List l;
      if (v.k == Value::K::Str) for (char c : v.s) l.push_back(Value::str(std::string(1, c)));
      else if (v.k == Value::K::Dict) for (const auto& kv : *v.d) l.push_back(Value::str(kv.first));
      return Value::list(std::move(l));
    }
    if (f == "reverse") {
      if (v.k == Value::K::Str) return Value::str(std::string(v.s.rbegin(), v.s.rend()));
      if (v.k == Value::K::List) return Value::list(List(v.l->rbegin(), v.l->rend()));
      fail(ErrorCode::BadArgument, "chat template: reverse of " + brief(v));
    }
    if (f == "replace" && a.size() >= 2) return Value::str(replace_all(to_text(v), as_str(a[0], "replace"), as_str(a[1], "replace")));
    if (f == "select" || f == "reject" || f == "selectattr" || f == "rejectattr")
      return select(v, a, f.size() > 6, f[0] == 's');
    if (f == "map" && a.empty() && e.kw.size() == 1 && e.kw[0].first == "attribute") {
      const std::string name = as_str(eval(*e.kw[0].second), "map");
      if (v.k != Value::K::List) fail(ErrorCode::BadArgument, "chat template: map over " + brief(v));
      List l;
      for (const Value& item : *v.l) {
        const Value* p = item.get(name);
        l.push_back(p ? *p : Value());
      }
      return Value::list(std::move(l));
    }
    if (f == "items" && v.k == Value::K::Dict) {
      List l;
      for (const auto& kv : *v.d) l.push_back(Value::list({Value::str(kv.first), kv.second}));
      return Value::list(std::move(l));
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
    if (t == "sequence") return v.k == Value::K::List || v.k == Value::K::Str;
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
    if (v.k != Value::K::List) {
      if (!v.defined()) return Value::list();
      fail(ErrorCode::BadArgument, "chat template: select over " + brief(v));
    }
    size_t i = 0;
    std::string name;
    if (attr) {
      if (a.empty()) fail(ErrorCode::BadArgument, "chat template: selectattr needs an attribute name");
      name = as_str(a[0], "selectattr");
      i = 1;
    }
    const std::string t = a.size() > i ? as_str(a[i], "select") : std::string();
    const std::vector<Value> rest(a.begin() + (long)std::min(a.size(), i + 1), a.end());
    List out;
    for (const Value& item : *v.l) {
      tick();
      const Value* p = attr ? item.get(name) : &item;
      const Value x = p ? *p : Value();
      if ((t.empty() ? truthy(x) : test_value(t, x, rest)) == keep) out.push_back(item);
    }
    return Value::list(std::move(out));
  }

  Value index(const Expr& e) {
    const Value o = eval(*e.a[0]);
    const Value k = eval(*e.a[1]);
    if (o.k == Value::K::Dict) {
      if (k.k != Value::K::Str) return Value();
      const Value* v = o.get(k.s);
      return v ? *v : Value();
    }
    if (o.k == Value::K::List || o.k == Value::K::Str) {
      if (!k.number()) return Value();
      const int64_t n = o.k == Value::K::List ? (int64_t)o.l->size() : (int64_t)o.s.size();
      int64_t i = as_int(k, "an index");
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value();
      return o.k == Value::K::List ? (*o.l)[(size_t)i] : Value::str(std::string(1, o.s[(size_t)i]));
    }
    return Value();
  }

  Value slice(const Expr& e) {
    const Value o = eval(*e.a[0]);
    if (o.k != Value::K::List && o.k != Value::K::Str) fail(ErrorCode::BadArgument, "chat template: slicing " + brief(o));
    const int64_t n = o.k == Value::K::List ? (int64_t)o.l->size() : (int64_t)o.s.size();
    const int64_t step = e.a[3] ? as_int(eval(*e.a[3]), "a slice step") : 1;
    if (step == 0) fail(ErrorCode::BadArgument, "chat template: a slice step of 0");
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
      else s += o.s[(size_t)i];
      if (__builtin_add_overflow(i, step, &i)) break;  // past either end
    }
    return o.k == Value::K::List ? Value::list(std::move(l)) : Value::str(std::move(s));
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
          if (v.i == INT64_MIN) fail(ErrorCode::BadArgument, "chat template: integer overflow in -(" + std::to_string(v.i) + ")");
          return Value::integer(-v.i);
        }
        if (v.number()) return Value::real(-v.num());
        fail(ErrorCode::BadArgument, "chat template: cannot negate " + brief(v));
      }
      case Expr::T::Not: return Value::boolean(!truthy(eval(*e.a[0])));
      case Expr::T::Cond: return truthy(eval(*e.a[0])) ? eval(*e.a[1]) : eval(*e.a[2]);
      case Expr::T::ListLit: {
        List l;
        for (const auto& x : e.a) l.push_back(eval(*x));
        return Value::list(std::move(l));
      }
      case Expr::T::DictLit: {
        Value d = Value::dict();
        for (size_t i = 0; i + 1 < e.a.size(); i += 2) d.put(as_str(eval(*e.a[i]), "a dict key"), eval(*e.a[i + 1]));
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
          if (s.size() > kMaxOutput) fail(ErrorCode::BadArgument, "chat template: a string grows too long");
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
  uint64_t work_ = 0;
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
