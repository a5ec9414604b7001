// Gradient products of the training backward pass: the scalar references. The fast path is
// train/model.cpp's linear_backward, which runs them on the packed f32 kernel (matmul.h).
#include "matmul_backward.h"

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

}  // namespace qkv
