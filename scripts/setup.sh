#!/usr/bin/env bash
# Installs everything a fresh Debian bookworm machine lacks to build and test qkv.
# Idempotent: each step checks first and returns at once when already done.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
deps="$root/.deps"
mkdir -p "$deps"

log() { printf '[setup] %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# --- apt packages --------------------------------------------------------------
need=()
command -v g++ >/dev/null || need+=(g++)
command -v cmake >/dev/null || need+=(cmake)
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
command -v em++ >/dev/null || need+=(emscripten)
[ -f /usr/include/gtest/gtest.h ] || need+=(libgtest-dev)
[ -f /usr/src/googletest/googletest/src/gtest-all.cc ] || need+=(googletest)  # GoogleTest built for WASM (kernel tests)
python3 -c 'import jinja2' 2>/dev/null || need+=(python3-jinja2)  # the reference renderer of chat templates (tests)
command -v chromium >/dev/null || need+=(chromium)  # headless browser tests (driven by playwright-core)
command -v clang++-14 >/dev/null || need+=(clang-14)  # the libFuzzer build (scripts/fuzz.sh)
compgen -G '/usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a' >/dev/null || need+=(libclang-rt-14-dev)
command -v clang-format >/dev/null || need+=(clang-format)  # scripts/format.sh
command -v cjpeg >/dev/null || need+=(libjpeg-turbo-progs)  # the JPEG references (cjpeg, djpeg) of the image decoder tests
command -v pnmtopng >/dev/null || need+=(netpbm)  # PNG encoders of the image decoder tests
[ -x /usr/bin/convert ] || need+=(imagemagick)  # the PNG reference decoder (libpng) of the image decoder tests
if [ "${#need[@]}" -gt 0 ]; then
  log "apt-get install ${need[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${need[@]}" >/dev/null
fi

# --- xsimd >= 13 (with the wasm backend) from Debian trixie, header-only, project-local ---
xs="$deps/xsimd"
if [ ! -f "$xs/include/xsimd/xsimd.hpp" ] || ! grep -q 'XSIMD_VERSION_MAJOR 1[3-9]' "$xs/include/xsimd/config/xsimd_config.hpp" 2>/dev/null; then
  log "fetching libxsimd-dev from Debian trixie into $xs"
  tmp="$(mktemp -d)"
  mkdir -p "$tmp/lists/partial"
  echo "deb http://deb.debian.org/debian trixie main" > "$tmp/sources.list"
  aptopts=(-o Dir::Etc::sourcelist="$tmp/sources.list" -o Dir::Etc::sourceparts=/dev/null
           -o Dir::State::Lists="$tmp/lists" -o APT::Get::List-Cleanup=0)
  apt-get "${aptopts[@]}" update -qq >/dev/null 2>&1
  (cd "$tmp" && apt-get "${aptopts[@]}" download libxsimd-dev >/dev/null 2>&1)
  rm -rf "$tmp/x" && mkdir -p "$tmp/x" && dpkg -x "$tmp"/libxsimd-dev_*.deb "$tmp/x"
  rm -rf "$xs" && mkdir -p "$xs" && cp -r "$tmp/x/usr/include" "$xs/include"
  rm -rf "$tmp"
fi

# --- npm packages (dev only) ------------------------------------------------------
if [ -f "$root/package.json" ] && [ ! -d "$root/node_modules" -o "$root/package.json" -nt "$root/node_modules/.stamp" ]; then
  log "npm install"
  (cd "$root" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
  mkdir -p "$root/node_modules" && touch "$root/node_modules/.stamp"
fi
log "ready"
