// The native products (AVX2, portable): per-type dispatch over tile_generic.h's tile.
#pragma once
// Included by avx2.cpp or portable.cpp after their integer primitives.
#include "tile_generic.h"
// (after the tile it runs)
#include "tiles.h"
#if QKV_QDOT_VNNI
#include "vnni.h"
#endif

namespace qkv {
namespace qdot_detail {
namespace {

// Native decode streams at the memory bound with 2 rows per tile.
template <class D>
void matmul_typed(float* Y, int64_t ldy, const BlockQ8A* X, const uint8_t* W, int T, int n, int r0, int r1,
                  const QdotPacked* pk) {
  const int nb = n / 32;
  const size_t rb = (size_t)(nb / D::kSub) * D::kBytes;
#if QKV_QDOT_VNNI
  if (T > 1) return vnni_prefill<D>(Y, ldy, X, pk, (size_t)nb, W, rb, nb, T, r0, r1);
#endif
  if (T > 1) return prefill_tiles(BlockTile<D, BlockQ8A>{nb}, Y, ldy, X, (size_t)nb, W, rb, T, r0, r1);
  decode_tiles<2>(BlockTile<D, BlockQ8A>{nb}, Y, X, W, rb, r0, r1);
}

// matmul_q8_simd of the native builds (scales convert in one instruction (F16C) or a scalar
// fast path, so finite_scales changes nothing here).
void matmul_native(QType t, float* Y, int64_t ldy, const BlockQ8A* X, const uint8_t* w, int T, int n, int r0, int r1,
                   const QdotPacked* pk) {
  switch (t) {
    case QType::Q8_0: return matmul_typed<Q8_0Block>(Y, ldy, X, w, T, n, r0, r1, pk);
    case QType::Q4_0: return matmul_typed<Q4_5Block<false, false>>(Y, ldy, X, w, T, n, r0, r1, pk);
    case QType::Q4_1: return matmul_typed<Q4_5Block<true, false>>(Y, ldy, X, w, T, n, r0, r1, pk);
    case QType::Q5_0: return matmul_typed<Q4_5Block<false, true>>(Y, ldy, X, w, T, n, r0, r1, pk);
    case QType::Q5_1: return matmul_typed<Q4_5Block<true, true>>(Y, ldy, X, w, T, n, r0, r1, pk);
    case QType::Q4_K: return matmul_typed<QK45Scalar<false>>(Y, ldy, X, w, T, n, r0, r1, pk);
    case QType::Q5_K: return matmul_typed<QK45Scalar<true>>(Y, ldy, X, w, T, n, r0, r1, pk);
    case QType::Q6_K: return matmul_typed<Q6KBlock>(Y, ldy, X, w, T, n, r0, r1, pk);
    default: fail(ErrorCode::Internal, "matmul_q8_simd: weight type has no integer dot product");
  }
}

}  // namespace
}  // namespace qdot_detail

bool qdot_uses_finite_scales() { return false; }
bool qdot_k_super_blocks() { return false; }

void matmul_q8_simd(QType t, float* Y, int64_t ldy, const BlockQ8A* X, const void* W, int T, int n, int r0, int r1,
                    bool, const QdotPacked* pk) {
  qdot_detail::matmul_native(t, Y, ldy, X, static_cast<const uint8_t*>(W), T, n, r0, r1, pk);
}

void qdot_pack_prefill(QdotPacked& p, const BlockQ8A* X, int T, int n, const QType* types, int n_types) {
#if QKV_QDOT_VNNI
  bool any = false;  // every type reads the one layout
  for (int i = 0; i < n_types; i++) any = any || qtype_int_dot(types[i]);
  qdot_detail::pack_prefill_vnni(p, X, T, n, any);
#else
  (void)X, (void)n, (void)types, (void)n_types;
  p.T = p.n = 0;
  p.wide = p.narrow = -1;
#endif
}

void matmul_q8k_simd(QType t, float* Y, int64_t ldy, const BlockQ8K* X, const void* W, int T, int n, int r0, int r1) {
  if (!qtype_k_super(t)) fail(ErrorCode::Internal, "matmul_q8k_simd: not a K type");
  qdot_detail::matmul_q8k_by_ref(t, Y, ldy, X, static_cast<const uint8_t*>(W), T, n, r0, r1);
}

}  // namespace qkv
