// Block-sparse attention (BigBird/Longformer style): each query block attends to a fixed pattern
// of key blocks (a local window, global tokens, a few seeded random blocks), so for a fixed
// pattern the work grows linearly with the sequence length.
#pragma once
#include <cstdint>
#include <vector>

#include "attention.h"
#include "attention_backward.h"

namespace qkv {

struct SparseKeyBlock {
  int block = 0;  // key block index (keys [block * size, (block + 1) * size))
  // true: every query of the query block attends all keys of this block (before the masks of
  // AttentionArgs). false: global queries (position < global_tokens) attend all of them, the
  // others only its global keys (j < global_tokens).
  bool whole = true;
};

// Positions are absolute (query at position p, key j at position j); block b holds positions
// [b * block, (b + 1) * block). Query position p attends to key j (before the causal, window and
// padding masks of AttentionArgs) when any of:
//   - p < global_tokens or j < global_tokens (global tokens see and are seen by everything);
//   - |p / block - j / block| <= window_blocks (the local window; 0: the query's own block);
//   - j / block is one of the random blocks of p / block: random_blocks distinct blocks drawn
//     (from `seed` and the query block) among the blocks outside the window and outside the
//     leading blocks made only of global tokens, before the query block when causal (all of
//     them when there are no more than random_blocks).
struct BlockSparsePattern {
  int block = 64;
  int window_blocks = 1;
  int global_tokens = 0;
  int random_blocks = 0;
  uint64_t seed = 0;

  // Throws Error(BadArgument) naming the field unless block >= 1 and the others are >= 0 (every
  // kernel below checks it first).
  void validate() const;
  // The key blocks that query block qb visits over n_kv keys, in increasing order.
  void key_blocks(int qb, int n_kv, bool causal, std::vector<SparseKeyBlock>& out) const;
  // The definition above for one (query position, key) pair, with causal j <= p.
  bool visible(int qpos, int j, int n_kv, bool causal) const;
  // The random blocks of query block qb, in increasing order.
  void random_of(int qb, int n_kv, bool causal, std::vector<int>& out) const;
};

// Dense reference: attention_ref's formula over all n_kv keys with the pattern's mask combined
// with a's masks (causal, window, key_valid). a.probs as in attention_ref.
void attention_block_sparse_ref(const AttentionArgs& a, const BlockSparsePattern& p);
// Online-softmax kernel that visits only the pattern's key tiles. Query heads [h0, h1) (callers
// split heads over threads). Returns the (query block, key block) tiles visited per head.
int64_t attention_block_sparse(const AttentionArgs& a, const BlockSparsePattern& p, int h0, int h1);

// Gradient of attention_block_sparse over one sequence (positions 0..n-1, no padding, no
// softcap), visiting the same tiles: each tile's probabilities are recomputed from the scores
// (a first pass over the tiles finds each row's max and sum), so a.probs is not read and the
// work stays linear in n. The formulas are attention_backward_ref's. Key/value heads [g0, g1) and
// their query heads (callers split kv heads over threads; dq, dk, dv of those heads overwritten).
void attention_block_sparse_backward(const AttentionBackwardArgs& a, const BlockSparsePattern& p, int g0, int g1);

}  // namespace qkv
