// Learning a SentencePiece-style BPE vocabulary from text: spaces written as U+2581, a dummy
// prefix space, the 256 <0xXX> byte-fallback pieces, <unk> <s> </s>. Each learned piece's
// score is minus its merge rank, so qkv's SentencePiece-mode encoder (and llama.cpp's), which
// merge the highest-scoring adjacent pair first, replay the learned merge order.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../tokenizer/tokenizer.h"

namespace qkv {

struct BpeVocab {
  std::vector<std::string> pieces;  // id order: <unk>, <s>, </s>, <0x00>..<0xFF>, characters, merges
  std::vector<float> scores;
  std::vector<int> types;  // GGUF token types: 1 normal, 2 unknown, 3 control, 6 byte
  int n_chars = 0, n_merges = 0;
};

// vocab_size: 260..65536 (the 259 fixed pieces, then at least one character). Characters that
// are rare (outside 99.99% coverage) or control characters are left to byte fallback.
// Throws Error(BadArgument) for an empty text or an impossible size.
BpeVocab train_bpe(const std::string& text, int vocab_size);

Tokenizer bpe_tokenizer(const BpeVocab& v);
// A GGUF holding only the tokenizer (tokenizer.ggml.* keys), readable by qkv and llama.cpp.
std::vector<uint8_t> bpe_to_gguf(const BpeVocab& v, const std::string& name);
// llama2.c's tokenizer.bin (spaces as ' ').
std::vector<uint8_t> bpe_to_llama2c(const BpeVocab& v);

}  // namespace qkv
