// The stored-type kernels against their scalar references on this build's SIMD paths (AVX2 /
// SSE natively; SIMD128 and relaxed SIMD in the WASM builds, where tests/js/kernels-wasm.test.mjs
// and relaxed_simd.test.mjs run these files under Node): activation blocks bit for bit, every
// block type's products, prefill tiles against decode, f16 scales in every lane, the
// finite-scale path, the f32 prefill tiles and flash attention.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/qdot.h"
#include "kernels/quant.h"
#include "quant_rows.h"

using namespace qkv;

namespace {

void check(bool ok, const char* what, int type, int n, double got, double want) {
  if (ok) return;
  ADD_FAILURE() << what << ": type " << type << " n " << n << ": got " << got << " want " << want;
}

TEST(StoredKernels, SimdPathsMatchTheirReferences) {
  std::printf("[          ] integer dot products: %s\n", qdot_impl_name());
  const QType types[] = {QType::Q8_0, QType::Q4_0, QType::Q4_1, QType::Q5_0,
                         QType::Q5_1, QType::Q4_K, QType::Q5_K, QType::Q6_K};
  for (QType t : types) {
    const int block = qtype_block(t);
    for (int n : {block, 2 * block, 9 * 32, 2048}) {  // 9 blocks: groups of four and a tail
      if (n % block) continue;
      for (int offset : {0, 3}) {
        std::vector<uint8_t> buf = stored_row(t, randn(n, 3 + n, 0.05f), offset);
        const uint8_t* row = buf.data() + offset;
        std::vector<float> x = randn(n, 9 + n);
        std::vector<BlockQ8A> a(n / 32), b(n / 32);
        quantize_act_q8_ref(x.data(), a.data(), n);
        quantize_act_q8_simd(x.data(), b.data(), n);
        for (int i = 0; i < n / 32; i++)
          check(a[i].d == b[i].d && a[i].s == b[i].s && std::memcmp(a[i].q, b[i].q, sizeof a[i].q) == 0 &&
                    a[i].h[0] == b[i].h[0] && a[i].h[1] == b[i].h[1],
                "activation blocks (bit-exact)", (int)t, n, b[i].d, a[i].d);
        double mag = 0;
        const float ref = dot_q8_ref(t, row, a.data(), n, &mag);
        float simd = 0;
        matmul_q8_simd(t, &simd, 1, a.data(), row, 1, n, 0, 1);
        // float rounding of nb block terms (as tests/native/kernels/test_qdot.cpp)
        check(std::fabs(simd - ref) <= (2.0 * (n / 32) + 16) * std::ldexp(1.0, -24) * mag + 1e-30, "simd vs reference",
              (int)t, n, simd, ref);
        // 5 tokens through the prefill tiles equal decoding each alone, bit for bit
        std::vector<BlockQ8A> X5(5 * (n / 32));
        for (int k = 0; k < 5; k++) quantize_act_q8_simd(randn(n, 100 + k).data(), X5.data() + k * (n / 32), n);
        float y5[5];
        matmul_q8_simd(t, y5, 1, X5.data(), row, 5, n, 0, 1);
        for (int k = 0; k < 5; k++) {
          float y1 = 0;
          matmul_q8_simd(t, &y1, 1, X5.data() + k * (n / 32), row, 1, n, 0, 1);
          check(y1 == y5[k], "prefill vs decode (bit-exact)", (int)t, n, y5[k], y1);
        }
      }
    }
  }
  // Blocks at the edges of their ranges and blocks of random bytes (any code, any K scale or
  // min, Q6_K scales down to -128) against activations at +-127: the largest products the
  // 16-bit pair sums (SIMD128's i32x4.dot_i16x8, relaxed SIMD's 8-bit dot) must hold exactly.
  for (QType t : types) {
    const int n = qtype_block(t) == 256 ? 512 : 9 * 32;
    const size_t bb = qtype_row_bytes(t, qtype_block(t));
    for (int fill : {0xff, 0x80, 0x00, -1}) {
      std::vector<uint8_t> row(qtype_row_bytes(t, n));
      unsigned seed = 7;
      for (uint8_t& v : row) v = fill >= 0 ? (uint8_t)fill : (uint8_t)((seed = seed * 1103515245u + 12345u) >> 16);
      const uint16_t h = f32_to_f16(1.0f);
      for (size_t b = 0; b < row.size() / bb; b++) {
        uint8_t* p = row.data() + b * bb;
        std::memcpy(t == QType::Q6_K ? p + 208 : p, &h, 2);
        if (t == QType::Q4_1 || t == QType::Q5_1 || t == QType::Q4_K || t == QType::Q5_K) std::memcpy(p + 2, &h, 2);
      }
      // 9 tokens: the WASM builds' packed GEMM (>= 8 tokens) and grouped tile, each forced.
      constexpr int kT = 9;
      std::vector<BlockQ8A> X5(kT * (n / 32));
      for (int k = 0; k < kT; k++) {
        std::vector<float> x(n);
        for (int i = 0; i < n; i++) x[i] = ((i + k) % 3 == 0 ? -1.0f : 1.0f) * ((i * (k + 1)) % 7 == 0 ? 1e-3f : 1.0f);
        quantize_act_q8_simd(x.data(), X5.data() + k * (n / 32), n);
      }
      float y5[2][kT];
      for (int kernel : {0, 1}) {
        qdot_force_prefill_kernel(kernel);
        matmul_q8_simd(t, y5[kernel], 1, X5.data(), row.data(), kT, n, 0, 1);
      }
      qdot_force_prefill_kernel(-1);
      for (int k = 0; k < kT; k++) {
        double mag = 0;
        const float ref = dot_q8_ref(t, row.data(), X5.data() + k * (n / 32), n, &mag);
        float y1 = 0;
        matmul_q8_simd(t, &y1, 1, X5.data() + k * (n / 32), row.data(), 1, n, 0, 1);
        check(std::fabs(y1 - ref) <= (2.0 * (n / 32) + 16) * std::ldexp(1.0, -24) * mag + 1e-30,
              "edge blocks: simd vs reference", (int)t, fill, y1, ref);
        for (int kernel : {0, 1})
          check(y1 == y5[kernel][k], "edge blocks: prefill vs decode (bit-exact)", (int)t, fill, y5[kernel][k], y1);
      }
    }
  }
  // Many rows at once (decode tiles of several rows taken from equal parts of [r0, r1), then the
  // rest one at a time; prefill tiles of two rows and an odd last row) equal each row computed
  // alone, bit for bit, and rows outside [r0, r1) and tokens' padding are untouched.
  for (QType t : types) {
    const int n = qtype_block(t) == 256 ? 512 : 9 * 32;
    const size_t rb = qtype_row_bytes(t, n);
    for (int d : {2, 3, 4, 5, 7, 9, 13}) {
      std::vector<uint8_t> W;
      for (int r = 0; r < d; r++) {
        const std::vector<uint8_t> row = stored_row(t, randn(n, 60 + r, 0.05f), 0);
        W.insert(W.end(), row.begin(), row.begin() + rb);
      }
      for (int T : {1, 5}) {
        std::vector<BlockQ8A> X(T * (n / 32));
        for (int k = 0; k < T; k++) quantize_act_q8_simd(randn(n, 70 + k).data(), X.data() + k * (n / 32), n);
        const int ldy = d + 2, r0 = d > 3 ? 1 : 0, r1 = d;
        std::vector<float> Y(T * ldy, -7.0f);
        matmul_q8_simd(t, Y.data(), ldy, X.data(), W.data(), T, n, r0, r1);
        for (int k = 0; k < T; k++)
          for (int c = 0; c < ldy; c++) {
            const float got = Y[k * ldy + c];
            if (c < r0 || c >= r1) {
              check(got == -7.0f, "many rows: outside rows untouched", (int)t, d, got, -7.0f);
              continue;
            }
            float one = 0;
            matmul_q8_simd(t, &one, 1, X.data() + k * (n / 32), W.data() + c * rb, 1, n, 0, 1);
            check(got == one, "many rows vs one row (bit-exact)", (int)t, d, got, one);
          }
      }
    }
  }
  // The K types against super-block activations (BlockQ8K: the relaxed-SIMD builds' kernel;
  // elsewhere the reference, which those builds' models do not call): the quantizer against its
  // reference, random rows (every code, scale and min) and edge fills against dot_q8k_ref,
  // prefill (9 tokens: two full groups and a short one) against decode bit for bit, and many rows
  // (decode's two-row tiles from two parts of [r0, r1), prefill's odd last row; from 8 tokens on,
  // the relaxed builds' two prefill kernels, each kept, and their trial) against one row and the
  // reference.
  for (QType t : {QType::Q4_K, QType::Q5_K, QType::Q6_K}) {
    const size_t bb = qtype_row_bytes(t, 256);
    for (int n : {256, 512, 2048}) {
      for (int fill : {-1, 0xff, 0x80, 0x00, 0x55}) {
        std::vector<uint8_t> row = stored_row(t, randn(n, 30 + n, 0.05f), 0);
        if (fill >= 0)
          for (size_t b = 0; b < row.size() / bb; b++) {
            uint8_t* p = row.data() + b * bb;
            std::memset(p, fill, bb);
            const uint16_t h = f32_to_f16(1.0f);
            std::memcpy(t == QType::Q6_K ? p + 208 : p, &h, 2);
            if (t != QType::Q6_K) std::memcpy(p + 2, &h, 2);
          }
        std::vector<BlockQ8K> X5(9 * (n / 256)), R(n / 256);
        for (int k = 0; k < 9; k++) {
          std::vector<float> x = randn(n, 110 + k);
          if (fill >= 0)  // activations at +-127 of their block's scale: the largest products
            for (int i = 0; i < n; i++)
              x[i] = ((i + k) % 3 == 0 ? -1.0f : 1.0f) * ((i * (k + 1)) % 7 == 0 ? 1e-3f : 1.0f);
          quantize_act_q8k_simd(x.data(), X5.data() + k * (n / 256), n);
          quantize_act_q8k_ref(x.data(), R.data(), n);
          check(std::memcmp(R.data(), X5.data() + k * (n / 256), R.size() * sizeof(BlockQ8K)) == 0,
                "super-block activations (bit-exact)", (int)t, n, X5[k * (n / 256)].d, R[0].d);
        }
        float y5[9];
        matmul_q8k_simd(t, y5, 1, X5.data(), row.data(), 9, n, 0, 1);
        for (int k = 0; k < 9; k++) {
          double mag = 0;
          const float ref = dot_q8k_ref(t, row.data(), X5.data() + k * (n / 256), n, &mag);
          float y1 = 0;
          matmul_q8k_simd(t, &y1, 1, X5.data() + k * (n / 256), row.data(), 1, n, 0, 1);
          check(std::fabs(y1 - ref) <= (2.0 * (n / 32) + 16) * std::ldexp(1.0, -24) * mag + 1e-30,
                "super-block: simd vs reference", (int)t, fill, y1, ref);
          check(y1 == y5[k], "super-block: prefill vs decode (bit-exact)", (int)t, fill, y5[k], y1);
        }
      }
    }
    const int n = 512;
    const size_t rb = qtype_row_bytes(t, n);
    for (int d : {2, 3, 4, 5, 7, 9, 13}) {
      std::vector<uint8_t> W;
      for (int r = 0; r < d; r++) {
        const std::vector<uint8_t> row = stored_row(t, randn(n, 160 + r, 0.05f), r);
        W.insert(W.end(), row.begin() + r, row.end());
      }
      for (int T : {1, 5, 9, 40})
        for (int kernel : {-1, 0, 1}) {
          std::vector<BlockQ8K> X(T * (n / 256));
          for (int k = 0; k < T; k++) quantize_act_q8k_simd(randn(n, 170 + k).data(), X.data() + k * (n / 256), n);
          const int ldy = d + 2, r0 = d > 3 ? 1 : 0, r1 = d;
          std::vector<float> Y(T * ldy, -7.0f);
          qdot_force_prefill_kernel(kernel);
          matmul_q8k_simd(t, Y.data(), ldy, X.data(), W.data(), T, n, r0, r1);
          qdot_force_prefill_kernel(-1);
          for (int k = 0; k < T; k++)
            for (int c = 0; c < ldy; c++) {
              const float got = Y[k * ldy + c];
              if (c < r0 || c >= r1) {
                check(got == -7.0f, "super-block, many rows: outside rows untouched", (int)t, d, got, -7.0f);
                continue;
              }
              float one = 0;
              matmul_q8k_simd(t, &one, 1, X.data() + k * (n / 256), W.data() + c * rb, 1, n, 0, 1);
              check(got == one, "super-block, many rows vs one row (bit-exact)", (int)t, d, got, one);
              double mag = 0;
              const float ref = dot_q8k_ref(t, W.data() + c * rb, X.data() + k * (n / 256), n, &mag);
              check(std::fabs(got - ref) <= (2.0 * (n / 32) + 16) * std::ldexp(1.0, -24) * mag + 1e-30,
                    "super-block, many rows vs reference", (int)t, T, got, ref);
            }
        }
    }
  }
  // f32 prefill (the packed-token kernel: 4- or 6-row tiles of 8 tokens and a last one of 4 or 8) against the
  // scalar reference: partial panels and tiles, depth blocks (n > 1024), padded strides, rows
  // outside [r0, r1) untouched. Bound as tests/native/kernels/test_kernels.cpp: 1e-5 sum |w x| + 1e-6.
  // Each tile height (the relaxed builds pick one by timing both), then the build's own choice.
  for (int tile : {4, 6, 0}) {
    matmul_f32_force_tile_rows(tile);
    for (int T : {2, 3, 4, 5, 9, 64}) {
      for (int n : {1, 5, 33, 1100}) {
        for (int d : {1, 7, 8, 9, 67}) {
          const int ldx = n + 3, ldy = d + 2, r0 = d > 2 ? 1 : 0, r1 = d;
          std::vector<float> W = randn(d * n, 40 + d, 1.0f), X(T * ldx, NAN), Y(T * ldy, -7.0f), ref(T * d), xt;
          for (int t = 0; t < T; t++) {
            const std::vector<float> row = randn(n, 50 + t);
            std::copy(row.begin(), row.end(), X.begin() + t * ldx);
            xt.insert(xt.end(), row.begin(), row.end());
          }
          matmul_f32_ref(ref.data(), d, xt.data(), n, W.data(), T, d, n);
          matmul_f32_simd(Y.data(), ldy, X.data(), ldx, W.data(), T, n, r0, r1);
          for (int t = 0; t < T; t++)
            for (int c = 0; c < ldy; c++) {
              const float got = Y[t * ldy + c];
              if (c < r0 || c >= r1) {
                check(got == -7.0f, "f32 matmul: outside rows untouched", (int)QType::F32, n, got, -7.0f);
                continue;
              }
              double mag = 0;
              for (int k = 0; k < n; k++) mag += std::fabs((double)W[c * n + k] * xt[t * n + k]);
              const float want = ref[t * d + c];
              check(std::fabs(got - want) <= 1e-5 * mag + 1e-6, "f32 matmul vs reference", (int)QType::F32, n, got,
                    want);
            }
        }
      }
    }
  }
  // Every half as a Q8_0 block scale (the integer kernels convert scales without F16C here):
  // one weight of 1 against one activation of 1 with d = 1 gives the scale itself, exactly
  // (an Inf or NaN scale: not finite; Inf times the zero weights' lanes is NaN, as in f32).
  // Every f16 in every lane of a group of four blocks (the scales are decoded four at a time
  // there), and as a lone tail block: the others in the group have zero scales and weights.
  for (int nblocks : {1, 4}) {
    std::vector<uint8_t> blk(34 * nblocks);
    std::vector<BlockQ8A> ones(nblocks);
    for (BlockQ8A& o : ones) {
      o = BlockQ8A{};
      o.d = 1.0f;
      o.q[0] = 1;
    }
    for (uint32_t h = 0; h < 65536; h++) {
      std::fill(blk.begin(), blk.end(), 0);
      uint8_t* b = blk.data() + 34 * (h % nblocks);
      b[0] = (uint8_t)(h & 0xff);
      b[1] = (uint8_t)(h >> 8);
      b[2] = 1;
      float got = 0;
      matmul_q8_simd(QType::Q8_0, &got, 1, ones.data(), blk.data(), 1, 32 * nblocks, 0, 1);
      const float want = f16_to_f32((uint16_t)h);
      check(std::isfinite(want) ? got == want : !std::isfinite(got), "block scale (f16)", (int)QType::Q8_0, (int)h, got,
            want);
    }
  }
  // The finite-scale conversion (matmul_q8_simd's finite_scales, for matrices whose scales the
  // loader found finite): every finite half as a Q8_0 scale and as a Q4_1 min (d = 0, so the
  // product is m times the activations' sum, 1), in every lane of a group and as a tail block.
  // The Q4_1 block: d, m, then codes; its activations' s = d_x * sum q = 1.
  for (int nblocks : {1, 4}) {
    for (QType t : {QType::Q8_0, QType::Q4_1}) {
      const int bb = t == QType::Q8_0 ? 34 : 20;
      std::vector<uint8_t> blk(bb * nblocks);
      std::vector<BlockQ8A> ones(nblocks);
      for (BlockQ8A& o : ones) {
        o = BlockQ8A{};
        o.d = 1.0f;
        o.s = 1.0f;
        o.q[0] = 1;
      }
      for (uint32_t h = 0; h < 65536; h++) {
        if ((h & 0x7c00u) == 0x7c00u) continue;  // Inf and NaN: the loader does not set the flag
        std::fill(blk.begin(), blk.end(), 0);
        uint8_t* b = blk.data() + bb * (h % nblocks);
        const int at = t == QType::Q8_0 ? 0 : 2;
        b[at] = (uint8_t)(h & 0xff);
        b[at + 1] = (uint8_t)(h >> 8);
        if (t == QType::Q8_0) b[2] = 1;
        float got = 0;
        matmul_q8_simd(t, &got, 1, ones.data(), blk.data(), 1, 32 * nblocks, 0, 1, true);
        const float want = f16_to_f32((uint16_t)h);
        check(got == want, "block scale (f16, finite path)", (int)t, (int)h, got, want);
      }
    }
  }
  // Whole matrices through the finite-scale path give the same bits as the general one: the
  // one-block types, scales from 1e-7 (subnormal halves) to 1e3 and of both signs (Q4_0's are
  // negative half the time), decode and prefill tiles, several rows, tails of groups.
  for (QType t : {QType::Q8_0, QType::Q4_0, QType::Q4_1, QType::Q5_0, QType::Q5_1}) {
    for (int n : {32, 9 * 32, 2048}) {
      const size_t rb = qtype_row_bytes(t, n);
      const int d = 13;
      std::vector<uint8_t> W;
      for (int r = 0; r < d; r++) {
        const float sigma = r % 3 == 0 ? 1e-6f : r % 3 == 1 ? 0.05f : 300.0f;
        const std::vector<uint8_t> row = stored_row(t, randn(n, 500 + r + n, sigma), 0);
        W.insert(W.end(), row.begin(), row.begin() + rb);
      }
      check(qdot_scales_finite(t, W.data(), d, n), "scales found finite", (int)t, n, 0, 1);
      for (int T : {1, 5}) {
        std::vector<BlockQ8A> X(T * (n / 32));
        for (int k = 0; k < T; k++) quantize_act_q8_simd(randn(n, 80 + k).data(), X.data() + k * (n / 32), n);
        std::vector<float> general(T * d), fast(T * d);
        matmul_q8_simd(t, general.data(), d, X.data(), W.data(), T, n, 0, d, false);
        matmul_q8_simd(t, fast.data(), d, X.data(), W.data(), T, n, 0, d, true);
        for (int i = 0; i < T * d; i++)
          check(std::memcmp(&general[i], &fast[i], 4) == 0, "finite-scale path vs general (bit-exact)", (int)t, n,
                fast[i], general[i]);
      }
    }
  }
  // f16 conversion: every half, SIMD vs scalar (NaN stays NaN); the f16 dot vs its reference.
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; h++) all[h] = (uint16_t)h;
  std::vector<float> fast(65536);
  dequantize_row_simd(QType::F16, all.data(), fast.data(), 65536);
  for (uint32_t h = 0; h < 65536; h++) {
    const float want = f16_to_f32((uint16_t)h);
    const bool ok = std::isnan(want) ? std::isnan(fast[h]) : std::memcmp(&fast[h], &want, 4) == 0;
    check(ok, "f16 conversion", (int)QType::F16, (int)h, fast[h], want);
  }
  for (int n : {7, 64, 769}) {
    std::vector<uint8_t> row = stored_row(QType::F16, randn(n, n, 0.1f), 1);
    std::vector<float> x = randn(n, 2 * n);
    const float r = dot_row_ref(QType::F16, row.data() + 1, x.data(), n),
                s = dot_row_simd(QType::F16, row.data() + 1, x.data(), n);
    check(std::fabs(r - s) <= 1e-5 * (std::fabs(r) + 1), "f16 dot", (int)QType::F16, n, s, r);
  }
  // Flash attention (scores of a group of keys reduced together; whole-tile fast paths) against
  // the direct reference: decode and prefill, key counts that leave short groups and tiles,
  // head sizes with a tail, grouped-query heads, a window, padding, probabilities.
  struct AttnCase {
    int nq, nkv, heads, kv_heads, hd, window;
    bool pad;
  };
  for (const AttnCase c : {AttnCase{1, 1, 2, 2, 64, 0, false}, AttnCase{1, 70, 4, 2, 64, 0, false},
                           AttnCase{1, 131, 2, 1, 20, 0, false}, AttnCase{5, 133, 4, 4, 64, 0, false},
                           AttnCase{9, 77, 2, 2, 33, 16, false}, AttnCase{3, 66, 2, 1, 64, 0, true}}) {
    const int width = c.heads * c.hd, kv_width = c.kv_heads * c.hd;
    const std::vector<float> q = randn(c.nq * width, 80), k = randn(c.nkv * kv_width, 81),
                             v = randn(c.nkv * kv_width, 82);
    std::vector<uint8_t> valid(c.nkv, 1);
    for (int j = 0; j < c.nkv; j += 7) valid[j] = 0;
    std::vector<float> out_ref(c.nq * width, -7.0f), out_fl(out_ref), p_ref((size_t)c.heads * c.nq * c.nkv),
        p_fl(p_ref);
    AttentionArgs a;
    a.n_q = c.nq;
    a.n_kv = c.nkv;
    a.n_heads = c.heads;
    a.n_kv_heads = c.kv_heads;
    a.head_dim = c.hd;
    a.q = q.data();
    a.q_stride = a.out_stride = width;
    a.k = k.data();
    a.v = v.data();
    a.kv_stride = kv_width;
    a.scale = 1.0f / std::sqrt((float)c.hd);
    a.q_pos0 = c.nkv - c.nq;
    a.window = c.window;
    a.key_valid = c.pad ? valid.data() : nullptr;
    a.out = out_ref.data();
    a.probs = p_ref.data();
    attention_ref(a);
    a.out = out_fl.data();
    a.probs = p_fl.data();
    attention_flash(a, 0, c.heads);
    for (size_t i = 0; i < out_ref.size(); i++)
      check(std::fabs(out_fl[i] - out_ref[i]) <= 2e-5 * (std::fabs(out_ref[i]) + 1), "attention: flash vs reference",
            c.hd, c.nkv, out_fl[i], out_ref[i]);
    for (size_t i = 0; i < p_ref.size(); i++)
      check(std::fabs(p_fl[i] - p_ref[i]) <= 1e-5, "attention probs: flash vs reference", c.hd, c.nkv, p_fl[i],
            p_ref[i]);
  }
}

}  // namespace
