// Activations quantized to 8 bits once per product (BlockQ8A, BlockQ8K): reference and xsimd.
#include <cfloat>

#include "../simd.h"
#include "common.h"

namespace qkv {

// max |v[k]| over n values; *finite: none is Inf or NaN.
static float abs_max(const float* v, int n, bool* finite) {
  float amax = 0.0f;
  *finite = true;
  for (int k = 0; k < n; k++) {
    *finite = *finite && std::isfinite(v[k]);
    amax = std::fmax(amax, std::fabs(v[k]));
  }
  return amax;
}

void quantize_act_q8_ref(const float* x, BlockQ8A* dst, int n) {
  for (int b = 0; b < n / 32; b++) {
    const float* v = x + 32 * b;
    BlockQ8A& o = dst[b];
    bool finite;
    const float amax = abs_max(v, 32, &finite);
    o.h[0] = o.h[1] = 0;
    if (!finite) {
      o.d = o.s = NAN;
      for (int k = 0; k < 32; k++) o.q[k] = 0;
      continue;
    }
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    o.d = amax / 127.0f;
    for (int k = 0; k < 32; k++) {
      const int q = (int)std::nearbyint(v[k] * id);
      o.q[k] = (q8a_t)q;
      o.h[k / 16] = (int16_t)(o.h[k / 16] + q);
    }
    o.s = o.d * (float)(o.h[0] + o.h[1]);
  }
}

void quantize_act_q8_simd(const float* x, BlockQ8A* dst, int n) {
  using ibatch = xsimd::batch<int32_t>;
  constexpr int L = kLanes, NV = 32 / kLanes;  // 4, 8 or 16 lanes: all divide 32
  static_assert(32 % kLanes == 0, "a block of 32 must be whole vectors");
  alignas(64) int32_t qi[32];
  const fbatch fmax_v(FLT_MAX);
  for (int b = 0; b < n / 32; b++) {
    const float* v = x + 32 * b;
    BlockQ8A& o = dst[b];
    fbatch xs[NV], amax(0.0f);
    auto finite = fbatch(0.0f) == fbatch(0.0f);
    for (int i = 0; i < NV; i++) {
      xs[i] = fbatch::load_unaligned(v + i * L);
      const fbatch a = xsimd::abs(xs[i]);
      finite = finite && (a <= fmax_v);  // false for Inf and NaN
      amax = xsimd::max(amax, a);
    }
    o.h[0] = o.h[1] = 0;
    if (!xsimd::all(finite)) {
      o.d = o.s = NAN;
      for (int k = 0; k < 32; k++) o.q[k] = 0;
      continue;
    }
    const float a = xsimd::reduce_max(amax);
    const float id = a != 0.0f ? 127.0f / a : 0.0f;
    o.d = a / 127.0f;
    ibatch sum[2] = {ibatch(0), ibatch(0)};
    for (int i = 0; i < NV; i++) {
      const ibatch q = xsimd::batch_cast<int32_t>(xsimd::nearbyint(xs[i] * fbatch(id)));  // integral: exact cast
      q.store_aligned(qi + i * L);
      sum[i * 2 / NV] += q;
    }
    for (int k = 0; k < 32; k++) o.q[k] = (q8a_t)qi[k];
    o.h[0] = (int16_t)xsimd::reduce_add(sum[0]);
    o.h[1] = (int16_t)xsimd::reduce_add(sum[1]);
    o.s = o.d * (float)(o.h[0] + o.h[1]);
  }
}

// The sums of q over each 16 and each 32 (at most 32 * 127 in magnitude: int16).
static void q8k_sums(BlockQ8K& o) {
  for (int g = 0; g < 16; g++) {
    int s = 0;
    for (int k = 0; k < 16; k++) s += o.q[16 * g + k];
    o.sum16[g] = (int16_t)s;
  }
  for (int j = 0; j < 8; j++) o.sum32[j] = (int16_t)(o.sum16[2 * j] + o.sum16[2 * j + 1]);
}

void quantize_act_q8k_ref(const float* x, BlockQ8K* dst, int n) {
  for (int b = 0; b < n / 256; b++) {
    const float* v = x + 256 * b;
    BlockQ8K& o = dst[b];
    bool finite;
    const float amax = abs_max(v, 256, &finite);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int k = 0; k < 256; k++) o.q[k] = finite ? (int8_t)(int)std::nearbyint(v[k] * id) : 0;
    o.d = finite ? amax / 127.0f : NAN;
    q8k_sums(o);
  }
}

void quantize_act_q8k_simd(const float* x, BlockQ8K* dst, int n) {
  constexpr int L = kLanes;
  static_assert(256 % kLanes == 0, "a super-block must be whole vectors");
  alignas(64) int32_t qi[256];
  const fbatch fmax_v(FLT_MAX);
  for (int b = 0; b < n / 256; b++) {
    const float* v = x + 256 * b;
    BlockQ8K& o = dst[b];
    fbatch amax(0.0f);
    auto finite = fbatch(0.0f) == fbatch(0.0f);
    for (int i = 0; i < 256; i += L) {
      const fbatch a = xsimd::abs(fbatch::load_unaligned(v + i));
      finite = finite && (a <= fmax_v);  // false for Inf and NaN
      amax = xsimd::max(amax, a);
    }
    if (xsimd::all(finite)) {
      const float a = xsimd::reduce_max(amax);
      const fbatch id(a != 0.0f ? 127.0f / a : 0.0f);
      for (int i = 0; i < 256; i += L)  // integral: exact cast
        xsimd::batch_cast<int32_t>(xsimd::nearbyint(fbatch::load_unaligned(v + i) * id)).store_aligned(qi + i);
      for (int k = 0; k < 256; k++) o.q[k] = (int8_t)qi[k];
      o.d = a / 127.0f;
    } else {
      std::memset(o.q, 0, sizeof o.q);
      o.d = NAN;
    }
    q8k_sums(o);
  }
}

}  // namespace qkv
