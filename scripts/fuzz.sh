#!/usr/bin/env bash
# Fuzzes what qkv reads from untrusted sources with libFuzzer under AddressSanitizer +
# UndefinedBehaviorSanitizer for a bounded time; fails on any crash, leak, sanitizer report,
# per-input timeout or allocation beyond the memory limit. Three targets share the time:
#   loaders (tests/fuzz/fuzz_loaders.cpp): model and tokenizer files (GGUF, llama2.c, t5);
#   text (tests/fuzz/fuzz_text.cpp): chat templates through the Jinja runtime, and arbitrary
#     text through the real vocabularies' tokenizers;
#   images (tests/fuzz/fuzz_images.cpp): PNG, JPEG and PPM files through the image decoders.
#
#   bash scripts/fuzz.sh [SECONDS]    default 60 in all; a step of scripts/test.sh
#
# Builds with clang into build-fuzz/ (its own CMake tree: the main build is g++). Each target
# starts from its seeds (written by qkv's own writers into build-fuzz/seeds-TARGET), the corpus
# committed in tests/fuzz/corpus/TARGET (what earlier long runs found: scripts/fuzz-long.sh) and
# what local runs found (build-fuzz/corpus-TARGET, kept across runs). A failing input is saved as
# build-fuzz/artifacts/crash-* (replay: build-fuzz/qkv_fuzz[_text] FILE).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
secs="${1:-60}"
case "$secs" in ''|*[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, got '$secs'" >&2; exit 2 ;; esac
source scripts/fuzz-common.sh
fuzz_build
third=$(( secs / 3 ))
fuzz_run loaders "$third"
fuzz_run text "$third"
fuzz_run images "$(( secs - 2 * third ))"
echo "[fuzz] no crash, leak, sanitizer report or timeout in ${secs}s" >&2
