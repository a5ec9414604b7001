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

  int vocab_size() const { return (int)pieces_.size(); }
  int bos_id() const { return 1; }
  int eos_id() const { return 2; }
  const std::string& piece(int id) const { return pieces_.at(id); }
  float score(int id) const { return scores_.at(id); }

  // Text -> ids. The dummy prefix (" ") is added before non-empty text, as llama2.c does.
  std::vector<int> encode(const std::string& text, bool bos, bool eos) const;

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

  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<int16_t> byte_of_;
  std::unordered_map<std::string, int> index_;
  int max_token_length_ = 0;
};

}  // namespace qkv
