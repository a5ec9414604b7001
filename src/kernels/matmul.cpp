// f32 products: scalar references and register-blocked xsimd versions.
#include "matmul.h"

#include <chrono>
#include <vector>

#include "simd.h"
#include "trial.h"

namespace qkv {

void matvec_f32_ref(float* y, const float* W, const float* x, int d, int n) {
  for (int i = 0; i < d; i++) {
    float s = 0.0f;
    for (int k = 0; k < n; k++) s += W[(int64_t)i * n + k] * x[k];
    y[i] = s;
  }
}

void matmul_f32_ref(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int T, int d, int n) {
  for (int t = 0; t < T; t++) matvec_f32_ref(Y + t * ldy, W, X + t * ldx, d, n);
}

// MR weight rows x NR tokens of dot products of length n; each output is reduced at the end.
template <int MR, int NR>
static inline void dot_block(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int n) {
  fbatch acc[MR][NR];
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NR; j++) acc[i][j] = fbatch(0.0f);
  int k = 0;
  for (; k + kLanes <= n; k += kLanes) {
    fbatch w[MR];
    for (int i = 0; i < MR; i++) w[i] = fbatch::load_unaligned(W + (int64_t)i * n + k);
    for (int j = 0; j < NR; j++) {
      fbatch xv = fbatch::load_unaligned(X + j * ldx + k);
      for (int i = 0; i < MR; i++) acc[i][j] = madd(w[i], xv, acc[i][j]);
    }
  }
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NR; j++) {
      float s = xsimd::reduce_add(acc[i][j]);
      for (int kk = k; kk < n; kk++) s += W[(int64_t)i * n + kk] * X[j * ldx + kk];
      Y[j * ldy + i] = s;
    }
}

// One weight row against x with four independent accumulators: a single sequential stream.
static inline float dot_row(const float* w, const float* x, int n) {
  fbatch a0(0.0f), a1(0.0f), a2(0.0f), a3(0.0f);
  int k = 0;
  for (; k + 4 * kLanes <= n; k += 4 * kLanes) {
    a0 = madd(fbatch::load_unaligned(w + k), fbatch::load_unaligned(x + k), a0);
    a1 = madd(fbatch::load_unaligned(w + k + kLanes), fbatch::load_unaligned(x + k + kLanes), a1);
    a2 = madd(fbatch::load_unaligned(w + k + 2 * kLanes), fbatch::load_unaligned(x + k + 2 * kLanes), a2);
    a3 = madd(fbatch::load_unaligned(w + k + 3 * kLanes), fbatch::load_unaligned(x + k + 3 * kLanes), a3);
  }
  for (; k + kLanes <= n; k += kLanes) a0 = madd(fbatch::load_unaligned(w + k), fbatch::load_unaligned(x + k), a0);
  float s = xsimd::reduce_add((a0 + a1) + (a2 + a3));
  for (; k < n; k++) s += w[k] * x[k];
  return s;
}

// R rows against x, two accumulators each: every x vector loaded serves R rows.
template <int R>
static inline void dot_rows(float* y, const float* const* w, const float* x, int n) {
  fbatch a[R][2];
  for (int r = 0; r < R; r++) a[r][0] = a[r][1] = fbatch(0.0f);
  int k = 0;
  for (; k + 2 * kLanes <= n; k += 2 * kLanes) {
    const fbatch x0 = fbatch::load_unaligned(x + k), x1 = fbatch::load_unaligned(x + k + kLanes);
    for (int r = 0; r < R; r++) {
      a[r][0] = madd(fbatch::load_unaligned(w[r] + k), x0, a[r][0]);
      a[r][1] = madd(fbatch::load_unaligned(w[r] + k + kLanes), x1, a[r][1]);
    }
  }
  for (int r = 0; r < R; r++) {
    float s = xsimd::reduce_add(a[r][0] + a[r][1]);
    for (int kk = k; kk < n; kk++) s += w[r][kk] * x[kk];
    y[r] = s;
  }
}

void matvec_f32_simd(float* y, const float* W, const float* x, int n, int r0, int r1) {
#ifdef __wasm__
  // WASM: 4 rows from the range's 4 quarters at a time, four far-apart sequential streams (as
  // the integer decode tiles read them, tiles.h), each x vector loaded serving 4 rows: V8 folds
  // no load into an FMA, so the x loads are half of the loop's. Natively (AVX2 / AVX-512 loads
  // of whole lines, folded) one row at a time measured faster end to end (docs/benchmarks.md).
  constexpr int R = 4;
  const int h = (r1 - r0) / R;
  for (int i = 0; i < h; i++) {
    const float* w[R];
    float out[R];
    for (int k = 0; k < R; k++) w[k] = W + (int64_t)(r0 + k * h + i) * n;
    dot_rows<R>(out, w, x, n);
    for (int k = 0; k < R; k++) y[r0 + k * h + i] = out[k];
  }
  r0 += R * h;
#endif
  for (int r = r0; r < r1; r++) y[r] = dot_row(W + (int64_t)r * n, x, n);
}

template <int MR>
static void matmul_rows(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int T, int n) {
#ifdef __wasm__
  // V8 on x86-64 has 16 SIMD registers: 4 x 3 accumulators + 4 weights + an x vector and the
  // mul/add temporary (no FMA in SIMD128) spill; 4 x 2 fit.
  constexpr int NR = 2;
#else
  constexpr int NR = 3;
#endif
  int t = 0;
  for (; t + NR <= T; t += NR) dot_block<MR, NR>(Y + t * ldy, ldy, X + t * ldx, ldx, W, n);
  for (; t + 2 <= T; t += 2) dot_block<MR, 2>(Y + t * ldy, ldy, X + t * ldx, ldx, W, n);
  for (; t < T; t++) dot_block<MR, 1>(Y + t * ldy, ldy, X + t * ldx, ldx, W, n);
}

// ---- packed-token kernel (prefill) ---------------------------------------------------------
// The tokens are packed, kXTile at a time, into tiles of (n, width): column k of a tile is the
// tile's tokens' x[k], one or two vectors (xpack_f32). The micro-kernel keeps MR weight rows x
// a tile's tokens of Y in registers and, per k, loads the tile's vectors once and multiplies them
// by each row's w[k] broadcast from the weight matrix as stored: an outer product (no horizontal
// sums), and no copy of the weights (packing weight panels instead cost 20% of a 64-token
// product in V8: 42 against 54 GFLOP/s for the same micro-kernel alone).
// Each output is summed in k order, one product at a time (fused where the target has FMA,
// mul + add in WASM SIMD128), exactly as matvec_f32_ref does; a depth block after the first
// resumes from the partial sums stored in Y, which keeps that order.
// Tile: MR x 2 accumulators + 2 token vectors + 1 broadcast (+ 1 temporary for mul + add) must
// fit the register file. WASM code runs on x64's 16 xmm registers (V8 keeps some for itself):
// SIMD128's mul + add needs a temporary, so 4 x 2 (12 live; 6 x 2 runs at 28 against 42 GFLOP/s
// in Chromium 156). Relaxed SIMD's fused madd needs none, and 6 x 2 (15 live) runs 7% faster than
// 4 x 2 in Chromium 156 and Node 24 (54.5 against 51), but V8 12.4 (Node 22) and older spill it
// and run it at half speed (24 against 50): the relaxed builds time both on their first calls
// and keep the faster (tile_trial; the sums are the same either way). Natively 6 x 2 with FMA
// (AVX2's 16 registers, AVX-512's 32).
constexpr int kTileRows[2] = {4, 6};
#if defined(__wasm__) && defined(QKV_RELAXED_SIMD)
constexpr int kTileFixed = -1;
#elif defined(__wasm__)
constexpr int kTileFixed = 0;
#else
constexpr int kTileFixed = 1;
#endif
static Trial tile_trial(kTileFixed);
// Tokens per tile: two vectors; the last tile of a batch is one vector wide when that holds it.
constexpr int kXTile = 2 * kLanes;
// Depth block: a tile's weight rows of it (16 KiB in WASM) stay in L1 while every tile passes.
constexpr int kDepth = 1024;

// MR rows from W (row stride ldw) x NV vectors of a tile (width NV * kLanes, of which nt are
// tokens) over kn columns, into Y's rows of those tokens.
template <int MR, int NV>
static inline void xtile(float* Y, int64_t ldy, const float* x, const float* W, int64_t ldw, int kn, int nt,
                         bool resume) {
  constexpr int TW = NV * kLanes;
  fbatch acc[MR][NV];
  alignas(64) float tmp[MR][TW];
  if (resume) {
    for (int i = 0; i < MR; i++)
      for (int j = 0; j < TW; j++) tmp[i][j] = j < nt ? Y[j * ldy + i] : 0.0f;
    for (int i = 0; i < MR; i++)
      for (int v = 0; v < NV; v++) acc[i][v] = fbatch::load_aligned(&tmp[i][v * kLanes]);
  } else {
    for (int i = 0; i < MR; i++)
      for (int v = 0; v < NV; v++) acc[i][v] = fbatch(0.0f);
  }
  // Row pointers, not W + i * ldw + k in the loop: 64-bit index arithmetic is slow in wasm32.
  const float* ws[MR];
  for (int i = 0; i < MR; i++) ws[i] = W + i * ldw;
  for (int k = 0; k < kn; k++, x += TW) {
    fbatch xv[NV];
    for (int v = 0; v < NV; v++) xv[v] = fbatch::load_unaligned(x + v * kLanes);
    for (int i = 0; i < MR; i++) {
      const fbatch w(ws[i][k]);
      for (int v = 0; v < NV; v++) acc[i][v] = madd(w, xv[v], acc[i][v]);
    }
  }
  for (int i = 0; i < MR; i++)
    for (int v = 0; v < NV; v++) acc[i][v].store_aligned(&tmp[i][v * kLanes]);
  for (int j = 0; j < nt; j++)
    for (int i = 0; i < MR; i++) Y[j * ldy + i] = tmp[i][j];
}

// One tile of nt tokens for `rows` (<= MR) rows: dispatched on the rows and the tile's width.
template <int MR>
static void xtile_rows(int rows, float* Y, int64_t ldy, const float* x, const float* W, int64_t ldw, int kn, int nt,
                       bool resume) {
  if (rows == MR) {
    if (nt > kLanes) xtile<MR, 2>(Y, ldy, x, W, ldw, kn, nt, resume);
    else xtile<MR, 1>(Y, ldy, x, W, ldw, kn, nt, resume);
    return;
  }
  if constexpr (MR > 1) xtile_rows<MR - 1>(rows, Y, ldy, x, W, ldw, kn, nt, resume);
}

const int kXPackMinTokens = kLanes;

static int xtile_width(int T, int t0) { return T - t0 > kLanes ? kXTile : kLanes; }

size_t xpack_f32_floats(int T, int n) {
  if (T <= 0 || n <= 0) return 0;
  const int last = T - (T - 1) / kXTile * kXTile;  // tokens in the last tile
  return ((size_t)(T - last) + (last > kLanes ? kXTile : kLanes)) * (size_t)n;
}

void xpack_f32(float* Xp, const float* X, int64_t ldx, int T, int n) {
  // 16 columns of a tile at a time: reads along each token's row, writes within 16 x width floats.
  constexpr int kCols = 16;
  for (int t0 = 0; t0 < T; t0 += kXTile) {
    const int tw = xtile_width(T, t0), nt = T - t0 < tw ? T - t0 : tw;
    float* d = Xp + (int64_t)t0 * n;
    for (int k0 = 0; k0 < n; k0 += kCols) {
      const int k1 = n - k0 < kCols ? n : k0 + kCols;
      for (int j = 0; j < nt; j++) {
        const float* x = X + (int64_t)(t0 + j) * ldx;
        for (int k = k0; k < k1; k++) d[(int64_t)k * tw + j] = x[k];
      }
      for (int j = nt; j < tw; j++)
        for (int k = k0; k < k1; k++) d[(int64_t)k * tw + j] = 0.0f;
    }
  }
}

void xpack_f32_t(float* Xp, const float* XT, int64_t ldxt, int T, int n) {
  for (int t0 = 0; t0 < T; t0 += kXTile) {
    const int tw = xtile_width(T, t0), nt = T - t0 < tw ? T - t0 : tw;
    float* d = Xp + (int64_t)t0 * n;
    for (int k = 0; k < n; k++, d += tw) {
      const float* x = XT + (int64_t)k * ldxt + t0;
      for (int j = 0; j < nt; j++) d[j] = x[j];
      for (int j = nt; j < tw; j++) d[j] = 0.0f;
    }
  }
}

template <int MR>
static void xpacked(float* Y, int64_t ldy, const float* Xp, const float* W, int64_t ldw, int T, int n, int r0, int r1,
                    bool accumulate) {
  for (int k0 = 0; k0 < n; k0 += kDepth) {
    const int kn = n - k0 < kDepth ? n - k0 : kDepth;
    for (int r = r0; r < r1; r += MR) {
      const int rows = r1 - r < MR ? r1 - r : MR;
      const float* W0 = W + (int64_t)r * ldw + k0;
      // Tile t starts at Xp + t * n; its columns from k0 on, k0 * width floats into it.
      for (int t = 0; t < T; t += kXTile)
        xtile_rows<MR>(rows, Y + t * ldy + r, ldy, Xp + (int64_t)t * n + (int64_t)k0 * xtile_width(T, t), W0, ldw, kn,
                       T - t < kXTile ? T - t : kXTile, accumulate || k0 > 0);
    }
  }
}

void matmul_f32_xpacked(float* Y, int64_t ldy, const float* Xp, const float* W, int64_t ldw, int T, int n, int r0,
                        int r1, bool accumulate) {
  auto run = [&](int which) {
    if (kTileRows[which] == 6) xpacked<6>(Y, ldy, Xp, W, ldw, T, n, r0, r1, accumulate);
    else xpacked<4>(Y, ldy, Xp, W, ldw, T, n, r0, r1, accumulate);
  };
  const int kept = tile_trial.decided();
  if (kept >= 0) return run(kept);
  const int which = tile_trial.pick();
  const auto start = std::chrono::steady_clock::now();
  run(which);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  tile_trial.report(which, (double)T * n * (r1 - r0), took.count());
}

int matmul_f32_tile_rows() {
  const int kept = tile_trial.decided();
  return kept >= 0 ? kTileRows[kept] : 0;
}

void matmul_f32_force_tile_rows(int rows) {
  if (rows == 0) return tile_trial.reset(kTileFixed);
  tile_trial.reset(rows == kTileRows[0] ? 0 : rows == kTileRows[1] ? 1 : kTileFixed);
}

// X packed a block of tokens and columns at a time into a buffer of this thread's (kTokBlock x
// kDepth floats at most), then the kernel over each block, resuming from Y after the first
// depth block.
constexpr int kTokBlock = 256;

const float* xpack_f32_thread(const float* X, int64_t ldx, int T, int n) {
  thread_local std::vector<float> xbuf;
  if (xbuf.size() < xpack_f32_floats(T, n)) xbuf.resize(xpack_f32_floats(T, n));
  xpack_f32(xbuf.data(), X, ldx, T, n);
  return xbuf.data();
}

static void matmul_packed(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int T, int n, int r0,
                          int r1, bool accumulate) {
  for (int t0 = 0; t0 < T; t0 += kTokBlock) {
    const int tn = T - t0 < kTokBlock ? T - t0 : kTokBlock;
    for (int k0 = 0; k0 < n; k0 += kDepth) {
      const int kn = n - k0 < kDepth ? n - k0 : kDepth;
      const float* xp = xpack_f32_thread(X + t0 * ldx + k0, ldx, tn, kn);
      matmul_f32_xpacked(Y + t0 * ldy, ldy, xp, W + k0, n, tn, kn, r0, r1, accumulate || k0 > 0);
    }
  }
}

void matmul_f32_simd(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int T, int n, int r0, int r1) {
  if (T == 1) return matvec_f32_simd(Y, W, X, n, r0, r1);
  if (T >= kXPackMinTokens) return matmul_packed(Y, ldy, X, ldx, W, T, n, r0, r1, false);
  // A few tokens: packing would cost more than it saves; dot products of 4 rows x 3 tokens.
  int r = r0;
  for (; r + 4 <= r1; r += 4) matmul_rows<4>(Y + r, ldy, X, ldx, W + (int64_t)r * n, T, n);
  for (; r < r1; r++) matmul_rows<1>(Y + r, ldy, X, ldx, W + (int64_t)r * n, T, n);
}

void matmul_f32_acc_ref(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int T, int d, int n) {
  for (int t = 0; t < T; t++)
    for (int i = 0; i < d; i++) {
      float s = Y[t * ldy + i];
      for (int k = 0; k < n; k++) s += W[(int64_t)i * n + k] * X[t * ldx + k];
      Y[t * ldy + i] = s;
    }
}

void matmul_f32_acc_simd(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int T, int n, int r0,
                         int r1) {
  if (T >= kXPackMinTokens) return matmul_packed(Y, ldy, X, ldx, W, T, n, r0, r1, true);
  // A few tokens: the products into a row buffer, then added.
  float buf[256];
  for (int t = 0; t < T; t++)
    for (int r = r0; r < r1; r += 256) {
      const int m = r1 - r < 256 ? r1 - r : 256;
      matvec_f32_simd(buf, W + (int64_t)r * n, X + t * ldx, n, 0, m);
      for (int i = 0; i < m; i++) Y[t * ldy + r + i] += buf[i];
    }
}

void add_f32_ref(float* y, const float* b, int n) {
  for (int i = 0; i < n; i++) y[i] += b[i];
}

void add_f32_simd(float* y, const float* b, int n) {
  int i = 0;
  for (; i + kLanes <= n; i += kLanes)
    (fbatch::load_unaligned(y + i) + fbatch::load_unaligned(b + i)).store_unaligned(y + i);
  for (; i < n; i++) y[i] += b[i];
}

}  // namespace qkv
