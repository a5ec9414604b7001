// WordPiece encoding of GGUF "bert" vocabularies, following llama.cpp's WPM tokenizer.
#include "wordpiece.h"

#include <algorithm>

#include "pretokenize.h"

namespace qkv {

namespace {
#include "wordpiece_table.inc"

template <size_t N>
uint32_t map_lookup(const uint32_t (&table)[N][2], uint32_t cp) {
  const auto* end = table + N;
  const auto* it = std::lower_bound(table, end, cp, [](const uint32_t(&e)[2], uint32_t v) { return e[0] < v; });
  return it != end && (*it)[0] == cp ? (*it)[1] : cp;
}

// ASCII symbols (general category S*): each is a word of its own, like punctuation.
bool ascii_symbol(uint32_t cp) {
  return cp == '$' || cp == '+' || cp == '<' || cp == '=' || cp == '>' || cp == '^' || cp == '`' || cp == '|' ||
         cp == '~';
}
}  // namespace

uint32_t wordpiece_nfd_first(uint32_t cp) {
  if (cp >= 0xAC00 && cp <= 0xD7A3) return 0x1100 + (cp - 0xAC00) / 588;  // Hangul syllable -> leading jamo
  return map_lookup(kWpNfd, cp);
}

uint32_t wordpiece_lower(uint32_t cp) { return map_lookup(kWpLower, cp); }

bool wordpiece_is_control(uint32_t cp) {
  const auto* end = kWpControl + sizeof kWpControl / sizeof kWpControl[0];
  const auto* it = std::upper_bound(kWpControl, end, cp, [](uint32_t v, const uint32_t(&e)[2]) { return v < e[0]; });
  return it != kWpControl && cp <= (*(it - 1))[1];
}

// The CJK ideograph blocks of BERT's tokenizer (with the upper bound of extension B-F's range
// as Hugging Face's Rust code and llama.cpp have it).
bool wordpiece_is_cjk(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

std::vector<std::string> wordpiece_words(const std::string& text) {
  std::vector<std::string> words(1);
  for (uint32_t raw : utf8_to_codepoints(text)) {
    const uint32_t cp = wordpiece_nfd_first(raw);
    if (unicode_is_space(cp)) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    if (cp == 0 || cp == 0xFFFD || wordpiece_is_control(cp)) continue;
    std::string s;
    append_utf8(s, wordpiece_lower(cp));
    if (unicode_class(cp) == 3 || (cp < 0x7F && ascii_symbol(cp)) || wordpiece_is_cjk(cp)) {
      if (!words.back().empty()) words.emplace_back();
      words.back() = s;
      words.emplace_back();
    } else {
      words.back() += s;
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

void wordpiece_encode(const std::string& text, const std::unordered_map<std::string, int>& index, int max_piece_bytes,
                      int unk, std::vector<int>& ids, uint64_t* work) {
  for (const std::string& w : wordpiece_words(text)) {
    const std::string word = "\xE2\x96\x81" + w;  // the word-start marker
    const int n = (int)word.size();
    const size_t start = ids.size();
    // Greedy longest match from the left, byte lengths as llama.cpp tries them.
    for (int i = 0; i < n;) {
      int found = -1, end = i;
      for (int j = std::min(n, i + max_piece_bytes + 1); j > i; j--) {
        auto it = index.find(word.substr(i, j - i));
        if (work) *work += j - i;
        if (it != index.end()) {
          found = it->second;
          end = j;
          break;
        }
      }
      if (found < 0) {
        ids.resize(start);  // one unmatched position spoils the whole word
        break;
      }
      ids.push_back(found);
      i = end;
    }
    if (ids.size() == start && unk >= 0) ids.push_back(unk);
  }
}

}  // namespace qkv
