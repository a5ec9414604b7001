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
      for (int i = 0; i < MR; i++) acc[i][j] = xsimd::fma(w[i], xv, acc[i][j]);
    }
  }
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NR; j++) {
      float s = xsimd::reduce_add(acc[i][j]);
      for (int kk = k; kk < n; kk++) s += W[(int64_t)i * n + kk] * X[j * ldx + kk];
      Y[j * ldy + i] = s;
    }
}

void matvec_f32_simd(float* y, const float* W, const float* x, int n, int r0, int r1) {
  int r = r0;
  for (; r + 4 <= r1; r += 4) dot_block<4, 1>(y + r, 1, x, 0, W + (int64_t)r * n, n);
  for (; r < r1; r++) dot_block<1, 1>(y + r, 1, x, 0, W + (int64_t)r * n, n);
}

template <int MR>
static void matmul_rows(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int T,
                        int n) {
  constexpr int NR = 3;
  int t = 0;
  for (; t + NR <= T; t += NR) dot_block<MR, NR>(Y + t * ldy, ldy, X + t * ldx, ldx, W, n);
  for (; t + 2 <= T; t += 2) dot_block<MR, 2>(Y + t * ldy, ldy, X + t * ldx, ldx, W, n);
  for (; t < T; t++) dot_block<MR, 1>(Y + t * ldy, ldy, X + t * ldx, ldx, W, n);
}

void matmul_f32_simd(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int T,
                     int n, int r0, int r1) {
  // Token tiles keep a slab of X hot in cache while each 4-row weight panel streams through.
  constexpr int TT = 48;
  for (int t0 = 0; t0 < T; t0 += TT) {
    int tn = T - t0 < TT ? T - t0 : TT;
    const float* Xt = X + t0 * ldx;
    float* Yt = Y + t0 * ldy;
    int r = r0;
    for (; r + 4 <= r1; r += 4) matmul_rows<4>(Yt + r, ldy, Xt, ldx, W + (int64_t)r * n, tn, n);
    for (; r < r1; r++) matmul_rows<1>(Yt + r, ldy, Xt, ldx, W + (int64_t)r * n, tn, n);
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
