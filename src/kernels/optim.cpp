// Cross-entropy and AdamW: scalar references and xsimd versions.
#include "optim.h"

#include <cmath>

#include "simd.h"
#include "softmax.h"

namespace qkv {

double cross_entropy_ref(float* x, int n, int target, float scale) {
  float mx = x[0];
  for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
  double sum = 0.0;
  for (int i = 0; i < n; i++) sum += std::exp((double)x[i] - mx);
  const double loss = std::log(sum) - ((double)x[target] - mx);
  for (int i = 0; i < n; i++) x[i] = (float)(std::exp((double)x[i] - mx) / sum) * scale;
  x[target] -= scale;
  return loss;
}

double cross_entropy_simd(float* x, int n, int target, float scale) {
  const float logit = x[target];
  fbatch mb(-INFINITY);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) mb = xsimd::max(mb, fbatch::load_unaligned(x + i));
  float mx = xsimd::reduce_max(mb);
  for (; i < n; i++) mx = x[i] > mx ? x[i] : mx;
  const float sum = exp_shift_sum_simd(x, n, mx);  // x <- exp(x - mx)
  const fbatch f(scale / sum);
  for (i = 0; i + kLanes <= n; i += kLanes) (fbatch::load_unaligned(x + i) * f).store_unaligned(x + i);
  for (; i < n; i++) x[i] *= scale / sum;
  x[target] -= scale;
  return std::log((double)sum) - ((double)logit - mx);
}

void adamw_ref(float* p, const float* g, float* m, float* v, int64_t n, const AdamWParams& h) {
  const float bc1 = 1.0f - std::pow(h.beta1, (float)h.step), bc2 = 1.0f - std::pow(h.beta2, (float)h.step);
  for (int64_t i = 0; i < n; i++) {
    m[i] = h.beta1 * m[i] + (1.0f - h.beta1) * g[i];
    v[i] = h.beta2 * v[i] + (1.0f - h.beta2) * g[i] * g[i];
    const float upd = (m[i] / bc1) / (std::sqrt(v[i] / bc2) + h.eps);
    p[i] -= h.lr * (upd + h.weight_decay * p[i]);
  }
}

void adamw_simd(float* p, const float* g, float* m, float* v, int64_t n, const AdamWParams& h) {
  const float bc1 = 1.0f - std::pow(h.beta1, (float)h.step), bc2 = 1.0f - std::pow(h.beta2, (float)h.step);
  const fbatch b1(h.beta1), b2(h.beta2), c1(1.0f - h.beta1), c2(1.0f - h.beta2), ib1(1.0f / bc1), ib2(1.0f / bc2),
      eps(h.eps), lr(h.lr), wd(h.weight_decay);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    fbatch gv = fbatch::load_unaligned(g + i), pv = fbatch::load_unaligned(p + i);
    fbatch mv = madd(b1, fbatch::load_unaligned(m + i), c1 * gv);
    fbatch vv = madd(b2, fbatch::load_unaligned(v + i), c2 * gv * gv);
    mv.store_unaligned(m + i);
    vv.store_unaligned(v + i);
    fbatch upd = (mv * ib1) / (xsimd::sqrt(vv * ib2) + eps);
    (pv - lr * (upd + wd * pv)).store_unaligned(p + i);
  }
  if (i < n) adamw_ref(p + i, g + i, m + i, v + i, n - i, h);
}

}  // namespace qkv
