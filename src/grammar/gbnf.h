// Grammars for constrained decoding: llama.cpp's GBNF text parsed into flat rules over Unicode
// code points. Repetitions and groups become generated rules, so a rule is only alternatives of
// sequences of code-point sets and rule references.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace qkv {

// A set of code points: ranges, optionally negated ([^...], and '.' as the negation of nothing).
struct CharSet {
  bool negated = false;
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive
  bool matches(uint32_t cp) const;
  // Whether some code point of [lo, hi] is in the set (for a partial UTF-8 sequence).
  bool intersects(uint32_t lo, uint32_t hi) const;
};

struct GElem {
  enum Kind : uint8_t { End, Alt, Ref, Chars } kind;
  uint32_t value;  // Ref: rule id; Chars: index into Grammar::sets
};

// Rules laid out one after another in `elems`: a rule is its alternatives separated by Alt and
// closed by End; a position in the grammar is an index into `elems`.
struct Grammar {
  std::vector<GElem> elems;
  std::vector<CharSet> sets;
  std::vector<uint32_t> rule_start;  // rule id -> index of its first element
  std::vector<std::string> rule_names;
  uint32_t root = 0;

  // Parses GBNF (rules `name ::= alternatives`, `|`, groups, `*` `+` `?` `{m}` `{m,}` `{m,n}`,
  // "literals", [classes] with ranges and ^, `.`, escapes \n \r \t \\ \" \' \[ \] \- \^ \xHH
  // \uHHHH \UHHHHHHHH, # comments). The start rule is `root`. Errors are BadArgument with the
  // line and column; left-recursive grammars are refused (they cannot be matched top-down).
  static Grammar parse(const std::string& text);
};

}  // namespace qkv
