#!/usr/bin/env bash
# Fuzzes the model and tokenizer readers (tests/fuzz/fuzz_loaders.cpp) with libFuzzer under
# AddressSanitizer + UndefinedBehaviorSanitizer for a bounded time; fails on any crash, leak,
# sanitizer report, per-input timeout or allocation beyond the memory limit.
#
#   bash scripts/fuzz.sh [SECONDS]    default 60; a step of scripts/test.sh
#
# Builds with clang into build-fuzz/ (its own CMake tree: the main build is g++). The seed corpus
# is written by qkv's own writers (llama2.c + tokenizer.bin, GGUF in every writable type) into
# build-fuzz/seeds; what the fuzzer finds new goes to build-fuzz/corpus and is kept across
# runs; a failing input is saved as build-fuzz/artifacts/crash-* (replay: build-fuzz/qkv_fuzz FILE).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
secs="${1:-60}"
case "$secs" in ''|*[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, got '$secs'" >&2; exit 2 ;; esac
cxx="$(command -v clang++-14 || command -v clang++ || true)"
[ -n "$cxx" ] || { echo "fuzz.sh: clang++ not found (scripts/setup.sh installs clang-14)" >&2; exit 1; }
out=build-fuzz
[ -f "$out/CMakeCache.txt" ] || CXX="$cxx" cmake -S . -B "$out" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DQKV_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
cmake --build "$out" --target qkv_fuzz -j"$(nproc 2>/dev/null || echo 2)" >/dev/null
rm -rf "$out/seeds" && mkdir -p "$out/seeds" "$out/corpus" "$out/artifacts"
QKV_FUZZ_WRITE_SEEDS="$out/seeds" "$out/qkv_fuzz" 2>/dev/null
echo "[fuzz] $(ls "$out/seeds" | wc -l) seeds, $(ls "$out/corpus" | wc -l) inputs kept from earlier runs; fuzzing for ${secs}s" >&2
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
"$out/qkv_fuzz" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=131072 \
  -dict=tests/fuzz/gguf.dict -use_value_profile=1 -artifact_prefix="$out/artifacts/" -print_final_stats=1 "$out/corpus" "$out/seeds" 2>"$out/fuzz.log" || {
  rc=$?
  grep -E "ERROR|SUMMARY|runtime error|Test unit written|==[0-9]+==" "$out/fuzz.log" | head -20 >&2
  echo "[fuzz] FAILED (exit $rc); full log: $out/fuzz.log" >&2
  exit 1
}
grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^Done" "$out/fuzz.log" >&2 || true
echo "[fuzz] no crash, leak, sanitizer report or timeout in ${secs}s" >&2
