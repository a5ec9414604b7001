#!/usr/bin/env bash
# Benchmarks (not tests): the same bench program natively and as WASM under Node, one after
# the other on this machine. Pass --quick to skip the 110M-shape model.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
bash scripts/build.sh all >/dev/null
echo "################ native ################"
./build/qkv_bench "$@"
echo "################ wasm (node $(node --version)) ################"
node build-wasm/qkv_bench.cjs "$@"
