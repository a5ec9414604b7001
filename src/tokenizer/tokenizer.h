// SentencePiece-style BPE as llama2.c does it: dummy-prefix space, greedy merges by piece
// score, byte fallback <0xXX> (ids 3..258), BOS = 1, EOS = 2.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace qkv {

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
  static Tokenizer from_spm_pieces(std::vector<std::string> pieces, std::vector<float> scores,
                                   std::vector<int> types, int bos, int eos, int unk, bool add_space_prefix);

  int vocab_size() const { return (int)pieces_.size(); }
  int bos_id() const { return bos_; }
  int eos_id() const { return eos_; }
  // Whether id is a control/special token (never printed as text).
  bool is_control(int id) const { return id >= 0 && id < vocab_size() && !types_.empty() && types_[id] == 3; }
  const std::string& piece(int id) const { return pieces_.at(id); }
  float score(int id) const { return scores_.at(id); }

  // Text -> ids. The dummy prefix (" ") is added before non-empty text, as llama2.c does.
  std::vector<int> encode(const std::string& text, bool bos, bool eos) const;
  std::vector<int> encode_llama2c(const std::string& text, bool bos, bool eos) const;
  std::vector<int> encode_spm(const std::string& text, bool bos, bool eos) const;

  // The bytes token `id` stands for when it follows `prev`: a leading space is dropped after
  // BOS, and byte tokens <0xXX> become that raw byte. May be an incomplete UTF-8 sequence.
  std::string decode(int prev, int id) const;

  // Byte value of a byte-fallback piece, or -1.
  int byte_value(int id) const { return id >= 0 && id < vocab_size() ? byte_of_[id] : -1; }

 private:
  int lookup(const std::string& s) const {
    auto it = index_.find(s);
    return it == index_.end() ? -1 : it->second;
  }
  int fallback_id(unsigned char byte) const;

  // Merges of adjacent symbols by score (leftmost among equals); symbols are strings. For each
  // result, *origin (if given) holds the input index of a symbol never merged, else -1.
  std::vector<std::string> merge(std::vector<std::string> symbols, std::vector<int>* origin = nullptr) const;

  bool spm_marker_ = false;  // GGUF mode: U+2581 stands for a space
  bool add_space_prefix_ = true;
  int bos_ = 1, eos_ = 2, unk_ = 0;
  std::vector<int> types_;  // GGUF token types (1 normal, 2 unknown, 3 control, 4 user, 5 unused, 6 byte)
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<int16_t> byte_of_;
  std::unordered_map<std::string, int> index_;
  int max_token_length_ = 0;
};

}  // namespace qkv
