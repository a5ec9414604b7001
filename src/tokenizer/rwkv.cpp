#include "rwkv.h"

#include <algorithm>
#include <cstdio>

#include "../common.h"

namespace qkv {

std::string rwkv_unescape(const std::string& escaped) {
  std::string out;
  out.reserve(escaped.size());
  bool escaping = false;
  int hex_left = 0;
  uint8_t acc = 0;
  for (char ch : escaped) {
    const uint8_t c = (uint8_t)ch;
    if (hex_left > 0) {  // llama.cpp's reading: lower-case a-f, anything else as if a digit
      acc = (uint8_t)((acc << 4) + (c >= 'a' ? c - 'a' + 10 : c - '0'));
      if (--hex_left == 0) out += (char)acc, acc = 0;
    } else if (escaping) {
      escaping = false;
      if (c == 't') out += '\t';
      else if (c == 'n') out += '\n';
      else if (c == 'r') out += '\r';
      else if (c == 'x') hex_left = 2;
      else out += (char)c;
    } else if (c == '\\') {
      escaping = true;
    } else {
      out += (char)c;
    }
  }
  return out;
}

RwkvTrie::RwkvTrie(const std::vector<std::string>& tokens) {
  nodes_.emplace_back();
  // Built with unsorted child lists, sorted once at the end for binary search.
  for (size_t id = 0; id < tokens.size(); id++) {
    const std::string bytes = rwkv_unescape(tokens[id]);
    int at = 0;
    for (char ch : bytes) {
      const uint8_t b = (uint8_t)ch;
      int next = -1;
      for (const auto& [kb, kid] : nodes_[at].kids)
        if (kb == b) next = kid;
      if (next < 0) {
        next = (int)nodes_.size();
        nodes_[at].kids.emplace_back(b, next);
        nodes_.emplace_back();
      }
      at = next;
    }
    if (at != 0) nodes_[at].value = (int)id;  // an empty token can never be matched
  }
  for (Node& n : nodes_) std::sort(n.kids.begin(), n.kids.end());
}

int RwkvTrie::child(int node, uint8_t b) const {
  const auto& k = nodes_[node].kids;
  auto it = std::lower_bound(k.begin(), k.end(), std::make_pair(b, -1));
  return it != k.end() && it->first == b ? it->second : -1;
}

void RwkvTrie::encode(const std::string& text, int unk, std::vector<int>& ids, uint64_t* work) const {
  size_t pos = 0;
  while (pos < text.size()) {
    int best = -1;
    size_t best_end = pos;
    for (int at = child(0, (uint8_t)text[pos]), i = (int)pos; at >= 0;) {
      if (nodes_[at].value >= 0) best = nodes_[at].value, best_end = (size_t)i + 1;
      if (work) ++*work;
      if ((size_t)++i >= text.size()) break;
      at = child(at, (uint8_t)text[i]);
    }
    if (best < 0) {
      if (unk < 0) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02X", (unsigned)(uint8_t)text[pos]);
        fail(ErrorCode::BadArgument, std::string("the byte ") + hex + " at offset " + std::to_string(pos) +
                                         " starts no token of this RWKV vocabulary, which has no unknown token");
      }
      ids.push_back(unk);
      best_end = pos + 1;
    } else {
      ids.push_back(best);
    }
    pos = best_end;
  }
}

}  // namespace qkv
