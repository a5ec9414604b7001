// Attention: the direct reference and the tiled online-softmax (flash) kernel.
#include "attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "simd.h"
#include "softmax.h"

namespace qkv {

static inline bool visible(const AttentionArgs& a, int qpos, int j) {
  if (a.causal && j > qpos) return false;
  if (a.window > 0 && qpos - j >= a.window) return false;
  if (a.key_valid && !a.key_valid[j]) return false;
  return true;
}

// Whether keys [j0, j0 + n) are all visible to the query at qpos (no per-key test needed).
static inline bool all_visible(const AttentionArgs& a, int qpos, int j0, int n) {
  if (a.key_valid) return false;
  if (a.causal && j0 + n - 1 > qpos) return false;
  if (a.window > 0 && qpos - j0 >= a.window) return false;
  return true;
}

void attention_ref(const AttentionArgs& a) {
  const int hd = a.head_dim, group = a.n_heads / a.n_kv_heads;
  std::vector<float> sc(a.n_kv > 0 ? a.n_kv : 1);
  for (int h = 0; h < a.n_heads; h++) {
    const int g = h / group;
    for (int i = 0; i < a.n_q; i++) {
      const float* q = a.q + i * a.q_stride + h * hd;
      float* o = a.out + i * a.out_stride + h * hd;
      const int qpos = a.q_pos0 + i;
      float mx = -INFINITY;
      for (int j = 0; j < a.n_kv; j++) {
        if (!visible(a, qpos, j)) {
          sc[j] = -INFINITY;
          continue;
        }
        const float* k = a.k + j * a.kv_stride + g * hd;
        float s = 0.0f;
        for (int d = 0; d < hd; d++) s += q[d] * k[d];
        sc[j] = s * a.scale;
        if (a.softcap > 0.0f) sc[j] = a.softcap * std::tanh(sc[j] / a.softcap);
        if (a.rel_bias) sc[j] += a.rel_bias[a.rel_bucket[j - qpos + a.rel_off] * a.n_heads + h];
        if (sc[j] > mx) mx = sc[j];
      }
      float sum = 0.0f;
      for (int j = 0; j < a.n_kv; j++) {
        sc[j] = sc[j] == -INFINITY ? 0.0f : std::exp(sc[j] - mx);
        sum += sc[j];
      }
      for (int j = 0; j < a.n_kv; j++) sc[j] = sum > 0.0f ? sc[j] / sum : 0.0f;
      for (int d = 0; d < hd; d++) o[d] = 0.0f;
      for (int j = 0; j < a.n_kv; j++) {
        if (sc[j] == 0.0f) continue;
        const float* v = a.v + j * a.kv_stride + g * hd;
        for (int d = 0; d < hd; d++) o[d] += sc[j] * v[d];
      }
      if (a.probs)
        for (int j = 0; j < a.n_kv; j++) a.probs[((int64_t)h * a.n_q + i) * a.n_kv + j] = sc[j];
    }
  }
}

static inline float dot_simd(const float* x, const float* y, int n) {
  fbatch acc(0.0f);
  int d = 0;
  for (; d + kLanes <= n; d += kLanes) acc = madd(fbatch::load_unaligned(x + d), fbatch::load_unaligned(y + d), acc);
  float s = xsimd::reduce_add(acc);
  for (; d < n; d++) s += x[d] * y[d];
  return s;
}

// y += p * v   (y, v: (n,))
static inline void axpy(float* y, float p, const float* v, int n) {
  fbatch pb(p);
  int d = 0;
  for (; d + kLanes <= n; d += kLanes)
    madd(pb, fbatch::load_unaligned(v + d), fbatch::load_unaligned(y + d)).store_unaligned(y + d);
  for (; d < n; d++) y[d] += p * v[d];
}

// The scores of nk <= kLanes keys k_u = k0 + u * stride against q, q loaded once for all: one
// vector of partial sums per key, reduced together by one xsimd::haddp (a transposing sum:
// no horizontal reduction per key; WASM, SSE and AVX2). haddp sums every lane by the same tree, so a key's score
// does not depend on its place in the group or on the keys beside it; a short group runs with
// zero accumulators for the missing keys.
static inline void dot_keys(const float* q, const float* k0, int64_t stride, int n, int nk, float* out) {
  fbatch acc[kLanes];
  for (int u = 0; u < kLanes; u++) acc[u] = fbatch(0.0f);
  int d = 0;
  auto accumulate = [&](int keys) {  // called with the constant kLanes for a full group (unrolled)
    for (; d + kLanes <= n; d += kLanes) {
      const fbatch qv = fbatch::load_unaligned(q + d);
      for (int u = 0; u < keys; u++) acc[u] = madd(qv, fbatch::load_unaligned(k0 + u * stride + d), acc[u]);
    }
  };
  if (nk == kLanes) accumulate(kLanes);
  else accumulate(nk);
  alignas(64) float r[kLanes];
  if constexpr (kLanes <= 8) {
    if (d == n && nk == kLanes) return xsimd::haddp(acc).store_unaligned(out);
    xsimd::haddp(acc).store_aligned(r);
  } else {  // xsimd 13's AVX-512 haddp returns the sums out of lane order: one reduction per key
    for (int u = 0; u < nk; u++) r[u] = xsimd::reduce_add(acc[u]);
  }
  for (int u = 0; u < nk; u++) {
    float s = r[u];
    for (int e = d; e < n; e++) s += q[e] * k0[u * stride + e];
    out[u] = s;
  }
}

// The largest of x[0..n).
static inline float max_simd(const float* x, int n) {
  int i = 0;
  float m = -INFINITY;
  if (n >= kLanes) {
    fbatch vm = fbatch::load_unaligned(x);
    for (i = kLanes; i + kLanes <= n; i += kLanes) vm = xsimd::max(vm, fbatch::load_unaligned(x + i));
    m = xsimd::reduce_max(vm);
  }
  for (; i < n; i++) m = x[i] > m ? x[i] : m;
  return m;
}

// y += sum_j p[j] v_j over the nk rows v_j = v0 + j * stride (keys with p[j] == 0 skipped), NV
// vectors of y held in registers across all the keys: the same multiply-adds per element, in
// the same order, as one y += p * v pass per key, without reloading and storing y per key.
template <int NV>
static inline void pv_block(float* y, const float* p, int nk, const float* v0, int64_t stride) {
  fbatch acc[NV];
  for (int u = 0; u < NV; u++) acc[u] = fbatch::load_unaligned(y + u * kLanes);
  auto add_key = [&](int j) {
    const fbatch pb(p[j]);
    const float* v = v0 + j * stride;
    for (int u = 0; u < NV; u++) acc[u] = madd(pb, fbatch::load_unaligned(v + u * kLanes), acc[u]);
  };
  int j = 0;
  for (; j + 2 <= nk; j += 2) {  // two keys per iteration: half the loop overhead per key
    if (p[j] != 0.0f) add_key(j);
    if (p[j + 1] != 0.0f) add_key(j + 1);
  }
  if (j < nk && p[j] != 0.0f) add_key(j);
  for (int u = 0; u < NV; u++) acc[u].store_unaligned(y + u * kLanes);
}

static void pv_accumulate(float* y, const float* p, int nk, const float* v0, int64_t stride, int n) {
  constexpr int NV = 8;  // 8 accumulators: half of WASM's 16 vector registers
  int d = 0;
  for (; d + NV * kLanes <= n; d += NV * kLanes) pv_block<NV>(y + d, p, nk, v0 + d, stride);
  for (; d + kLanes <= n; d += kLanes) pv_block<1>(y + d, p, nk, v0 + d, stride);
  for (; d < n; d++)
    for (int j = 0; j < nk; j++)
      if (p[j] != 0.0f) y[d] += p[j] * v0[j * stride + d];
}

// Reads one float of every 64-byte line of rows [j0, j0 + nk) over columns [c0, c1), in order,
// so the tile arrives as a sequential stream (a head's slice of each cache row is a strided walk
// that the hardware prefetchers serve poorly when the cache is out of L2). Returns a sum the
// caller keeps, so the loads are not dropped. (Its adds pace the loads: or-ing the bits instead,
// the touch ran faster in cache but the whole kernel 10% slower out of it; vectorised, with the
// loads out of address order, as slow as no touch at all. Chromium 156.)
static float touch_rows(const float* base, int64_t stride, int j0, int nk, int c0, int c1) {
  float t = 0.0f;
  for (int j = j0; j < j0 + nk; j++)
    for (int c = c0; c < c1; c += 16) t += base[j * stride + c];
  return t;
}
static volatile float g_touch_sink;

void attention_flash(const AttentionArgs& a, int h0, int h1) {
  constexpr int BQ = 8;   // queries sharing each loaded key/value row
  constexpr int BK = 64;  // keys per tile
  const int hd = a.head_dim, group = a.n_heads / a.n_kv_heads, nh = h1 - h0;
  if (nh <= 0) return;
  // Per-thread working set: BQ accumulators of head_dim per head, and a BQ x BK score tile.
  // Tiles are the outer loop and heads the inner one: a tile's key and value rows are read once
  // (touch_rows) and then serve every head from cache.
  thread_local std::vector<float> acc_buf, ml_buf;
  if (acc_buf.size() < (size_t)nh * BQ * hd) acc_buf.resize((size_t)nh * BQ * hd);
  if (ml_buf.size() < (size_t)nh * BQ * 2) ml_buf.resize((size_t)nh * BQ * 2);
  alignas(64) float s[BQ][BK];
  const int c0 = (h0 / group) * hd, c1 = ((h1 - 1) / group + 1) * hd;  // cache columns of these heads
  // With one key/value head the touch would walk the same strided slice the head reads anyway.
  const bool touch = c1 - c0 > hd;
  float touched = 0.0f;

  for (int i0 = 0; i0 < a.n_q; i0 += BQ) {
    const int nq = a.n_q - i0 < BQ ? a.n_q - i0 : BQ;
    for (int h = h0; h < h1; h++) {
      float* acc = acc_buf.data() + (size_t)(h - h0) * BQ * hd;
      float *m = ml_buf.data() + (size_t)(h - h0) * BQ * 2, *l = m + BQ;
      for (int i = 0; i < nq; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
        for (int d = 0; d < hd; d++) acc[i * hd + d] = 0.0f;
      }
    }
    // Keys past the last query's causal horizon are never visible to this block.
    int kv_end = a.n_kv;
    if (a.causal && a.q_pos0 + i0 + nq < kv_end) kv_end = a.q_pos0 + i0 + nq;
    int kv_begin = 0;
    if (a.window > 0 && a.q_pos0 + i0 - a.window + 1 > 0) kv_begin = a.q_pos0 + i0 - a.window + 1;
    for (int j0 = kv_begin; j0 < kv_end; j0 += BK) {
      const int nk = kv_end - j0 < BK ? kv_end - j0 : BK;
      if (touch) touched += touch_rows(a.k, a.kv_stride, j0, nk, c0, c1) + touch_rows(a.v, a.kv_stride, j0, nk, c0, c1);
      for (int h = h0; h < h1; h++) {
        const int g = h / group;
        float* acc = acc_buf.data() + (size_t)(h - h0) * BQ * hd;
        float *m = ml_buf.data() + (size_t)(h - h0) * BQ * 2, *l = m + BQ;
        // Scores for the tile, four keys at a time.
        const float* kt = a.k + (int64_t)j0 * a.kv_stride + g * hd;
        for (int i = 0; i < nq; i++) {
          const int qpos = a.q_pos0 + i0 + i;
          const float* qi = a.q + (i0 + i) * a.q_stride + h * hd;
          for (int jj = 0; jj < nk; jj += kLanes)
            dot_keys(qi, kt + jj * a.kv_stride, a.kv_stride, hd, std::min(kLanes, nk - jj), &s[i][jj]);
          if (all_visible(a, qpos, j0, nk)) {
            const fbatch sc(a.scale);
            int jj = 0;
            for (; jj + kLanes <= nk; jj += kLanes) (fbatch::load_aligned(&s[i][jj]) * sc).store_aligned(&s[i][jj]);
            for (; jj < nk; jj++) s[i][jj] *= a.scale;
          } else {
            for (int jj = 0; jj < nk; jj++) s[i][jj] = visible(a, qpos, j0 + jj) ? s[i][jj] * a.scale : -INFINITY;
          }
          if (a.softcap > 0.0f)
            for (int jj = 0; jj < nk; jj++)
              if (s[i][jj] != -INFINITY) s[i][jj] = a.softcap * std::tanh(s[i][jj] / a.softcap);
          if (a.rel_bias) {
            const int* bucket = a.rel_bucket + (j0 - qpos + a.rel_off);
            for (int jj = 0; jj < nk; jj++)
              if (s[i][jj] != -INFINITY) s[i][jj] += a.rel_bias[bucket[jj] * a.n_heads + h];
          }
        }
        for (int i = 0; i < nq; i++) {
          float* row = s[i];
          if (a.probs) {  // keep raw scores; normalised once the final max and sum are known
            float* pr = a.probs + ((int64_t)h * a.n_q + i0 + i) * a.n_kv + j0;
            for (int jj = 0; jj < nk; jj++) pr[jj] = row[jj];
          }
          const float tmax = max_simd(row, nk);
          if (tmax == -INFINITY) {  // nothing visible in this tile for this query
            for (int jj = 0; jj < nk; jj++) row[jj] = 0.0f;
            continue;
          }
          const float mnew = tmax > m[i] ? tmax : m[i];
          const float corr = m[i] == -INFINITY ? 0.0f : std::exp(m[i] - mnew);
          l[i] = l[i] * corr + exp_shift_sum_simd(row, nk, mnew);
          m[i] = mnew;
          float* o = acc + i * hd;
          if (corr != 1.0f)
            for (int d = 0; d < hd; d++) o[d] *= corr;
        }
        // acc += P V (the tile's value rows are in cache).
        const float* vt = a.v + (int64_t)j0 * a.kv_stride + g * hd;
        for (int i = 0; i < nq; i++) pv_accumulate(acc + i * hd, s[i], nk, vt, a.kv_stride, hd);
      }
    }
    for (int h = h0; h < h1; h++) {
      const float* acc = acc_buf.data() + (size_t)(h - h0) * BQ * hd;
      const float *m = ml_buf.data() + (size_t)(h - h0) * BQ * 2, *l = m + BQ;
      for (int i = 0; i < nq; i++) {
        float* o = a.out + (i0 + i) * a.out_stride + h * hd;
        const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
        for (int d = 0; d < hd; d++) o[d] = acc[i * hd + d] * inv;
        if (a.probs) {
          float* pr = a.probs + ((int64_t)h * a.n_q + i0 + i) * a.n_kv;
          for (int j = 0; j < a.n_kv; j++) {
            const bool in_range = j >= kv_begin && j < kv_end;
            pr[j] = (in_range && pr[j] != -INFINITY && l[i] > 0.0f) ? std::exp(pr[j] - m[i]) * inv : 0.0f;
          }
        }
      }
    }
  }
  g_touch_sink = touched;
}

// ---- linear attention ---------------------------------------------------------------------

static inline float phi(float x) { return x > 0.0f ? x + 1.0f : std::exp(x); }  // elu(x) + 1

static void phi_row(float* y, const float* x, int n) {
  for (int d = 0; d < n; d++) y[d] = phi(x[d]);
}

void attention_linear_ref(const AttentionArgs& a) {
  const int hd = a.head_dim, group = a.n_heads / a.n_kv_heads;
  std::vector<float> w(a.n_kv > 0 ? a.n_kv : 1);
  for (int h = 0; h < a.n_heads; h++) {
    const int g = h / group;
    for (int i = 0; i < a.n_q; i++) {
      const float* q = a.q + i * a.q_stride + h * hd;
      float* o = a.out + i * a.out_stride + h * hd;
      const int qpos = a.q_pos0 + i;
      double sum = 0.0;
      for (int j = 0; j < a.n_kv; j++) {
        w[j] = 0.0f;
        if (!visible(a, qpos, j)) continue;
        const float* k = a.k + j * a.kv_stride + g * hd;
        double s = 0.0;
        for (int d = 0; d < hd; d++) s += (double)phi(q[d]) * phi(k[d]);
        w[j] = (float)s;
        sum += s;
      }
      for (int d = 0; d < hd; d++) o[d] = 0.0f;
      for (int j = 0; j < a.n_kv; j++) {
        w[j] = sum > 0.0 ? (float)(w[j] / sum) : 0.0f;
        if (w[j] == 0.0f) continue;
        const float* v = a.v + j * a.kv_stride + g * hd;
        for (int d = 0; d < hd; d++) o[d] += w[j] * v[d];
      }
      if (a.probs)
        for (int j = 0; j < a.n_kv; j++) a.probs[((int64_t)h * a.n_q + i) * a.n_kv + j] = w[j];
    }
  }
}

void attention_linear(const AttentionArgs& a, int h0, int h1) {
  const int hd = a.head_dim, group = a.n_heads / a.n_kv_heads;
  thread_local std::vector<float> buf;
  const size_t need = (size_t)hd * hd + 3 * (size_t)hd;
  if (buf.size() < need) buf.resize(need);
  float* S = buf.data();   // (hd, hd): S[d][e] = sum phi(k)[d] v[e]
  float* z = S + hd * hd;  // (hd,): sum phi(k)
  float* fq = z + hd;      // phi(q)
  float* fk = fq + hd;     // phi(k)
  const bool recurrent = a.causal && a.window == 0 && !a.key_valid && !a.probs;
  for (int h = h0; h < h1; h++) {
    const int g = h / group;
    if (!recurrent) {  // direct form: weights per visible key
      for (int i = 0; i < a.n_q; i++) {
        const int qpos = a.q_pos0 + i;
        float* o = a.out + i * a.out_stride + h * hd;
        phi_row(fq, a.q + i * a.q_stride + h * hd, hd);
        for (int d = 0; d < hd; d++) o[d] = 0.0f;
        float sum = 0.0f;
        float* pr = a.probs ? a.probs + ((int64_t)h * a.n_q + i) * a.n_kv : nullptr;
        for (int j = 0; j < a.n_kv; j++) {
          if (pr) pr[j] = 0.0f;
          if (!visible(a, qpos, j)) continue;
          phi_row(fk, a.k + j * a.kv_stride + g * hd, hd);
          const float w = dot_simd(fq, fk, hd);
          if (pr) pr[j] = w;
          sum += w;
          axpy(o, w, a.v + j * a.kv_stride + g * hd, hd);
        }
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        for (int d = 0; d < hd; d++) o[d] *= inv;
        if (pr)
          for (int j = 0; j < a.n_kv; j++) pr[j] *= inv;
      }
      continue;
    }
    // Recurrent form: keys enter the state in position order; query i reads it once every key up
    // to its position is in.
    for (int d = 0; d < hd * hd + hd; d++) S[d] = 0.0f;
    int next = 0;  // first key not yet in the state
    for (int i = 0; i < a.n_q; i++) {
      const int upto = std::min(a.n_kv, a.q_pos0 + i + 1);
      for (; next < upto; next++) {
        phi_row(fk, a.k + next * a.kv_stride + g * hd, hd);
        const float* v = a.v + next * a.kv_stride + g * hd;
        for (int d = 0; d < hd; d++) axpy(S + d * hd, fk[d], v, hd);
        axpy(z, 1.0f, fk, hd);
      }
      float* o = a.out + i * a.out_stride + h * hd;
      phi_row(fq, a.q + i * a.q_stride + h * hd, hd);
      for (int e = 0; e < hd; e++) o[e] = 0.0f;
      for (int d = 0; d < hd; d++) axpy(o, fq[d], S + d * hd, hd);
      const float den = dot_simd(fq, z, hd);
      const float inv = den > 0.0f ? 1.0f / den : 0.0f;
      for (int e = 0; e < hd; e++) o[e] *= inv;
    }
  }
}

}  // namespace qkv
