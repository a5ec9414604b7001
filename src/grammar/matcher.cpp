// The grammar matcher: parse stacks as shared linked frames, states interned with their byte
// transitions cached (a lazily built byte automaton), masks by a walk of the token trie.
#include "matcher.h"

#include <algorithm>
#include <numeric>

#include "../common.h"

namespace qkv {

namespace {
constexpr int kMaxDepth = 4096;         // nesting of one expansion (absurd grammars fail, not crash)
constexpr size_t kMaxStacks = 1 << 16;  // parse stacks alive in one state (ambiguity bound)
constexpr size_t kMaxStates = 8192;     // cached states before the caches are rebuilt (1 KiB each)
constexpr size_t kMaxNodes = 1 << 21;
constexpr size_t kMaxMasks = 32;
}  // namespace

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes, std::vector<int> eog_ids)
    : vocab_((int)token_bytes.size()), bytes_(token_bytes), eog_(std::move(eog_ids)) {
  for (int e : eog_)
    if (e < 0 || e >= vocab_)
      fail(ErrorCode::BadArgument, "end-of-generation id " + std::to_string(e) + " outside the vocabulary");
  std::vector<int32_t> order;
  for (int i = 0; i < vocab_; i++)
    if (!bytes_[i].empty() && std::find(eog_.begin(), eog_.end(), i) == eog_.end()) order.push_back(i);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return bytes_[a] < bytes_[b] || (bytes_[a] == bytes_[b] && a < b); });
  nodes_.emplace_back();
  // Sorted strings: each one shares a prefix with the previous, so a path of open nodes suffices.
  std::vector<int32_t> path{0};  // path[d]: the node for the first d bytes of the previous token
  std::vector<int32_t> last_child{-1};
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& s = bytes_[id];
    size_t common = 0;
    if (prev)
      while (common < s.size() && common < prev->size() && s[common] == (*prev)[common]) common++;
    path.resize(common + 1);
    last_child.resize(common + 1);
    for (size_t d = common; d < s.size(); d++) {
      const int32_t n = (int32_t)nodes_.size();
      nodes_.emplace_back();
      nodes_[n].byte = (uint8_t)s[d];
      const int32_t parent = path[d];
      if (last_child[d] < 0) nodes_[parent].first_child = n;
      else nodes_[last_child[d]].next_sibling = n;
      last_child[d] = n;
      path.push_back(n);
      last_child.push_back(-1);
    }
    Node& end = nodes_[path[s.size()]];
    if (end.tok_end != (int32_t)toks_.size() || end.tok_begin == end.tok_end) end.tok_begin = (int32_t)toks_.size();
    toks_.push_back(id);
    end.tok_end = (int32_t)toks_.size();
    prev = &s;
  }
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenTrie> vocab)
    : g_(std::move(g)), vocab_(std::move(vocab)) {
  if (!g_ || !vocab_) fail(ErrorCode::BadArgument, "grammar matcher needs a grammar and a vocabulary");
  reset();
}

int32_t GrammarMatcher::node(uint32_t pos, int32_t parent) {
  const uint64_t key = ((uint64_t)pos << 32) | (uint32_t)parent;
  auto it = node_ids_.find(key);
  if (it != node_ids_.end()) return it->second;
  const int32_t id = (int32_t)nodes_.size();
  nodes_.push_back({pos, parent});
  node_ids_.emplace(key, id);
  return id;
}

// Every stack reachable from grammar position `pos` (with `parent` below) without consuming a
// character: tops at character sets, or -1 once the root is complete.
void GrammarMatcher::expand(uint32_t pos, int32_t parent, std::vector<int32_t>& out, int depth) {
  if (depth > kMaxDepth)
    fail(ErrorCode::BadArgument, "grammar: nesting deeper than " + std::to_string(kMaxDepth) + " rules");
  if (out.size() > kMaxStacks)
    fail(ErrorCode::BadArgument, "grammar: too ambiguous (more than 65536 parses alive at once)");
  const GElem& e = g_->elems[pos];
  switch (e.kind) {
    case GElem::End:
    case GElem::Alt:
      if (parent < 0) {
        out.push_back(-1);
      } else {
        const Node p = nodes_[parent];
        expand(p.pos, p.parent, out, depth + 1);
      }
      return;
    case GElem::Chars: out.push_back(node(pos, parent)); return;
    case GElem::Ref: {
      // A reference at the end of its alternative returns straight to the frame below (tail
      // call), so repetition rules do not grow the stack.
      const GElem::Kind after = g_->elems[pos + 1].kind;
      const int32_t ret = (after == GElem::End || after == GElem::Alt) ? parent : node(pos + 1, parent);
      uint32_t a = g_->rule_start[e.value];
      expand(a, ret, out, depth + 1);
      for (;; a++) {
        const GElem::Kind k = g_->elems[a].kind;
        if (k == GElem::End) break;
        if (k == GElem::Alt) expand(a + 1, ret, out, depth + 1);
      }
      return;
    }
  }
}

int32_t GrammarMatcher::intern(std::vector<int32_t> stacks, uint32_t cp, uint8_t need, uint8_t len) {
  std::vector<int32_t> key = stacks;
  key.push_back((int32_t)cp);
  key.push_back(need | (len << 8));
  auto it = state_ids_.find(key);
  if (it != state_ids_.end()) return it->second;
  const int32_t id = (int32_t)states_.size();
  State s;
  s.stacks = std::move(stacks);
  s.cp = cp;
  s.need = need;
  s.len = len;
  s.next.fill(-2);
  states_.push_back(std::move(s));
  state_ids_.emplace(std::move(key), id);
  return id;
}

int32_t GrammarMatcher::advance_cp(const State& s, uint32_t cp) {
  std::vector<int32_t> out;
  for (int32_t t : s.stacks) {
    if (t < 0) continue;
    const Node n = nodes_[t];
    if (g_->sets[g_->elems[n.pos].value].matches(cp)) expand(n.pos + 1, n.parent, out, 0);
  }
  if (out.empty()) return -1;
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return intern(std::move(out), 0, 0, 0);
}

int32_t GrammarMatcher::step(int32_t state, uint8_t byte) {
  const int32_t known = states_[state].next[byte];
  if (known != -2) return known;
  const State s = states_[state];  // a copy: interning may move states_
  int32_t r = -1;
  uint32_t cp = 0;
  int need = -1;  // -1: dead byte
  int len = s.len;
  if (s.need == 0) {
    // NUL never matches (as in llama.cpp, whose grammar reads tokens as C strings).
    if (byte == 0) need = -1;
    else if (byte < 0x80) need = 0, cp = byte, len = 1;
    else if (byte >= 0xC2 && byte < 0xE0) need = 1, cp = byte & 0x1F, len = 2;
    else if ((byte & 0xF0) == 0xE0) need = 2, cp = byte & 0x0F, len = 3;
    else if (byte >= 0xF0 && byte <= 0xF4) need = 3, cp = byte & 0x07, len = 4;
  } else if ((byte & 0xC0) == 0x80) {
    need = s.need - 1;
    cp = (s.cp << 6) | (byte & 0x3F);
  }
  if (need >= 0) {
    // The code points this prefix can still become, less overlong forms, surrogates and
    // values past U+10FFFF (invalid UTF-8 is never produced).
    static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    const uint32_t lo = std::max(cp << (6 * need), kMin[len]);
    const uint32_t hi = std::min<uint32_t>((cp << (6 * need)) | ((1u << (6 * need)) - 1), 0x10FFFF);
    const bool surrogate = lo >= 0xD800 && hi <= 0xDFFF;
    if (lo > hi || surrogate) {
      need = -1;
    } else if (need == 0) {
      r = advance_cp(s, cp);
    } else {
      // A partial code point lives only if some stack can take one of its completions.
      bool live = false;
      for (int32_t t : s.stacks)
        if (t >= 0 && g_->sets[g_->elems[nodes_[t].pos].value].intersects(lo, hi)) {
          live = true;
          break;
        }
      if (live) r = intern(s.stacks, cp, (uint8_t)need, (uint8_t)len);
    }
  }
  states_[state].next[byte] = r;
  return r;
}

void GrammarMatcher::reset() {
  nodes_.clear();
  node_ids_.clear();
  states_.clear();
  state_ids_.clear();
  masks_.clear();
  mask_owner_.clear();
  std::vector<int32_t> out;
  uint32_t a = g_->rule_start[g_->root];  // every alternative of root, returning to nowhere
  expand(a, -1, out, 0);
  for (; g_->elems[a].kind != GElem::End; a++)
    if (g_->elems[a].kind == GElem::Alt) expand(a + 1, -1, out, 0);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  start_ = cur_ = intern(std::move(out), 0, 0, 0);
  ended_ = false;
}

bool GrammarMatcher::can_end() const {
  const State& s = states_[cur_];
  return !ended_ && s.need == 0 && !s.stacks.empty() && s.stacks[0] == -1;
}

bool GrammarMatcher::must_end() {
  if (!can_end()) return false;
  for (int b = 0; b < 256; b++)
    if (step(cur_, (uint8_t)b) >= 0) return false;
  return true;
}

bool GrammarMatcher::accept_bytes(const std::string& bytes) {
  if (ended_) return false;
  int32_t st = cur_;
  for (unsigned char c : bytes) {
    st = step(st, c);
    if (st < 0) return false;
  }
  cur_ = st;
  return true;
}

bool GrammarMatcher::matches(const std::string& text) {
  const int32_t saved = cur_;
  const bool saved_end = ended_;
  cur_ = start_;
  ended_ = false;
  const bool ok = accept_bytes(text) && can_end();
  cur_ = saved;
  ended_ = saved_end;
  return ok;
}

void GrammarMatcher::accept_token(int token) {
  if (token < 0 || token >= vocab_->vocab_size())
    fail(ErrorCode::BadArgument, "grammar: token id " + std::to_string(token) + " outside the vocabulary");
  if (ended_) fail(ErrorCode::BadArgument, "grammar: a token after the end of the output");
  const auto& eog = vocab_->eog_ids();
  if (std::find(eog.begin(), eog.end(), token) != eog.end()) {
    if (!can_end()) fail(ErrorCode::BadArgument, "grammar: end of generation before the grammar is complete");
    ended_ = true;
    return;
  }
  const std::string& b = vocab_->bytes(token);
  if (b.empty() || !accept_bytes(b))
    fail(ErrorCode::BadArgument, "grammar: token " + std::to_string(token) + " cannot continue the output");
  // Bound the caches over long generations: start them again from the current state.
  if (states_.size() > kMaxStates || nodes_.size() > kMaxNodes) {
    std::vector<std::vector<uint32_t>> chains;  // the current stacks as grammar positions, top first
    const State cur = states_[cur_];
    for (int32_t t : cur.stacks) {
      std::vector<uint32_t> c;
      for (int32_t n = t; n >= 0; n = nodes_[n].parent) c.push_back(nodes_[n].pos);
      chains.push_back(std::move(c));
    }
    reset();
    std::vector<int32_t> stacks;
    for (const auto& c : chains) {
      int32_t n = -1;
      for (auto it = c.rbegin(); it != c.rend(); ++it) n = node(*it, n);
      stacks.push_back(n);
    }
    std::sort(stacks.begin(), stacks.end());
    cur_ = intern(std::move(stacks), cur.cp, cur.need, cur.len);
  }
}

void GrammarMatcher::compute_mask(int32_t state, std::vector<uint64_t>& m) {
  const int vocab = vocab_->vocab_size();
  m.assign((size_t)(vocab + 63) / 64, 0);
  const auto& nodes = vocab_->nodes();
  const auto& toks = vocab_->tokens();
  // Depth-first over the trie with an explicit stack of (trie node, matcher state).
  struct Frame {
    int32_t node, state;
  };
  std::vector<Frame> todo{{0, state}};
  while (!todo.empty()) {
    const Frame f = todo.back();
    todo.pop_back();
    for (int32_t c = nodes[f.node].first_child; c >= 0; c = nodes[c].next_sibling) {
      const int32_t ns = step(f.state, nodes[c].byte);
      if (ns < 0) continue;
      for (int32_t k = nodes[c].tok_begin; k < nodes[c].tok_end; k++) m[toks[k] >> 6] |= 1ull << (toks[k] & 63);
      if (nodes[c].first_child >= 0) todo.push_back({c, ns});
    }
  }
  const State& s = states_[state];
  if (s.need == 0 && !s.stacks.empty() && s.stacks[0] == -1)
    for (int e : vocab_->eog_ids()) m[e >> 6] |= 1ull << (e & 63);
}

const std::vector<uint64_t>& GrammarMatcher::mask() {
  if (ended_) {
    out_.assign((size_t)(vocab_->vocab_size() + 63) / 64, 0);
    return out_;
  }
  int32_t slot = states_[cur_].mask_slot;
  if (slot < 0) {
    if (masks_.size() < kMaxMasks) {
      slot = (int32_t)masks_.size();
      masks_.emplace_back();
      mask_owner_.push_back(-1);
    } else {
      slot = (int32_t)(mask_clock_++ % kMaxMasks);
      if (mask_owner_[slot] >= 0) states_[mask_owner_[slot]].mask_slot = -1;
    }
    compute_mask(cur_, masks_[slot]);
    mask_owner_[slot] = cur_;
    states_[cur_].mask_slot = slot;
  }
  return masks_[slot];
}

bool GrammarMatcher::allowed(int token) {
  if (token < 0 || token >= vocab_->vocab_size()) return false;
  return (mask()[token >> 6] >> (token & 63)) & 1;
}

}  // namespace qkv
