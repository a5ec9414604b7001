#!/usr/bin/env bash
# Applies .clang-format to the tracked C++ sources (src/, bindings/, tests/, bench/), or with
# --check lists the files it would change and fails if there are any (for CI once applied).
# Usage: scripts/format.sh [--check] [FILE...]   (default: every tracked .cpp/.h)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
command -v clang-format >/dev/null || { echo "error: clang-format is not installed (apt-get install clang-format)" >&2; exit 1; }
if [ "$#" -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files 'src/*.cpp' 'src/*.h' 'bindings/*.cpp' 'bindings/*.h' 'tests/*.cpp' 'tests/*.h' \
    'bench/*.cpp' 'bench/*.h')
fi
[ "${#files[@]}" -gt 0 ] || exit 0
if [ "$check" = 1 ]; then
  bad=0
  for f in "${files[@]}"; do
    if ! clang-format --style=file --dry-run -Werror "$f" >/dev/null 2>&1; then echo "$f"; bad=1; fi
  done
  exit "$bad"
fi
clang-format --style=file -i "${files[@]}"
