// Matrix products of the model's weights against a batch of activations, in whatever storage the
// weight has (f32, decoded on the fly, or integer dots against activations quantized once), and
// the row-parallel sections that run them. Shared by Transformer and EncoderDecoder.
//
// A section may hold several products of one input (q, k and v; up and gate) and the work that
// only needs the columns a chunk has just written (bias, RoPE, the GLU, the residual add): one
// fork-join per group instead of one per product plus serial passes between them.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <vector>

#include "../kernels/qdot.h"
#include "../threadpool.h"
#include "weights.h"

namespace qkv {

// Below this many multiply-adds a section runs on the calling thread: handing it to another
// core costs more than it saves (the 260K models decode faster on one thread than on two).
constexpr int64_t kMinParallelWork = 1 << 16;

// fn(r0, r1, thread) over [0, n) in chunks whose bounds are multiples of `grain`: on the calling
// thread as one chunk when the section does fewer than kMinParallelWork multiply-adds, else
// across the pool. Decoding one token (n_tok 1), the chunks are made large, about two per
// thread: a decode product reads its rows as several streams far apart within its range, and
// over a chunk of 16 rows those streams are adjacent rows, which the hardware prefetcher
// serves badly (Q8_0 decode in Chromium: 19 GFLOP/s over 16-row chunks, 26-29 over 64, 33-34
// over 256 or the whole matrix).
void for_rows(ThreadPool& pool, int64_t work, int n, int grain, int n_tok,
              const std::function<void(int, int, int)>& fn);

// One input X (n_tok, cols), row stride ldx, for products against weights of `cols` columns.
class ProductInput {
 public:
  // Points at X, whose width is the weights' column count (all of `ws` have the same), and
  // quantizes it (once, into a buffer kept between calls) when one of them takes integer dots,
  // or lays it out for the f32 prefill kernel (xpack_f32) when one is multiplied in f32 (F32,
  // F16, BF16) and there are enough tokens. The integer prefill kernels' packed copy
  // (qdot_pack_prefill) is made here too, so threads taking chunks of rows do not each make one.
  // X must stay unchanged while products read it.
  void set(const float* x, int64_t ldx, int n_tok, const Tensor* const* ws, int n_ws);
  void set(const float* x, int64_t ldx, int n_tok, std::initializer_list<const Tensor*> ws) {
    set(x, ldx, n_tok, ws.begin(), (int)ws.size());
  }
  // Y = X W^T for weight rows [r0, r1) of w (w.cols == cols): Y's columns r0..r1 for every token.
  // Safe to call from several threads at once on disjoint rows.
  void rows(float* y, int64_t ldy, const Tensor& w, int r0, int r1) const;
  // Y = X W^T over every row of w, across the pool.
  void full(ThreadPool& pool, float* y, int64_t ldy, const Tensor& w) const;
  int tokens() const { return n_tok_; }

 private:
  const float* x_ = nullptr;
  int64_t ldx_ = 0;
  int n_tok_ = 0, cols_ = 0;
  bool quantized_ = false, quantized_k_ = false, packed_ = false;
  std::vector<BlockQ8A> xq_;  // (n_tok, cols/32) for the integer-dot types
  QdotPacked xqp_;            // xq_ laid out for the prefill kernels, shared by the threads
  std::vector<BlockQ8K> xk_;  // (n_tok, cols/256) for the K types where qdot_k_super_blocks()
  std::vector<float> xp_;     // xpack_f32 of X for the f32 kernel
};

// One product of a stacked section: Y (n_tok, ld) = X W^T (+ bias).
struct Product {
  float* y;
  int64_t ld;
  const Tensor* w;
  const float* bias = nullptr;
};

// Every product of `parts` (weights of the same width) against X, in one parallel section over
// their rows stacked in order, the bias added per chunk. `finish(i, r0, r1)`, if given, runs on
// the thread that wrote rows [r0, r1) of part i (bias included) for every token. Chunk bounds are
// multiples of `grain` in the stacked rows; parts whose row counts are multiples of a unit that
// divides `grain` are cut on that unit too (whole heads).
void stacked_products(ThreadPool& pool, ProductInput& in, const float* x, int64_t ldx, int n_tok,
                      std::initializer_list<Product> parts, int grain = 16,
                      const std::function<void(int, int, int)>& finish = nullptr);

}  // namespace qkv
