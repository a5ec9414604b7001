#!/usr/bin/env bash
# Every test: set-up, build (native + WASM), ctest (kernels, model, bad input, golden CLI
# conformance), the libFuzzer run over the model readers (60 s, scripts/fuzz.sh; QKV_FUZZ_SECONDS
# to change), then node --test (WASM conformance, native-vs-WASM logits, bad input).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
bash scripts/build.sh all
if [ ! -d ../shared/models ]; then
  echo "error: ../shared/models (the test fixtures) is missing beside the repository" >&2
  exit 1
fi
(cd build && ctest --output-on-failure -j"$(nproc 2>/dev/null || echo 2)")
bash scripts/fuzz.sh "${QKV_FUZZ_SECONDS:-60}"
node --test tests/js/*.test.mjs
