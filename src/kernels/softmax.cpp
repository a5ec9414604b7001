// Softmax: the scalar reference is llama2.c's (max, exp, sum, divide) in that order.
#include "softmax.h"

#include <cmath>

#include "simd.h"

namespace qkv {

void softmax_ref(float* x, int n) {
  float max_val = x[0];
  for (int i = 1; i < n; i++)
    if (x[i] > max_val) max_val = x[i];
  float sum = 0.0f;
  for (int i = 0; i < n; i++) {
    x[i] = std::exp(x[i] - max_val);
    sum += x[i];
  }
  for (int i = 0; i < n; i++) x[i] /= sum;
}

float exp_shift_sum_simd(float* x, int n, float shift) {
  fbatch m(shift), vsum(0.0f);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    fbatch e = xsimd::exp(fbatch::load_unaligned(x + i) - m);
    e.store_unaligned(x + i);
    vsum += e;
  }
  float sum = xsimd::reduce_add(vsum);
  for (; i < n; i++) {
    x[i] = std::exp(x[i] - shift);
    sum += x[i];
  }
  return sum;
}

void softmax_simd(float* x, int n) {
  int i = 0;
  fbatch vmax(-INFINITY);
  for (; i + kLanes <= n; i += kLanes) vmax = xsimd::max(vmax, fbatch::load_unaligned(x + i));
  float max_val = xsimd::reduce_max(vmax);
  for (; i < n; i++)
    if (x[i] > max_val) max_val = x[i];
  const float sum = exp_shift_sum_simd(x, n, max_val);
  fbatch inv(1.0f / sum);
  for (i = 0; i + kLanes <= n; i += kLanes) (fbatch::load_unaligned(x + i) * inv).store_unaligned(x + i);
  float sinv = 1.0f / sum;
  for (; i < n; i++) x[i] *= sinv;
}

}  // namespace qkv
