// Jinja's evaluator: one render's scopes, macro frames and output, walking the statement tree.
#pragma once
#include <initializer_list>
#include <utility>

#include "jinja_syntax.h"

namespace qkv::jinja {

class Renderer {
 public:
  explicit Renderer(std::map<std::string, Value> globals) { scopes_.push_back(std::move(globals)); }

  // Runs statements until a {% break %} or {% continue %} (left in jump_ for the loop).
  void run(const Body& b);
  std::string& out() { return out_; }

 private:
  void tick() { charge(64); }
  // What a computed value cost to make: its bytes or items.
  Value made(Value v);
  // What reading a stored value costs: a string is copied, a list or dict is shared (its items
  // are not copied, so they are not charged: a long list read once per loop pass stays linear).
  Value read(Value v);
  // What copying these items costs: their strings are copied byte by byte (lists and dicts in
  // them are shared).
  void charge_items(const List& l);
  void emit(const std::string& s);
  Value lookup(const std::string& n) const;

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
  std::string capture(const Body& b);
  void assign(const std::vector<std::string>& target, Value v);

  // A macro call's saved scopes (those of its call site), found by serial number by the caller()
  // of a {% call %} block.
  struct Frame {
    uint64_t serial;
    std::vector<Scope> scopes;
  };

  // Calls a macro (or, with m a call block, its caller body) with the call's arguments. A macro
  // sees the template's top-level names and its own; a caller body sees the names where its
  // {% call %} stands. Both get a scope of their own, holding the parameters.
  Value call_macro(const Value& f, const Expr& e, const Stmt* caller_body = nullptr);

  void exec(const Stmt& s);
  void bind(const std::vector<std::string>& vars, const Value& v);

  static int64_t as_int(const Value& v, const char* what);
  static std::string as_str(const Value& v, const char* what);

  Value arith(const std::string& op, const Value& a, const Value& b);

  static bool less(const Value& a, const Value& b);
  // Python's 'in', charged per item compared and byte searched.
  static bool contains(const Value& hay, const Value& needle);

  std::vector<Value> args(const Expr& e);

  // An indent given as a width (spaces) or as the string itself.
  static std::string indent_text(const Value& w);
  // Python's str.splitlines(): \n, \r\n, \r, \v, \f, \x1c-\x1e, U+0085, U+2028 and U+2029 end lines.
  static std::vector<std::string> split_lines(const std::string& s);
  static std::string strip(const std::string& s, const std::string& chars, bool left, bool right);
  // Python's str.replace (count < 0: every occurrence; an empty `from` matches between characters).
  static std::string replace_all(const std::string& s, const std::string& from, const std::string& to,
                                 int64_t count = -1);
  static std::string title(const std::string& s, bool all_words);
  static std::string lower(std::string s);
  // The case changes Jinja has both as string methods and as filters (upper, lower, title,
  // capitalize): true with *out set when `op` is one.
  static bool recase(const std::string& op, const std::string& s, std::string* out);
  static std::string upper(std::string s);
  static const std::string& ws();

  Value method(const Expr& e);
  // Python's str methods beyond the common ones (count, index, rsplit, isdigit, join, ljust,
  // partition, ...): true with *out set when `m` is one.
  static bool str_method(const std::string& s, const std::string& m, const std::vector<Value>& a, Value* out);

  Value call(const Expr& e);

  using Kw = std::vector<std::pair<std::string, Value>>;
  Kw kwargs(const Expr& e);
  Value filter(const Expr& e);
  // Positional argument i, or the keyword argument `name`, or dflt.
  static Value arg(const std::vector<Value>& a, const Kw& kw, size_t i, const char* name, Value dflt = Value());
  static void only_kw(const char* f, const Kw& kw, std::initializer_list<const char*> names);
  // The items a filter iterates: a list's, a dict's keys, a string's characters (UTF-8
  // sequences kept whole); undefined and none give none, as Jinja2's filters that test the
  // sequence first do.
  static List items_of(const Value& v, const char* f);
  // A string's characters (code points as UTF-8 sequences), as Python iterates a str.
  static std::vector<std::string> chars(const std::string& s);
  static size_t utf8_len(const std::string& s, size_t i);
  static int64_t code_points(const std::string& s);
  // Python's sort order of two values (for sort, dictsort, min and max); case-blind on strings
  // unless cs.
  static bool sort_less(const Value& a, const Value& b, bool cs);
  // An item's attribute (a dotted path, as Jinja2's attribute= takes; digits index a list).
  static Value attribute(const Value& item, const std::string& path);

  static Value lazy(Value v);

  Value apply_filter(const std::string& f, const Value& v, const std::vector<Value>& a, const Kw& kw);
  // groupby, slice, striptags, wordwrap, xmlattr, urlencode, filesizeformat (jinja_text.cpp):
  // true with *out set when f is one of them.
  bool text_filter(const std::string& f, const Value& v, const std::vector<Value>& a, const Kw& kw, Value* out);
  // The `filter` and `test` tests (is a name one of Jinja2's): true with *result set when t is one.
  static bool name_test(const std::string& t, const Value& v, bool* result);
  // Python's str.format and format(x, spec).
  std::string str_format(const std::string& fmt, const std::vector<Value>& a, const Kw& kw);
  std::string format_spec(const Value& x, const std::string& spec);

  bool test(const Expr& e) { return test_value(e.name, eval(*e.a[0]), args(e)); }
  bool test_value(const std::string& t, const Value& v, const std::vector<Value>& a);
  // select / reject / selectattr / rejectattr: the items (or their attribute) that pass a test
  // (or are truthy, without one).
  Value select(const Value& v, const std::vector<Value>& a, bool attr, bool keep);

  Value index(const Expr& e);

  // Where each character (code point) of s starts, and s.size() at the end, as Python indexes a
  // str; empty for ASCII text, whose characters are its bytes.
  static std::vector<size_t> char_starts(const std::string& s);
  // Character k of s (0 <= k < its length), given char_starts(s).
  static std::string char_at(const std::string& s, const std::vector<size_t>& at, int64_t k);

  Value slice(const Expr& e);

  Value eval(const Expr& e);

  std::vector<std::map<std::string, Value>> scopes_;
  std::vector<Frame*> frames_;    // macro calls in progress, innermost last
  Stmt::T jump_ = Stmt::T::Text;  // Break or Continue while one unwinds to its loop, else Text
  uint64_t frame_serial_ = 0;
  int nest_ = 0;
  std::string out_;
};

}  // namespace qkv::jinja
