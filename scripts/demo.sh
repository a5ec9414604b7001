#!/usr/bin/env bash
# The main job: set up, build, and generate text with the native CLI on the default model.
# Extra arguments are passed to `qkv run` (e.g. -i "A prompt" -n 100 -t 0.8).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
bash scripts/build.sh native >/dev/null
model="${QKV_MODEL:-../shared/models/aidreams260K.bin}"
tok="${QKV_TOKENIZER:-../shared/models/aidreams-tok512.bin}"
if [ $# -eq 0 ]; then set -- -i "I dream of" -n 128 -t 0.8; fi
exec ./build/qkv run "$model" -z "$tok" "$@"
