// A small regular-expression engine for pre-tokenizer patterns, over Unicode code points.
// It covers exactly what llama.cpp's tokenizer.ggml.pre regexes use: literals (UTF-8), classes
// and negated classes with ranges, \p{L} \p{Lu} \p{Ll} \p{Lt} \p{Lm} \p{Lo} \p{M} \p{N} \p{P}
// \p{S} (and \P{..}), \s \S \d \D \w \W, '.', groups ( ), (?: ), (?i: ) (ASCII case folding),
// alternation, ? * + {n} {n,} {n,m} (greedy or lazy), ^ $, and one-character lookaheads
// (?=X) (?!X). Matching is a Pike VM (a breadth-first NFA simulation with thread priorities),
// so a search costs O(pattern size x characters scanned) and never backtracks, while giving
// the leftmost match that a backtracking engine (std::regex, PCRE) would give. As in llama.cpp,
// non-ASCII whitespace is matched as if it were U+000B (\s matches it; no literal range does).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace qkv {

// Property bits of a code point, as the patterns test them.
enum : uint16_t {
  kPropLu = 1,
  kPropLl = 2,
  kPropLt = 4,
  kPropLm = 8,
  kPropLo = 16,
  kPropL = kPropLu | kPropLl | kPropLt | kPropLm | kPropLo,
  kPropM = 32,
  kPropN = 64,
  kPropP = 128,
  kPropS = 256,
  kPropSpace = 512,   // llama.cpp's whitespace set
  kPropDigit = 1024,  // ASCII 0-9 (\d, as std::regex has it)
  kPropWord = 2048,   // ASCII [A-Za-z0-9_] (\w)
};
uint16_t unicode_props(uint32_t cp);

class Regex {
 public:
  // Throws Error(BadArgument) naming the construct it cannot compile.
  explicit Regex(const std::string& pattern);

  // The leftmost(-first) match in cps[b, e) starting at or after `from` (b <= from <= e);
  // ^ and $ hold at b and e, and lookaheads see nothing past e. props[i] = unicode_props(cps[i]).
  // False if none. *steps (if given) grows by the VM's work: one per thread step.
  bool find(const uint32_t* cps, const uint16_t* props, size_t b, size_t e, size_t from, size_t* ms, size_t* me,
            uint64_t* steps = nullptr) const;

  const std::string& pattern() const { return pattern_; }

  struct Class {
    std::vector<std::pair<uint32_t, uint32_t>> ranges;  // non-ASCII members (ASCII is in `ascii`)
    uint16_t props = 0, nprops = 0;                     // members by property / by lacking one
    bool negated = false;
    uint32_t ascii[4] = {0, 0, 0, 0};  // final answer for code points < 128
    bool matches(uint32_t cp, uint16_t prop) const;
  };
  enum Op : uint8_t { kChar, kSplit, kJmp, kMatch, kBegin, kEnd, kLook, kNotLook };
  struct Inst {
    Op op;
    int x = 0, y = 0;  // kChar/kLook/kNotLook: class; kSplit: preferred x, then y; kJmp: x
  };

 private:
  std::string pattern_;
  std::vector<Class> classes_;
  std::vector<Inst> prog_;
  friend class RegexCompiler;
};

}  // namespace qkv
