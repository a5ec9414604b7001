// f32 products: scalar references and register-blocked xsimd versions.
#include "matmul.h"

#include "simd.h"

namespace qkv {

void matvec_f32_ref(float* y, const float* W, const float* x, int d, int n) {
  for (int i = 0; i < d; i++) {
    float s = 0.0f;
    for (int k = 0; k < n; k++) s += W[(int64_t)i * n + k] * x[k];
    y[i] = s;
  }
}

void matmul_f32_ref(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int T,
                    int d, int n) {
  for (int t = 0; t < T; t++) matvec_f32_ref(Y + t * ldy, W, X + t * ldx, d, n);
}

// MR weight rows x NR tokens of dot products of length n; each output is reduced at the end.
template <int MR, int NR>
static inline void dot_block(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W,
                             int n) {
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

// One weight row against x with four independent accumulators. Decode is bound by streaming
// W from memory: walking one row at a time gives the prefetcher a single sequential stream
// (measured 23.7 GB/s on one core vs 14 GB/s for four interleaved rows).
static inline float dot_row(const float* w, const float* x, int n) {
  fbatch a0(0.0f), a1(0.0f), a2(0.0f), a3(0.0f);
  int k = 0;
  for (; k + 4 * kLanes <= n; k += 4 * kLanes) {
    a0 = madd(fbatch::load_unaligned(w + k), fbatch::load_unaligned(x + k), a0);
    a1 = madd(fbatch::load_unaligned(w + k + kLanes), fbatch::load_unaligned(x + k + kLanes), a1);
    a2 = madd(fbatch::load_unaligned(w + k + 2 * kLanes), fbatch::load_unaligned(x + k + 2 * kLanes), a2);
    a3 = madd(fbatch::load_unaligned(w + k + 3 * kLanes), fbatch::load_unaligned(x + k + 3 * kLanes), a3);
  }
  for (; k + kLanes <= n; k += kLanes)
    a0 = madd(fbatch::load_unaligned(w + k), fbatch::load_unaligned(x + k), a0);
  float s = xsimd::reduce_add((a0 + a1) + (a2 + a3));
  for (; k < n; k++) s += w[k] * x[k];
  return s;
}

void matvec_f32_simd(float* y, const float* W, const float* x, int n, int r0, int r1) {
  for (int r = r0; r < r1; r++) y[r] = dot_row(W + (int64_t)r * n, x, n);
}

template <int MR>
static void matmul_rows(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int T,
                        int n) {
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

// ---- packed-panel kernel (prefill) ---------------------------------------------------------
// Weight rows are packed kPanel at a time and kDepth columns at a time into P (kDepth, kPanel):
// column k of the panel is kPanelV contiguous vectors. The micro-kernel keeps kTok tokens x
// kPanel rows of Y in registers and, per k, loads the panel's vectors once and multiplies them
// by each token's x[k] broadcast (an outer product: no horizontal sums, every load contiguous).
// Each output is summed in k order, one product at a time (fused where the target has FMA,
// mul + add in WASM, which has no FMA), exactly as matvec_f32_ref does; a depth block after the
// first resumes from the partial sums stored in Y, which keeps that order.
// Tile: kPanelV x kTok accumulators + kPanelV weights + 1 broadcast must fit the register file:
// WASM SIMD128 code runs on x64's 16 xmm registers (V8 keeps some for itself), so 2 x 4 (11
// live) there; 2 x 6 (15) for AVX2's 16 and AVX-512's 32 registers. (Relaxed SIMD's madd needs
// no temporary, but 2 x 5 and 2 x 6 measured 40% slower than 2 x 4 in V8 all the same.)
constexpr int kPanelV = 2;
constexpr int kPanel = kPanelV * kLanes;
#if defined(__wasm__)
constexpr int kTok = 4;
#else
constexpr int kTok = 6;
#endif
constexpr int kDepth = 8192 / kPanel;  // a packed block is 32 KiB (L1): 1024 columns in WASM, 256 with AVX-512

template <int NT>
static inline void panel_tile(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* P, int kn, int rows,
                              bool resume) {
  fbatch acc[NT][kPanelV];
  alignas(64) float tmp[kPanel];
  for (int j = 0; j < NT; j++) {
    if (!resume) {
      for (int i = 0; i < kPanelV; i++) acc[j][i] = fbatch(0.0f);
    } else if (rows == kPanel) {
      for (int i = 0; i < kPanelV; i++) acc[j][i] = fbatch::load_unaligned(Y + j * ldy + i * kLanes);
    } else {
      for (int r = 0; r < kPanel; r++) tmp[r] = r < rows ? Y[j * ldy + r] : 0.0f;
      for (int i = 0; i < kPanelV; i++) acc[j][i] = fbatch::load_aligned(tmp + i * kLanes);
    }
  }
  // Row pointers, not X + j * ldx + k in the loop: 64-bit index arithmetic is slow in wasm32.
  const float* xs[NT];
  for (int j = 0; j < NT; j++) xs[j] = X + j * ldx;
  const float* p = P;
  for (int k = 0; k < kn; k++, p += kPanel) {
    fbatch w[kPanelV];
    for (int i = 0; i < kPanelV; i++) w[i] = fbatch::load_aligned(p + i * kLanes);
    for (int j = 0; j < NT; j++) {
      const fbatch x(xs[j][k]);
      for (int i = 0; i < kPanelV; i++) acc[j][i] = madd(w[i], x, acc[j][i]);
    }
  }
  for (int j = 0; j < NT; j++) {
    if (rows == kPanel) {
      for (int i = 0; i < kPanelV; i++) acc[j][i].store_unaligned(Y + j * ldy + i * kLanes);
    } else {
      for (int i = 0; i < kPanelV; i++) acc[j][i].store_aligned(tmp + i * kLanes);
      for (int r = 0; r < rows; r++) Y[j * ldy + r] = tmp[r];
    }
  }
}

template <int NT>
static void panel_tiles(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* P, int T, int kn, int rows,
                        bool resume) {
  int t = 0;
  for (; t + NT <= T; t += NT) panel_tile<NT>(Y + t * ldy, ldy, X + t * ldx, ldx, P, kn, rows, resume);
  if constexpr (NT > 1) {
    if (t < T) panel_tiles<NT - 1>(Y + t * ldy, ldy, X + t * ldx, ldx, P, T - t, kn, rows, resume);
  }
}

static void matmul_packed(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int T, int n, int r0,
                          int r1, bool accumulate) {
  alignas(64) float P[kDepth * kPanel];
  for (int r = r0; r < r1; r += kPanel) {
    const int rows = r1 - r < kPanel ? r1 - r : kPanel;
    for (int k0 = 0; k0 < n; k0 += kDepth) {
      const int kn = n - k0 < kDepth ? n - k0 : kDepth;
      for (int i = 0; i < rows; i++) {
        const float* w = W + (int64_t)(r + i) * n + k0;
        for (int k = 0; k < kn; k++) P[k * kPanel + i] = w[k];
      }
      for (int i = rows; i < kPanel; i++)
        for (int k = 0; k < kn; k++) P[k * kPanel + i] = 0.0f;
      panel_tiles<kTok>(Y + r, ldy, X + k0, ldx, P, T, kn, rows, accumulate || k0 > 0);
    }
  }
}

void matmul_f32_simd(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int T,
                     int n, int r0, int r1) {
  if (T == 1) return matvec_f32_simd(Y, W, X, n, r0, r1);
  if (T >= kTok) return matmul_packed(Y, ldy, X, ldx, W, T, n, r0, r1, false);
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
  if (T >= kTok) return matmul_packed(Y, ldy, X, ldx, W, T, n, r0, r1, true);
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
