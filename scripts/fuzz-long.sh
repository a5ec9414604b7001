#!/usr/bin/env bash
# A long fuzzing run whose finds are kept: each target runs for SECONDS (default 1800) from
# everything found so far, then the committed corpus tests/fuzz/corpus/TARGET is rebuilt as the
# smallest set of inputs that covers all it covered plus what this run found (libFuzzer's
# -merge=1; inputs are named by their SHA-1, so duplicates cannot occur; text inputs are cut to
# 2 KB there). Commit the changes
# under tests/fuzz/corpus/ so that the next run, and the 60 s CI run, start from there.
#
#   bash scripts/fuzz-long.sh [SECONDS] [TARGET...]    targets: loaders text images (default all)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
secs="${1:-1800}"
case "$secs" in ''|*[!0-9]*) echo "fuzz-long.sh: SECONDS must be a whole number, got '$secs'" >&2; exit 2 ;; esac
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(loaders text images)
source scripts/fuzz-common.sh
fuzz_build
for t in "${targets[@]}"; do
  case "$t" in loaders|text|images) ;; *) echo "fuzz-long.sh: unknown target '$t' (loaders, text, images)" >&2; exit 2 ;; esac
  fuzz_run "$t" "$secs"
  merged="$out/merged-$t"
  rm -rf "$merged" && mkdir -p "$merged"
  # Inputs kept in the repository are cut to 2 KB (loaders: the whole bound), keeping it small.
  keep_len=2048
  [ "$t" = loaders ] && keep_len="$(fuzz_max_len "$t")"
  "$(fuzz_bin "$t")" -merge=1 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len="$keep_len" \
    "$merged" "tests/fuzz/corpus/$t" "$out/corpus-$t" "$out/seeds-$t" 2>"$out/merge-$t.log"
  rm -rf "tests/fuzz/corpus/$t" && mv "$merged" "tests/fuzz/corpus/$t"
  echo "[fuzz] $t: tests/fuzz/corpus/$t now holds $(ls "tests/fuzz/corpus/$t" | wc -l) inputs," \
    "$(cat "tests/fuzz/corpus/$t"/* | wc -c) bytes" >&2
done
