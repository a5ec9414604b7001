// Jinja values (Python-like dynamic types), their printing and comparison, and the render's work budget.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../common.h"

namespace qkv::jinja {

constexpr size_t kMaxOutput = 16u << 20;  // bytes of rendered text (and of any one string or printed value)
constexpr uint64_t kMaxWork =
    1u << 28;                         // evaluated nodes x 64, bytes of strings and list items made, items walked x 16
constexpr int kMaxDepth = 64;         // brackets inside one another in a tag, and nested blocks
constexpr int kMaxExprHeight = 128;   // an expression tree's height: chains (a.b.c, x|f|g, 1+1+1) count too
constexpr int kMaxValueDepth = 64;    // lists and dicts inside one another
constexpr int kMaxRenderDepth = 256;  // statements and expressions being evaluated at once (macros recurse)

// A template that is malformed or misuses a value: the model's template is at fault.
[[noreturn]] inline void bad_template(const std::string& what) { fail(ErrorCode::BadModel, "chat template: " + what); }

[[noreturn]] inline void unsupported(const std::string& what) {
  fail(ErrorCode::Unsupported, "chat template: " + what);
}

// ---- work ----------------------------------------------------------------------------------

// The work of the render in progress on this thread (render_jinja_chat resets it). Lists share
// their items, so a value can stand for far more than its making cost ([a, a, a, a] of such
// lists, twelve deep, is 8^12 items): whatever walks a value (printing, comparing, searching)
// is charged per item and byte it visits, so each walk stops at the budget.
inline thread_local uint64_t g_work = 0;

// What a hostile template runs into (a bound on work, output, nesting or size). The template
// comes with the model, so this is ErrorCode::BadModel, not the conversation's fault.
[[noreturn]] inline void too_much(const std::string& what) { fail(ErrorCode::BadModel, "chat template: " + what); }

inline void charge(uint64_t units) {
  g_work += units;
  if (g_work > kMaxWork)
    too_much("rendering takes too much work (the budget is " + std::to_string(kMaxWork >> 20) + "M units)");
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
  bool is_ns = false;  // a namespace() (its attributes can be set); beside b, where it adds no bytes to a Value
  bool group = false;  // groupby's (grouper, list) tuple, whose items are also .grouper and .list (beside b too)
  int64_t i = 0;
  double f = 0;
  std::string s;                // Str; Func: its name
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

  static Value none() {
    Value v;
    v.k = K::None;
    return v;
  }
  static Value boolean(bool x) {
    Value v;
    v.k = K::Bool;
    v.b = x;
    return v;
  }
  static Value integer(int64_t x) {
    Value v;
    v.k = K::Int;
    v.i = x;
    return v;
  }
  static Value real(double x) {
    Value v;
    v.k = K::Float;
    v.f = x;
    return v;
  }
  static Value str(std::string x) {
    Value v;
    v.k = K::Str;
    v.s = std::move(x);
    return v;
  }
  static Value list(List x = {}) {
    Value v;
    v.k = K::List;
    v.depth = 1;
    for (const Value& c : x) v.hold(c);
    v.l = std::make_shared<List>(std::move(x));
    return v;
  }
  static Value dict(Dict x = {});
  static Value func(std::string name, const Stmt* macro = nullptr) {
    Value v;
    v.k = K::Func;
    v.s = std::move(name);
    v.macro = macro;
    return v;
  }

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

// A (key, value) tuple, as items() and dictsort give.
Value pair(Value a, Value b);
// A dict key as a value (what iterating a dict, keys() and items() give).
Value key_value(const Entry& e);

// The scopes a macro defined inside a loop or another macro sees (as they were where it was defined).
struct Closure {
  std::vector<std::map<std::string, Value>> scopes;
};

bool truthy(const Value& v);
// A string as json.dumps writes it; ascii: every non-ASCII character as \uXXXX (surrogate pairs
// past U+FFFF), as ensure_ascii=True does.
void json_quote(std::string& o, const std::string& s, bool ascii);
// Python's repr() of a float (json: json.dumps's, which spells nan and inf as NaN and Infinity).
std::string float_text(double f, bool json = false);

// How a value is printed: Python's repr() (json = false) or json.dumps (json = true) with
// Hugging Face's tojson options; printing stops once the text passes `limit` bytes.
struct Style {
  bool json = false, ascii = false, sort = false, pretty = false;
  std::string ind;                       // pretty: one level's indent
  std::string isep = ", ", ksep = ": ";  // json: between items, between a key and its value
  size_t limit = kMaxOutput;
};

// Python's repr() of a string: single quotes unless it holds ' and no ".
void repr_str(std::string& o, const std::string& s);
// Appends the printed value to o, charged per item and byte; false once o passes st.limit
// (the text is then cut short and the caller decides what that means).
bool dump(std::string& o, const Value& v, const Style& st, int level);
// Python's repr() of a value, failing past the output bound.
std::string repr(const Value& v, const Style& st = Style());
// What {{ v }} prints (Python's str()).
std::string to_text(const Value& v);
// A value as error messages quote it: its repr, cut to 60 bytes (however large the value).
std::string brief(const Value& v);
// A text for an error message (raise_exception's): what {{ v }} prints, cut to 2000 bytes.
std::string message_text(const Value& v);
// Python's ==, charged per item walked.
bool equal(const Value& a, const Value& b);

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

inline size_t find_text(const std::string& hay, const std::string& needle, size_t from = 0) {
  return Finder(needle).find(hay, from);
}

}  // namespace qkv::jinja
