# Shared by scripts/fuzz.sh (the short CI run) and scripts/fuzz-long.sh (long runs that grow the
# committed corpus): building the targets, and running one for a while with its corpora.
out=build-fuzz

fuzz_build() {
  local cxx
  cxx="$(command -v clang++-14 || command -v clang++ || true)"
  [ -n "$cxx" ] || { echo "fuzz: clang++ not found (scripts/setup.sh installs clang-14)" >&2; exit 1; }
  [ -f "$out/CMakeCache.txt" ] || CXX="$cxx" cmake -S . -B "$out" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DQKV_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
  cmake --build "$out" --target qkv_fuzz qkv_fuzz_text qkv_fuzz_images -j"$(nproc 2>/dev/null || echo 2)" >/dev/null
  mkdir -p "$out/artifacts"
}

# The binary, dictionary and input size bound of a target.
fuzz_bin() { case "$1" in loaders) echo "$out/qkv_fuzz" ;; text) echo "$out/qkv_fuzz_text" ;; images) echo "$out/qkv_fuzz_images" ;; esac; }
fuzz_dict() { case "$1" in loaders) echo tests/fuzz/gguf.dict ;; text) echo tests/fuzz/jinja.dict ;; images) echo tests/fuzz/images.dict ;; esac; }
fuzz_max_len() { case "$1" in loaders) echo 131072 ;; text) echo 16384 ;; images) echo 65536 ;; esac; }

# fuzz_run TARGET SECONDS: new finds go to build-fuzz/corpus-TARGET (the first corpus: the only
# one libFuzzer writes); tests/fuzz/corpus/TARGET and the seeds are read. Per input: 10 s, 2 GB
# of RSS, 1 GB in one allocation.
fuzz_run() {
  local t="$1" secs="$2" bin seeds
  bin="$(fuzz_bin "$t")"
  seeds="$out/seeds-$t"
  rm -rf "$seeds" && mkdir -p "$seeds" "$out/corpus-$t" "tests/fuzz/corpus/$t"
  QKV_FUZZ_WRITE_SEEDS="$seeds" "$bin" 2>/dev/null
  echo "[fuzz] $t: $(ls "$seeds" | wc -l) seeds, $(ls "tests/fuzz/corpus/$t" | wc -l) committed and" \
    "$(ls "$out/corpus-$t" | wc -l) local inputs from earlier runs; fuzzing for ${secs}s" >&2
  ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len="$(fuzz_max_len "$t")" \
    -dict="$(fuzz_dict "$t")" -use_value_profile=1 -artifact_prefix="$out/artifacts/" -print_final_stats=1 \
    "$out/corpus-$t" "tests/fuzz/corpus/$t" "$seeds" 2>"$out/fuzz-$t.log" || {
    local rc=$?
    grep -E "ERROR|SUMMARY|runtime error|Test unit written|==[0-9]+==" "$out/fuzz-$t.log" | head -20 >&2
    echo "[fuzz] $t FAILED (exit $rc); full log: $out/fuzz-$t.log" >&2
    exit 1
  }
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^Done" "$out/fuzz-$t.log" >&2 || true
}
