// The integer dot products in plain loops, for targets without AVX2 or WASM SIMD128.
#include "common.h"

#if QKV_QDOT_PORTABLE

namespace qkv {
namespace qdot_detail {
namespace {

// W32: 32 weight integers; X32: 32 activations; I32: an integer sum; F: a float accumulator.
// Each operation builds a fresh W32 from const references: g++ 12 with AVX-512 on miscompiled
// the in-place form (a by-value W32 changed and returned) in Q5_K's multi-row and prefill tiles.
struct W32 {
  int16_t v[32];
};
struct X32 {
  int16_t v[32];
};
using I32 = int32_t;
using F = float;
inline W32 load_w32(const uint8_t* p) {
  W32 r;
  for (int k = 0; k < 32; k++) r.v[k] = p[k];
  return r;
}
inline W32 load_s32(const uint8_t* p) {
  W32 r;
  for (int k = 0; k < 32; k++) r.v[k] = (int8_t)p[k];
  return r;
}
inline X32 load_x32(const q8a_t* q) {
  X32 r;
  for (int k = 0; k < 32; k++) r.v[k] = q[k];
  return r;
}
inline W32 nibbles16(const uint8_t* p) {
  W32 r;
  for (int k = 0; k < 16; k++) {
    r.v[k] = p[k] & 0x0f;
    r.v[k + 16] = p[k] >> 4;
  }
  return r;
}
inline W32 low4(const W32& v) {
  W32 r;
  for (int k = 0; k < 32; k++) r.v[k] = (int16_t)(v.v[k] & 0x0f);
  return r;
}
inline W32 high4(const W32& v) {
  W32 r;
  for (int k = 0; k < 32; k++) r.v[k] = (int16_t)((v.v[k] >> 4) & 0x0f);
  return r;
}
inline W32 bits_at(const W32& v, int s, int mask) {
  const int left = s < 0 ? -s : 0, right = s > 0 ? s : 0;
  W32 r;
  for (int k = 0; k < 32; k++) r.v[k] = (int16_t)(((v.v[k] << left) >> right) & mask);
  return r;
}
inline W32 or8(const W32& a, const W32& b) {
  W32 r;
  for (int k = 0; k < 32; k++) r.v[k] = (int16_t)(a.v[k] | b.v[k]);
  return r;
}
// Bytes loaded by load_w32 are unsigned; a signed weight type reinterprets them first.
inline W32 sub8(const W32& v, int c) {
  W32 r;
  for (int k = 0; k < 32; k++) r.v[k] = (int16_t)(int8_t)(uint8_t)(v.v[k] - c);
  return r;
}
inline W32 bits_to_16s(uint32_t bits) {
  W32 r;
  for (int k = 0; k < 32; k++) r.v[k] = ((bits >> k) & 1) << 4;
  return r;
}
inline I32 dot_us(const W32& w, const X32& x) {
  int32_t s = 0;
  for (int k = 0; k < 32; k++) s += w.v[k] * x.v[k];
  return s;
}
inline I32 dot_ss(const W32& w, const X32& x) { return dot_us(w, x); }
inline I32 dot_ss16(const W32& w, const X32& x, int sa, int sb) {
  int32_t a = 0, b = 0;
  for (int k = 0; k < 16; k++) a += w.v[k] * x.v[k];
  for (int k = 16; k < 32; k++) b += w.v[k] * x.v[k];
  return sa * a + sb * b;
}
inline void scale_u8x8(const uint8_t* v, float s, float* out) {
  for (int k = 0; k < 8; k++) out[k] = s * (float)v[k];
}
inline F fzero() { return 0.0f; }
inline F fmadd(I32 i, float s, F acc) { return acc + (float)i * s; }
inline float fsum(F a) { return a; }

}  // namespace
}  // namespace qdot_detail
}  // namespace qkv

#include "native.h"

const char* qkv::qdot_impl_name() { return "portable"; }

#endif
