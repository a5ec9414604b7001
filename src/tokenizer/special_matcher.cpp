#include "special_matcher.h"

#include <algorithm>
#include <deque>

namespace qkv {

int SpecialMatcher::child(int node, uint8_t b) const {
  const auto& nx = nodes_[node].next;
  auto it = std::lower_bound(nx.begin(), nx.end(), std::make_pair(b, -1));
  return it != nx.end() && it->first == b ? it->second : -1;
}

SpecialMatcher::SpecialMatcher(const std::vector<std::string>& texts) : nodes_(1), len_(texts.size()) {
  for (size_t i = 0; i < texts.size(); i++) {
    len_[i] = (int)texts[i].size();
    if (texts[i].empty()) continue;
    int n = 0;
    for (unsigned char b : texts[i]) {
      int c = child(n, b);
      if (c < 0) {
        c = (int)nodes_.size();
        nodes_.push_back(Node());
        nodes_[c].depth = nodes_[n].depth + 1;
        auto& nx = nodes_[n].next;
        nx.insert(std::lower_bound(nx.begin(), nx.end(), std::make_pair(b, -1)), {b, c});
      }
      n = c;
    }
    if (nodes_[n].out < 0) nodes_[n].out = (int)i;  // the first of duplicate texts wins
  }
  // Failure links breadth-first: the longest proper suffix that is also a prefix in the trie.
  std::deque<int> queue;
  for (auto [b, c] : nodes_[0].next) queue.push_back(c);
  while (!queue.empty()) {
    const int n = queue.front();
    queue.pop_front();
    const int f = nodes_[n].fail;
    nodes_[n].out_link = nodes_[f].out >= 0 ? f : nodes_[f].out_link;
    for (auto [b, c] : nodes_[n].next) {
      int g = f;
      int to = -1;
      while (n != 0) {
        to = child(g, b);
        if (to >= 0 || g == 0) break;
        g = nodes_[g].fail;
      }
      nodes_[c].fail = to >= 0 && to != c ? to : 0;
      queue.push_back(c);
    }
  }
}

std::vector<std::pair<int, size_t>> SpecialMatcher::find_all(const std::string& text, uint64_t* steps) const {
  std::vector<std::pair<int, size_t>> hits;
  uint64_t work = 0;
  int s = 0;
  for (size_t i = 0; i < text.size(); i++) {
    const uint8_t b = (uint8_t)text[i];
    int c;
    while ((c = child(s, b)) < 0 && s != 0) {
      s = nodes_[s].fail;
      work++;
    }
    s = c < 0 ? 0 : c;
    work++;
    for (int o = nodes_[s].out >= 0 ? s : nodes_[s].out_link; o >= 0; o = nodes_[o].out_link) {
      hits.emplace_back(nodes_[o].out, i + 1 - len_[nodes_[o].out]);
      work++;
    }
  }
  if (steps) *steps += work;
  return hits;
}

}  // namespace qkv
