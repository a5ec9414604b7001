// RoPE and attention kernels against their scalar references and against independent
// double-precision oracles written from the header contracts (rope_angles, attention, linear
// attention); buffers and tolerances as in test_kernels.cpp (kernel_checks.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "kernels/attention.h"
#include "kernels/rope.h"
#include "kernels/simd.h"
#include "kernels/softmax.h"
#include "kernel_checks.h"

using namespace qkv_test;

namespace {

// ---- RoPE -----------------------------------------------------------------------------------
TEST(RopeKernel, AnglesMatchFormula) {
  for (int n_rot : {2, 4, 6, 32, 64, 128, 130})
    for (int pos : {0, 1, 17, 4095})
      for (float theta : {10000.0f, 1000000.0f})
        for (float fs : {1.0f, 0.5f}) {
          SCOPED_TRACE("n_rot=" + std::to_string(n_rot) + " pos=" + std::to_string(pos) +
                       " theta=" + std::to_string(theta) + " freq_scale=" + std::to_string(fs));
          const int half = n_rot / 2;
          Buf c(half, 1), s(half, 1);
          c.fill_sentinel();
          s.fill_sentinel();
          qkv::rope_angles(c.data(), s.data(), n_rot, pos, theta, fs);
          EXPECT_TRUE(c.guards_intact());
          EXPECT_TRUE(s.guards_intact());
          for (int p = 0; p < half; p++) {
            // The documented float recipe (llama2.c's).
            const float freq = 1.0f / std::pow(theta, (float)(2 * p) / (float)n_rot);
            const float val = (float)pos * fs * freq;
            EXPECT_NEAR(c[p], std::cos((double)val), kTrigAbs) << "p=" << p;
            EXPECT_NEAR(s[p], std::sin((double)val), kTrigAbs) << "p=" << p;
            // The ideal angle, in double.
            const double ideal = (double)pos * fs * std::pow((double)theta, -2.0 * p / n_rot);
            const double atol = kAngleRel * std::fabs(ideal) + kTrigAbs;
            EXPECT_NEAR(c[p], std::cos(ideal), atol) << "p=" << p;
            EXPECT_NEAR(s[p], std::sin(ideal), atol) << "p=" << p;
          }
          if (half > 0) {
            EXPECT_NEAR(c[0], std::cos((double)pos * fs), kAngleRel * pos + kTrigAbs);  // p = 0: freq 1
            if (pos == 0) {
              EXPECT_EQ(c[half - 1], 1.0f);
              EXPECT_EQ(s[half - 1], 0.0f);
            }
          }
        }
}

// YaRN's correction range, worked by hand from d(b) = n_rot ln(orig / (2 pi b)) / (2 ln theta):
// - n_rot 16, theta 1e6, orig 2048: d(32) = 16 ln(10.186) / 27.631 = 1.344 -> floor 1;
//   d(1) = 16 ln(325.95) / 27.631 = 3.351 -> ceil 4.
// - n_rot 128, theta 1e4, orig 4096 (Llama 2 shape): d(32) = 128 ln(20.372) / 18.421 = 20.94 ->
//   20; d(1) = 128 ln(651.90) / 18.421 = 45.03 -> 46.
// - orig 64, theta 1e4, n_rot 16: d(32) < 0 -> clamped to 0; orig 1e9: d(1) = 16 ln(1.59e8) /
//   18.421 = 16.4 -> clamped to n_rot - 1 = 15.
TEST(RopeKernel, YarnRangeMatchesWorkedValues) {
  auto r = qkv::rope_yarn_range(16, 2048, 1e6f, 32.0f, 1.0f);
  EXPECT_EQ(r.lo, 1.0f);
  EXPECT_EQ(r.hi, 4.0f);
  r = qkv::rope_yarn_range(128, 4096, 1e4f, 32.0f, 1.0f);
  EXPECT_EQ(r.lo, 20.0f);
  EXPECT_EQ(r.hi, 46.0f);
  EXPECT_EQ(qkv::rope_yarn_range(16, 64, 1e4f, 32.0f, 1.0f).lo, 0.0f);
  EXPECT_EQ(qkv::rope_yarn_range(16, 1000000000, 1e4f, 32.0f, 1.0f).hi, 15.0f);
}

// Below the range a pair keeps its unscaled angle, from hi on it takes the scaled one, between
// the two blend linearly in the pair index; every cos and sin carries mscale (1 + 0.1 ln(1/fs)).
TEST(RopeKernel, YarnBlendsScaledAndUnscaledAngles) {
  const int n_rot = 16, half = n_rot / 2;
  const float theta = 1e6f, fs = 0.25f, attn = 1.2f;
  const qkv::RopeYarn y = qkv::rope_yarn_range(n_rot, 2048, theta, 32.0f, 1.0f);  // [1, 4]
  const double mscale = attn * (1.0 + 0.1 * std::log(4.0));
  for (int pos : {0, 1, 9, 50, 300}) {
    std::vector<float> c(half), s(half), lin_c(half), lin_s(half);
    qkv::rope_angles(c.data(), s.data(), n_rot, pos, theta, fs, nullptr, attn, &y);
    qkv::rope_angles(lin_c.data(), lin_s.data(), n_rot, pos, theta, fs, nullptr, attn);
    for (int p = 0; p < half; p++) {
      SCOPED_TRACE("pos=" + std::to_string(pos) + " p=" + std::to_string(p));
      const double freq = std::pow((double)theta, -2.0 * p / n_rot);
      const double scaled = pos * fs * freq, unscaled = pos * freq;
      const double w = p <= 1 ? 1.0 : p >= 4 ? 0.0 : (4.0 - p) / 3.0;  // weight of the unscaled angle
      const double a = w * unscaled + (1 - w) * scaled;
      const double atol = mscale * (kAngleRel * std::fabs(a) + kTrigAbs);
      EXPECT_NEAR(c[p], mscale * std::cos(a), atol);
      EXPECT_NEAR(s[p], mscale * std::sin(a), atol);
      // Without YaRN: linear scaling of every pair and no extra magnitude.
      EXPECT_NEAR(lin_c[p], attn * std::cos(scaled), attn * (kAngleRel * scaled + kTrigAbs));
    }
  }
}

struct RopeShape {
  int n_heads, head_dim, n_rot;
};
std::vector<RopeShape> rope_shapes() {
  std::vector<RopeShape> all = {{1, 2, 2},
                                {3, 6, 6},
                                {2, kLanes, kLanes},
                                {3, kLanes + 2, kLanes - 2},  // adjacent: SIMD body then pair tail
                                {3, kLanes + 2, kLanes + 2},
                                {2, 2 * kLanes - 2, 2 * kLanes - 2},  // halves: half = kLanes - 1
                                {2, 2 * kLanes, 2 * kLanes},
                                {5, 2 * kLanes + 2, 2 * kLanes + 2},
                                {4, 34, 34},
                                {2, 64, 64},
                                {2, 64, 32},  // partial rotation (n_rot < head_dim)
                                {3, 128, 64},
                                {2, 4 * kLanes + 1, 4 * kLanes - 2},  // halves: half = 2 * kLanes - 1, odd head_dim
                                {2, 80, 24},
                                {1, 96, 2},
                                {3, 67, 66},  // odd head_dim: later heads start misaligned
                                {3, 67, 40},
                                {2, 1040, 1040},  // wider than the SIMD adjacent kernel's 512-entry table
                                {1, 520, 514}};
  std::vector<RopeShape> unique;  // narrower vectors (kLanes = 4) make some shapes coincide
  for (const RopeShape& r : all)
    if (std::none_of(unique.begin(), unique.end(), [&](const RopeShape& u) {
          return u.n_heads == r.n_heads && u.head_dim == r.head_dim && u.n_rot == r.n_rot;
        }))
      unique.push_back(r);
  return unique;
}
using RopeParam = std::tuple<int, int, int>;  // (layout 0 = adjacent / 1 = halves, shape index, off)
class RopeKernel : public ::testing::TestWithParam<RopeParam> {};

TEST_P(RopeKernel, SimdMatchesRef) {
  const bool halves = std::get<0>(GetParam()) == 1;
  const RopeShape sh = rope_shapes()[std::get<1>(GetParam())];
  const int off = std::get<2>(GetParam());
  const int n = sh.n_heads * sh.head_dim, half = sh.n_rot / 2;
  struct Angles {
    int pos;
    float theta, fs;
  };
  for (Angles ang : {Angles{0, 10000.0f, 1.0f}, Angles{1, 10000.0f, 1.0f}, Angles{7, 10000.0f, 1.0f},
                     Angles{4095, 500000.0f, 1.0f}, Angles{333, 1000000.0f, 0.25f}}) {
    SCOPED_TRACE("pos=" + std::to_string(ang.pos) + " theta=" + std::to_string(ang.theta));
    std::mt19937 rng(seed_of({9, (int)halves, std::get<1>(GetParam()), off, ang.pos}));
    Buf c(half, off), s(half, off), x(n, off);
    qkv::rope_angles(c.data(), s.data(), sh.n_rot, ang.pos, ang.theta, ang.fs);
    fill_uniform(rng, x.data(), n, -3.0f, 3.0f);
    const std::vector<float> in = x.vec();
    std::vector<float> ref = in;
    if (halves) {
      qkv::rope_halves_ref(ref.data(), sh.n_heads, sh.head_dim, sh.n_rot, c.data(), s.data());
      qkv::rope_halves_simd(x.data(), sh.n_heads, sh.head_dim, sh.n_rot, c.data(), s.data());
    } else {
      qkv::rope_adjacent_ref(ref.data(), sh.n_heads, sh.head_dim, sh.n_rot, c.data(), s.data());
      qkv::rope_adjacent_simd(x.data(), sh.n_heads, sh.head_dim, sh.n_rot, c.data(), s.data());
    }
    // Tolerance from the pair (v0, v1) that produced element i; dims >= n_rot must not change.
    auto tol = [&](size_t i) -> double {
      const int h = (int)i / sh.head_dim, e = (int)i % sh.head_dim;
      if (e >= sh.n_rot) return 0.0;
      int e0, e1, p;
      if (halves) {
        p = e % half;
        e0 = p;
        e1 = p + half;
      } else {
        p = e / 2;
        e0 = 2 * p;
        e1 = 2 * p + 1;
      }
      const float* v = in.data() + h * sh.head_dim;
      return kRopeRel * (std::fabs(v[e0] * c[p]) + std::fabs(v[e1] * s[p]) + std::fabs(v[e0] * s[p]) +
                         std::fabs(v[e1] * c[p])) +
             kRopeAbs;
    };
    EXPECT_TRUE(AllNear(halves ? "rope halves" : "rope adjacent", x.data(), ref.data(), n, tol));
    int changed = 0, unrotated_changed = 0;
    for (int i = 0; i < n; i++) {
      if (i % sh.head_dim >= sh.n_rot) {
        if (std::memcmp(&x[i], &in[i], sizeof(float)) != 0) unrotated_changed++;
      } else if (std::fabs(ref[i] - in[i]) > 1e-3f) {
        changed++;
      }
    }
    EXPECT_EQ(unrotated_changed, 0) << "dims at or past n_rot must stay untouched";
    if (ang.pos == 0) EXPECT_TRUE(AllEqual("pos 0 is the identity", x.data(), in.data(), n));
    else EXPECT_GT(changed, 0) << "sanity: the reference must rotate something";
    EXPECT_TRUE(x.guards_intact());
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, RopeKernel,
                         ::testing::Combine(::testing::Values(0, 1), ::testing::Range(0, (int)rope_shapes().size()),
                                            ::testing::ValuesIn(kOffsets)),
                         [](const ::testing::TestParamInfo<RopeParam>& info) {
                           const RopeShape sh = rope_shapes()[std::get<1>(info.param)];
                           return std::string(std::get<0>(info.param) ? "Halves" : "Adjacent") + "_h" +
                                  std::to_string(sh.n_heads) + "_hd" + std::to_string(sh.head_dim) + "_rot" +
                                  std::to_string(sh.n_rot) + "_off" + std::to_string(std::get<2>(info.param));
                         });

// ---- attention ------------------------------------------------------------------------------
enum KeyMask { kNoMask, kRandomMask, kFirstKeyMasked, kSecondTileMasked, kAllMasked };

struct AttnCase {
  const char* name;
  int n_q, n_kv, n_heads, n_kv_heads, head_dim, q_pos0;
  bool causal;
  int window;
  KeyMask mask;
  int stride_pad;       // extra floats at the end of each q / kv / out row (NaN in the inputs)
  float scale_mul = 1;  // scale = scale_mul / sqrt(head_dim); large values make peaked softmaxes
  float softcap = 0;    // > 0: scores softcap * tanh(s / softcap) (Gemma 2)
};

std::vector<AttnCase> attn_cases() {
  const int L = kLanes;
  return {
      {"decode", 1, 37, 4, 4, 16, 36, true, 0, kNoMask, 0},
      {"decode_gqa_long", 1, 1000, 8, 2, 64, 999, true, 0, kNoMask, 3},
      {"decode_hd128", 1, 300, 2, 2, 128, 299, true, 0, kNoMask, 0},
      {"prefill", 20, 20, 4, 4, 16, 0, true, 0, kNoMask, 0},
      {"prefill_continue", 13, 43, 4, 2, L + 3, 30, true, 0, kNoMask, 3},
      {"prefill_continue_long", 17, 1000, 4, 1, 32, 983, true, 0, kNoMask, 0},
      {"prefill_cache_past_queries", 9, 500, 2, 2, 16, 100, true, 0, kNoMask, 0},  // keys > qpos hidden
      {"prefill_129", 129, 129, 2, 1, 8, 0, true, 0, kNoMask, 1},
      {"gqa_odd_dim", 11, 11, 6, 3, 2 * L + 3, 0, true, 0, kNoMask, 1},
      {"mqa_hd1", 10, 10, 3, 1, 1, 0, true, 0, kNoMask, 0},
      {"hd3", 5, 70, 2, 1, 3, 65, true, 0, kNoMask, 2},
      {"kv64_tile", 1, 64, 2, 2, 16, 63, true, 0, kNoMask, 0},
      {"kv65_tile", 2, 65, 2, 2, 16, 63, true, 0, kNoMask, 0},
      {"window", 20, 30, 4, 2, 16, 10, true, 5, kNoMask, 0},
      {"window1", 9, 9, 2, 2, 8, 0, true, 1, kNoMask, 0},
      {"window_long_decode", 3, 1000, 4, 4, 32, 997, true, 300, kNoMask, 0},
      {"window_long_prefill", 40, 1000, 2, 1, 16, 960, true, 130, kNoMask, 1},
      {"window_no_keys_in_cache", 2, 10, 2, 1, 8, 30, true, 5, kNoMask, 0},  // every query masked
      {"noncausal", 70, 70, 2, 2, 16, 0, false, 0, kNoMask, 0},
      {"noncausal_window", 30, 50, 2, 2, 16, 10, false, 10, kNoMask, 0},  // future keys visible
      {"padding_random", 12, 150, 4, 2, 16, 138, true, 0, kRandomMask, 0},
      {"padding_random_noncausal", 16, 100, 2, 1, 2 * L + 1, 0, false, 0, kRandomMask, 2},
      {"padding_first_key", 8, 8, 2, 2, 16, 0, true, 0, kFirstKeyMasked, 0},  // query 0 sees nothing
      {"padding_whole_tile", 3, 200, 2, 1, 16, 0, false, 0, kSecondTileMasked, 0},
      {"padding_whole_tile_causal_window", 10, 200, 2, 2, 16, 190, true, 150, kSecondTileMasked, 0},
      {"all_keys_masked", 5, 20, 2, 1, 8, 15, true, 0, kAllMasked, 0},
      {"peaked_scores", 6, 300, 2, 1, 32, 294, true, 0, kNoMask, 0, 12.0f},
      {"peaked_scores_window", 6, 300, 2, 1, 32, 294, true, 100, kRandomMask, 0, 12.0f},
      {"softcap_decode", 1, 300, 4, 2, 32, 299, true, 0, kNoMask, 0, 12.0f, 3.0f},
      {"softcap_prefill_window", 40, 200, 2, 1, 16, 160, true, 50, kRandomMask, 1, 6.0f, 2.0f},
  };
}

bool visible_by_contract(const AttnCase& c, const std::vector<uint8_t>& kv, int qpos, int j) {
  if (c.causal && j > qpos) return false;
  if (c.window > 0 && qpos - j >= c.window) return false;
  if (c.mask != kNoMask && !kv[j]) return false;
  return true;
}

using AttnParam = std::tuple<int, int>;  // (case index, off)
class AttentionKernel : public ::testing::TestWithParam<AttnParam> {};

TEST_P(AttentionKernel, FlashMatchesRefAndOracle) {
  const AttnCase c = attn_cases()[std::get<0>(GetParam())];
  const int off = std::get<1>(GetParam());
  const int H = c.n_heads, KVH = c.n_kv_heads, hd = c.head_dim, nq = c.n_q, nkv = c.n_kv;
  ASSERT_EQ(H % KVH, 0);
  const int64_t q_stride = (int64_t)H * hd + c.stride_pad, kv_stride = (int64_t)KVH * hd + c.stride_pad;
  const int64_t out_stride = (int64_t)H * hd + c.stride_pad;
  std::mt19937 rng(seed_of({10, std::get<0>(GetParam()), off}));

  Buf q((size_t)nq * q_stride, off), k((size_t)nkv * kv_stride, off), v((size_t)nkv * kv_stride, off);
  q.fill(NAN);  // stride padding must never be read
  k.fill(NAN);
  v.fill(NAN);
  for (int i = 0; i < nq; i++) fill_uniform(rng, q.data() + i * q_stride, (size_t)H * hd, -1.0f, 1.0f);
  for (int j = 0; j < nkv; j++) {
    fill_uniform(rng, k.data() + j * kv_stride, (size_t)KVH * hd, -1.0f, 1.0f);
    fill_uniform(rng, v.data() + j * kv_stride, (size_t)KVH * hd, -1.0f, 1.0f);
  }
  std::vector<uint8_t> key_valid(nkv, 1);
  switch (c.mask) {
    case kNoMask: break;
    case kRandomMask: {
      std::bernoulli_distribution masked(0.25);
      for (int j = 0; j < nkv; j++) key_valid[j] = masked(rng) ? 0 : 1;
      key_valid[nkv - 1] = 1;
      break;
    }
    case kFirstKeyMasked: key_valid[0] = 0; break;
    case kSecondTileMasked:
      for (int j = 64; j < 128 && j < nkv; j++) key_valid[j] = 0;
      break;
    case kAllMasked: std::fill(key_valid.begin(), key_valid.end(), 0); break;
  }

  qkv::AttentionArgs a;
  a.n_q = nq;
  a.n_kv = nkv;
  a.n_heads = H;
  a.n_kv_heads = KVH;
  a.head_dim = hd;
  a.q = q.data();
  a.q_stride = q_stride;
  a.k = k.data();
  a.v = v.data();
  a.kv_stride = kv_stride;
  a.out_stride = out_stride;
  a.scale = c.scale_mul / std::sqrt((float)hd);
  a.q_pos0 = c.q_pos0;
  a.causal = c.causal;
  a.window = c.window;
  a.softcap = c.softcap;
  a.key_valid = c.mask == kNoMask ? nullptr : key_valid.data();

  // Double-precision oracle written from the header's contract.
  const size_t n_out = (size_t)nq * out_stride, n_probs = (size_t)H * nq * nkv;
  // o_or holds the sentinel in the out stride padding, which the kernels must leave untouched.
  std::vector<float> p_or(n_probs, 0.0f), o_or(n_out, sentinel());
  std::vector<double> o_bound(n_out, 0.0);  // kAttnRel * sum_j p_j |v_jd| + kAttnAbs
  std::vector<char> row_visible((size_t)H * nq, 0);
  int n_visible_rows = 0, n_masked_rows = 0;
  {
    std::vector<double> sc(nkv), od(hd), ob(hd);
    for (int h = 0; h < H; h++) {
      const int g = h / (H / KVH);
      for (int i = 0; i < nq; i++) {
        const float* qr = q.data() + i * q_stride + h * hd;
        double mx = -INFINITY;
        bool any = false;
        for (int j = 0; j < nkv; j++) {
          if (!visible_by_contract(c, key_valid, c.q_pos0 + i, j)) {
            sc[j] = -INFINITY;
            continue;
          }
          any = true;
          const float* kr = k.data() + j * kv_stride + g * hd;
          double s = 0.0;
          for (int d = 0; d < hd; d++) s += (double)qr[d] * kr[d];
          sc[j] = s * a.scale;
          if (c.softcap > 0) sc[j] = c.softcap * std::tanh(sc[j] / c.softcap);
          mx = std::max(mx, sc[j]);
        }
        row_visible[(size_t)h * nq + i] = any;
        (any ? n_visible_rows : n_masked_rows)++;
        std::fill(od.begin(), od.end(), 0.0);
        std::fill(ob.begin(), ob.end(), 0.0);
        if (any) {
          double sum = 0.0;
          for (int j = 0; j < nkv; j++) sum += sc[j] == -INFINITY ? 0.0 : std::exp(sc[j] - mx);
          for (int j = 0; j < nkv; j++) {
            const double p = sc[j] == -INFINITY ? 0.0 : std::exp(sc[j] - mx) / sum;
            p_or[((size_t)h * nq + i) * nkv + j] = (float)p;
            if (p == 0.0) continue;
            const float* vr = v.data() + j * kv_stride + g * hd;
            for (int d = 0; d < hd; d++) {
              od[d] += p * vr[d];
              ob[d] += p * std::fabs(vr[d]);
            }
          }
        }
        for (int d = 0; d < hd; d++) {
          o_or[i * out_stride + h * hd + d] = (float)od[d];
          o_bound[i * out_stride + h * hd + d] = kAttnRel * ob[d] + kAttnAbs;
        }
      }
    }
  }
  // Output columns that belong to a head (not the stride padding).
  auto is_head_col = [&](size_t idx) { return (int64_t)(idx % out_stride) < (int64_t)H * hd; };
  auto out_tol = [&](size_t idx) { return is_head_col(idx) ? o_bound[idx] : 0.0; };
  auto prob_tol = [&](const std::vector<float>& want) {
    return [&want](size_t idx) { return kProbRel * std::fabs(want[idx]) + kProbAbs; };
  };

  // Checks shared by the reference and the flash kernel.
  auto check_semantics = [&](const char* who, const Buf& out, const Buf& probs) {
    SCOPED_TRACE(who);
    EXPECT_TRUE(out.guards_intact()) << "write outside out";
    EXPECT_TRUE(probs.guards_intact()) << "write outside probs";
    int pad_written = 0, masked_nonzero = 0, masked_out_nonzero = 0, bad_sums = 0;
    double worst_sum = 0.0;
    for (size_t idx = 0; idx < n_out; idx++)
      if (!is_head_col(idx) && !is_sentinel(out[idx])) pad_written++;
    EXPECT_EQ(pad_written, 0) << "out stride padding was written";
    for (int h = 0; h < H; h++)
      for (int i = 0; i < nq; i++) {
        const float* pr = probs.data() + ((size_t)h * nq + i) * nkv;
        double sum = 0.0;
        for (int j = 0; j < nkv; j++) {
          sum += pr[j];
          if (!visible_by_contract(c, key_valid, c.q_pos0 + i, j) && pr[j] != 0.0f) masked_nonzero++;
        }
        if (row_visible[(size_t)h * nq + i]) {
          if (!(std::fabs(sum - 1.0) <= kRowSumTol)) bad_sums++;
          worst_sum = std::max(worst_sum, std::fabs(sum - 1.0));
        } else {
          for (int d = 0; d < hd; d++)
            if (out[i * out_stride + h * hd + d] != 0.0f) masked_out_nonzero++;
        }
      }
    EXPECT_EQ(masked_nonzero, 0) << "masked keys must get probability exactly 0";
    EXPECT_EQ(masked_out_nonzero, 0) << "queries with no visible key must output exactly 0";
    EXPECT_EQ(bad_sums, 0) << "probability rows must sum to 1; worst |sum - 1| = " << worst_sum;
    EXPECT_TRUE(AllNear("out vs double oracle", out.data(), o_or.data(), n_out, out_tol));
    EXPECT_TRUE(AllNear("probs vs double oracle", probs.data(), p_or.data(), n_probs, prob_tol(p_or)));
  };

  // Reference.
  Buf out_ref(n_out, off), probs_ref(n_probs, off);
  out_ref.fill_sentinel();
  probs_ref.fill_sentinel();
  a.out = out_ref.data();
  a.probs = probs_ref.data();
  qkv::attention_ref(a);
  check_semantics("attention_ref", out_ref, probs_ref);

  // Flash over all heads, with probabilities.
  Buf out_fl(n_out, off), probs_fl(n_probs, off);
  out_fl.fill_sentinel();
  probs_fl.fill_sentinel();
  a.out = out_fl.data();
  a.probs = probs_fl.data();
  qkv::attention_flash(a, 0, H);
  check_semantics("attention_flash", out_fl, probs_fl);
  EXPECT_TRUE(AllNear("flash out vs ref out", out_fl.data(), out_ref.data(), n_out, out_tol));
  const std::vector<float> pref = probs_ref.vec();
  EXPECT_TRUE(AllNear("flash probs vs ref probs", probs_fl.data(), pref.data(), n_probs, prob_tol(pref)));

  // Sanity: the comparison is not between two all-zero outputs.
  if (n_visible_rows > 0) {
    bool nz = false;
    for (size_t idx = 0; idx < n_out; idx++) nz |= is_head_col(idx) && out_ref[idx] != 0.0f;
    EXPECT_TRUE(nz) << "reference output is all zero although some queries see keys";
  }
  if (c.mask == kAllMasked || std::string(c.name) == "window_no_keys_in_cache") {
    EXPECT_EQ(n_visible_rows, 0);
  }
  if (c.mask == kFirstKeyMasked) {
    EXPECT_GT(n_masked_rows, 0);
  }

  // Flash without probs: the same output, bit for bit (probs is inspection only).
  Buf out_np(n_out, off);
  out_np.fill_sentinel();
  a.out = out_np.data();
  a.probs = nullptr;
  qkv::attention_flash(a, 0, H);
  EXPECT_TRUE(AllEqual("flash out without probs vs with probs", out_np.data(), out_fl.data(), n_out));
  EXPECT_TRUE(out_np.guards_intact());

  // Flash over a head sub-range leaves the other heads untouched; two ranges give the full result.
  if (H > 1) {
    const int hs = H / 2;
    Buf out_sp(n_out, off), probs_sp(n_probs, off);
    out_sp.fill_sentinel();
    probs_sp.fill_sentinel();
    a.out = out_sp.data();
    a.probs = probs_sp.data();
    qkv::attention_flash(a, hs, H);
    int touched = 0;
    for (int i = 0; i < nq; i++)
      for (int e = 0; e < hs * hd; e++) touched += !is_sentinel(out_sp[i * out_stride + e]);
    for (size_t idx = 0; idx < (size_t)hs * nq * nkv; idx++) touched += !is_sentinel(probs_sp[idx]);
    EXPECT_EQ(touched, 0) << "heads outside [h0, h1) were written";
    qkv::attention_flash(a, 0, hs);
    EXPECT_TRUE(AllEqual("flash split heads out", out_sp.data(), out_fl.data(), n_out));
    EXPECT_TRUE(AllEqual("flash split heads probs", probs_sp.data(), probs_fl.data(), n_probs));
    EXPECT_TRUE(out_sp.guards_intact());
    EXPECT_TRUE(probs_sp.guards_intact());
  }
}

TEST(AttentionKernelEdge, EmptyCacheGivesZeroOutput) {
  // n_kv = 0: no query sees a key, so both kernels write zeros (and nothing past the heads).
  const int H = 2, hd = kLanes + 1, nq = 3;
  const int64_t stride = H * hd + 1;
  Buf q(nq * stride, 1), kv(1, 1), out_ref(nq * stride, 1), out_fl(nq * stride, 1);
  q.fill(1.0f);
  kv.fill(1.0f);
  qkv::AttentionArgs a;
  a.n_q = nq;
  a.n_kv = 0;
  a.n_heads = H;
  a.n_kv_heads = 1;
  a.head_dim = hd;
  a.q = q.data();
  a.q_stride = stride;
  a.k = a.v = kv.data();
  a.kv_stride = hd;
  a.out_stride = stride;
  a.q_pos0 = 5;
  for (Buf* out : {&out_ref, &out_fl}) {
    out->fill_sentinel();
    a.out = out->data();
    if (out == &out_ref) {
      qkv::attention_ref(a);
    } else {
      qkv::attention_flash(a, 0, H);
    }
    for (int i = 0; i < nq; i++)
      for (int e = 0; e < stride; e++) {
        if (e < H * hd) {
          EXPECT_EQ((*out)[i * stride + e], 0.0f) << (out == &out_ref ? "ref" : "flash") << " row " << i;
        } else {
          EXPECT_TRUE(is_sentinel((*out)[i * stride + e])) << "padding written";
        }
      }
    EXPECT_TRUE(out->guards_intact());
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionKernel,
                         ::testing::Combine(::testing::Range(0, (int)attn_cases().size()),
                                            ::testing::ValuesIn(kOffsets)),
                         [](const ::testing::TestParamInfo<AttnParam>& info) {
                           return std::string(attn_cases()[std::get<0>(info.param)].name) + "_off" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace

// ---- linear attention -----------------------------------------------------------------------
// attention_linear (recurrent state where the masks allow, direct weights otherwise) and
// attention_linear_ref against a double-precision transcription of the definition:
// out_i = sum_j phi(q_i).phi(k_j) v_j / sum_j phi(q_i).phi(k_j), phi = elu + 1, j visible.
TEST(LinearAttention, MatchesTheDefinitionUnderEveryMask) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> U(-2.0f, 2.0f);
  struct Shape {
    int H, KH, hd, nq, nkv, pos0;
    bool causal;
    int window;
    bool padding;
  };
  const Shape shapes[] = {
      {4, 2, 16, 7, 7, 0, true, 0, false},     {2, 1, 33, 1, 50, 49, true, 0, false},
      {6, 3, 64, 20, 90, 70, true, 0, false},  {3, 3, 5, 9, 9, 0, false, 0, false},
      {4, 1, 16, 12, 40, 28, true, 6, false},  {2, 2, 32, 10, 10, 0, true, 0, true},
      {8, 2, 80, 3, 130, 127, true, 0, false}, {1, 1, 128, 64, 64, 0, true, 0, false},
  };
  auto phi = [](double x) { return x > 0 ? x + 1.0 : std::exp(x); };
  for (const Shape& s : shapes) {
    SCOPED_TRACE(::testing::Message() << "H " << s.H << "/" << s.KH << " hd " << s.hd << " nq " << s.nq << " nkv "
                                      << s.nkv << " causal " << s.causal << " window " << s.window << " pad "
                                      << s.padding);
    const int qd = s.H * s.hd, kvd = s.KH * s.hd;
    std::vector<float> q(s.nq * qd), k(s.nkv * kvd), v(s.nkv * kvd);
    for (auto* x : {&q, &k, &v})
      for (float& f : *x) f = U(rng);
    std::vector<uint8_t> valid(s.nkv, 1);
    if (s.padding)
      for (int j = 0; j < s.nkv; j += 3) valid[j] = 0;
    qkv::AttentionArgs a;
    a.n_q = s.nq;
    a.n_kv = s.nkv;
    a.n_heads = s.H;
    a.n_kv_heads = s.KH;
    a.head_dim = s.hd;
    a.q = q.data();
    a.q_stride = qd;
    a.k = k.data();
    a.v = v.data();
    a.kv_stride = kvd;
    a.out_stride = qd;
    a.q_pos0 = s.pos0;
    a.causal = s.causal;
    a.window = s.window;
    a.key_valid = s.padding ? valid.data() : nullptr;
    // The definition, in double.
    std::vector<double> want(s.nq * qd, 0.0), wantp((size_t)s.H * s.nq * s.nkv, 0.0);
    for (int h = 0; h < s.H; h++) {
      const int g = h / (s.H / s.KH);
      for (int i = 0; i < s.nq; i++) {
        const int qp = s.pos0 + i;
        double den = 0;
        std::vector<double> w(s.nkv, 0.0);
        for (int j = 0; j < s.nkv; j++) {
          if ((s.causal && j > qp) || (s.window > 0 && qp - j >= s.window) || !valid[j]) continue;
          for (int d = 0; d < s.hd; d++) w[j] += phi(q[i * qd + h * s.hd + d]) * phi(k[j * kvd + g * s.hd + d]);
          den += w[j];
        }
        for (int j = 0; j < s.nkv; j++) {
          wantp[((size_t)h * s.nq + i) * s.nkv + j] = den > 0 ? w[j] / den : 0.0;
          for (int d = 0; d < s.hd; d++)
            want[i * qd + h * s.hd + d] += (den > 0 ? w[j] / den : 0.0) * v[j * kvd + g * s.hd + d];
        }
      }
    }
    auto close = [&](const char* who, const std::vector<float>& got, const std::vector<double>& ref, double tol) {
      double worst = 0;
      for (size_t x = 0; x < ref.size(); x++) worst = std::max(worst, std::fabs(got[x] - ref[x]));
      EXPECT_LE(worst, tol) << who << ": max |got - definition| = " << worst;
    };
    std::vector<float> out_ref(want.size()), p_ref(wantp.size()), out_rec(want.size()), out_dir(want.size()),
        p_dir(wantp.size());
    a.out = out_ref.data();
    a.probs = p_ref.data();
    qkv::attention_linear_ref(a);
    close("ref out", out_ref, want, 1e-5);
    close("ref probs", p_ref, wantp, 1e-6);
    a.out = out_rec.data();
    a.probs = nullptr;  // recurrent form when causal without window/padding
    qkv::attention_linear(a, 0, s.H);
    close("simd out", out_rec, want, 2e-5);
    a.out = out_dir.data();
    a.probs = p_dir.data();  // probabilities force the direct form
    qkv::attention_linear(a, 0, s.H);
    close("simd direct out", out_dir, want, 2e-5);
    close("simd direct probs", p_dir, wantp, 1e-6);
    // Not trivially zero: the inputs reach the output.
    double mag = 0;
    for (double x : want) mag = std::max(mag, std::fabs(x));
    EXPECT_GT(mag, 0.05);
  }
}
