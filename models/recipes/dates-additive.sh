#!/usr/bin/env bash
# Reproduces models/dates-encdec-additive.gguf: the dates translator (dates.sh) with additive
# cross-attention. Extra key=value arguments override models/recipes/dates-additive.conf.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
bash scripts/build.sh native >/dev/null
mkdir -p build/dates
nice -n 10 ./build/qkv train models/recipes/dates-additive.conf "$@" 2>&1 | tee build/dates/train-additive.log
