#!/usr/bin/env bash
# Reproduces models/kjv-2m.gguf, the demo's default model, from nothing but Debian's public-domain
# King James Bible (package bible-kjv): text -> BPE tokenizer (2048 pieces) -> 1800 training steps.
# About 45 minutes on the 2-core development machine (shared with other work; 1,400 tokens/s). Extra key=value arguments override
# models/recipes/kjv.conf (e.g. steps=100 out=/tmp/kjv-test.gguf state=/tmp/kjv-test.state).
# An interrupted run resumes from its state file (build/kjv/kjv-2m.state) where it stopped.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v bible >/dev/null; then
  echo "[kjv] apt-get install bible-kjv" >&2
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq bible-kjv >/dev/null
fi
bash scripts/build.sh native >/dev/null

mkdir -p build/kjv
# `bible -f` prints one verse per line as "Ge1:1 In the beginning ...". Keep the verse text, one
# verse per line, and a blank line between chapters (each chapter becomes one document that
# starts with BOS).
bible -f Gen1:1-Rev22:21 |
  awk '{ ref = $1; sub(/^[^ ]+ /, ""); split(ref, a, ":"); if (NR > 1 && a[1] != prev) print ""; print; prev = a[1] }' \
  > build/kjv/kjv.txt
echo "[kjv] text: $(wc -l < build/kjv/kjv.txt) lines, $(wc -c < build/kjv/kjv.txt) bytes, sha256 $(sha256sum build/kjv/kjv.txt | cut -c1-16)" >&2

./build/qkv train-tokenizer build/kjv/kjv.txt --vocab 2048 --out build/kjv/kjv-tok.gguf
# nice: other work on the machine stays responsive; training still uses both cores.
nice -n 10 ./build/qkv train models/recipes/kjv.conf "$@" 2>&1 | tee build/kjv/train.log
