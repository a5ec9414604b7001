// WordPiece (BERT) as llama.cpp runs GGUF "bert" vocabularies: the text is normalised (accents
// stripped through the first code point of its NFD form, lowercased, control characters dropped),
// split at whitespace, with each punctuation mark, ASCII symbol and CJK ideograph a word of its
// own; each word, prefixed with U+2581 (the word-start marker the GGUF converter writes in place
// of BERT's bare pieces, whose "##" continuations it writes bare), becomes the longest
// vocabulary pieces from the left; a word with an unmatched position becomes [UNK] whole.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace qkv {

// The normalised words of a text, as UTF-8 strings (without the U+2581 marker).
std::vector<std::string> wordpiece_words(const std::string& text);

// Appends the ids of text's words to ids. index: piece -> id; max_piece_bytes: the longest piece;
// unk: the id of a word that cannot be spelled.
void wordpiece_encode(const std::string& text, const std::unordered_map<std::string, int>& index, int max_piece_bytes,
                      int unk, std::vector<int>& ids, uint64_t* work = nullptr);

// Normalisation steps, exposed for tests: the NFD first code point, the lowercase first code
// point, and the character classes the splitter uses.
uint32_t wordpiece_nfd_first(uint32_t cp);
uint32_t wordpiece_lower(uint32_t cp);
bool wordpiece_is_control(uint32_t cp);
bool wordpiece_is_cjk(uint32_t cp);

}  // namespace qkv
