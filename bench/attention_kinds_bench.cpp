// qkv_attention_kinds_bench [--max N] [--head-dim D] [--heads H] [--reps R]: time vs length of
// causal block-sparse attention (block 64, window 1, 64 global tokens, 2 random blocks) against
// dense attention_flash, one thread, lengths 512 to N (default 16384), each the best of --reps runs
// (default 3: a shared machine's load only ever adds time). Prints figures; asserts nothing.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention_sparse.h"
#include "kernels/simd.h"

using namespace qkv;

static double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char** argv) {
  int max_n = 16384, hd = 64, heads = 1, reps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--max")) max_n = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--head-dim")) hd = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--heads")) heads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (max_n < 1 || hd < 1 || heads < 1 || reps < 1) {
    std::fprintf(stderr, "--max, --head-dim, --heads and --reps must be positive\n");
    return 2;
  }
  BlockSparsePattern p;
  p.block = 64, p.window_blocks = 1, p.global_tokens = 64, p.random_blocks = 2, p.seed = 1;
  std::printf("simd %s, head_dim %d, heads %d, causal; pattern block %d window %d global %d random %d\n",
              simd_arch_name(), hd, heads, p.block, p.window_blocks, p.global_tokens, p.random_blocks);
  std::printf("%8s %12s %12s %13s %10s\n", "length", "dense ms", "sparse ms", "dense/sparse", "tiles");
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int n = 512; n <= max_n; n *= 2) {
    const int w = heads * hd;
    std::vector<float> q((size_t)n * w), k((size_t)n * w), v((size_t)n * w), out((size_t)n * w);
    for (auto* x : {&q, &k, &v})
      for (float& y : *x) y = nd(rng);
    AttentionArgs a;
    a.n_q = a.n_kv = n, a.n_heads = a.n_kv_heads = heads, a.head_dim = hd;
    a.q = q.data(), a.q_stride = w, a.k = k.data(), a.v = v.data(), a.kv_stride = w;
    a.out = out.data(), a.out_stride = w, a.scale = 1.0f / std::sqrt((float)hd), a.causal = true;
    double dense = 1e300, sparse = 1e300;
    int64_t tiles = 0;
    for (int r = 0; r < reps; r++) {
      double t0 = now_ms();
      attention_flash(a, 0, heads);
      dense = std::min(dense, now_ms() - t0);
      t0 = now_ms();
      tiles = attention_block_sparse(a, p, 0, heads);
      sparse = std::min(sparse, now_ms() - t0);
    }
    std::printf("%8d %12.2f %12.2f %13.2f %10lld\n", n, dense, sparse, dense / sparse, (long long)tiles);
  }
  return 0;
}
