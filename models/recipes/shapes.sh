#!/usr/bin/env bash
# Reproduces models/shapes-vit.gguf, the shipped image classifier: a small Vision Transformer
# trained by qkv on shapes it draws itself (src/train/shapes.cpp, seeded; held-out images from a
# separate stream), so the recipe needs nothing but a native build. Extra key=value arguments
# override models/recipes/shapes.conf (e.g. steps=100 out=/tmp/shapes-test.gguf).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
bash scripts/build.sh native >/dev/null
mkdir -p build/shapes
# nice: other work on the machine stays responsive; training still uses both cores.
nice -n 10 ./build/qkv train models/recipes/shapes.conf "$@" 2>&1 | tee build/shapes/train.log
