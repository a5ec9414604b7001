// Constrained decoding: a pushdown matcher over a Grammar, advanced byte by byte (UTF-8 code
// points may span tokens), and the per-step mask of the vocabulary's tokens that keep the output
// valid. Matcher states (a set of parse stacks plus a partial code point) are interned and their
// byte transitions cached, so the grammar becomes a lazily built byte automaton; a mask walks a
// trie of the token byte strings through it (shared prefixes walked once) and is cached per state.
// Output is valid UTF-8 without NUL (a NUL byte never matches, as in llama.cpp).
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "gbnf.h"

namespace qkv {

// The vocabulary as byte strings, in a trie. Tokens with no bytes (control tokens) are never
// allowed by a mask; the end-of-generation ids are allowed exactly when the grammar can end.
class TokenTrie {
 public:
  TokenTrie(const std::vector<std::string>& token_bytes, std::vector<int> eog_ids);
  int vocab_size() const { return vocab_; }
  const std::vector<int>& eog_ids() const { return eog_; }
  const std::string& bytes(int id) const { return bytes_[id]; }

  struct Node {
    int32_t first_child = -1, next_sibling = -1;
    int32_t tok_begin = 0, tok_end = 0;  // tokens ending here: toks_[tok_begin, tok_end)
    uint8_t byte = 0;
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& tokens() const { return toks_; }

 private:
  int vocab_;
  std::vector<std::string> bytes_;
  std::vector<int> eog_;
  std::vector<Node> nodes_;  // nodes_[0] is the root (the empty prefix)
  std::vector<int32_t> toks_;
};

class GrammarMatcher {
 public:
  GrammarMatcher(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenTrie> vocab);

  // Bit i set: token i may come next. (vocab_size + 63) / 64 words, valid until the next call.
  const std::vector<uint64_t>& mask();
  bool allowed(int token);
  // Advances by a sampled token; an end-of-generation id ends the match. Throws BadArgument
  // for a token the mask forbids.
  void accept_token(int token);
  // Advances by raw bytes; false (state unchanged) if they cannot continue the output.
  bool accept_bytes(const std::string& bytes);
  // The output so far is a complete sentence of the grammar.
  bool can_end() const;
  // Nothing but the end can follow (the grammar is complete and allows no more).
  bool must_end();
  // Whether `text` as a whole is a sentence of the grammar (from the start state).
  bool matches(const std::string& text);
  void reset();
  int vocab_size() const { return vocab_->vocab_size(); }

  size_t state_count() const { return states_.size(); }

 private:
  struct Node {  // one frame of a parse stack: a grammar position and the frame below it
    uint32_t pos;
    int32_t parent;
  };
  struct State {
    std::vector<int32_t> stacks;  // sorted; top frames at a Chars element, or -1 for "complete"
    uint32_t cp = 0;              // a partial UTF-8 code point: bits so far and bytes still needed
    uint8_t need = 0;
    uint8_t len = 0;                // the sequence's whole length, to refuse overlong forms
    std::array<int32_t, 256> next;  // byte transitions: -2 unknown, -1 dead
    int32_t mask_slot = -1;
  };

  std::shared_ptr<const Grammar> g_;
  std::shared_ptr<const TokenTrie> vocab_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_ids_;
  std::vector<State> states_;
  std::map<std::vector<int32_t>, int32_t> state_ids_;  // key: stacks + {cp, need}
  std::vector<std::vector<uint64_t>> masks_;           // cached masks, by slot
  std::vector<int32_t> mask_owner_;
  size_t mask_clock_ = 0;
  int32_t start_ = -1, cur_ = -1;
  bool ended_ = false;
  std::vector<uint64_t> out_;
  std::vector<int32_t> walk_;  // the trie walk's stack of states, by depth

  int32_t node(uint32_t pos, int32_t parent);
  void expand(uint32_t pos, int32_t parent, std::vector<int32_t>& out, int depth);
  int32_t intern(std::vector<int32_t> stacks, uint32_t cp, uint8_t need, uint8_t len);
  int32_t step(int32_t state, uint8_t byte);
  int32_t advance_cp(const State& s, uint32_t cp);
  void compute_mask(int32_t state, std::vector<uint64_t>& m);
};

}  // namespace qkv
