// T5's biased attention as a kernel: attention_ref and attention_flash with a relative-position
// bias table against a float64 transcription of the definition, against each other, and against
// the training kernel's forward (bias_attention_ref), an independent implementation.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention_bias_backward.h"

namespace {

struct Shape {
  int H, KH, hd, nq, nkv, pos0;
  bool causal;
  int window;
};

struct Case {
  Shape s;
  std::vector<float> q, k, v, bias;
  std::vector<int> bucket;  // one per key - query distance, from -(pos0 + nq) on
  int n_buckets = 0;
  qkv::AttentionArgs args(float* out, float* probs) const {
    qkv::AttentionArgs a;
    a.n_q = s.nq;
    a.n_kv = s.nkv;
    a.n_heads = s.H;
    a.n_kv_heads = s.KH;
    a.head_dim = s.hd;
    a.q = q.data();
    a.q_stride = s.H * s.hd;
    a.k = k.data();
    a.v = v.data();
    a.kv_stride = s.KH * s.hd;
    a.out = out;
    a.out_stride = s.H * s.hd;
    a.scale = 1.0f / std::sqrt((float)s.hd);
    a.q_pos0 = s.pos0;
    a.causal = s.causal;
    a.window = s.window;
    a.probs = probs;
    a.rel_bias = bias.data();
    a.rel_bucket = bucket.data();
    a.rel_off = s.pos0 + s.nq;
    return a;
  }
};

Case make_case(const Shape& s, std::mt19937& rng) {
  std::uniform_real_distribution<float> U(-1.0f, 1.0f), B(-3.0f, 3.0f);
  Case c;
  c.s = s;
  c.n_buckets = 8;
  c.q.resize((size_t)s.nq * s.H * s.hd);
  c.k.resize((size_t)s.nkv * s.KH * s.hd);
  c.v.resize(c.k.size());
  for (auto* x : {&c.q, &c.k, &c.v})
    for (float& f : *x) f = U(rng);
  c.bias.resize((size_t)c.n_buckets * s.H);
  for (float& f : c.bias) f = B(rng);  // large enough to reorder which keys dominate
  std::uniform_int_distribution<int> pick(0, c.n_buckets - 1);
  c.bucket.resize((size_t)s.pos0 + s.nq + s.nkv);
  for (int& b : c.bucket) b = pick(rng);
  return c;
}

// The definition in double: softmax over visible keys of scale q.k + bias[bucket(j - qpos), h].
void oracle(const Case& c, std::vector<double>& out, std::vector<double>& probs) {
  const Shape& s = c.s;
  const int qd = s.H * s.hd, kvd = s.KH * s.hd, off = s.pos0 + s.nq;
  out.assign((size_t)s.nq * qd, 0.0);
  probs.assign((size_t)s.H * s.nq * s.nkv, 0.0);
  for (int h = 0; h < s.H; h++) {
    const int g = h / (s.H / s.KH);
    for (int i = 0; i < s.nq; i++) {
      const int qpos = s.pos0 + i;
      std::vector<double> sc(s.nkv, -INFINITY);
      double mx = -INFINITY;
      for (int j = 0; j < s.nkv; j++) {
        if (s.causal && j > qpos) continue;
        if (s.window > 0 && qpos - j >= s.window) continue;
        double d = 0;
        for (int e = 0; e < s.hd; e++) d += (double)c.q[i * qd + h * s.hd + e] * c.k[j * kvd + g * s.hd + e];
        sc[j] = d / std::sqrt((double)s.hd) + c.bias[c.bucket[j - qpos + off] * s.H + h];
        mx = std::max(mx, sc[j]);
      }
      double z = 0;
      for (int j = 0; j < s.nkv; j++) z += sc[j] == -INFINITY ? 0.0 : std::exp(sc[j] - mx);
      for (int j = 0; j < s.nkv; j++) {
        const double p = sc[j] == -INFINITY ? 0.0 : std::exp(sc[j] - mx) / z;
        probs[((size_t)h * s.nq + i) * s.nkv + j] = p;
        for (int e = 0; e < s.hd; e++) out[i * qd + h * s.hd + e] += p * c.v[j * kvd + g * s.hd + e];
      }
    }
  }
}

void expect_near(const char* what, const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < got.size(); i++) worst = std::max(worst, std::abs(got[i] - want[i]));
  EXPECT_LE(worst, tol) << what;
}

const Shape kShapes[] = {
    {4, 4, 16, 9, 9, 0, false, 0},     // encoder self-attention
    {4, 2, 32, 1, 150, 149, true, 0},  // one decode step over three key tiles, grouped heads
    {2, 1, 8, 70, 70, 0, true, 0},     // prefill across query and key tiles
    {3, 3, 24, 5, 40, 35, true, 11},   // with a sliding window
    {6, 6, 64, 13, 100, 0, false, 0},  // cross-shaped: more keys than queries, no mask
};

TEST(AttentionRelBias, RefAndFlashMatchTheDefinition) {
  std::mt19937 rng(34);
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "H " << s.H << "/" << s.KH << " hd " << s.hd << " nq " << s.nq << " nkv "
                                      << s.nkv << " pos0 " << s.pos0 << " causal " << s.causal << " window "
                                      << s.window);
    const Case c = make_case(s, rng);
    std::vector<double> want, want_p;
    oracle(c, want, want_p);
    const size_t n_out = (size_t)s.nq * s.H * s.hd, n_p = (size_t)s.H * s.nq * s.nkv;
    std::vector<float> out_ref(n_out), p_ref(n_p), out_fl(n_out), p_fl(n_p), out_np(n_out);
    qkv::attention_ref(c.args(out_ref.data(), p_ref.data()));
    qkv::attention_flash(c.args(out_fl.data(), p_fl.data()), 0, s.H);
    qkv::attention_flash(c.args(out_np.data(), nullptr), 0, s.H);  // without capture
    expect_near("ref out", out_ref, want, 2e-5);
    expect_near("ref probs", p_ref, want_p, 2e-6);
    expect_near("flash out", out_fl, want, 2e-5);
    expect_near("flash probs", p_fl, want_p, 2e-6);
    expect_near("flash out without probs", out_np, want, 2e-5);
    // Heads split over calls give the same result as one call.
    std::vector<float> out_split(n_out);
    const qkv::AttentionArgs a = c.args(out_split.data(), nullptr);
    for (int h = 0; h < s.H; h++) qkv::attention_flash(a, h, h + 1);
    EXPECT_EQ(out_split, out_np);
  }
}

TEST(AttentionRelBias, MatchesTheTrainingKernelsForward) {
  // bias_attention_ref indexes buckets by j - i + n_q - 1 (queries at 0..n_q-1, heads unshared).
  std::mt19937 rng(5);
  for (bool causal : {false, true}) {
    const Shape s{4, 4, 16, 12, 12, 0, causal, 0};
    Case c = make_case(s, rng);
    std::vector<float> out(s.nq * s.H * s.hd), probs((size_t)s.H * s.nq * s.nkv);
    qkv::attention_flash(c.args(out.data(), probs.data()), 0, s.H);
    qkv::BiasAttentionArgs b;
    b.n_q = s.nq;
    b.n_kv = s.nkv;
    b.n_heads = s.H;
    b.head_dim = s.hd;
    b.q = c.q.data();
    b.q_stride = s.H * s.hd;
    b.k = c.k.data();
    b.v = c.v.data();
    b.kv_stride = s.H * s.hd;
    std::vector<float> out_b(out.size()), probs_b(probs.size());
    b.out = out_b.data();
    b.out_stride = s.H * s.hd;
    b.probs = probs_b.data();
    b.scale = 1.0f / std::sqrt((float)s.hd);
    b.causal = causal;
    b.bias = c.bias.data();
    b.bucket = c.bucket.data() + 1;  // rel_off n_q against the training kernel's n_q - 1
    qkv::bias_attention_ref(b);
    std::vector<double> ob(out_b.begin(), out_b.end()), pb(probs_b.begin(), probs_b.end());
    expect_near("out", out, ob, 2e-5);
    expect_near("probs", probs, pb, 2e-6);
  }
}

}  // namespace
