// Block-sparse attention: the pattern, a dense masked reference and the tile-skipping kernel.
#include "attention_sparse.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <string>

#include "common.h"
#include "simd.h"

namespace qkv {

static inline uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static inline int n_blocks(const BlockSparsePattern& p, int n_kv) { return (n_kv + p.block - 1) / p.block; }

void BlockSparsePattern::validate() const {
  auto bad = [](const char* field, long long v, const char* need) {
    fail(ErrorCode::BadArgument,
         std::string("block-sparse attention: ") + field + " is " + std::to_string(v) + ", must be " + need);
  };
  if (block < 1) bad("block", block, ">= 1");
  if (window_blocks < 0) bad("window_blocks", window_blocks, ">= 0");
  if (global_tokens < 0) bad("global_tokens", global_tokens, ">= 0");
  if (random_blocks < 0) bad("random_blocks", random_blocks, ">= 0");
}

void BlockSparsePattern::random_of(int qb, int n_kv, bool causal, std::vector<int>& out) const {
  out.clear();
  if (random_blocks <= 0) return;
  const int lo = global_tokens / block;  // blocks made only of global tokens are attended anyway
  const int hi = std::min(n_blocks(*this, n_kv) - 1, causal ? qb : INT32_MAX);
  if (hi < lo) return;
  const int wlo = std::max(lo, qb - window_blocks), whi = std::min(hi, qb + window_blocks);
  const int in_window = whi >= wlo ? whi - wlo + 1 : 0;
  const int candidates = hi - lo + 1 - in_window;
  auto outside = [&](int b) { return b < qb - window_blocks || b > qb + window_blocks; };
  if (candidates <= random_blocks) {
    for (int b = lo; b <= hi; b++)
      if (outside(b)) out.push_back(b);
    return;
  }
  // Rejection sampling: every try lands on a candidate with probability above 1/(2 window + 2),
  // less the few already drawn, so this takes O(random_blocks + window_blocks) tries on average.
  uint64_t s = seed ^ (0xd1b54a32d192ed03ull * (uint64_t)(qb + 1));
  const uint64_t range = (uint64_t)(hi - lo + 1);
  while ((int)out.size() < random_blocks) {
    const int b = lo + (int)(splitmix64(s) % range);
    if (outside(b) && std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
  }
  std::sort(out.begin(), out.end());
}

void BlockSparsePattern::key_blocks(int qb, int n_kv, bool causal, std::vector<SparseKeyBlock>& out) const {
  out.clear();
  const int nb = n_blocks(*this, n_kv);
  const int hi = std::min(nb - 1, causal ? qb : INT32_MAX);
  if (hi < 0) return;
  thread_local std::vector<int> rnd;
  random_of(qb, n_kv, causal, rnd);
  const int wlo = std::max(0, qb - window_blocks), whi = std::min(hi, qb + window_blocks);
  // A block holding global queries visits every key block; its other queries see only the
  // global keys of the blocks outside their window and random blocks.
  const bool global_queries = (int64_t)qb * block < global_tokens;
  const int gblocks = global_queries ? hi + 1 : std::min(hi + 1, (global_tokens + block - 1) / block);
  // The union of three small sets (global blocks, window, random blocks): O(their sizes).
  for (int b = 0; b < gblocks; b++) out.push_back({b, false});
  for (int b = wlo; b <= whi; b++) out.push_back({b, true});
  for (int b : rnd) out.push_back({b, true});
  std::sort(out.begin(), out.end(), [](const SparseKeyBlock& x, const SparseKeyBlock& y) {
    return x.block != y.block ? x.block < y.block : x.whole > y.whole;
  });
  size_t n = 0;  // keep the first of each block (whole sorts first)
  for (size_t t = 0; t < out.size(); t++)
    if (n == 0 || out[n - 1].block != out[t].block) out[n++] = out[t];
  out.resize(n);
}

bool BlockSparsePattern::visible(int qpos, int j, int n_kv, bool causal) const {
  if (causal && j > qpos) return false;
  if (qpos < global_tokens || j < global_tokens) return true;
  const int qb = qpos / block, kb = j / block;
  if (std::abs(qb - kb) <= window_blocks) return true;
  thread_local std::vector<int> rnd;
  random_of(qb, n_kv, causal, rnd);
  return std::find(rnd.begin(), rnd.end(), kb) != rnd.end();
}

static inline bool base_visible(const AttentionArgs& a, int qpos, int j) {
  if (a.causal && j > qpos) return false;
  if (a.window > 0 && qpos - j >= a.window) return false;
  if (a.key_valid && !a.key_valid[j]) return false;
  return true;
}

void attention_block_sparse_ref(const AttentionArgs& a, const BlockSparsePattern& p) {
  p.validate();
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
        sc[j] = -INFINITY;
        if (!base_visible(a, qpos, j) || !p.visible(qpos, j, a.n_kv, a.causal)) continue;
        const float* k = a.k + j * a.kv_stride + g * hd;
        float s = 0.0f;
        for (int d = 0; d < hd; d++) s += q[d] * k[d];
        sc[j] = s * a.scale;
        if (a.softcap > 0.0f) sc[j] = a.softcap * std::tanh(sc[j] / a.softcap);
        if (sc[j] > mx) mx = sc[j];
      }
      float sum = 0.0f;
      for (int j = 0; j < a.n_kv; j++) {
        sc[j] = sc[j] == -INFINITY ? 0.0f : std::exp(sc[j] - mx);
        sum += sc[j];
      }
      for (int d = 0; d < hd; d++) o[d] = 0.0f;
      for (int j = 0; j < a.n_kv; j++) {
        sc[j] = sum > 0.0f ? sc[j] / sum : 0.0f;
        const float* v = a.v + j * a.kv_stride + g * hd;
        for (int d = 0; d < hd; d++) o[d] += sc[j] * v[d];
        if (a.probs) a.probs[((int64_t)h * a.n_q + i) * a.n_kv + j] = sc[j];
      }
    }
  }
}

static inline float dot(const float* x, const float* y, int n) {
  fbatch acc(0.0f);
  int d = 0;
  for (; d + kLanes <= n; d += kLanes) acc = madd(fbatch::load_unaligned(x + d), fbatch::load_unaligned(y + d), acc);
  float s = xsimd::reduce_add(acc);
  for (; d < n; d++) s += x[d] * y[d];
  return s;
}

// y = y * c + p * x
static inline void scale_axpy(float* y, float c, float p, const float* x, int n) {
  const fbatch cb(c), pb(p);
  int d = 0;
  for (; d + kLanes <= n; d += kLanes)
    madd(pb, fbatch::load_unaligned(x + d), fbatch::load_unaligned(y + d) * cb).store_unaligned(y + d);
  for (; d < n; d++) y[d] = y[d] * c + p * x[d];
}

// End of the keys of tile kb that the query at qpos may see: the whole block, or only its global
// keys (possibly none, then <= the block start).
static inline int tile_end(const BlockSparsePattern& p, const SparseKeyBlock& kb, int qpos, int n_kv) {
  const int j0 = kb.block * p.block, end = std::min(j0 + p.block, n_kv);
  return kb.whole || qpos < p.global_tokens ? end : std::min(end, p.global_tokens);
}

int64_t attention_block_sparse(const AttentionArgs& a, const BlockSparsePattern& p, int h0, int h1) {
  p.validate();
  const int hd = a.head_dim, group = a.n_heads / a.n_kv_heads, B = p.block;
  if (h1 <= h0 || a.n_q <= 0) return 0;
  thread_local std::vector<float> acc, ml, s;
  thread_local std::vector<SparseKeyBlock> blocks;
  s.resize((size_t)B);
  int64_t tiles = 0;
  const int qb0 = a.q_pos0 / B, qb1 = (a.q_pos0 + a.n_q - 1) / B;
  for (int qb = qb0; qb <= qb1; qb++) {
    const int i0 = std::max(0, qb * B - a.q_pos0), i1 = std::min(a.n_q, (qb + 1) * B - a.q_pos0);
    const int nq = i1 - i0;
    p.key_blocks(qb, a.n_kv, a.causal, blocks);
    tiles += (int64_t)blocks.size();
    acc.assign((size_t)nq * hd, 0.0f);
    ml.resize((size_t)nq * 2);
    for (int h = h0; h < h1; h++) {
      const int g = h / group;
      float *m = ml.data(), *l = m + nq;
      for (int i = 0; i < nq; i++) m[i] = -INFINITY, l[i] = 0.0f;
      std::fill(acc.begin(), acc.end(), 0.0f);
      if (a.probs)
        for (int i = i0; i < i1; i++) std::fill_n(a.probs + ((int64_t)h * a.n_q + i) * a.n_kv, a.n_kv, -INFINITY);
      for (const SparseKeyBlock& kb : blocks) {
        const int j0 = kb.block * B;
        for (int i = 0; i < nq; i++) {
          const int qpos = a.q_pos0 + i0 + i;
          const int j1 = tile_end(p, kb, qpos, a.n_kv);
          if (j1 <= j0) continue;  // a non-global query in a block of global keys it is past
          const float* qi = a.q + (int64_t)(i0 + i) * a.q_stride + h * hd;
          float tmax = -INFINITY;
          for (int j = j0; j < j1; j++) {
            float x = -INFINITY;
            if (base_visible(a, qpos, j)) {
              x = dot(qi, a.k + (int64_t)j * a.kv_stride + g * hd, hd) * a.scale;
              if (a.softcap > 0.0f) x = a.softcap * std::tanh(x / a.softcap);
            }
            s[j - j0] = x;
            tmax = std::max(tmax, x);
          }
          if (a.probs)
            std::copy(s.begin(), s.begin() + (j1 - j0), a.probs + ((int64_t)h * a.n_q + i0 + i) * a.n_kv + j0);
          if (tmax == -INFINITY) continue;
          const float mnew = std::max(m[i], tmax);
          float corr = m[i] == -INFINITY ? 0.0f : std::exp(m[i] - mnew);
          float* o = acc.data() + (size_t)i * hd;
          l[i] *= corr;
          for (int j = j0; j < j1; j++) {
            if (s[j - j0] == -INFINITY) continue;
            const float e = std::exp(s[j - j0] - mnew);
            l[i] += e;
            scale_axpy(o, corr, e, a.v + (int64_t)j * a.kv_stride + g * hd, hd);
            corr = 1.0f;  // the rescale is applied once, with the first key of the tile
          }
          m[i] = mnew;
        }
      }
      for (int i = 0; i < nq; i++) {
        float* o = a.out + (int64_t)(i0 + i) * a.out_stride + h * hd;
        const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
        for (int d = 0; d < hd; d++) o[d] = acc[(size_t)i * hd + d] * inv;
        if (a.probs) {
          float* pr = a.probs + ((int64_t)h * a.n_q + i0 + i) * a.n_kv;
          for (int j = 0; j < a.n_kv; j++)
            pr[j] = (pr[j] == -INFINITY || l[i] == 0.0f) ? 0.0f : std::exp(pr[j] - m[i]) * inv;
        }
      }
    }
  }
  return tiles;
}

// y += c * x
static inline void axpy(float* y, float c, const float* x, int n) { scale_axpy(y, 1.0f, c, x, n); }

void attention_block_sparse_backward(const AttentionBackwardArgs& a, const BlockSparsePattern& p, int g0, int g1) {
  p.validate();
  const int hd = a.head_dim, group = a.n_heads / a.n_kv_heads, n = a.n, B = p.block;
  for (int i = 0; i < n; i++) {
    for (int g = g0; g < g1; g++) {
      std::fill_n(a.dk + (int64_t)i * a.kv_stride + g * hd, hd, 0.0f);
      std::fill_n(a.dv + (int64_t)i * a.kv_stride + g * hd, hd, 0.0f);
      for (int h = g * group; h < (g + 1) * group; h++) std::fill_n(a.dq + (int64_t)i * a.q_stride + h * hd, hd, 0.0f);
    }
  }
  thread_local std::vector<float> stats;
  thread_local std::vector<SparseKeyBlock> blocks;
  stats.resize((size_t)B * 3);
  float *m = stats.data(), *l = m + B, *di = l + B;
  auto score = [&](int h, int g, int i, int j) {
    return dot(a.q + (int64_t)i * a.q_stride + h * hd, a.k + (int64_t)j * a.kv_stride + g * hd, hd) * a.scale;
  };
  for (int qb = 0; qb * B < n; qb++) {
    const int i0 = qb * B, i1 = std::min(n, i0 + B);
    p.key_blocks(qb, n, a.causal, blocks);
    for (int h = g0 * group; h < g1 * group; h++) {
      const int g = h / group;
      // Pass 1: each row's max and softmax denominator over the visited keys.
      for (int i = i0; i < i1; i++) {
        m[i - i0] = -INFINITY, l[i - i0] = 0.0f;
        di[i - i0] = dot(a.dout + (int64_t)i * a.out_stride + h * hd, a.out + (int64_t)i * a.out_stride + h * hd, hd);
      }
      for (const SparseKeyBlock& kb : blocks)
        for (int i = i0; i < i1; i++) {
          const int j1 = std::min(tile_end(p, kb, i, n), a.causal ? i + 1 : n);
          for (int j = kb.block * B; j < j1; j++) {
            const float s = score(h, g, i, j);
            float& mi = m[i - i0];
            if (s > mi) {
              l[i - i0] = l[i - i0] * (mi == -INFINITY ? 0.0f : std::exp(mi - s)) + 1.0f;
              mi = s;
            } else {
              l[i - i0] += std::exp(s - mi);
            }
          }
        }
      // Pass 2: P from the scores, then dV += P^T dO, dS = P (dO V^T - di), dq += dS k, dk += dS q.
      for (const SparseKeyBlock& kb : blocks)
        for (int i = i0; i < i1; i++) {
          const int j1 = std::min(tile_end(p, kb, i, n), a.causal ? i + 1 : n);
          const float* dout = a.dout + (int64_t)i * a.out_stride + h * hd;
          const float* qi = a.q + (int64_t)i * a.q_stride + h * hd;
          float* dqi = a.dq + (int64_t)i * a.q_stride + h * hd;
          for (int j = kb.block * B; j < j1; j++) {
            const float pij = std::exp(score(h, g, i, j) - m[i - i0]) / l[i - i0];
            const float* vj = a.v + (int64_t)j * a.kv_stride + g * hd;
            const float ds = pij * (dot(dout, vj, hd) - di[i - i0]) * a.scale;
            axpy(a.dv + (int64_t)j * a.kv_stride + g * hd, pij, dout, hd);
            axpy(dqi, ds, a.k + (int64_t)j * a.kv_stride + g * hd, hd);
            axpy(a.dk + (int64_t)j * a.kv_stride + g * hd, ds, qi, hd);
          }
        }
    }
  }
}

}  // namespace qkv
