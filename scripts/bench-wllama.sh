#!/usr/bin/env bash
# Benchmark (not a test): qkv vs wllama (llama.cpp in WASM) in the same headless Chromium run,
# on random-weight GGUF models of the 110M shape (add --shapes 110m,1b for the ~1B one) in
# F32, Q8_0, Q4_0 and Q4_K, at 1 and 2 threads; then native qkv_bench for the memory-bandwidth
# bound. Options are passed to bench/bench-wllama.mjs (see its header). Generated models are
# cached in build/bench-wllama/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
bash scripts/build.sh all >/dev/null
node bench/bench-wllama.mjs "$@"
echo
echo "################ native qkv_bench (prefill/decode vs the memory-bandwidth bound) ################"
./build/qkv_bench
