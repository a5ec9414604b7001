// Gradient products of the training backward pass: scalar references and register-blocked
// xsimd versions (outer-product form: broadcast one scalar, FMA against a row vector).
#include "matmul_backward.h"

#include "simd.h"

namespace qkv {

void matmul_dx_ref(float* dX, int64_t ldx, const float* dY, int64_t ldy, const float* W, int T, int d, int n,
                   bool accumulate) {
  for (int t = 0; t < T; t++)
    for (int k = 0; k < n; k++) {
      float s = 0.0f;
      for (int r = 0; r < d; r++) s += dY[t * ldy + r] * W[(int64_t)r * n + k];
      dX[t * ldx + k] = accumulate ? dX[t * ldx + k] + s : s;
    }
}

void matmul_dw_ref(float* dW, const float* dY, int64_t ldy, const float* X, int64_t ldx, int T, int d, int n) {
  for (int r = 0; r < d; r++)
    for (int k = 0; k < n; k++) {
      float s = 0.0f;
      for (int t = 0; t < T; t++) s += dY[t * ldy + r] * X[t * ldx + k];
      dW[(int64_t)r * n + k] += s;
    }
}

// MT tokens x NV vectors of output columns [k, k + NV*kLanes): acc[i][v] = sum_r dY[t+i, r] W[r, k+v*L..]
template <int MT, int NV>
static inline void dx_block(float* dX, int64_t ldx, const float* dY, int64_t ldy, const float* W, int d, int n,
                            int k, bool accumulate) {
  fbatch acc[MT][NV];
  for (int i = 0; i < MT; i++)
    for (int v = 0; v < NV; v++) acc[i][v] = fbatch(0.0f);
  for (int r = 0; r < d; r++) {
    fbatch w[NV];
    for (int v = 0; v < NV; v++) w[v] = fbatch::load_unaligned(W + (int64_t)r * n + k + v * kLanes);
    for (int i = 0; i < MT; i++) {
      fbatch g(dY[i * ldy + r]);
      for (int v = 0; v < NV; v++) acc[i][v] = xsimd::fma(g, w[v], acc[i][v]);
    }
  }
  for (int i = 0; i < MT; i++)
    for (int v = 0; v < NV; v++) {
      float* p = dX + i * ldx + k + v * kLanes;
      if (accumulate) acc[i][v] += fbatch::load_unaligned(p);
      acc[i][v].store_unaligned(p);
    }
}

template <int MT>
static void dx_rows(float* dX, int64_t ldx, const float* dY, int64_t ldy, const float* W, int d, int n,
                    bool accumulate) {
  constexpr int NV = 4;
  int k = 0;
  for (; k + NV * kLanes <= n; k += NV * kLanes) dx_block<MT, NV>(dX, ldx, dY, ldy, W, d, n, k, accumulate);
  for (; k + kLanes <= n; k += kLanes) dx_block<MT, 1>(dX, ldx, dY, ldy, W, d, n, k, accumulate);
  for (; k < n; k++)  // columns past the last whole vector
    for (int i = 0; i < MT; i++) {
      float s = 0.0f;
      for (int r = 0; r < d; r++) s += dY[i * ldy + r] * W[(int64_t)r * n + k];
      dX[i * ldx + k] = accumulate ? dX[i * ldx + k] + s : s;
    }
}

void matmul_dx_simd(float* dX, int64_t ldx, const float* dY, int64_t ldy, const float* W, int d, int n, int t0,
                    int t1, bool accumulate) {
  int t = t0;
  for (; t + 6 <= t1; t += 6) dx_rows<6>(dX + t * ldx, ldx, dY + t * ldy, ldy, W, d, n, accumulate);
  for (; t + 4 <= t1; t += 4) dx_rows<4>(dX + t * ldx, ldx, dY + t * ldy, ldy, W, d, n, accumulate);
  for (; t < t1; t++) dx_rows<1>(dX + t * ldx, ldx, dY + t * ldy, ldy, W, d, n, accumulate);
}

// MR weight rows x NV vectors of columns [k, ...): acc[i][v] = sum_t dY[t, r+i] X[t, k+v*L..]
template <int MR, int NV>
static inline void dw_block(float* dW, const float* dY, int64_t ldy, const float* X, int64_t ldx, int T, int n,
                            int k) {
  fbatch acc[MR][NV];
  for (int i = 0; i < MR; i++)
    for (int v = 0; v < NV; v++) acc[i][v] = fbatch(0.0f);
  for (int t = 0; t < T; t++) {
    fbatch x[NV];
    for (int v = 0; v < NV; v++) x[v] = fbatch::load_unaligned(X + t * ldx + k + v * kLanes);
    for (int i = 0; i < MR; i++) {
      fbatch g(dY[t * ldy + i]);
      for (int v = 0; v < NV; v++) acc[i][v] = xsimd::fma(g, x[v], acc[i][v]);
    }
  }
  for (int i = 0; i < MR; i++)
    for (int v = 0; v < NV; v++) {
      float* p = dW + (int64_t)i * n + k + v * kLanes;
      (fbatch::load_unaligned(p) + acc[i][v]).store_unaligned(p);
    }
}

template <int MR>
static void dw_rows(float* dW, const float* dY, int64_t ldy, const float* X, int64_t ldx, int T, int n) {
  constexpr int NV = 4;
  int k = 0;
  for (; k + NV * kLanes <= n; k += NV * kLanes) dw_block<MR, NV>(dW, dY, ldy, X, ldx, T, n, k);
  for (; k + kLanes <= n; k += kLanes) dw_block<MR, 1>(dW, dY, ldy, X, ldx, T, n, k);
  for (; k < n; k++)
    for (int i = 0; i < MR; i++) {
      float s = 0.0f;
      for (int t = 0; t < T; t++) s += dY[t * ldy + i] * X[t * ldx + k];
      dW[(int64_t)i * n + k] += s;
    }
}

void matmul_dw_simd(float* dW, const float* dY, int64_t ldy, const float* X, int64_t ldx, int T, int n, int r0,
                    int r1) {
  // Token tiles keep a slab of X in cache while every row panel of this range passes over it.
  constexpr int TT = 256;
  for (int t0 = 0; t0 < T; t0 += TT) {
    const int tn = T - t0 < TT ? T - t0 : TT;
    const float* Yt = dY + t0 * ldy;
    const float* Xt = X + t0 * ldx;
    int r = r0;
    for (; r + 4 <= r1; r += 4) dw_rows<4>(dW + (int64_t)r * n, Yt + r, ldy, Xt, ldx, tn, n);
    for (; r < r1; r++) dw_rows<1>(dW + (int64_t)r * n, Yt + r, ldy, Xt, ldx, tn, n);
  }
}

}  // namespace qkv
