// llama2.c tokenizer: loading with validation, encoding with run.c's merge order, decoding.
#include "tokenizer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <queue>

#include "../common.h"
#include "rwkv.h"
#include "special_matcher.h"
#include "unigram.h"
#include "wordpiece.h"

namespace qkv {

static void bad(const std::string& msg) { fail(ErrorCode::BadTokenizer, "tokenizer: " + msg); }

static int parse_byte_piece(const std::string& p) {
  // "<0xXX>" with two hex digits
  if (p.size() != 6 || p.compare(0, 3, "<0x") != 0 || p[5] != '>') return -1;
  auto hex = [](char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
  };
  int hi = hex(p[3]), lo = hex(p[4]);
  return (hi < 0 || lo < 0) ? -1 : hi * 16 + lo;
}

Tokenizer Tokenizer::from_llama2c(const uint8_t* data, uint64_t size, int vocab_size) {
  if (vocab_size <= 0) bad("vocabulary size must be positive, got " + std::to_string(vocab_size));
  if (size < 4) bad("file is truncated: " + std::to_string(size) + " bytes, less than its 4-byte header");
  Tokenizer t;
  int32_t mtl;
  std::memcpy(&mtl, data, 4);
  if (mtl <= 0 || mtl > (1 << 16))
    bad("max_token_length = " + std::to_string(mtl) + " is impossible (must be 1..65536); is this a tokenizer.bin?");
  t.max_token_length_ = mtl;
  uint64_t off = 4;
  // Reads one (score, len, bytes) record; false at a clean end of file.
  auto read_piece = [&](std::string* s, float* score, int index) {
    if (off == size) return false;
    if (size - off < 8) bad("file is truncated inside piece " + std::to_string(index));
    int32_t len;
    std::memcpy(score, data + off, 4);
    std::memcpy(&len, data + off + 4, 4);
    off += 8;
    if (len < 0 || len > mtl)
      bad("piece " + std::to_string(index) + " has length " + std::to_string(len) + " (max_token_length is " +
          std::to_string(mtl) + "); the file is corrupt");
    if ((uint64_t)len > size - off)
      bad("file is truncated: piece " + std::to_string(index) + " runs past the end of the file");
    s->assign(reinterpret_cast<const char*>(data + off), len);
    off += len;
    return true;
  };
  // Each piece takes at least 8 bytes, so the file bounds what is worth reserving.
  const uint64_t fits = (size - 4) / 8;
  t.pieces_.reserve(std::min<uint64_t>(vocab_size, fits));
  t.scores_.reserve(std::min<uint64_t>(vocab_size, fits));
  for (int i = 0; i < vocab_size; i++) {
    std::string s;
    float sc;
    if (!read_piece(&s, &sc, i))
      bad("it has " + std::to_string(i) + " pieces but the model's vocabulary has " + std::to_string(vocab_size) +
          "; model and tokenizer do not belong together");
    t.pieces_.push_back(std::move(s));
    t.scores_.push_back(sc);
  }
  if (off != size) {
    int extra = 0;
    std::string s;
    float sc;
    while (extra < (1 << 22) && read_piece(&s, &sc, vocab_size + extra)) extra++;
    bad("it has " + std::to_string(vocab_size + extra) + " pieces but the model's vocabulary has " +
        std::to_string(vocab_size) + "; model and tokenizer do not belong together");
  }
  t.byte_of_.resize(vocab_size);
  t.index_.reserve(vocab_size * 2);
  for (int i = 0; i < vocab_size; i++) {
    t.byte_of_[i] = (int16_t)parse_byte_piece(t.pieces_[i]);
    t.index_.emplace(t.pieces_[i], i);  // the first of duplicate pieces wins
  }
  return t;
}

int Tokenizer::fallback_id(unsigned char byte) const {
  int id = byte + 3;
  if (id >= vocab_size()) {
    char hex[8];
    snprintf(hex, sizeof hex, "0x%02X", byte);
    fail(ErrorCode::BadArgument, std::string("cannot encode byte ") + hex +
                                     ": the tokenizer has no byte-fallback pieces (vocabulary of " +
                                     std::to_string(vocab_size()) + ")");
  }
  return id;
}

static const std::string kSpace = "\xE2\x96\x81";  // U+2581

Tokenizer Tokenizer::from_spm_pieces(std::vector<std::string> pieces, std::vector<float> scores, std::vector<int> types,
                                     int bos, int eos, int unk, bool add_space_prefix) {
  const int n = (int)pieces.size();
  if (n == 0) bad("the vocabulary is empty");
  if (scores.size() != pieces.size())
    bad("has " + std::to_string(scores.size()) + " scores for " + std::to_string(n) + " pieces");
  if (!types.empty() && types.size() != pieces.size())
    bad("has " + std::to_string(types.size()) + " token types for " + std::to_string(n) + " pieces");
  for (int id : {bos, eos})
    if (id < 0 || id >= n)
      bad("special token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(n));
  Tokenizer t;
  t.pieces_ = std::move(pieces);
  t.scores_ = std::move(scores);
  t.types_ = std::move(types);
  t.bos_ = bos;
  t.eos_ = eos;
  t.unk_ = unk >= 0 && unk < n ? unk : -1;
  t.spm_marker_ = true;
  t.add_space_prefix_ = add_space_prefix;
  t.byte_of_.resize(n);
  t.index_.reserve(n * 2);
  for (int i = 0; i < n; i++) {
    t.byte_of_[i] = (int16_t)parse_byte_piece(t.pieces_[i]);
    t.index_.emplace(t.pieces_[i], i);
  }
  t.index_specials();
  t.set_specials(bos, eos, true, false, {});
  return t;
}

// The parts every GGUF vocabulary kind shares: checked sizes, the pieces indexed (the first of
// duplicates wins, or the last where llama.cpp's kind says so), zero scores, no byte pieces.
Tokenizer Tokenizer::with_vocab(std::vector<std::string> pieces, std::vector<int> types, int unk, bool last_wins) {
  const int n = (int)pieces.size();
  if (n == 0) bad("the vocabulary is empty");
  if (!types.empty() && types.size() != pieces.size())
    bad("has " + std::to_string(types.size()) + " token types for " + std::to_string(n) + " tokens");
  if (unk < -1 || unk >= n) bad("the unknown token id " + std::to_string(unk) + " is outside the vocabulary");
  Tokenizer t;
  t.add_space_prefix_ = false;
  t.pieces_ = std::move(pieces);
  t.scores_.assign(n, 0.0f);
  t.types_ = std::move(types);
  t.byte_of_.assign(n, -1);
  t.unk_ = unk;
  t.index_.reserve(n * 2);
  for (int i = 0; i < n; i++) {
    if (last_wins) t.index_[t.pieces_[i]] = i;
    else t.index_.emplace(t.pieces_[i], i);
  }
  return t;
}

Tokenizer Tokenizer::from_bpe(std::vector<std::string> tokens, std::vector<int> types,
                              const std::vector<std::string>& merges, PreTokenizer pre, bool ignore_merges) {
  Tokenizer t = with_vocab(std::move(tokens), std::move(types), -1, false);
  const int n = t.vocab_size();
  t.bpe_ = true;
  t.pre_ = pre;
  t.ignore_merges_ = ignore_merges;
  t.raw_utf8_ = pre_tokenizer_raw_utf8(pre);
  t.escape_spaces_ = pre_tokenizer_escapes_spaces(pre);
  if (t.raw_utf8_)  // <0xXX> byte tokens, as SentencePiece writes them
    for (int i = 0; i < n; i++)
      if (t.token_type(i) == kTokByte) t.byte_of_[i] = (int16_t)parse_byte_piece(t.pieces_[i]);
  t.merge_rank_.reserve(merges.size() * 2);
  for (size_t r = 0; r < merges.size(); r++) {
    const size_t sp = merges[r].find(' ', 1);
    if (sp == std::string::npos || sp + 1 >= merges[r].size())
      bad("merge " + std::to_string(r) + " ('" + merges[r].substr(0, 40) +
          "') is not two symbols separated by a space");
    t.merge_rank_.emplace(merges[r], (int)r);  // the first of duplicate merges wins
  }
  t.index_specials();
  t.set_specials(-1, -1, false, false, {});
  return t;
}

Tokenizer Tokenizer::from_unigram(std::vector<std::string> pieces, std::vector<float> scores, std::vector<int> types,
                                  int unk, bool add_space_prefix, bool remove_extra_whitespaces,
                                  std::vector<uint8_t> charsmap) {
  const int n = (int)pieces.size();
  if (n == 0) bad("the vocabulary is empty");
  if (scores.size() != pieces.size())
    bad("has " + std::to_string(scores.size()) + " scores for " + std::to_string(n) + " pieces");
  if (!types.empty() && types.size() != pieces.size())
    bad("has " + std::to_string(types.size()) + " token types for " + std::to_string(n) + " pieces");
  Tokenizer t;
  t.ugm_ = std::make_shared<Unigram>(pieces, scores, types, unk, add_space_prefix, remove_extra_whitespaces,
                                     std::move(charsmap));
  t.pieces_ = std::move(pieces);
  t.scores_ = std::move(scores);
  t.types_ = std::move(types);
  t.unk_ = unk;
  t.spm_marker_ = true;
  t.add_space_prefix_ = add_space_prefix;
  t.byte_of_.resize(n);
  t.index_.reserve(n * 2);
  for (int i = 0; i < n; i++) {
    t.byte_of_[i] = (int16_t)parse_byte_piece(t.pieces_[i]);
    t.index_.emplace(t.pieces_[i], i);
  }
  t.index_specials();
  t.set_specials(-1, -1, false, false, {});
  return t;
}

Tokenizer Tokenizer::from_wordpiece(std::vector<std::string> pieces, std::vector<int> types, int cls, int sep, int unk,
                                    bool add_cls, bool add_sep) {
  Tokenizer t = with_vocab(std::move(pieces), std::move(types), unk, true);  // llama.cpp: the last duplicate wins
  t.wpm_ = true;
  for (const std::string& p : t.pieces_) t.max_token_length_ = std::max(t.max_token_length_, (int)p.size());
  t.index_specials();
  t.set_specials(cls, sep, add_cls, add_sep, {sep});
  t.set_separator(sep, add_sep);
  return t;
}

Tokenizer Tokenizer::from_rwkv(std::vector<std::string> tokens, std::vector<int> types, int unk) {
  auto trie = std::make_shared<RwkvTrie>(tokens);
  Tokenizer t = with_vocab(std::move(tokens), std::move(types), unk, false);
  t.rwkv_ = std::move(trie);
  t.index_specials();
  t.set_specials(-1, -1, false, false, {});
  return t;
}

void Tokenizer::index_specials() {
  specials_.clear();
  for (int i = 0; i < vocab_size(); i++) {
    const int ty = token_type(i);
    if ((ty == kTokControl || ty == kTokUserDefined || ty == kTokUnknown) && !pieces_[i].empty())
      specials_.push_back(i);
  }
  std::stable_sort(specials_.begin(), specials_.end(),
                   [this](int a, int b) { return pieces_[a].size() > pieces_[b].size(); });
  std::vector<std::string> texts;
  for (int id : specials_) texts.push_back(pieces_[id]);
  specials_matcher_ = specials_.empty() ? nullptr : std::make_shared<const SpecialMatcher>(texts);
}

void Tokenizer::set_specials(int bos, int eos, bool add_bos, bool add_eos, std::vector<int> eog) {
  const int n = vocab_size();
  for (int id : {bos, eos})
    if (id < -1 || id >= n)
      bad("special token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(n));
  if (add_bos && bos < 0) bad("BOS must be added but the tokenizer has no BOS token");
  bos_ = bos;
  eos_ = eos;
  add_bos_ = add_bos;
  add_eos_ = add_eos && eos >= 0;
  // End of generation: EOS, the given ids (EOT, ...) and the control tokens that chat formats
  // end their turns with.
  static const char* kEnders[] = {"<|eot_id|>",    "<|im_end|>",      "<|end|>",    "<end_of_turn>",
                                  "<|endoftext|>", "<|end_of_text|>", "<|eom_id|>", "<EOT>"};
  if (eos >= 0) eog.push_back(eos);
  for (const char* e : kEnders) {
    const int id = lookup(e);
    if (id >= 0 && token_type(id) == kTokControl) eog.push_back(id);
  }
  eog_.clear();
  for (int id : eog)
    if (id >= 0 && id < n && !is_eog(id)) eog_.push_back(id);
}

bool Tokenizer::is_eog(int id) const { return std::find(eog_.begin(), eog_.end(), id) != eog_.end(); }

// llama.cpp's rule, in one pass: special tokens claim their occurrences longest first (then in
// vocabulary order), each leftmost and without overlapping its own earlier ones, in the text
// that longer ones left unclaimed. All occurrences come from one Aho-Corasick scan; an
// occurrence is free if neither of its ends is claimed (a claimed run inside it would be a
// token at least as long, which can only have come first if it covers one of those ends).
std::vector<Tokenizer::Frag> Tokenizer::split_specials(const std::string& text, bool parse_special,
                                                       uint64_t* work) const {
  std::vector<Frag> out;
  if (!specials_matcher_ || text.empty()) {
    out.push_back({-1, 0, text.size()});
    return out;
  }
  std::vector<std::pair<int, size_t>> hits = specials_matcher_->find_all(text, work);
  hits.erase(std::remove_if(hits.begin(), hits.end(),
                            [&](const std::pair<int, size_t>& h) {
                              return !parse_special && token_type(specials_[h.first]) != kTokUserDefined;
                            }),
             hits.end());
  std::sort(hits.begin(), hits.end());  // by rank, then position
  if (work) *work += hits.size();
  std::vector<uint8_t> claimed(text.size(), 0);
  std::vector<Frag> tokens;
  size_t own_end = 0;
  int rank = -1;
  for (auto [r, s] : hits) {
    const int sid = specials_[r];
    const size_t e = s + pieces_[sid].size();
    if (r != rank) rank = r, own_end = 0;
    if (s < own_end || claimed[s] || claimed[e - 1]) continue;
    std::fill(claimed.begin() + s, claimed.begin() + e, 1);
    size_t p = e;
    if (std::find(rstrip_.begin(), rstrip_.end(), sid) != rstrip_.end())
      while (p < text.size() && !claimed[p] && std::isspace((unsigned char)text[p])) claimed[p++] = 1;
    own_end = p;
    tokens.push_back({sid, s, p});
    if (work) *work += p - s;
  }
  std::sort(tokens.begin(), tokens.end(), [](const Frag& a, const Frag& b) { return a.b < b.b; });
  size_t p = 0;
  for (const Frag& t : tokens) {
    if (t.b > p) out.push_back({-1, p, t.b});
    out.push_back({t.id, t.b, t.b + pieces_[t.id].size()});
    p = t.e;
  }
  if (p < text.size()) out.push_back({-1, p, text.size()});
  return out;
}

std::vector<int> Tokenizer::encode(const std::string& text, bool bos, bool eos, bool parse_special,
                                   uint64_t* work) const {
  if (!spm_marker_ && !bpe_ && !wpm_ && !rwkv_) return encode_llama2c(text, bos, eos);
  std::vector<int> ids;
  if (bos && add_bos_ && bos_ >= 0) ids.push_back(bos_);
  // Special tokens written in the text split it into text and token fragments.
  std::vector<Frag> frags = split_specials(text, parse_special, work);
  bool prev_special = true;  // SentencePiece: a space prefix at the start and after each special token
  for (const Frag& f : frags) {
    if (f.id >= 0) {
      ids.push_back(f.id);
      prev_special = true;
      continue;
    }
    if (f.e == f.b) continue;
    const std::string part = text.substr(f.b, f.e - f.b);
    if (ugm_) ugm_->encode(part, ids, work);
    else if (rwkv_) rwkv_->encode(part, unk_, ids, work);
    else if (bpe_) encode_bpe_text(part, ids, work);
    else if (wpm_) wordpiece_encode(part, index_, max_token_length_, unk_, ids, work);
    else encode_spm_text(part, add_space_prefix_ && prev_special, ids, work);
    prev_special = false;
  }
  if (eos && add_eos_) ids.push_back(eos_);
  return ids;
}

void Tokenizer::encode_bpe_text(const std::string& text, std::vector<int>& ids, uint64_t* work) const {
  if (raw_utf8_) return encode_raw_bpe_text(text, ids, work);
  for (const std::string& word : pre_tokenize(text, pre_, work)) {
    std::vector<std::string> sym;
    std::string whole;
    for (unsigned char b : word) {
      std::string c;
      append_utf8(c, gpt2_byte_to_cp(b));
      whole += c;
      sym.push_back(std::move(c));
    }
    if (ignore_merges_) {
      const int id = lookup(whole);
      if (id >= 0) {
        ids.push_back(id);
        continue;
      }
    }
    auto rank = [this](const std::string& a, const std::string& b) {
      auto it = merge_rank_.find(a + " " + b);
      return it == merge_rank_.end() ? -INFINITY : -(float)it->second;
    };
    for (const std::string& piece : merge(std::move(sym), rank, nullptr, work)) {
      const int id = lookup(piece);
      if (id >= 0) {
        ids.push_back(id);
        continue;
      }
      for (uint32_t cp : utf8_to_codepoints(piece)) {  // one token per byte
        std::string c;
        append_utf8(c, cp);
        const int bid = lookup(c);
        if (bid >= 0) ids.push_back(bid);
        else if (unk_ >= 0) ids.push_back(unk_);
        else fail(ErrorCode::BadArgument, "cannot encode a byte: the BPE vocabulary lacks its byte token");
      }
    }
  }
}

// SentencePiece-style BPE (llama.cpp's byte_encode = false): spaces written as U+2581 where the
// kind says so, merges over the UTF-8 characters themselves, and a piece no token spells becomes
// its bytes' <0xXX> tokens (bytes without one are dropped, as llama.cpp drops them).
void Tokenizer::encode_raw_bpe_text(const std::string& text, std::vector<int>& ids, uint64_t* work) const {
  std::string escaped;
  if (escape_spaces_) {
    escaped.reserve(text.size() + text.size() / 2);
    for (char c : text) {
      if (c == ' ') escaped += kSpace;
      else escaped += c;
    }
  }
  auto rank = [this](const std::string& a, const std::string& b) {
    auto it = merge_rank_.find(a + " " + b);
    return it == merge_rank_.end() ? -INFINITY : -(float)it->second;
  };
  for (const std::string& word : pre_tokenize(escape_spaces_ ? escaped : text, pre_, work)) {
    // Gemma 4: a run of newlines that is itself a token is taken whole.
    if (pre_ == PreTokenizer::Gemma4 && word.find_first_not_of('\n') == std::string::npos) {
      const int id = lookup(word);
      if (id >= 0) {
        ids.push_back(id);
        continue;
      }
    }
    if (ignore_merges_) {
      const int id = lookup(word);
      if (id >= 0) {
        ids.push_back(id);
        continue;
      }
    }
    for (const std::string& piece : merge(utf8_symbols(word), rank, nullptr, work)) {
      const int id = lookup(piece);
      if (id >= 0) {
        ids.push_back(id);
        continue;
      }
      for (unsigned char b : piece) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        const int bid = lookup(name);
        if (bid >= 0) ids.push_back(bid);
      }
    }
  }
}

template <class Score>
std::vector<std::string> Tokenizer::merge(std::vector<std::string> sym, Score pair_score, std::vector<int>* origin,
                                          uint64_t* work) {
  const int m = (int)sym.size();
  std::vector<int> prev(m), next(m);
  std::vector<char> alive(m, 1);
  std::vector<uint32_t> version(m, 0);
  for (int i = 0; i < m; i++) {
    prev[i] = i - 1;
    next[i] = i + 1 < m ? i + 1 : -1;
  }
  struct Cand {
    float score;
    int left, right;
    uint32_t lv, rv;
  };
  auto worse = [](const Cand& a, const Cand& b) { return a.score != b.score ? a.score < b.score : a.left > b.left; };
  std::priority_queue<Cand, std::vector<Cand>, decltype(worse)> heap(worse);
  auto consider = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const float score = pair_score(sym[l], sym[r]);
    if (!(score > -1e30f)) return;
    heap.push({score, l, r, version[l], version[r]});
    if (work) ++*work;
  };
  for (int i = 0; i + 1 < m; i++) consider(i, i + 1);
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    if (work) ++*work;
    if (!alive[c.left] || !alive[c.right] || next[c.left] != c.right || version[c.left] != c.lv ||
        version[c.right] != c.rv)
      continue;
    sym[c.left] += sym[c.right];
    version[c.left]++;
    alive[c.right] = 0;
    next[c.left] = next[c.right];
    if (next[c.right] >= 0) prev[next[c.right]] = c.left;
    consider(prev[c.left], c.left);
    consider(c.left, next[c.left]);
  }
  std::vector<std::string> out;
  if (origin) origin->clear();
  for (int i = 0; i < m; i++)
    if (alive[i]) {
      out.push_back(std::move(sym[i]));
      if (origin) origin->push_back(version[i] == 0 ? i : -1);
    }
  return out;
}

std::vector<std::string> Tokenizer::merge_by_score(std::vector<std::string> sym, std::vector<int>* origin,
                                                   uint64_t* work) const {
  return merge(
      std::move(sym),
      [this](const std::string& a, const std::string& b) {
        const int id = lookup(a + b);
        return id >= 0 && scores_[id] > -1e10f ? scores_[id] : -INFINITY;
      },
      origin, work);
}

std::vector<std::string> utf8_symbols(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char b = s[i];
    size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 1;
    if (i + len > s.size()) len = 1;
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

void Tokenizer::encode_spm_text(const std::string& text, bool prefix, std::vector<int>& ids, uint64_t* work) const {
  {
    std::string s = prefix ? kSpace : std::string();
    for (char ch : text) {
      if (ch == ' ') s += kSpace;
      else s += ch;
    }
    for (const std::string& piece : merge_by_score(utf8_symbols(s), nullptr, work)) {
      int id = lookup(piece);
      if (id >= 0) {
        ids.push_back(id);
        continue;
      }
      for (unsigned char b : piece) {  // byte fallback through the <0xXX> pieces
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        int bid = lookup(name);
        if (bid >= 0) ids.push_back(bid);
        else if (unk_ >= 0) ids.push_back(unk_);
        else
          fail(ErrorCode::BadArgument,
               std::string("cannot encode byte ") + name + ": no byte-fallback piece and no unknown token");
      }
    }
  }
}

std::vector<int> Tokenizer::encode_llama2c(const std::string& text, bool bos, bool eos) const {
  std::vector<int> ids;
  ids.reserve(text.size() + 3);
  if (bos) ids.push_back(bos_id());
  if (!text.empty()) {
    int sp = lookup(" ");
    ids.push_back(sp >= 0 ? sp : fallback_id(' '));
  }
  // Code points (up to 4 bytes) to pieces, or to one byte token per byte.
  const size_t n = text.size();
  std::string buf;
  for (size_t i = 0; i < n; i++) {
    const unsigned char ch = text[i];
    if ((ch & 0xC0) != 0x80) buf.clear();
    buf.push_back((char)ch);
    const bool next_cont = i + 1 < n && ((unsigned char)text[i + 1] & 0xC0) == 0x80;
    if (next_cont && buf.size() < 4) continue;
    int id = lookup(buf);
    if (id >= 0) ids.push_back(id);
    else
      for (unsigned char b : buf) ids.push_back(fallback_id(b));
    buf.clear();
  }

  // Merges: repeatedly the best-scoring adjacent pair, leftmost among equals (run.c's order).
  // Every symbol is a vocabulary piece here, so merging their strings and looking the results
  // up gives run.c's ids.
  std::vector<std::string> sym;
  sym.reserve(ids.size());
  for (int id : ids) sym.push_back(pieces_[id]);
  std::vector<int> origin;
  std::vector<std::string> merged = merge_by_score(std::move(sym), &origin);
  std::vector<int> out;
  out.reserve(merged.size() + 1);
  for (size_t i = 0; i < merged.size(); i++)  // unmerged symbols keep their id (duplicate pieces)
    out.push_back(origin[i] >= 0 ? ids[origin[i]] : lookup(merged[i]));
  if (eos) out.push_back(eos_id());
  return out;
}

std::string Tokenizer::decode(int prev, int id) const {
  if (id < 0 || id >= vocab_size())
    fail(ErrorCode::BadArgument,
         "token id " + std::to_string(id) + " is outside the vocabulary (0.." + std::to_string(vocab_size() - 1) + ")");
  if (byte_of_[id] >= 0) return std::string(1, (char)byte_of_[id]);
  if (rwkv_) return token_type(id) == kTokControl ? std::string() : rwkv_unescape(pieces_[id]);
  if (bpe_) {  // control tokens print nothing; user-defined ones are plain text
    const int ty = token_type(id);
    if (ty == kTokControl) return std::string();
    if (ty == kTokUserDefined) return pieces_[id];
    if (escape_spaces_) {
      std::string o;
      for (size_t i = 0; i < pieces_[id].size();) {
        if (pieces_[id].compare(i, 3, kSpace) == 0) o += ' ', i += 3;
        else o += pieces_[id][i++];
      }
      return o;
    }
    std::string o;
    for (uint32_t cp : utf8_to_codepoints(pieces_[id])) {
      const int b = gpt2_cp_to_byte(cp);
      if (b >= 0) o += (char)b;
      else append_utf8(o, cp);
    }
    return o;
  }
  std::string p = pieces_[id];
  if (spm_marker_ || wpm_) {
    std::string o;
    for (size_t i = 0; i < p.size();) {
      if (p.compare(i, 3, kSpace) == 0) {
        o += ' ';
        i += 3;
      } else {
        o += p[i++];
      }
    }
    p.swap(o);
  }
  if (prev == bos_id() && !p.empty() && p[0] == ' ') return p.substr(1);
  return p;
}

}  // namespace qkv
