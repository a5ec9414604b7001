#!/usr/bin/env bash
# The main job: set up, build the web demo (web/dist) and serve it; see usage() below.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

usage() {
  cat <<'USAGE'
Usage: bash scripts/demo.sh [--no-isolation] [--open]
       bash scripts/demo.sh cli [qkv run flags]

Serves qkv's web demo on http://127.0.0.1:8080/ (PORT=N to change it; 0 = any free port) with
the COOP/COEP headers that enable WebAssembly threads. The page loads the default model by itself.
Runs until Ctrl-C. On a fresh machine it first installs what is missing (scripts/setup.sh) and
builds the page (scripts/build-web.sh); once built, it serves the page straight away.

  --no-isolation   serve without COOP/COEP (the page then runs single-threaded)
  --open           also open the page in the default browser (xdg-open / open)
  -h, --help       this text

  cli [FLAGS]      generate in the terminal with the native CLI instead, e.g.
                   bash scripts/demo.sh cli -i "In the beginning" -n 100 -t 0.8
                   (qkv run flags; `cli` may be left out when the first flag is one of them)
USAGE
}

# Installs what is missing (apt, xsimd, npm) only when a tool the build needs is not there.
setup_if_needed() {
  if ! command -v node >/dev/null || ! command -v cmake >/dev/null || ! command -v g++ >/dev/null ||
     ! command -v em++ >/dev/null || [ ! -f .deps/xsimd/include/xsimd/xsimd.hpp ] || [ ! -d node_modules ]; then
    bash scripts/setup.sh
  fi
}


# --- terminal mode: the native CLI on the default model (what this script did before the web demo) ---
if [ "${1:-}" = cli ] || [[ "${1:-}" =~ ^-[inptskz]$ ]] || [ "${1:-}" = --min-p ] || [ "${1:-}" = --repeat-penalty ] ||
   [ "${1:-}" = --threads ] || [ "${1:-}" = --ctx ]; then
  [ "${1:-}" != cli ] || shift
  if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then usage; exit 0; fi
  setup_if_needed
  bash scripts/build.sh native >/dev/null
  # The default: qkv's own model (models/*.gguf, tokenizer inside; not one whose NAME.json says
  # "default": false, as the encoder-decoder dates model's does), else the test fixture.
  gguf=""
  for m in models/*.gguf; do
    [ -f "$m" ] || continue
    if [ -f "${m%.gguf}.json" ] && grep -q '"default": *false' "${m%.gguf}.json"; then continue; fi
    gguf="$m"
    break
  done
  if [ -z "${QKV_MODEL:-}" ] && [ -n "$gguf" ]; then
    if [ $# -eq 0 ]; then set -- -i "In the beginning" -n 128 -t 0.8; fi
    exec ./build/qkv run "$gguf" "$@"
  fi
  model="${QKV_MODEL:-../shared/models/aidreams260K.bin}"
  tok="${QKV_TOKENIZER:-../shared/models/aidreams-tok512.bin}"
  if [ $# -eq 0 ]; then set -- -i "I dream of" -n 128 -t 0.8; fi
  exec ./build/qkv run "$model" -z "$tok" "$@"
fi

# --- web mode ----------------------------------------------------------------------------
isolation=1 open=0
for a in "$@"; do
  case "$a" in
    --no-isolation) isolation=0 ;;
    --open) open=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "demo.sh: unknown argument '$a' (see --help)" >&2; exit 2 ;;
  esac
done

# The page is rebuilt only when something it is built from changed since the last build (the
# stamp); a fresh checkout has no stamp, so it is set up and built.
stamp=build/web-demo.stamp
if [ ! -f web/dist/index.html ] || [ ! -f "$stamp" ] ||
   [ -n "$(find src bindings web models scripts/build-web.sh CMakeLists.txt package.json -newer "$stamp" \
           -not -path 'web/dist/*' -type f -print -quit 2>/dev/null)" ]; then
  setup_if_needed
  bash scripts/build-web.sh
  mkdir -p build && touch "$stamp"
fi

export QKV_DEMO_PORT="${PORT:-8080}" QKV_DEMO_ISOLATION="$isolation" QKV_DEMO_OPEN="$open"
exec node --input-type=module - <<'EOF'
// Serves web/dist with tests/js/server.mjs; if the port is taken, the next free one is used.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { startServer } from './tests/js/server.mjs';

const want = Number(process.env.QKV_DEMO_PORT);
const coopCoep = process.env.QKV_DEMO_ISOLATION === '1';
if (!Number.isInteger(want) || want < 0 || want > 65535) {
  console.error(`demo.sh: PORT must be a port number, got '${process.env.QKV_DEMO_PORT}'`);
  process.exit(2);
}
let srv = null;
for (let port = want; !srv; port++) {
  try {
    srv = await startServer('web/dist', { port, coopCoep });
  } catch (e) {
    if (e.code !== 'EADDRINUSE' || want === 0 || port >= want + 20) {
      console.error(`demo.sh: cannot serve on 127.0.0.1:${port}: ${e.message}`);
      process.exit(1);
    }
    console.error(`demo.sh: port ${port} is in use, trying ${port + 1}`);
  }
}
const manifest = JSON.parse(readFileSync('web/dist/models/default.json', 'utf8'));
const line = '-'.repeat(Math.max(40, srv.url.length + 8));
process.stdout.write(`${line}\n  qkv web demo:  ${srv.url}\n${line}\n` +
  `  open it in a browser; the default model (${manifest.name}) loads by itself.\n` +
  `  threads: ${coopCoep ? 'on (COOP/COEP headers sent)' : 'off (--no-isolation: single-threaded)'}\n` +
  `  serving web/dist; Ctrl-C stops.\n`);
if (process.env.QKV_DEMO_OPEN === '1') {
  const opener = process.platform === 'darwin' ? 'open' : 'xdg-open';
  spawn(opener, [srv.url], { stdio: 'ignore', detached: true }).on('error', () =>
    console.error(`demo.sh: could not run ${opener}; open ${srv.url} yourself`)).unref();
}
const stop = () => { srv.close().then(() => process.exit(0)); };
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
EOF
