// SentencePiece Unigram encoding (GGUF tokenizer.ggml.model = "t5") as llama.cpp runs it:
// normalize (the precompiled character map when the file has one, spaces escaped as U+2581, a
// space prefix, optionally runs of spaces merged), then the Viterbi segmentation that maximises
// the sum of piece scores (log probabilities); a code point no piece covers becomes the unknown
// token (consecutive unknowns merged into one), scored min(score) - 10.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace qkv {

class Unigram {
 public:
  // pieces/scores/types: the vocabulary (types as GGUF numbers them: pieces of type normal (1),
  // user-defined (4) and unused (5) take part in the segmentation; user-defined ones score 0).
  // charsmap: tokenizer.ggml.precompiled_charsmap bytes, or empty. Throws Error(BadTokenizer)
  // for a malformed character map.
  Unigram(const std::vector<std::string>& pieces, const std::vector<float>& scores, const std::vector<int>& types,
          int unk, bool add_space_prefix, bool remove_extra_whitespaces, std::vector<uint8_t> charsmap);

  // One stretch of text (no special tokens in it) -> ids, appended.
  // *work (if given) grows by one per vocabulary lookup.
  void encode(const std::string& text, std::vector<int>& ids, uint64_t* work = nullptr) const;
  // The normalized form encode() segments (for tests).
  std::string normalize(const std::string& text) const;

 private:
  // The longest prefix of text[off..] the character map rewrites: its length (0 = none) and
  // the replacement.
  size_t charsmap_prefix(const std::string& text, size_t off, const char** repl) const;
  uint32_t node(size_t i) const;

  std::unordered_map<std::string, int> match_;  // segmentable pieces -> id (the last duplicate wins)
  std::vector<double> score_;                   // per id: the score Viterbi adds
  size_t max_len_ = 0;                          // longest segmentable piece, bytes
  int unk_ = -1;
  double unk_score_ = 0;
  bool add_space_prefix_ = true, merge_spaces_ = false;
  std::vector<uint8_t> charsmap_;
  size_t xcda_n_ = 0, repl_off_ = 0;  // XCDA entries (u32) after the 4-byte size; replacements from repl_off_
};

}  // namespace qkv
