// The one SIMD vocabulary of the kernels: xsimd's default batch for the target
// (SSE/AVX2 natively, wasm SIMD128 under Emscripten).
#pragma once
#include <type_traits>

#include <xsimd/xsimd.hpp>

namespace qkv {
using fbatch = xsimd::batch<float>;
constexpr int kLanes = static_cast<int>(fbatch::size);

// a * b + c. Natively xsimd's fma (fused where the target has FMA). In the relaxed-SIMD WASM
// builds (QKV_RELAXED_SIMD) it is f32x4.relaxed_madd, which V8 runs as one fused instruction
// on CPUs with FMA: clang 14 knows that instruction only under its pre-standard name and
// opcode (f32x4.fma, a + b * c), so the build emits that with the operands in madd's order and
// scripts/wasm-relaxed.mjs rewrites each such opcode to the standard relaxed_madd, which
// multiplies its first two operands and adds the third. Plain SIMD128 builds: mul + add.
template <class B>
inline B madd(const B& a, const B& b, const B& c) {
#if defined(__wasm__) && defined(QKV_RELAXED_SIMD)
  if constexpr (std::is_same_v<B, fbatch>) {
    typedef float f32x4 __attribute__((__vector_size__(16)));
    return fbatch((v128_t)__builtin_wasm_fma_f32x4((f32x4)a.data, (f32x4)b.data, (f32x4)c.data));
  } else {
    return xsimd::fma(a, b, c);
  }
#else
  return xsimd::fma(a, b, c);
#endif
}

// Name of the instruction set the kernels were compiled for ("avx2", "wasm", ...).
// The relaxed-SIMD WASM builds say "wasm-relaxed".
inline const char* simd_arch_name() {
#if defined(__wasm__) && defined(QKV_RELAXED_SIMD)
  return "wasm-relaxed";
#else
  return xsimd::default_arch::name();
#endif
}
}  // namespace qkv
