// SentencePiece-style BPE as llama2.c does it: dummy-prefix space, greedy merges by piece
// score, byte fallback <0xXX> (ids 3..258), BOS = 1, EOS = 2.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "pretokenize.h"

namespace qkv {

// GGUF token types (tokenizer.ggml.token_type).
enum TokenType { kTokNormal = 1, kTokUnknown = 2, kTokControl = 3, kTokUserDefined = 4, kTokUnused = 5, kTokByte = 6 };

// The initial symbols of SentencePiece-mode encoding: one per UTF-8 code point, an invalid or
// truncated sequence's bytes one by one. (Shared with the BPE trainer, which must split alike.)
std::vector<std::string> utf8_symbols(const std::string& s);

class Unigram;
class RwkvTrie;
class SpecialMatcher;

class Tokenizer {
 public:
  // Parses llama2.c's tokenizer.bin: int32 max_token_length, then vocab_size x
  // (f32 score, int32 len, len bytes). vocab_size comes from the model; a file holding more or
  // fewer pieces is refused with both counts. Throws Error(BadTokenizer).
  static Tokenizer from_llama2c(const uint8_t* data, uint64_t size, int vocab_size);

  // SentencePiece vocabulary as GGUF stores it (tokenizer.ggml.*): spaces written as U+2581,
  // byte fallback by the pieces "<0xXX>", special ids from the metadata. Encoding follows
  // llama.cpp: code points are the initial symbols, merged by score; what is left unmatched
  // becomes byte tokens.
  static Tokenizer from_spm_pieces(std::vector<std::string> pieces, std::vector<float> scores, std::vector<int> types,
                                   int bos, int eos, int unk, bool add_space_prefix);

  // Byte-level BPE as GGUF stores it (tokenizer.ggml.model = gpt2): tokens in GPT-2's
  // byte-to-unicode spelling, merges "left right" by rank, a pre-tokenizer from tokenizer.ggml.pre.
  // The raw-UTF-8 kinds (Gemma 4's) spell tokens as text, spaces as U+2581, bytes as <0xXX>.
  // ignore_merges: a pre-token that is itself in the vocabulary is taken whole (Llama 3).
  static Tokenizer from_bpe(std::vector<std::string> tokens, std::vector<int> types,
                            const std::vector<std::string>& merges, PreTokenizer pre, bool ignore_merges);

  // SentencePiece Unigram as GGUF stores it (tokenizer.ggml.model = t5): Viterbi over piece
  // scores after llama.cpp's normalization (tokenizer/unigram.h). No BOS; special ids are set
  // with set_specials.
  static Tokenizer from_unigram(std::vector<std::string> pieces, std::vector<float> scores, std::vector<int> types,
                                int unk, bool add_space_prefix, bool remove_extra_whitespaces,
                                std::vector<uint8_t> charsmap);
  // WordPiece as GGUF stores it (tokenizer.ggml.model = bert; see wordpiece.h): word-start
  // pieces prefixed with U+2581, continuations bare. cls/sep are added around each text
  // (as BOS/EOS) when add_cls/add_sep; unk spells a word the vocabulary cannot.
  static Tokenizer from_wordpiece(std::vector<std::string> pieces, std::vector<int> types, int cls, int sep, int unk,
                                  bool add_cls, bool add_sep);

  // RWKV World as GGUF stores it (tokenizer.ggml.model = rwkv; see rwkv.h): escaped byte
  // strings, cut greedily into the longest tokens. unk: the id for a byte that starts no token.
  static Tokenizer from_rwkv(std::vector<std::string> tokens, std::vector<int> types, int unk);

  // Special ids (-1 = none), whether encode(..., bos/eos = true) adds them, and the ids that end
  // a generation (EOS, EOT and the like).
  void set_specials(int bos, int eos, bool add_bos, bool add_eos, std::vector<int> eog);

  int vocab_size() const { return (int)pieces_.size(); }
  bool is_bpe() const { return bpe_; }
  bool is_unigram() const { return (bool)ugm_; }
  bool is_wordpiece() const { return wpm_; }
  bool is_rwkv() const { return (bool)rwkv_; }
  // "bpe", "wordpiece", "unigram", "rwkv" or "sentencepiece" (llama2.c and GGUF llama).
  const char* kind() const {
    return bpe_ ? "bpe" : wpm_ ? "wordpiece" : ugm_ ? "unigram" : rwkv_ ? "rwkv" : "sentencepiece";
  }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool is_eog(int id) const;
  const std::vector<int>& eog_ids() const { return eog_; }
  int token_type(int id) const { return id >= 0 && id < vocab_size() && !types_.empty() ? types_[id] : kTokNormal; }
  // Special tokens that swallow the whitespace after them when matched in text (llama.cpp
  // gives Phi-3's special tokens this attribute).
  void set_rstrip(std::vector<int> ids) { rstrip_ = std::move(ids); }
  // tokenizer.chat_template of a GGUF model ("" if none).
  const std::string& chat_template() const { return chat_template_; }
  void set_chat_template(std::string t) { chat_template_ = std::move(t); }
  // The id of a vocabulary entry spelled exactly `text`, or -1.
  int find(const std::string& text) const { return lookup(text); }
  int bos_id() const { return bos_; }
  int eos_id() const { return eos_; }
  // The separator between the two texts of a pair (llama.cpp's SEP: a reranker's query and
  // document) and whether pairs get one (GGUF tokenizer.ggml.add_sep_token; WordPiece: its [SEP]).
  void set_separator(int id, bool add) { sep_ = id, add_sep_ = add && id >= 0; }
  int sep_id() const { return sep_; }
  bool add_sep() const { return add_sep_; }
  // Whether id is a control/special token (never printed as text).
  bool is_control(int id) const { return id >= 0 && id < vocab_size() && !types_.empty() && types_[id] == 3; }
  const std::string& piece(int id) const { return pieces_.at(id); }
  float score(int id) const { return scores_.at(id); }

  // Text -> ids. bos/eos: add BOS/EOS where the tokenizer asks for them (llama2.c: always BOS).
  // parse_special: control tokens written in the text (e.g. "<|im_start|>") become their ids;
  // user-defined tokens always do (llama.cpp's rule).
  // *work (if given) grows by the work done (scan and regex steps), for the linearity tests.
  std::vector<int> encode(const std::string& text, bool bos, bool eos, bool parse_special = false,
                          uint64_t* work = nullptr) const;
  std::vector<int> encode_llama2c(const std::string& text, bool bos, bool eos) const;

  // The bytes token `id` stands for when it follows `prev`: a leading space is dropped after
  // BOS, and byte tokens <0xXX> become that raw byte. May be an incomplete UTF-8 sequence.
  std::string decode(int prev, int id) const;

  // Byte value of a byte-fallback piece, or -1.
  int byte_value(int id) const { return id >= 0 && id < vocab_size() ? byte_of_[id] : -1; }

 private:
  static Tokenizer with_vocab(std::vector<std::string> pieces, std::vector<int> types, int unk, bool last_wins);
  int lookup(const std::string& s) const {
    auto it = index_.find(s);
    return it == index_.end() ? -1 : it->second;
  }
  int fallback_id(unsigned char byte) const;
  // One stretch of text without special tokens.
  void encode_spm_text(const std::string& text, bool prefix, std::vector<int>& ids, uint64_t* work) const;
  void encode_bpe_text(const std::string& text, std::vector<int>& ids, uint64_t* work) const;
  void encode_raw_bpe_text(const std::string& text, std::vector<int>& ids, uint64_t* work) const;
  struct Frag {
    int id;  // >= 0: a special token
    size_t b, e;
  };
  std::vector<Frag> split_specials(const std::string& text, bool parse_special, uint64_t* work) const;
  void index_specials();

  // Merges of adjacent symbols by score (leftmost among equals); symbols are strings. For each
  // result, *origin (if given) holds the input index of a symbol never merged, else -1.
  // pair_score(left, right) gives a merge's priority (higher first) or -inf for none.
  template <class Score>
  // *work (if given) grows by one per candidate pushed or popped.
  static std::vector<std::string> merge(std::vector<std::string> symbols, Score pair_score,
                                        std::vector<int>* origin = nullptr, uint64_t* work = nullptr);
  std::vector<std::string> merge_by_score(std::vector<std::string> symbols, std::vector<int>* origin = nullptr,
                                          uint64_t* work = nullptr) const;

  std::shared_ptr<const Unigram> ugm_;    // Unigram segmentation (t5), else null
  std::shared_ptr<const RwkvTrie> rwkv_;  // RWKV greedy matching, else null
  bool spm_marker_ = false;               // GGUF mode: U+2581 stands for a space
  bool add_space_prefix_ = true;
  bool bpe_ = false, ignore_merges_ = false;
  bool raw_utf8_ = false, escape_spaces_ = false;  // SentencePiece-style BPE (pretokenize.h)
  bool wpm_ = false;                               // WordPiece (wordpiece.h)
  PreTokenizer pre_ = PreTokenizer::Gpt2;
  std::unordered_map<std::string, int> merge_rank_;         // "left right" -> rank
  std::vector<int> specials_;                               // control/user-defined/unknown ids, longest text first
  std::shared_ptr<const SpecialMatcher> specials_matcher_;  // over specials_' texts, in that order
  std::vector<int> eog_;
  std::vector<int> rstrip_;
  std::string chat_template_;
  bool add_bos_ = true, add_eos_ = false, add_sep_ = false;
  int bos_ = 1, eos_ = 2, unk_ = 0, sep_ = -1;
  std::vector<int> types_;  // GGUF token types (1 normal, 2 unknown, 3 control, 4 user, 5 unused, 6 byte)
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<int16_t> byte_of_;
  std::unordered_map<std::string, int> index_;
  int max_token_length_ = 0;
};

}  // namespace qkv
