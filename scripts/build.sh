#!/usr/bin/env bash
# Builds everything: native (build/: qkv CLI, tests, benchmark) and WASM (dist/qkv{,-mt}{,-relaxed}.mjs
# + .wasm: single-thread and pthreads, each in SIMD128 and relaxed-SIMD variants).
# Usage: scripts/build.sh [native|wasm|all]   (default all). Incremental: reruns are fast.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
what="${1:-all}"
jobs="$(nproc 2>/dev/null || echo 2)"
export NODE_PATH=/usr/share/nodejs  # Debian's emscripten needs acorn from here

if [ "$what" = native ] || [ "$what" = all ]; then
  [ -f build/CMakeCache.txt ] || cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON >/dev/null
  cmake --build build -j"$jobs"
fi
if [ "$what" = wasm ] || [ "$what" = all ]; then
  [ -f build-wasm/CMakeCache.txt ] || emcmake cmake -S . -B build-wasm -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build-wasm -j"$jobs"
  # The relaxed-SIMD variants (dist/qkv-relaxed.*, qkv-mt-relaxed.*): fused multiply-add.
  [ -f build-wasm-relaxed/CMakeCache.txt ] ||
    emcmake cmake -S . -B build-wasm-relaxed -DCMAKE_BUILD_TYPE=Release -DQKV_WASM_RELAXED=ON >/dev/null
  cmake --build build-wasm-relaxed -j"$jobs"
fi
