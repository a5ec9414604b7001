// The one SIMD vocabulary of the kernels: xsimd's default batch for the target
// (SSE/AVX2 natively, wasm SIMD128 under Emscripten).
#pragma once
#include <xsimd/xsimd.hpp>

namespace qkv {
using fbatch = xsimd::batch<float>;
constexpr int kLanes = static_cast<int>(fbatch::size);

// Name of the instruction set the kernels were compiled for ("avx2", "wasm", ...).
inline const char* simd_arch_name() { return xsimd::default_arch::name(); }
}  // namespace qkv
