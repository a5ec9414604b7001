// The integer dot products of the WASM SIMD128 build (weights widened, i32x4.dot_i16x8).
#include "common.h"

#if QKV_QDOT_WASM && !QKV_QDOT_RELAXED
#include <utility>

#include "wasm_simd128.h"

namespace qkv {
namespace qdot_detail {
namespace {

// How the types multiply here (wasm_tile.h): all of them widened.
template <class D>
constexpr bool kRelaxed8 = false;
template <class D, class Q>
inline auto load_act(const Q* q) {
  return load_x32(q);
}
template <class D, class XB>
inline auto weights(const D& dec) {
  return dec.w(0);
}
template <class D>
inline auto weight_pair(const D& dec, int j) {
  W32 a, b;
  dec.wpair(j, &a, &b);
  return std::make_pair(a, b);
}

}  // namespace
}  // namespace qdot_detail
}  // namespace qkv

#include "wasm_tile.h"
// (after the tile they run)
#include "tiles.h"
#include "wasm_gemm.h"

namespace qkv {
namespace qdot_detail {
namespace {

// Weight rows per decode tile: 4 for the one-block types (faster than 2 in Chromium once the
// block sums are pinned), 2 for the K types (4 measured slower; see docs/benchmarks.md).
template <class D>
constexpr int kDecodeRows = D::kSub == 1 ? 4 : 2;

template <class D>
void matmul_typed(float* Y, int64_t ldy, const BlockQ8A* X, const uint8_t* W, int T, int n, int r0, int r1,
                  const QdotPacked* pk) {
  const int nb = n / 32;
  const size_t rb = (size_t)(nb / D::kSub) * D::kBytes;
  if (T >= kPackMinTokens) return prefill_gemm<D>(Y, ldy, X, pk, W, rb, T, nb, r0, r1);
  if (T > 1) return prefill_tiles(BlockTile<D, BlockQ8A>{nb}, Y, ldy, X, (size_t)nb, W, rb, T, r0, r1);
  decode_tiles<kDecodeRows<D>>(BlockTile<D, BlockQ8A>{nb}, Y, X, W, rb, r0, r1);
}

// The one-block types, with or without the finite-scale conversion.
template <bool F>
void matmul_one_block(QType t, float* Y, int64_t ldy, const BlockQ8A* X, const uint8_t* w, int T, int n, int r0, int r1,
                      const QdotPacked* pk) {
  switch (t) {
    case QType::Q8_0: return matmul_typed<Q8_0Simd128<F>>(Y, ldy, X, w, T, n, r0, r1, pk);
    case QType::Q4_0: return matmul_typed<Q4_5Simd128<false, false, F>>(Y, ldy, X, w, T, n, r0, r1, pk);
    case QType::Q4_1: return matmul_typed<Q4_5Simd128<true, false, F>>(Y, ldy, X, w, T, n, r0, r1, pk);
    case QType::Q5_0: return matmul_typed<Q4_5Simd128<false, true, F>>(Y, ldy, X, w, T, n, r0, r1, pk);
    default: return matmul_typed<Q4_5Simd128<true, true, F>>(Y, ldy, X, w, T, n, r0, r1, pk);
  }
}

}  // namespace
}  // namespace qdot_detail

bool qdot_uses_finite_scales() { return true; }
bool qdot_k_super_blocks() { return false; }
const char* qdot_impl_name() { return "wasm-simd128"; }

void qdot_pack_prefill(QdotPacked& p, const BlockQ8A* X, int T, int n, const QType* types, int n_types) {
  bool any = false;  // every type reads the 16-bit layout here
  for (int i = 0; i < n_types; i++) any = any || qtype_int_dot(types[i]);
  qdot_detail::pack_prefill_wasm(p, X, T, n, any, false);
}

void matmul_q8_simd(QType t, float* Y, int64_t ldy, const BlockQ8A* X, const void* W, int T, int n, int r0, int r1,
                    bool finite_scales, const QdotPacked* pk) {
  using namespace qdot_detail;
  const uint8_t* w = static_cast<const uint8_t*>(W);
  switch (t) {
    case QType::Q8_0:
    case QType::Q4_0:
    case QType::Q4_1:
    case QType::Q5_0:
    case QType::Q5_1:
      if (finite_scales) return matmul_one_block<true>(t, Y, ldy, X, w, T, n, r0, r1, pk);
      return matmul_one_block<false>(t, Y, ldy, X, w, T, n, r0, r1, pk);
    case QType::Q4_K: return matmul_typed<QK45Simd128<false>>(Y, ldy, X, w, T, n, r0, r1, pk);
    case QType::Q5_K: return matmul_typed<QK45Simd128<true>>(Y, ldy, X, w, T, n, r0, r1, pk);
    case QType::Q6_K: return matmul_typed<Q6KSimd128>(Y, ldy, X, w, T, n, r0, r1, pk);
    default: fail(ErrorCode::Internal, "matmul_q8_simd: weight type has no integer dot product");
  }
}

void matmul_q8k_simd(QType t, float* Y, int64_t ldy, const BlockQ8K* X, const void* W, int T, int n, int r0, int r1) {
  if (!qtype_k_super(t)) fail(ErrorCode::Internal, "matmul_q8k_simd: not a K type");
  qdot_detail::matmul_q8k_by_ref(t, Y, ldy, X, static_cast<const uint8_t*>(W), T, n, r0, r1);
}

}  // namespace qkv

#endif
