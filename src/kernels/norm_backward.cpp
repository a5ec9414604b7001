// RMSNorm backward: scalar reference and xsimd version.
#include "norm_backward.h"

#include <cmath>

#include "simd.h"

namespace qkv {

void rmsnorm_backward_ref(float* dx, float* dw, const float* dy, const float* x, const float* w, int n, float eps) {
  float ss = 0.0f, dot = 0.0f;
  for (int i = 0; i < n; i++) {
    ss += x[i] * x[i];
    dot += w[i] * dy[i] * x[i];
  }
  const float r = 1.0f / std::sqrt(ss / n + eps);
  const float c = r * r * r * dot / n;
  for (int i = 0; i < n; i++) {
    dx[i] += r * w[i] * dy[i] - c * x[i];
    dw[i] += dy[i] * x[i] * r;
  }
}

void rmsnorm_backward_simd(float* dx, float* dw, const float* dy, const float* x, const float* w, int n, float eps) {
  fbatch ss(0.0f), dot(0.0f);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    fbatch xv = fbatch::load_unaligned(x + i);
    ss = madd(xv, xv, ss);
    dot = madd(fbatch::load_unaligned(w + i) * fbatch::load_unaligned(dy + i), xv, dot);
  }
  float s = xsimd::reduce_add(ss), d = xsimd::reduce_add(dot);
  for (int j = i; j < n; j++) {
    s += x[j] * x[j];
    d += w[j] * dy[j] * x[j];
  }
  const float r = 1.0f / std::sqrt(s / n + eps);
  const float c = r * r * r * d / n;
  const fbatch rb(r), cb(c);
  for (i = 0; i + kLanes <= n; i += kLanes) {
    fbatch xv = fbatch::load_unaligned(x + i), gy = fbatch::load_unaligned(dy + i);
    fbatch g = rb * fbatch::load_unaligned(w + i) * gy - cb * xv;
    (fbatch::load_unaligned(dx + i) + g).store_unaligned(dx + i);
    madd(gy, xv * rb, fbatch::load_unaligned(dw + i)).store_unaligned(dw + i);
  }
  for (; i < n; i++) {
    dx[i] += r * w[i] * dy[i] - c * x[i];
    dw[i] += dy[i] * x[i] * r;
  }
}

void layernorm_backward_ref(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, int n,
                            float eps) {
  float mean = 0.0f, var = 0.0f;
  for (int i = 0; i < n; i++) mean += x[i];
  mean /= n;
  for (int i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
  const float r = 1.0f / std::sqrt(var / n + eps);
  float mg = 0.0f, mgx = 0.0f;
  for (int i = 0; i < n; i++) {
    const float g = w[i] * dy[i];
    mg += g;
    mgx += g * (x[i] - mean) * r;
  }
  mg /= n;
  mgx /= n;
  for (int i = 0; i < n; i++) {
    const float xh = (x[i] - mean) * r;
    dx[i] += r * (w[i] * dy[i] - mg - xh * mgx);
    dw[i] += dy[i] * xh;
    if (db) db[i] += dy[i];
  }
}

static float sum_simd(const float* x, int n) {
  fbatch acc(0.0f);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) acc += fbatch::load_unaligned(x + i);
  float s = xsimd::reduce_add(acc);
  for (; i < n; i++) s += x[i];
  return s;
}

void layernorm_backward_simd(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, int n,
                             float eps) {
  const float mean = sum_simd(x, n) / n;
  const fbatch mb(mean);
  fbatch vacc(0.0f);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    fbatch d = fbatch::load_unaligned(x + i) - mb;
    vacc = madd(d, d, vacc);
  }
  float var = xsimd::reduce_add(vacc);
  for (int j = i; j < n; j++) var += (x[j] - mean) * (x[j] - mean);
  const float r = 1.0f / std::sqrt(var / n + eps);
  const fbatch rb(r);
  fbatch g1(0.0f), g2(0.0f);
  for (i = 0; i + kLanes <= n; i += kLanes) {
    fbatch g = fbatch::load_unaligned(w + i) * fbatch::load_unaligned(dy + i);
    g1 += g;
    g2 = madd(g, (fbatch::load_unaligned(x + i) - mb) * rb, g2);
  }
  float mg = xsimd::reduce_add(g1), mgx = xsimd::reduce_add(g2);
  for (int j = i; j < n; j++) {
    mg += w[j] * dy[j];
    mgx += w[j] * dy[j] * (x[j] - mean) * r;
  }
  mg /= n;
  mgx /= n;
  const fbatch mgb(mg), mgxb(mgx);
  for (i = 0; i + kLanes <= n; i += kLanes) {
    fbatch gy = fbatch::load_unaligned(dy + i);
    fbatch xh = (fbatch::load_unaligned(x + i) - mb) * rb;
    fbatch d = rb * (fbatch::load_unaligned(w + i) * gy - mgb - xh * mgxb);
    (fbatch::load_unaligned(dx + i) + d).store_unaligned(dx + i);
    madd(gy, xh, fbatch::load_unaligned(dw + i)).store_unaligned(dw + i);
    if (db) (fbatch::load_unaligned(db + i) + gy).store_unaligned(db + i);
  }
  for (; i < n; i++) {
    const float xh = (x[i] - mean) * r;
    dx[i] += r * (w[i] * dy[i] - mg - xh * mgx);
    dw[i] += dy[i] * xh;
    if (db) db[i] += dy[i];
  }
}

}  // namespace qkv
