// Unigram (SentencePiece) normalization and Viterbi segmentation, following llama.cpp's UGM
// tokenizer so that ids match it exactly (scores summed in double, the best kept as float).
#include "unigram.h"

#include <algorithm>
#include <cfloat>
#include <cstring>

#include "../common.h"

namespace qkv {

static const char kEscapedSpace[] = "\xE2\x96\x81";  // U+2581

Unigram::Unigram(const std::vector<std::string>& pieces, const std::vector<float>& scores,
                 const std::vector<int>& types, int unk, bool add_space_prefix, bool remove_extra_whitespaces,
                 std::vector<uint8_t> charsmap)
    : unk_(unk),
      add_space_prefix_(add_space_prefix),
      merge_spaces_(remove_extra_whitespaces),
      charsmap_(std::move(charsmap)) {
  const size_t n = pieces.size();
  if (scores.size() != n) fail(ErrorCode::BadTokenizer, "tokenizer: unigram vocabulary needs one score per piece");
  if (unk < 0 || (size_t)unk >= n)
    fail(ErrorCode::BadTokenizer,
         "tokenizer: the unigram vocabulary needs an unknown token (got id " + std::to_string(unk) + ")");
  float min_score = FLT_MAX;
  score_.assign(n, 0.0);
  match_.reserve(n * 2);
  for (size_t id = 0; id < n; id++) {
    const int ty = types.empty() ? 1 : types[id];
    if (ty == 1) min_score = std::min(min_score, scores[id]);
    if ((ty == 1 || ty == 4 || ty == 5) && !pieces[id].empty()) {
      match_[pieces[id]] = (int)id;
      max_len_ = std::max(max_len_, pieces[id].size());
    }
    score_[id] = ty == 4 ? 0.0 : (double)scores[id];
  }
  unk_score_ = (double)(min_score - 10.0f);
  if (!charsmap_.empty()) {
    if (charsmap_.size() < 4)
      fail(ErrorCode::BadTokenizer, "tokenizer: precompiled_charsmap is shorter than its 4-byte header");
    uint32_t blob;
    std::memcpy(&blob, charsmap_.data(), 4);
    if ((uint64_t)blob + 4 >= charsmap_.size() || blob % 4 != 0)
      fail(ErrorCode::BadTokenizer, "tokenizer: precompiled_charsmap says its trie has " + std::to_string(blob) +
                                        " bytes, which does not fit in its " + std::to_string(charsmap_.size()) +
                                        " bytes");
    xcda_n_ = blob / 4;
    repl_off_ = 4 + (size_t)blob;
  }
}

uint32_t Unigram::node(size_t i) const {
  if (i >= xcda_n_)
    fail(ErrorCode::BadTokenizer,
         "tokenizer: precompiled_charsmap trie index " + std::to_string(i) + " is out of range");
  uint32_t v;
  std::memcpy(&v, charsmap_.data() + 4 + i * 4, 4);
  return v;
}

// The character map is an XOR-compressed compact double array (Darts-clone's layout): a node
// packs BASE, LCHECK (the label that leads to it), a LEAF flag and, at leaves, a VALUE (the
// offset of the null-terminated replacement). The child of node s by byte c is BASE(s) ^ c.
size_t Unigram::charsmap_prefix(const std::string& text, size_t off, const char** repl) const {
  if (xcda_n_ == 0) return 0;
  auto base = [&](uint32_t p) { return (p >> 10) << ((p & (1u << 9)) >> 6); };
  size_t best = 0;
  uint32_t best_value = 0;
  size_t idx = base(node(0));
  for (size_t i = off; i < text.size(); i++) {
    const unsigned char c = (unsigned char)text[i];
    if (c == 0) break;
    idx ^= c;
    const uint32_t p = node(idx);
    if ((p & ((1u << 31) | 0xffu)) != c) break;  // LCHECK
    const bool leaf = (p >> 8) & 1;
    idx ^= base(p);
    if (leaf) {
      best = i - off + 1;
      best_value = node(idx) & ((1u << 31) - 1);
    }
  }
  if (best == 0) return 0;
  const size_t at = repl_off_ + best_value;
  if (at >= charsmap_.size())
    fail(ErrorCode::BadTokenizer,
         "tokenizer: precompiled_charsmap replacement offset " + std::to_string(best_value) + " is out of range");
  const void* end = std::memchr(charsmap_.data() + at, 0, charsmap_.size() - at);
  if (!end) fail(ErrorCode::BadTokenizer, "tokenizer: precompiled_charsmap replacement is not terminated");
  *repl = reinterpret_cast<const char*>(charsmap_.data() + at);
  return best;
}

// UTF-8 length from the first byte (continuation and invalid bytes count 1), as llama.cpp.
static size_t utf8_len(unsigned char b) {
  static const uint8_t lut[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lut[b >> 4];
}

// A valid UTF-8 sequence at text[off..]: its length, or 0.
static size_t valid_utf8(const std::string& s, size_t off) {
  const unsigned char b = s[off];
  const size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (n == 0 || off + n > s.size()) return 0;
  for (size_t i = 1; i < n; i++)
    if (((unsigned char)s[off + i] & 0xC0) != 0x80) return 0;
  return n;
}

std::string Unigram::normalize(const std::string& text) const {
  std::string out;
  bool prepended = false, in_word = false;
  for (size_t off = 0; off < text.size();) {
    // The piece of input consumed and what it becomes: the character map's rewrite of the
    // longest prefix it knows, else the code point itself, else U+FFFD for one invalid byte.
    const char* repl = nullptr;
    size_t consumed = charsmap_prefix(text, off, &repl);
    std::string piece;
    if (consumed > 0) {
      piece = repl;
    } else if ((consumed = valid_utf8(text, off)) > 0) {
      piece = text.substr(off, consumed);
    } else {
      piece = "\xEF\xBF\xBD";
      consumed = 1;
    }
    for (char ch : piece) {
      if (ch != ' ') {
        if (!in_word) {
          in_word = true;
          if ((add_space_prefix_ && !prepended) || merge_spaces_) {
            out += kEscapedSpace;
            prepended = true;
          }
        }
        out += ch;
      } else {
        in_word = false;
        if (!merge_spaces_) out += kEscapedSpace;
      }
    }
    off += consumed;
  }
  return out;
}

void Unigram::encode(const std::string& text, std::vector<int>& ids, uint64_t* work) const {
  const std::string s = normalize(text);
  const size_t n = s.size();
  if (n == 0) return;
  struct Best {
    int id;
    size_t from;
    float score;
  };
  std::vector<Best> best(n + 1, Best{unk_, 0, -FLT_MAX});
  best[0] = {unk_, 0, 0.0f};
  std::string key;
  for (size_t off = 0; off < n;) {
    const size_t cp = std::min(utf8_len((unsigned char)s[off]), n - off);
    const double here = best[off].score;
    bool whole_cp = false;
    key.clear();
    for (size_t len = 1; len <= max_len_ && off + len <= n; len++) {
      key.push_back(s[off + len - 1]);
      auto it = match_.find(key);
      if (work) ++*work;
      if (it == match_.end()) continue;
      if (len == cp) whole_cp = true;
      const double challenger = here + score_[it->second];
      if (challenger > best[off + len].score) best[off + len] = {it->second, off, (float)challenger};
    }
    if (!whole_cp) {
      const double challenger = here + unk_score_;
      if (challenger > best[off + cp].score) best[off + cp] = {unk_, off, (float)challenger};
    }
    off += cp;
  }
  // Back from the end; consecutive unknown tokens become one.
  const size_t start = ids.size();
  bool prev_unk = false;
  for (size_t at = n;;) {
    const Best& b = best[at];
    const bool is_unk = b.id == unk_;
    if (!(prev_unk && is_unk)) ids.push_back(b.id);
    if (b.from == 0) break;
    prev_unk = is_unk;
    at = b.from;
  }
  std::reverse(ids.begin() + start, ids.end());
}

}  // namespace qkv
