#!/usr/bin/env bash
# Trains the block-sparse KJV decoder (kjv-sparse.conf) and its dense twin (kjv-dense.conf) on
# the text and tokenizer kjv.sh prepares (made here first if missing); their held-out losses are
# in models/README.md. Extra key=value arguments override both configs.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
if ! command -v bible >/dev/null; then
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq bible-kjv >/dev/null
fi
bash scripts/build.sh native >/dev/null
mkdir -p build/kjv
if [ ! -f build/kjv/kjv-tok.gguf ]; then  # as kjv.sh prepares them
  bible -f Gen1:1-Rev22:21 |
    awk '{ ref = $1; sub(/^[^ ]+ /, ""); split(ref, a, ":"); if (NR > 1 && a[1] != prev) print ""; print; prev = a[1] }' \
    > build/kjv/kjv.txt
  ./build/qkv train-tokenizer build/kjv/kjv.txt --vocab 2048 --out build/kjv/kjv-tok.gguf
fi
for twin in sparse dense; do
  nice -n 10 ./build/qkv train "models/recipes/kjv-$twin.conf" "$@" 2>&1 | tee "build/kjv/train-$twin.log"
done
