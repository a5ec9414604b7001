// BPE training: count whitespace-delimited words once, then repeatedly merge the most frequent
// adjacent symbol pair inside words, updating pair counts only for the words that changed.
#include "bpe.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>

#include "../common.h"
#include "../formats/gguf_writer.h"
#include "../tokenizer/tokenizer.h"

namespace qkv {

static const std::string kSpace = "\xE2\x96\x81";  // U+2581
static constexpr int kFixed = 3 + 256;             // <unk> <s> </s> and the byte pieces
static constexpr size_t kMaxPieceBytes = 32;

BpeVocab train_bpe(const std::string& text, int vocab_size) {
  if (text.empty()) fail(ErrorCode::BadArgument, "train-tokenizer: the text is empty");
  if (vocab_size < kFixed + 1 || vocab_size > 65536)
    fail(ErrorCode::BadArgument, "train-tokenizer: vocabulary size " + std::to_string(vocab_size) +
                                     " must be 260..65536 (259 pieces are fixed: <unk>, <s>, </s> and 256 bytes)");
  // Words as the encoder sees the text: a dummy-prefix space, spaces as U+2581; a word starts at
  // each U+2581; control characters (newlines, tabs) stand alone and are never merged.
  std::string s = kSpace;
  s.reserve(text.size() * 2);
  for (char ch : text) s += ch == ' ' ? kSpace : std::string(1, ch);
  std::vector<std::string> cps = utf8_symbols(s);
  std::unordered_map<std::string, int64_t> char_count;
  for (const auto& cp : cps) char_count[cp]++;

  // Characters by frequency (ties by bytes), kept up to 99.99% coverage and half the budget.
  std::vector<std::pair<std::string, int64_t>> chars(char_count.begin(), char_count.end());
  std::sort(chars.begin(), chars.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  const int64_t total = (int64_t)cps.size();
  const int char_budget = std::max(1, (vocab_size - kFixed + 1) / 2);
  BpeVocab v;
  v.pieces = {"<unk>", "<s>", "</s>"};
  v.types = {2, 3, 3};
  for (int b = 0; b < 256; b++) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    v.pieces.push_back(name);
    v.types.push_back(6);
  }
  std::unordered_map<std::string, int> id_of;  // symbol string -> vocabulary id
  int64_t covered = 0;
  for (const auto& [cp, n] : chars) {
    if (v.n_chars >= char_budget || (covered >= total * 0.9999 && n < 2)) break;
    const unsigned char b0 = cp[0];
    if (cp.size() == 1 && (b0 < 0x20 || b0 == 0x7f || b0 >= 0x80)) continue;  // control or invalid byte
    id_of[cp] = (int)v.pieces.size();
    v.pieces.push_back(cp);
    v.types.push_back(1);
    v.n_chars++;
    covered += n;
  }

  // Unique words with their counts; symbols are vocabulary ids, -1 = never merged.
  std::map<std::string, int64_t> word_count;  // ordered: a deterministic word order
  {
    size_t w0 = 0;
    auto flush = [&](size_t end) {
      if (end > w0) word_count[s.substr(w0, end - w0)]++;
      w0 = end;
    };
    for (size_t i = 0; i < s.size();) {
      const unsigned char b = s[i];
      if (s.compare(i, 3, kSpace) == 0) {
        flush(i);
        i += 3;
      } else if (b < 0x20 || b == 0x7f) {
        flush(i);
        w0 = ++i;  // the control character itself is dropped: it never merges
      } else {
        i++;
      }
    }
    flush(s.size());
  }
  struct Word {
    std::vector<int> sym;
    int64_t count;
  };
  std::vector<Word> words;
  words.reserve(word_count.size());
  for (const auto& [w, n] : word_count) {
    Word wd{{}, n};
    for (const auto& cp : utf8_symbols(w)) {
      auto it = id_of.find(cp);
      wd.sym.push_back(it == id_of.end() ? -1 : it->second);
    }
    words.push_back(std::move(wd));
  }
  auto key = [](int a, int b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; };
  std::unordered_map<uint64_t, int64_t> pairs;
  auto count_pairs = [&](const Word& w, int64_t sign) {
    for (size_t i = 0; i + 1 < w.sym.size(); i++)
      if (w.sym[i] >= 0 && w.sym[i + 1] >= 0) {
        int64_t& c = pairs[key(w.sym[i], w.sym[i + 1])];
        c += sign * w.count;
      }
  };
  for (const Word& w : words) count_pairs(w, 1);

  int rank = 0;
  while ((int)v.pieces.size() < vocab_size) {
    uint64_t best = 0;
    int64_t best_n = 0;
    for (const auto& [k, n] : pairs) {  // most frequent; ties to the smaller key (deterministic)
      if (n < 2 || n < best_n || (n == best_n && k > best)) continue;
      const int a = (int)(k >> 32), b = (int)(uint32_t)k;
      if (v.pieces[a].size() + v.pieces[b].size() > kMaxPieceBytes) continue;
      best = k;
      best_n = n;
    }
    if (best_n < 2) break;
    const int a = (int)(best >> 32), b = (int)(uint32_t)best;
    const std::string merged = v.pieces[a] + v.pieces[b];
    int id;
    auto it = id_of.find(merged);
    if (it != id_of.end()) {
      id = it->second;  // the same string from another split: merge, but no new piece
    } else {
      id = (int)v.pieces.size();
      id_of[merged] = id;
      v.pieces.push_back(merged);
      v.types.push_back(1);
      v.scores.resize(v.pieces.size(), 0.0f);
      v.scores[id] = -(float)rank++;
      v.n_merges++;
    }
    for (Word& w : words) {
      bool has = false;
      for (size_t i = 0; i + 1 < w.sym.size() && !has; i++) has = w.sym[i] == a && w.sym[i + 1] == b;
      if (!has) continue;
      count_pairs(w, -1);
      std::vector<int> out;
      out.reserve(w.sym.size());
      for (size_t i = 0; i < w.sym.size(); i++) {
        if (i + 1 < w.sym.size() && w.sym[i] == a && w.sym[i + 1] == b) {
          out.push_back(id);
          i++;
        } else {
          out.push_back(w.sym[i]);
        }
      }
      w.sym.swap(out);
      count_pairs(w, 1);
    }
    pairs.erase(best);
  }
  // Fixed pieces score 0 (never a merge result); characters score below every merge.
  v.scores.resize(v.pieces.size(), 0.0f);
  for (int i = 0; i < v.n_chars; i++) v.scores[kFixed + i] = -(float)(rank + i);
  return v;
}

Tokenizer bpe_tokenizer(const BpeVocab& v) {
  return Tokenizer::from_spm_pieces(v.pieces, v.scores, v.types, 1, 2, 0, true);
}

std::vector<uint8_t> bpe_to_gguf(const BpeVocab& v, const std::string& name) {
  GgufWriter w;
  w.add_string("general.name", name);
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_strings("tokenizer.ggml.tokens", v.pieces);
  w.add_f32s("tokenizer.ggml.scores", v.scores);
  std::vector<int32_t> types(v.types.begin(), v.types.end());
  w.add_i32s("tokenizer.ggml.token_type", types);
  w.add_u32("tokenizer.ggml.bos_token_id", 1);
  w.add_u32("tokenizer.ggml.eos_token_id", 2);
  w.add_u32("tokenizer.ggml.unknown_token_id", 0);
  return w.finish();
}

std::vector<uint8_t> bpe_to_llama2c(const BpeVocab& v) {
  const Tokenizer tok = bpe_tokenizer(v);
  std::vector<std::string> pieces;
  size_t max_len = 1;
  for (int i = 0; i < (int)v.pieces.size(); i++) {  // U+2581 -> ' '; byte pieces keep their <0xXX> names
    pieces.push_back(v.types[i] == 6 ? v.pieces[i] : tok.decode(-1, i));
    max_len = std::max(max_len, pieces.back().size());
  }
  std::vector<uint8_t> out;
  auto put = [&](const void* p, size_t n) { out.insert(out.end(), (const uint8_t*)p, (const uint8_t*)p + n); };
  const int32_t mtl = (int32_t)max_len;
  put(&mtl, 4);
  for (size_t i = 0; i < pieces.size(); i++) {
    const int32_t len = (int32_t)pieces[i].size();
    put(&v.scores[i], 4);
    put(&len, 4);
    put(pieces[i].data(), pieces[i].size());
  }
  return out;
}

}  // namespace qkv
