// Additive attention: scalar references and xsimd kernels, forward and backward.
#include "attention_additive.h"

#include <cmath>
#include <vector>

#include "simd.h"

namespace qkv {

static inline bool visible(const AdditiveAttentionArgs& a, int i, int j) {
  if (a.causal && j > a.q_pos0 + i) return false;
  if (a.key_valid && !a.key_valid[j]) return false;
  return true;
}

// ---- scalar references --------------------------------------------------------------------

// y = W x; W: (rows, cols) dense.
static void matvec_scalar(float* y, const float* w, const float* x, int rows, int cols) {
  for (int r = 0; r < rows; r++) {
    float s = 0.0f;
    for (int c = 0; c < cols; c++) s += w[(int64_t)r * cols + c] * x[c];
    y[r] = s;
  }
}

// Projections of every query and key: qp (n_q, d_att), kp (n_kv, d_att).
template <class MatVec>
static void project(const AdditiveAttentionArgs& a, std::vector<float>& qp, std::vector<float>& kp, MatVec mv) {
  qp.resize((size_t)a.n_q * a.d_att);
  kp.resize((size_t)a.n_kv * a.d_att);
  for (int i = 0; i < a.n_q; i++) mv(qp.data() + (size_t)i * a.d_att, a.w_q, a.q + i * a.q_stride, a.d_att, a.d_q);
  for (int j = 0; j < a.n_kv; j++) mv(kp.data() + (size_t)j * a.d_att, a.w_k, a.k + j * a.k_stride, a.d_att, a.d_k);
}

void attention_additive_ref(const AdditiveAttentionArgs& a) {
  std::vector<float> qp, kp, p(a.n_kv > 0 ? a.n_kv : 1);
  project(a, qp, kp, matvec_scalar);
  for (int i = 0; i < a.n_q; i++) {
    float mx = -INFINITY;
    for (int j = 0; j < a.n_kv; j++) {
      p[j] = -INFINITY;
      if (!visible(a, i, j)) continue;
      float s = 0.0f;
      for (int t = 0; t < a.d_att; t++)
        s += a.v[t] * std::tanh(qp[(size_t)i * a.d_att + t] + kp[(size_t)j * a.d_att + t]);
      p[j] = s;
      if (s > mx) mx = s;
    }
    float sum = 0.0f;
    for (int j = 0; j < a.n_kv; j++) {
      p[j] = p[j] == -INFINITY ? 0.0f : std::exp(p[j] - mx);
      sum += p[j];
    }
    float* o = a.out + i * a.out_stride;
    for (int d = 0; d < a.d_v; d++) o[d] = 0.0f;
    for (int j = 0; j < a.n_kv; j++) {
      p[j] = sum > 0.0f ? p[j] / sum : 0.0f;
      const float* vj = a.values + j * a.values_stride;
      for (int d = 0; d < a.d_v; d++) o[d] += p[j] * vj[d];
      if (a.probs) a.probs[(int64_t)i * a.n_kv + j] = p[j];
    }
  }
}

void attention_additive_backward_ref(const AdditiveAttentionArgs& a, const AdditiveAttentionGrads& g) {
  const int da = a.d_att;
  std::vector<float> qp, kp, dqp((size_t)a.n_q * da, 0.0f), dkp((size_t)a.n_kv * da, 0.0f);
  project(a, qp, kp, matvec_scalar);
  for (int t = 0; t < da; t++) g.dv[t] = 0.0f;
  for (int j = 0; j < a.n_kv; j++)
    for (int d = 0; d < a.d_v; d++) g.dvalues[j * a.values_stride + d] = 0.0f;
  for (int i = 0; i < a.n_q; i++) {
    const float* dout = g.dout + i * a.out_stride;
    const float* o = g.out + i * a.out_stride;
    float di = 0.0f;
    for (int d = 0; d < a.d_v; d++) di += dout[d] * o[d];
    for (int j = 0; j < a.n_kv; j++) {
      const float p = g.probs[(int64_t)i * a.n_kv + j];
      if (p == 0.0f) continue;  // masked (or underflowed: every term below carries p)
      const float* vj = a.values + j * a.values_stride;
      float* dvj = g.dvalues + j * a.values_stride;
      float dp = 0.0f;
      for (int d = 0; d < a.d_v; d++) {
        dp += dout[d] * vj[d];
        dvj[d] += p * dout[d];
      }
      const float ds = p * (dp - di);
      for (int t = 0; t < da; t++) {
        const float th = std::tanh(qp[(size_t)i * da + t] + kp[(size_t)j * da + t]);
        g.dv[t] += ds * th;
        const float du = ds * a.v[t] * (1.0f - th * th);
        dqp[(size_t)i * da + t] += du;
        dkp[(size_t)j * da + t] += du;
      }
    }
  }
  // Through the projections: dx = W^T du, dW += du x^T.
  auto through = [da](const std::vector<float>& du, int n, const float* x, int64_t xs, float* dx, const float* w,
                      float* dw, int dcols) {
    for (int t = 0; t < da * dcols; t++) dw[t] = 0.0f;
    for (int r = 0; r < n; r++) {
      float* dxr = dx + r * xs;
      const float* xr = x + r * xs;
      for (int c = 0; c < dcols; c++) dxr[c] = 0.0f;
      for (int t = 0; t < da; t++) {
        const float u = du[(size_t)r * da + t];
        for (int c = 0; c < dcols; c++) {
          dxr[c] += u * w[(int64_t)t * dcols + c];
          dw[(int64_t)t * dcols + c] += u * xr[c];
        }
      }
    }
  };
  through(dqp, a.n_q, a.q, a.q_stride, g.dq, a.w_q, g.dw_q, a.d_q);
  through(dkp, a.n_kv, a.k, a.k_stride, g.dk, a.w_k, g.dw_k, a.d_k);
}

// ---- xsimd kernels ------------------------------------------------------------------------

static inline float dot(const float* x, const float* y, int n) {
  fbatch acc(0.0f);
  int d = 0;
  for (; d + kLanes <= n; d += kLanes) acc = madd(fbatch::load_unaligned(x + d), fbatch::load_unaligned(y + d), acc);
  float s = xsimd::reduce_add(acc);
  for (; d < n; d++) s += x[d] * y[d];
  return s;
}

// y += p * x
static inline void axpy(float* y, float p, const float* x, int n) {
  const fbatch pb(p);
  int d = 0;
  for (; d + kLanes <= n; d += kLanes)
    madd(pb, fbatch::load_unaligned(x + d), fbatch::load_unaligned(y + d)).store_unaligned(y + d);
  for (; d < n; d++) y[d] += p * x[d];
}

static void matvec_simd(float* y, const float* w, const float* x, int rows, int cols) {
  for (int r = 0; r < rows; r++) y[r] = dot(w + (int64_t)r * cols, x, cols);
}

// v . tanh(qp + kp) over n lanes.
static inline float tanh_score(const float* v, const float* qp, const float* kp, int n) {
  fbatch acc(0.0f);
  int t = 0;
  for (; t + kLanes <= n; t += kLanes)
    acc = madd(fbatch::load_unaligned(v + t),
               xsimd::tanh(fbatch::load_unaligned(qp + t) + fbatch::load_unaligned(kp + t)), acc);
  float s = xsimd::reduce_add(acc);
  for (; t < n; t++) s += v[t] * std::tanh(qp[t] + kp[t]);
  return s;
}

void attention_additive_simd(const AdditiveAttentionArgs& a) {
  const int da = a.d_att;
  thread_local std::vector<float> qp, kp, p;
  project(a, qp, kp, matvec_simd);
  if (p.size() < (size_t)a.n_kv + 1) p.resize((size_t)a.n_kv + 1);
  for (int i = 0; i < a.n_q; i++) {
    float mx = -INFINITY;
    const float* qi = qp.data() + (size_t)i * da;
    for (int j = 0; j < a.n_kv; j++) {
      p[j] = visible(a, i, j) ? tanh_score(a.v, qi, kp.data() + (size_t)j * da, da) : -INFINITY;
      if (p[j] > mx) mx = p[j];
    }
    float sum = 0.0f;
    for (int j = 0; j < a.n_kv; j++) {
      p[j] = p[j] == -INFINITY ? 0.0f : std::exp(p[j] - mx);
      sum += p[j];
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    float* o = a.out + i * a.out_stride;
    for (int d = 0; d < a.d_v; d++) o[d] = 0.0f;
    for (int j = 0; j < a.n_kv; j++) {
      p[j] *= inv;
      if (p[j] != 0.0f) axpy(o, p[j], a.values + j * a.values_stride, a.d_v);
      if (a.probs) a.probs[(int64_t)i * a.n_kv + j] = p[j];
    }
  }
}

// For one visible pair: dv += ds * t, dqp += du, dkp += du with t = tanh(qp + kp),
// du = ds * v * (1 - t^2).
static inline void tanh_backward(float* dv, float* dqp, float* dkp, const float* v, const float* qp, const float* kp,
                                 float ds, int n) {
  const fbatch dsb(ds), one(1.0f);
  int t = 0;
  for (; t + kLanes <= n; t += kLanes) {
    const fbatch th = xsimd::tanh(fbatch::load_unaligned(qp + t) + fbatch::load_unaligned(kp + t));
    madd(dsb, th, fbatch::load_unaligned(dv + t)).store_unaligned(dv + t);
    const fbatch du = dsb * fbatch::load_unaligned(v + t) * (one - th * th);
    (fbatch::load_unaligned(dqp + t) + du).store_unaligned(dqp + t);
    (fbatch::load_unaligned(dkp + t) + du).store_unaligned(dkp + t);
  }
  for (; t < n; t++) {
    const float th = std::tanh(qp[t] + kp[t]);
    dv[t] += ds * th;
    const float du = ds * v[t] * (1.0f - th * th);
    dqp[t] += du;
    dkp[t] += du;
  }
}

void attention_additive_backward_simd(const AdditiveAttentionArgs& a, const AdditiveAttentionGrads& g) {
  const int da = a.d_att;
  thread_local std::vector<float> qp, kp, dqp, dkp;
  project(a, qp, kp, matvec_simd);
  dqp.assign((size_t)a.n_q * da, 0.0f);
  dkp.assign((size_t)a.n_kv * da, 0.0f);
  for (int t = 0; t < da; t++) g.dv[t] = 0.0f;
  for (int j = 0; j < a.n_kv; j++)
    for (int d = 0; d < a.d_v; d++) g.dvalues[j * a.values_stride + d] = 0.0f;
  for (int i = 0; i < a.n_q; i++) {
    const float* dout = g.dout + i * a.out_stride;
    const float di = dot(dout, g.out + i * a.out_stride, a.d_v);
    for (int j = 0; j < a.n_kv; j++) {
      const float p = g.probs[(int64_t)i * a.n_kv + j];
      if (p == 0.0f) continue;
      const float* vj = a.values + j * a.values_stride;
      const float ds = p * (dot(dout, vj, a.d_v) - di);
      axpy(g.dvalues + j * a.values_stride, p, dout, a.d_v);
      tanh_backward(g.dv, dqp.data() + (size_t)i * da, dkp.data() + (size_t)j * da, a.v, qp.data() + (size_t)i * da,
                    kp.data() + (size_t)j * da, ds, da);
    }
  }
  auto through = [da](const std::vector<float>& du, int n, const float* x, int64_t xs, float* dx, const float* w,
                      float* dw, int dcols) {
    for (int t = 0; t < da * dcols; t++) dw[t] = 0.0f;
    for (int r = 0; r < n; r++) {
      float* dxr = dx + r * xs;
      for (int c = 0; c < dcols; c++) dxr[c] = 0.0f;
      for (int t = 0; t < da; t++) {
        const float u = du[(size_t)r * da + t];
        if (u == 0.0f) continue;
        axpy(dxr, u, w + (int64_t)t * dcols, dcols);
        axpy(dw + (int64_t)t * dcols, u, x + r * xs, dcols);
      }
    }
  };
  through(dqp, a.n_q, a.q, a.q_stride, g.dq, a.w_q, g.dw_q, a.d_q);
  through(dkp, a.n_kv, a.k, a.k_stride, g.dk, a.w_k, g.dw_k, a.d_k);
}

}  // namespace qkv
