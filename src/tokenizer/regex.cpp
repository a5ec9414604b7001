// Pre-tokenizer regex engine: a recursive-descent parser to a tree, Thompson compilation to a
// Pike VM program, and the VM. See regex.h for the covered syntax.
#include "regex.h"

#include <algorithm>
#include <memory>

#include "../common.h"
#include "pretokenize.h"

namespace qkv {

uint16_t unicode_props(uint32_t cp) {
  uint16_t p = 0;
  switch (unicode_category(cp)) {
    case 1: p = kPropLu; break;
    case 2: p = kPropLl; break;
    case 3: p = kPropLt; break;
    case 4: p = kPropLm; break;
    case 5: p = kPropLo; break;
    case 6: p = kPropM; break;
    case 7: p = kPropN; break;
    case 8: p = kPropP; break;
    case 9: p = kPropS; break;
    default: break;
  }
  if (unicode_is_space(cp)) p |= kPropSpace;
  if (cp >= '0' && cp <= '9') p |= kPropDigit;
  if ((cp >= '0' && cp <= '9') || (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z') || cp == '_') p |= kPropWord;
  return p;
}

bool Regex::Class::matches(uint32_t cp, uint16_t prop) const {
  // llama.cpp hands its regexes non-ASCII whitespace as U+000B, so no literal range sees it.
  if (cp >= 128 && (prop & kPropSpace)) cp = 0x0B;
  if (cp < 128) return (ascii[cp >> 5] >> (cp & 31)) & 1;
  bool in = (prop & props) || (~prop & nprops);
  for (size_t i = 0; !in && i < ranges.size(); i++) in = cp >= ranges[i].first && cp <= ranges[i].second;
  return in != negated;
}

namespace {
struct Node {
  enum Kind { Empty, Char, Cat, Alt, Repeat, Begin, End, Look } kind;
  int cls = -1;          // Char, Look
  bool neg = false;      // Look: (?!X)
  int min = 0, max = 0;  // Repeat (max < 0: unbounded)
  bool greedy = true;
  std::vector<std::unique_ptr<Node>> kids;
  explicit Node(Kind k) : kind(k) {}
};
using NodeP = std::unique_ptr<Node>;
constexpr int kMaxRepeat = 1000;
constexpr size_t kMaxProgram = 100000;
}  // namespace

class RegexCompiler {
 public:
  RegexCompiler(Regex& re) : re_(re), s_(utf8_to_codepoints(re.pattern_)) {}

  void run() {
    NodeP root = alternation(false);
    if (pos_ < s_.size()) bad("unbalanced ')'");
    emit(*root);
    re_.prog_.push_back({Regex::kMatch});
  }

 private:
  Regex& re_;
  std::vector<uint32_t> s_;
  size_t pos_ = 0;

  [[noreturn]] void bad(const std::string& what) const {
    fail(ErrorCode::BadArgument,
         "pre-tokenizer regex '" + re_.pattern_ + "': " + what + " at character " + std::to_string(pos_));
  }
  bool more() const { return pos_ < s_.size(); }
  uint32_t peek() const { return more() ? s_[pos_] : 0; }
  bool eat(uint32_t c) {
    if (more() && s_[pos_] == c) return pos_++, true;
    return false;
  }

  // A class under construction: members before negation and ASCII folding.
  struct Set {
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    uint16_t props = 0, nprops = 0;
    bool negated = false;
  };
  int add_class(const Set& st, bool icase) {
    Regex::Class c;
    c.props = st.props;
    c.nprops = st.nprops;
    c.negated = st.negated;
    bool pos[128];
    for (uint32_t cp = 0; cp < 128; cp++) {
      const uint16_t pr = unicode_props(cp);
      bool in = (pr & st.props) || (~pr & st.nprops);
      for (auto [a, b] : st.ranges) in = in || (cp >= a && cp <= b);
      pos[cp] = in;
    }
    if (icase)
      for (uint32_t cp = 'a'; cp <= 'z'; cp++) pos[cp] = pos[cp - 32] = pos[cp] || pos[cp - 32];
    for (uint32_t cp = 0; cp < 128; cp++)
      if (pos[cp] != st.negated) c.ascii[cp >> 5] |= 1u << (cp & 31);
    for (auto [a, b] : st.ranges)
      if (b >= 128) c.ranges.emplace_back(std::max<uint32_t>(a, 128), b);
    re_.classes_.push_back(std::move(c));
    return (int)re_.classes_.size() - 1;
  }
  NodeP char_node(const Set& st, bool icase) {
    NodeP n = std::make_unique<Node>(Node::Char);
    n->cls = add_class(st, icase);
    return n;
  }

  uint16_t property(bool* ok) {
    if (!eat('{')) bad("\\p needs {name}");
    std::string name;
    while (more() && peek() != '}') name += (char)s_[pos_++];
    if (!eat('}')) bad("unterminated \\p{");
    static const struct {
      const char* n;
      uint16_t p;
    } kNames[] = {{"L", kPropL},   {"Lu", kPropLu}, {"Ll", kPropLl}, {"Lt", kPropLt}, {"Lm", kPropLm},
                  {"Lo", kPropLo}, {"M", kPropM},   {"N", kPropN},   {"P", kPropP},   {"S", kPropS}};
    for (const auto& k : kNames)
      if (name == k.n) return *ok = true, k.p;
    bad("unsupported Unicode property \\p{" + name + "}");
  }
  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
      const uint32_t c = peek();
      const int d = c >= '0' && c <= '9'   ? (int)(c - '0')
                    : c >= 'a' && c <= 'f' ? (int)(c - 'a' + 10)
                    : c >= 'A' && c <= 'F' ? (int)(c - 'A' + 10)
                                           : -1;
      if (d < 0) bad("bad hexadecimal escape");
      v = v * 16 + d;
      pos_++;
    }
    return v;
  }
  // After a backslash: adds the escape's members to st; returns the code point if it is one
  // character (for ranges), else UINT32_MAX.
  uint32_t escape(Set& st) {
    if (!more()) bad("trailing backslash");
    const uint32_t c = s_[pos_++];
    bool ok = false;
    switch (c) {
      case 's': st.props |= kPropSpace; return UINT32_MAX;
      case 'S': st.nprops |= kPropSpace; return UINT32_MAX;
      case 'd': st.props |= kPropDigit; return UINT32_MAX;
      case 'D': st.nprops |= kPropDigit; return UINT32_MAX;
      case 'w': st.props |= kPropWord; return UINT32_MAX;
      case 'W': st.nprops |= kPropWord; return UINT32_MAX;
      case 'p': st.props |= property(&ok); return UINT32_MAX;
      case 'P': st.nprops |= property(&ok); return UINT32_MAX;
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case 'f': return '\f';
      case 'v': return '\v';
      case '0': return 0;
      case 'x': return hex(2);
      case 'u': return hex(4);
      case 'U': return hex(8);
      default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
          bad(std::string("unsupported escape \\") + (char)c);
        return c;  // an escaped punctuation character stands for itself
    }
  }

  NodeP bracket(bool icase) {
    Set st;
    st.negated = eat('^');
    bool first = true;
    while (more() && (peek() != ']' || first)) {
      first = false;
      uint32_t lo;
      if (eat('\\')) {
        lo = escape(st);
        if (lo == UINT32_MAX) continue;
      } else {
        lo = s_[pos_++];
      }
      uint32_t hi = lo;
      if (peek() == '-' && pos_ + 1 < s_.size() && s_[pos_ + 1] != ']') {
        pos_++;
        if (eat('\\')) {
          Set dummy;
          hi = escape(dummy);
          if (hi == UINT32_MAX) bad("a class shorthand cannot end a range");
        } else {
          hi = s_[pos_++];
        }
        if (hi < lo) bad("range out of order");
      }
      st.ranges.emplace_back(lo, hi);
    }
    if (!eat(']')) bad("unterminated [");
    return char_node(st, icase);
  }

  NodeP alternation(bool icase) {
    NodeP first = concat(icase);
    if (peek() != '|') return first;
    NodeP alt = std::make_unique<Node>(Node::Alt);
    alt->kids.push_back(std::move(first));
    while (eat('|')) alt->kids.push_back(concat(icase));
    return alt;
  }

  NodeP concat(bool icase) {
    NodeP cat = std::make_unique<Node>(Node::Cat);
    while (more() && peek() != '|' && peek() != ')') cat->kids.push_back(repeat(icase));
    return cat;
  }

  int number() {
    int v = -1;
    while (more() && peek() >= '0' && peek() <= '9') {
      v = (v < 0 ? 0 : v) * 10 + (int)(s_[pos_++] - '0');
      if (v > kMaxRepeat) bad("repetition count above " + std::to_string(kMaxRepeat));
    }
    return v;
  }

  NodeP repeat(bool icase) {
    NodeP a = atom(icase);
    for (;;) {
      int mn, mx;
      if (eat('?')) mn = 0, mx = 1;
      else if (eat('*')) mn = 0, mx = -1;
      else if (eat('+')) mn = 1, mx = -1;
      else if (peek() == '{' && pos_ + 1 < s_.size() && s_[pos_ + 1] >= '0' && s_[pos_ + 1] <= '9') {
        pos_++;
        mn = number();
        mx = mn;
        if (eat(',')) mx = peek() == '}' ? -1 : number();
        if (!eat('}') || mx == -2 || (mx >= 0 && mx < mn)) bad("bad {n,m} repetition");
      } else {
        return a;
      }
      if (a->kind == Node::Begin || a->kind == Node::End || a->kind == Node::Look) bad("repetition of an assertion");
      NodeP r = std::make_unique<Node>(Node::Repeat);
      r->min = mn;
      r->max = mx;
      if (eat('?')) r->greedy = false;
      else if (peek() == '+') bad("possessive quantifiers are not supported");
      r->kids.push_back(std::move(a));
      a = std::move(r);
    }
  }

  // The lone class a lookahead body reduces to, or -1.
  static int single_class(const Node& n) {
    if (n.kind == Node::Char) return n.cls;
    if ((n.kind == Node::Cat || n.kind == Node::Alt) && n.kids.size() == 1) return single_class(*n.kids[0]);
    return -1;
  }

  NodeP atom(bool icase) {
    const uint32_t c = s_[pos_++];
    Set st;
    switch (c) {
      case '(': {
        NodeP inner;
        if (eat('?')) {
          if (eat(':')) inner = alternation(icase);
          else if (eat('i')) {
            if (!eat(':')) bad("only (?i: groups are supported");
            inner = alternation(true);
          } else if (peek() == '=' || peek() == '!') {
            const bool neg = s_[pos_++] == '!';
            NodeP body = alternation(icase);
            const int cls = single_class(*body);
            if (cls < 0) bad("lookaheads must test one character");
            inner = std::make_unique<Node>(Node::Look);
            inner->cls = cls;
            inner->neg = neg;
          } else {
            bad("unsupported group (?" + std::string(1, (char)peek()));
          }
        } else {
          inner = alternation(icase);
        }
        if (!eat(')')) bad("unterminated (");
        return inner;
      }
      case '[': return bracket(icase);
      case '.':
        st.negated = true;
        st.ranges = {{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};
        return char_node(st, false);
      case '^': return std::make_unique<Node>(Node::Begin);
      case '$': return std::make_unique<Node>(Node::End);
      case '\\': {
        const uint32_t one = escape(st);
        if (one != UINT32_MAX) st.ranges.emplace_back(one, one);
        return char_node(st, icase);
      }
      case ')':
      case '|':
      case '*':
      case '+':
      case '?': bad("nothing to repeat or group");
      default: st.ranges.emplace_back(c, c); return char_node(st, icase);
    }
  }

  int here() const { return (int)re_.prog_.size(); }
  int push(Regex::Op op, int x = 0, int y = 0) {
    if (re_.prog_.size() >= kMaxProgram) bad("the compiled pattern is too large");
    re_.prog_.push_back({op, x, y});
    return here() - 1;
  }

  void emit(const Node& n) {
    switch (n.kind) {
      case Node::Empty: break;
      case Node::Char: push(Regex::kChar, n.cls); break;
      case Node::Begin: push(Regex::kBegin); break;
      case Node::End: push(Regex::kEnd); break;
      case Node::Look: push(n.neg ? Regex::kNotLook : Regex::kLook, n.cls); break;
      case Node::Cat:
        for (const NodeP& k : n.kids) emit(*k);
        break;
      case Node::Alt: {
        std::vector<int> jumps;
        for (size_t i = 0; i < n.kids.size(); i++) {
          if (i + 1 < n.kids.size()) {
            const int sp = push(Regex::kSplit);
            re_.prog_[sp].x = here();
            emit(*n.kids[i]);
            jumps.push_back(push(Regex::kJmp));
            re_.prog_[sp].y = here();
          } else {
            emit(*n.kids[i]);
          }
        }
        for (int j : jumps) re_.prog_[j].x = here();
        break;
      }
      case Node::Repeat: {
        const Node& body = *n.kids[0];
        for (int i = 0; i < n.min; i++) emit(body);
        auto split_to = [&](int sp, int body_at, int out) {
          re_.prog_[sp].x = n.greedy ? body_at : out;
          re_.prog_[sp].y = n.greedy ? out : body_at;
        };
        if (n.max < 0) {  // L: split body, out; body; jmp L
          const int sp = push(Regex::kSplit);
          emit(body);
          push(Regex::kJmp, sp);
          split_to(sp, sp + 1, here());
        } else {
          std::vector<int> splits;
          for (int i = n.min; i < n.max; i++) {
            splits.push_back(push(Regex::kSplit));
            emit(body);
          }
          for (int sp : splits) split_to(sp, sp + 1, here());
        }
        break;
      }
    }
  }
};

Regex::Regex(const std::string& pattern) : pattern_(pattern) { RegexCompiler(*this).run(); }

namespace {
struct Thread {
  int pc;
  size_t start;
};
}  // namespace

bool Regex::find(const uint32_t* cps, const uint16_t* props, size_t b, size_t e, size_t from, size_t* ms, size_t* me,
                 uint64_t* steps) const {
  // Scratch reused across calls; stamps only grow, so marks left by other patterns never collide.
  thread_local std::vector<Thread> clist, nlist, stack;
  thread_local std::vector<uint64_t> mark;
  thread_local uint64_t stamp = 0;
  if (mark.size() < prog_.size()) mark.resize(prog_.size(), 0);
  clist.clear();
  nlist.clear();
  stack.clear();
  uint64_t work = 0;
  // Adds pc's closure at position p to list (in priority order), following jumps, splits and
  // zero-width assertions; each pc enters a list once (the first, highest-priority way).
  auto add = [&](std::vector<Thread>& list, int pc0, size_t start, size_t p) {
    stack.push_back({pc0, start});
    while (!stack.empty()) {
      const Thread t = stack.back();
      stack.pop_back();
      work++;
      if (mark[t.pc] == stamp) continue;
      mark[t.pc] = stamp;
      const Inst& in = prog_[t.pc];
      switch (in.op) {
        case kJmp: stack.push_back({in.x, t.start}); break;
        case kSplit:
          stack.push_back({in.y, t.start});
          stack.push_back({in.x, t.start});
          break;
        case kBegin:
          if (p == b) stack.push_back({t.pc + 1, t.start});
          break;
        case kEnd:
          if (p == e) stack.push_back({t.pc + 1, t.start});
          break;
        case kLook:
        case kNotLook: {
          const bool hit = p < e && classes_[in.x].matches(cps[p], props[p]);
          if (hit == (in.op == kLook)) stack.push_back({t.pc + 1, t.start});
          break;
        }
        default: list.push_back(t); break;
      }
    }
  };
  bool matched = false;
  stamp++;
  for (size_t p = from;; p++) {
    if (!matched) add(clist, 0, p, p);
    if (clist.empty()) {
      if (matched || p >= e) break;
      stamp++;
      continue;
    }
    stamp++;
    nlist.clear();
    for (const Thread& t : clist) {
      work++;
      const Inst& in = prog_[t.pc];
      if (in.op == kMatch) {
        matched = true;
        *ms = t.start;
        *me = p;
        break;  // lower-priority threads lose to this match
      }
      if (p < e && classes_[in.x].matches(cps[p], props[p])) add(nlist, t.pc + 1, t.start, p + 1);
    }
    clist.swap(nlist);
    if (p >= e) {
      // Threads still alive at the end can only match by reaching kMatch without input.
      for (const Thread& t : clist)
        if (prog_[t.pc].op == kMatch) {
          matched = true;
          *ms = t.start;
          *me = e;
          break;
        }
      break;
    }
  }
  if (steps) *steps += work;
  return matched;
}

}  // namespace qkv
