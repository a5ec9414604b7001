// All occurrences of many strings in one pass over a text (Aho-Corasick): the special tokens
// written in a text are found in time linear in the text plus the occurrences, however many
// special tokens the vocabulary has.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace qkv {

class SpecialMatcher {
 public:
  // Pattern i is texts[i]; empty texts never match.
  explicit SpecialMatcher(const std::vector<std::string>& texts = {});

  // Every occurrence (pattern, start byte), in order of its end. *steps grows by the work done.
  std::vector<std::pair<int, size_t>> find_all(const std::string& text, uint64_t* steps = nullptr) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int>> next;  // sorted by byte
    int fail = 0;
    int out = -1;       // the pattern ending at this node
    int out_link = -1;  // nearest node on the fail chain with a pattern
    int depth = 0;
  };
  int child(int node, uint8_t b) const;
  std::vector<Node> nodes_;
  std::vector<int> len_;
};

}  // namespace qkv
