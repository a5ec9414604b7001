// GBNF parser: text -> rules (repetitions expanded into generated rules), then checks that every
// referenced rule exists, `root` exists, and no rule is left-recursive.
#include "gbnf.h"

#include <algorithm>
#include <functional>
#include <map>

#include "../common.h"

namespace qkv {

bool CharSet::matches(uint32_t cp) const {
  bool in = false;
  for (const auto& r : ranges)
    if (cp >= r.first && cp <= r.second) {
      in = true;
      break;
    }
  return in != negated;
}

bool CharSet::intersects(uint32_t lo, uint32_t hi) const {
  if (!negated) {
    for (const auto& r : ranges)
      if (r.first <= hi && r.second >= lo) return true;
    return false;
  }
  // Negated: some point of [lo, hi] is outside every range. Walk the ranges in order.
  std::vector<std::pair<uint32_t, uint32_t>> rs = ranges;
  std::sort(rs.begin(), rs.end());
  uint32_t next = lo;  // the lowest point not yet known to be covered
  for (const auto& r : rs) {
    if (r.first > next) break;
    if (r.second >= next) {
      if (r.second >= hi) return false;
      next = r.second + 1;
    }
  }
  return next <= hi;
}

namespace {

constexpr size_t kMaxElems = 1 << 20;  // a bound on the expanded grammar ({m,n} multiplies)
constexpr uint32_t kMaxRepeat = 10000;

using Seq = std::vector<GElem>;
using Alts = std::vector<Seq>;

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  Grammar run() {
    skip_space();
    while (i_ < s_.size()) {
      const size_t at = i_;
      std::string name = parse_name();
      skip_space();
      if (s_.compare(i_, 3, "::=") != 0) error(i_, "expected '::=' after rule name '" + name + "'");
      i_ += 3;
      const uint32_t id = rule_id(name, at);
      if (defined_[id]) error(at, "rule '" + name + "' is defined twice");
      defined_[id] = true;
      rules_[id] = parse_alternatives(false);
      skip_space();
    }
    for (size_t r = 0; r < rules_.size(); r++)
      if (!defined_[r]) error(first_use_[r], "rule '" + names_[r] + "' is used but never defined");
    auto root = ids_.find("root");
    if (root == ids_.end())
      fail(ErrorCode::BadArgument, "grammar: no 'root' rule (the start rule must be called root)");
    Grammar g;
    g.sets = std::move(sets_);
    g.rule_names = names_;
    g.root = root->second;
    for (size_t r = 0; r < rules_.size(); r++) {
      g.rule_start.push_back((uint32_t)g.elems.size());
      for (size_t a = 0; a < rules_[r].size(); a++) {
        if (a) g.elems.push_back({GElem::Alt, 0});
        g.elems.insert(g.elems.end(), rules_[r][a].begin(), rules_[r][a].end());
      }
      g.elems.push_back({GElem::End, 0});
    }
    check_left_recursion(g);
    return g;
  }

 private:
  const std::string& s_;
  size_t i_ = 0;
  std::map<std::string, uint32_t> ids_;
  std::vector<std::string> names_;
  std::vector<Alts> rules_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;
  std::vector<CharSet> sets_;
  size_t n_elems_ = 0;
  int depth_ = 0;

  [[noreturn]] void error(size_t at, const std::string& why) const {
    int line = 1, col = 1;
    for (size_t k = 0; k < at && k < s_.size(); k++) {
      if (s_[k] == '\n') {
        line++;
        col = 1;
      } else if (((unsigned char)s_[k] & 0xC0) != 0x80) {
        col++;
      }
    }
    fail(ErrorCode::BadArgument,
         "grammar: line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + why);
  }

  uint32_t rule_id(const std::string& name, size_t at) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const uint32_t id = (uint32_t)names_.size();
    ids_[name] = id;
    names_.push_back(name);
    rules_.emplace_back();
    defined_.push_back(false);
    first_use_.push_back(at);
    return id;
  }

  uint32_t new_rule(const std::string& base, Alts alts) {
    const std::string name = base + "#" + std::to_string(names_.size());  // # cannot clash with a user rule name
    const uint32_t id = rule_id(name, i_);
    rules_[id] = std::move(alts);
    defined_[id] = true;
    return id;
  }

  void count(size_t n) {
    n_elems_ += n;
    if (n_elems_ > kMaxElems) error(i_, "the grammar is too large once repetitions are expanded");
  }

  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  void skip_space() {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        i_++;
      } else if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') i_++;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t b = i_;
    while (i_ < s_.size() && name_char(s_[i_])) i_++;
    if (i_ == b)
      error(b, i_ < s_.size() ? std::string("expected a rule name, found '") + s_[i_] + "'"
                              : "expected a rule name, found the end");
    return s_.substr(b, i_ - b);
  }

  // Whether a rule definition (`name ::=`) starts here: it ends the sequence before it.
  bool at_definition() const {
    size_t k = i_;
    while (k < s_.size() && name_char(s_[k])) k++;
    if (k == i_) return false;
    while (k < s_.size() && (s_[k] == ' ' || s_[k] == '\t')) k++;
    return s_.compare(k, 3, "::=") == 0;
  }

  uint32_t parse_hex(size_t n) {
    uint32_t v = 0;
    for (size_t k = 0; k < n; k++, i_++) {
      if (i_ >= s_.size()) error(i_, "unfinished \\x / \\u escape");
      const char c = s_[i_];
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0) error(i_, std::string("expected a hex digit in an escape, found '") + c + "'");
      v = v * 16 + (uint32_t)d;
    }
    if (v > 0x10FFFF) error(i_, "escape beyond U+10FFFF");
    return v;
  }

  // One code point of a literal or class (escapes decoded); UTF-8 in the grammar is decoded.
  uint32_t parse_char() {
    if (i_ >= s_.size()) error(i_, "unexpected end of grammar");
    const unsigned char c = (unsigned char)s_[i_];
    if (c == '\\') {
      i_++;
      if (i_ >= s_.size()) error(i_, "unfinished escape");
      const char e = s_[i_++];
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '0': return 0;
        case '\\':
        case '"':
        case '\'':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/': return (uint32_t)e;
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        default: error(i_ - 2, std::string("unknown escape '\\") + e + "'");
      }
    }
    if (c < 0x80) {
      i_++;
      return c;
    }
    const int n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (n == 0 || i_ + n > s_.size()) error(i_, "invalid UTF-8 in the grammar");
    uint32_t cp = c & (0xFF >> (n + 1));
    for (int k = 1; k < n; k++) {
      const unsigned char b = (unsigned char)s_[i_ + k];
      if ((b & 0xC0) != 0x80) error(i_, "invalid UTF-8 in the grammar");
      cp = (cp << 6) | (b & 0x3F);
    }
    i_ += n;
    return cp;
  }

  uint32_t add_set(CharSet cs) {
    sets_.push_back(std::move(cs));
    return (uint32_t)sets_.size() - 1;
  }

  Alts parse_alternatives(bool nested) {
    Alts alts;
    alts.push_back(parse_sequence(nested));
    while (i_ < s_.size() && s_[i_] == '|') {
      i_++;
      alts.push_back(parse_sequence(nested));
    }
    return alts;
  }

  Seq parse_sequence(bool nested) {
    Seq seq;
    size_t last = 0;  // where the last atom's elements begin in seq
    bool have_atom = false;
    for (;;) {
      skip_space();
      if (i_ >= s_.size()) break;
      const char c = s_[i_];
      if (c == '|' || (c == ')' && nested)) break;
      if (c == ')') error(i_, "unmatched ')'");
      if (!nested && at_definition()) break;
      const size_t at = i_;
      if (c == '"') {
        i_++;
        last = seq.size();
        while (i_ < s_.size() && s_[i_] != '"') {
          const uint32_t cp = parse_char();
          seq.push_back({GElem::Chars, add_set({false, {{cp, cp}}})});
        }
        if (i_ >= s_.size()) error(at, "unterminated string literal");
        i_++;
        count(seq.size() - last);
        have_atom = true;
      } else if (c == '[') {
        i_++;
        CharSet cs;
        if (i_ < s_.size() && s_[i_] == '^') {
          cs.negated = true;
          i_++;
        }
        while (i_ < s_.size() && s_[i_] != ']') {
          const uint32_t lo = parse_char();
          uint32_t hi = lo;
          if (i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
            i_++;
            hi = parse_char();
            if (hi < lo) error(at, "character range with its end before its start");
          }
          cs.ranges.push_back({lo, hi});
        }
        if (i_ >= s_.size()) error(at, "unterminated character class");
        i_++;
        last = seq.size();
        seq.push_back({GElem::Chars, add_set(std::move(cs))});
        count(1);
        have_atom = true;
      } else if (c == '.') {
        i_++;
        last = seq.size();
        seq.push_back({GElem::Chars, add_set({true, {}})});
        count(1);
        have_atom = true;
      } else if (c == '(') {
        i_++;
        if (++depth_ > 256) error(at, "groups nested deeper than 256");
        Alts inner = parse_alternatives(true);
        depth_--;
        skip_space();
        if (i_ >= s_.size() || s_[i_] != ')') error(at, "unclosed '('");
        i_++;
        last = seq.size();
        if (inner.size() == 1) {
          seq.insert(seq.end(), inner[0].begin(), inner[0].end());
        } else {
          seq.push_back({GElem::Ref, new_rule("group", std::move(inner))});
        }
        count(1);
        have_atom = true;
      } else if (name_char(c)) {
        const std::string name = parse_name();
        last = seq.size();
        seq.push_back({GElem::Ref, rule_id(name, at)});
        count(1);
        have_atom = true;
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_atom) error(at, std::string("'") + c + "' with nothing before it to repeat");
        uint32_t lo = 0, hi = UINT32_MAX;  // UINT32_MAX: unbounded
        i_++;
        if (c == '+') lo = 1;
        else if (c == '?') hi = 1;
        else if (c == '{') parse_braces(at, &lo, &hi);
        Seq atom(seq.begin() + (long)last, seq.end());
        seq.resize(last);
        repeat(seq, atom, lo, hi);
        have_atom = false;  // x** is an error, as in llama.cpp
      } else {
        error(at, std::string("unexpected character '") + c + "'");
      }
    }
    return seq;
  }

  uint32_t parse_uint(size_t at) {
    const size_t b = i_;
    uint64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      v = v * 10 + (uint64_t)(s_[i_++] - '0');
      if (v > kMaxRepeat) error(at, "repetition count above " + std::to_string(kMaxRepeat));
    }
    if (i_ == b) error(i_, "expected a number in '{m,n}'");
    return (uint32_t)v;
  }

  void parse_braces(size_t at, uint32_t* lo, uint32_t* hi) {
    skip_space();
    *lo = parse_uint(at);
    skip_space();
    if (i_ < s_.size() && s_[i_] == ',') {
      i_++;
      skip_space();
      *hi = (i_ < s_.size() && s_[i_] == '}') ? UINT32_MAX : parse_uint(at);
      skip_space();
    } else {
      *hi = *lo;
    }
    if (i_ >= s_.size() || s_[i_] != '}') error(at, "unclosed '{'");
    i_++;
    if (*hi < *lo) error(at, "'{m,n}' with n < m");
  }

  // atom{lo,hi} appended to seq: lo copies, then either a star rule or nested optional rules.
  void repeat(Seq& seq, const Seq& atom, uint32_t lo, uint32_t hi) {
    count(atom.size() * (size_t)std::max<uint32_t>(lo, 1) + 2);
    for (uint32_t k = 0; k < lo; k++) seq.insert(seq.end(), atom.begin(), atom.end());
    if (hi == UINT32_MAX) {
      const uint32_t id = new_rule("star", {});
      Seq more = atom;
      more.push_back({GElem::Ref, id});
      rules_[id] = {more, {}};
      seq.push_back({GElem::Ref, id});
      return;
    }
    if (hi == lo) return;
    count(atom.size() * (size_t)(hi - lo) + 2 * (size_t)(hi - lo));
    // opt_k ::= atom opt_{k+1} | ""  (the last without the reference)
    uint32_t next = UINT32_MAX;
    for (uint32_t k = hi - lo; k > 0; k--) {
      Seq more = atom;
      if (next != UINT32_MAX) more.push_back({GElem::Ref, next});
      next = new_rule("opt", {more, {}});
    }
    seq.push_back({GElem::Ref, next});
  }

  // A rule is left-recursive when it can reach itself before consuming a character.
  static void check_left_recursion(const Grammar& g) {
    const size_t n = g.rule_start.size();
    std::vector<char> nullable(n, 0);
    auto alt_nullable_prefix = [&](size_t e, const std::function<void(uint32_t)>& on_ref) {
      // Walks one alternative from e; calls on_ref for each reference reachable at its start;
      // returns whether the whole alternative can match nothing.
      for (;; e++) {
        const GElem& x = g.elems[e];
        if (x.kind == GElem::End || x.kind == GElem::Alt) return true;
        if (x.kind == GElem::Chars) return false;
        on_ref(x.value);
        if (!nullable[x.value]) return false;
      }
    };
    auto for_alts = [&](size_t r, const std::function<void(size_t)>& f) {
      size_t e = g.rule_start[r];
      f(e);
      for (;; e++) {
        if (g.elems[e].kind == GElem::End) break;
        if (g.elems[e].kind == GElem::Alt) f(e + 1);
      }
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; r++) {
        if (nullable[r]) continue;
        bool any = false;
        for_alts(r, [&](size_t e) { any = any || alt_nullable_prefix(e, [](uint32_t) {}); });
        if (any) {
          nullable[r] = 1;
          changed = true;
        }
      }
    }
    std::vector<std::vector<uint32_t>> first(n);
    for (size_t r = 0; r < n; r++)
      for_alts(r, [&](size_t e) { alt_nullable_prefix(e, [&](uint32_t t) { first[r].push_back(t); }); });
    std::vector<char> color(n, 0);  // 0 new, 1 on the path, 2 done
    std::function<void(uint32_t)> visit = [&](uint32_t r) {
      color[r] = 1;
      for (uint32_t t : first[r]) {
        if (color[t] == 1)
          fail(ErrorCode::BadArgument, "grammar: rule '" + g.rule_names[t] +
                                           "' is left-recursive (it can reach itself before matching a character); "
                                           "rewrite it with repetition");
        if (color[t] == 0) visit(t);
      }
      color[r] = 2;
    };
    for (uint32_t r = 0; r < n; r++)
      if (color[r] == 0) visit(r);
  }
};

}  // namespace

Grammar Grammar::parse(const std::string& text) { return Parser(text).run(); }

}  // namespace qkv
