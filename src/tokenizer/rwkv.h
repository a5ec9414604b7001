// RWKV "World" tokenization as llama.cpp runs GGUF "rwkv" vocabularies: each token is stored as
// the text of Python's bytes repr (\t \n \r \xNN, a backslash before any other character keeps
// that character), and the text is cut greedily, left to right, into the longest token whose
// bytes it starts with. No normalisation, no pre-tokenizer, no merges.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace qkv {

// The bytes an escaped RWKV token stands for (hex digits read as llama.cpp reads them).
std::string rwkv_unescape(const std::string& escaped);

class RwkvTrie {
 public:
  // tokens: the escaped vocabulary, every token included (the last of duplicates wins).
  explicit RwkvTrie(const std::vector<std::string>& tokens);

  // One stretch of text -> ids, appended. A byte that starts no token becomes unk; with no unk
  // (-1), Error(BadArgument) names the byte. *work (if given) grows by one per byte visited.
  void encode(const std::string& text, int unk, std::vector<int>& ids, uint64_t* work = nullptr) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int>> kids;  // sorted by byte
    int value = -1;
  };
  int child(int node, uint8_t b) const;
  std::vector<Node> nodes_;
};

}  // namespace qkv
