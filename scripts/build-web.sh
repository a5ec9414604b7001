#!/usr/bin/env bash
# Builds the static web demo into web/dist/: a folder any static host can serve.
#
#   web/dist/index.html, app.js, *.js, style.css, _headers   the page (from web/)
#   web/dist/qkv/src/js/*.js                                  the npm package's JS API
#   web/dist/qkv/src/webgpu/*.wgsl                            its WebGPU shaders (fetched relative to src/js)
#   web/dist/qkv/dist/qkv{,-mt}{,-relaxed}.{mjs,wasm}, *.worker.js  the WASM builds (src/js -> ../../dist)
#   web/dist/models/default.json + the default model and its tokenizer
#   web/dist/models/index.json + the other models/*.gguf (the demo's list of built-in models)
#   web/dist/models/images.json + every image model of models/ (clip-arch GGUF: the image panel's
#                                 list; a random-weight fixture classifier when there is none)
#
# The default model is the first models/*.gguf of the repository (qkv's own, e.g. models/kjv-2m.gguf:
# a GGUF carries its tokenizer), else the first models/NAME.bin that has a tokenizer beside it
# (models/NAME.tokenizer.bin, models/NAME-tokenizer.bin or models/tokenizer.bin); otherwise
# the test fixture ../shared/models/aidreams260K.bin with aidreams-tok512.bin (copied into this
# ignored build output only). A models/NAME.json beside the model gives its name, description,
# licence and prompt; a sidecar with "default": false (e.g. the encoder-decoder dates model) is
# never the default, only listed. QKV_MODEL=... (and QKV_TOKENIZER=... for a .bin) override the choice.
#
# Idempotent: files are copied only when their content changed, and files that no longer
# belong to the site are removed. Set QKV_SKIP_WASM_BUILD=1 to reuse dist/ as it is.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out=web/dist
log() { printf '[build-web] %s\n' "$*" >&2; }

if [ "${QKV_SKIP_WASM_BUILD:-0}" != 1 ]; then
  bash scripts/build.sh wasm >/dev/null
fi
for f in qkv.mjs qkv.wasm qkv-mt.mjs qkv-mt.wasm qkv-mt.worker.js qkv-relaxed.mjs qkv-relaxed.wasm qkv-mt-relaxed.mjs qkv-mt-relaxed.wasm qkv-mt-relaxed.worker.js package.json; do
  [ -f "dist/$f" ] || { log "error: dist/$f is missing (bash scripts/build.sh wasm failed?)"; exit 1; }
done

# --- the default model -------------------------------------------------------------
model="${QKV_MODEL:-}" tok="${QKV_TOKENIZER:-}" desc="" license="" prompt="" sidecar=""
# Image models (GGUF with general.architecture "clip": classifiers and mmproj encoders) go to the
# image panel's list (models/images.json), never to the text models'.
is_image_model() { [ "$(head -c 65536 "$1" | grep -ac 'clip\.vision\.')" != 0 ]; }  # -c reads it all: no SIGPIPE under pipefail
if [ -z "$model" ]; then
  for m in models/*.gguf; do
    [ -f "$m" ] || continue
    if is_image_model "$m"; then continue; fi
    if [ -f "${m%.gguf}.json" ] && grep -q '"default": *false' "${m%.gguf}.json"; then continue; fi
    model="$m"
    if [ -f "${m%.gguf}.json" ]; then sidecar="${m%.gguf}.json"; fi
    break
  done
fi
if [ -z "$model" ]; then
  for m in models/*.bin; do
    [ -f "$m" ] || continue
    case "$(basename "$m")" in *tok*) continue ;; esac
    stem="${m%.bin}"
    for t in "$stem.tokenizer.bin" "$stem-tokenizer.bin" "$stem.tok.bin" models/tokenizer.bin; do
      if [ -f "$t" ]; then model="$m" tok="$t"; break 2; fi
    done
  done
  if [ -n "$model" ] && [ -f "${model%.bin}.json" ]; then sidecar="${model%.bin}.json"; fi
fi
if [ -z "$model" ]; then
  model=../shared/models/aidreams260K.bin
  tok=../shared/models/aidreams-tok512.bin
  desc='Llama-2 architecture, 260K parameters (dim 64, 4 layers, 4 heads, vocabulary 512, context 128), trained on about 2000 short "AI dream" texts. A test fixture of this repository (../shared/models), standing in until qkv ships a model it trained itself.'
  license='Not stated by its source (the public ai-dreamer-esp32-s3 project); see ../shared/models/README.md. For trying the engine only.'
  prompt='I dream of'
fi
case "$model" in
  *.gguf) ;;  # carries its tokenizer
  *) [ -n "$tok" ] || { log "error: QKV_MODEL is set but QKV_TOKENIZER is not (a .bin model needs its tokenizer)"; exit 1; } ;;
esac
[ -f "$model" ] || { log "error: default model $model not found"; exit 1; }
[ -z "$tok" ] || [ -f "$tok" ] || { log "error: tokenizer $tok not found"; exit 1; }

# --- copy with change detection ---------------------------------------------------------
declare -A keep=()
changed=0
put() {  # put SRC DEST-relative-to-out
  local src="$1" dst="$out/$2"
  keep["$dst"]=1
  if [ ! -f "$dst" ] || ! cmp -s "$src" "$dst"; then
    mkdir -p "$(dirname "$dst")"
    cp "$src" "$dst.tmp" && chmod 644 "$dst.tmp" && mv -f "$dst.tmp" "$dst"
    changed=$((changed + 1))
  fi
}

mkdir -p "$out"
for f in web/*.html web/*.js web/*.css web/_headers; do
  [ -f "$f" ] && put "$f" "$(basename "$f")"
done
for f in src/js/*.js; do put "$f" "qkv/src/js/$(basename "$f")"; done
for f in src/webgpu/*.wgsl; do put "$f" "qkv/src/webgpu/$(basename "$f")"; done
for f in qkv.mjs qkv.wasm qkv-mt.mjs qkv-mt.wasm qkv-mt.worker.js qkv-relaxed.mjs qkv-relaxed.wasm qkv-mt-relaxed.mjs qkv-mt-relaxed.wasm qkv-mt-relaxed.worker.js package.json; do put "dist/$f" "qkv/dist/$f"; done
put package.json qkv/package.json

mname="$(basename "$model")" tname=""
put "$model" "models/$mname"
if [ -n "$tok" ]; then
  tname="$(basename "$tok")"
  [ "$mname" != "$tname" ] || tname="tokenizer-$tname"
  put "$tok" "models/$tname"
fi

manifest="$(mktemp)" index="$(mktemp)"
trap 'rm -f "$manifest" "$index"' EXIT
# manifest MODEL TOKENIZER MODEL-NAME TOKENIZER-NAME DESC LICENSE PROMPT SIDECAR: one model's JSON.
manifest() {
  node - "$@" <<'EOF'
const fs = require('node:fs');
const crypto = require('node:crypto');
const [model, tok, mname, tname, desc, license, prompt, sidecar] = process.argv.slice(2);
const extra = sidecar ? JSON.parse(fs.readFileSync(sidecar, 'utf8')) : {};
const sha = (p) => crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex');
const name = extra.name || mname.replace(/\.(bin|gguf)$/, '');
const manifest = {
  name,
  model: mname,
  tokenizer: tname || null,  // null: the model file carries its tokenizer (GGUF)
  description: extra.description || desc || `${name} (from ${model})`,
  license: extra.license || license || 'see the model\'s source',
  prompt: extra.prompt || prompt || 'Once upon a time',
  sampling: extra.sampling ?? null,  // the demo's sampling defaults for this model (null: the page's)
  modelBytes: fs.statSync(model).size,
  tokenizerBytes: tok ? fs.statSync(tok).size : 0,
  modelSha256: sha(model),
  tokenizerSha256: tok ? sha(tok) : null,
};
process.stdout.write(JSON.stringify(manifest, null, 2) + '\n');
EOF
}
manifest "$model" "$tok" "$mname" "$tname" "$desc" "$license" "$prompt" "$sidecar" >"$manifest"
put "$manifest" models/default.json

# The built-in models: the default first, then every other models/*.gguf (with its sidecar).
{
  printf '[\n'
  cat "$manifest"
  for m in models/*.gguf; do
    [ -f "$m" ] || continue
    [ "$m" != "$model" ] || continue
    if is_image_model "$m"; then continue; fi
    put "$m" "models/$(basename "$m")"
    side=""
    if [ -f "${m%.gguf}.json" ]; then side="${m%.gguf}.json"; fi
    printf ',\n'
    manifest "$m" "" "$(basename "$m")" "" "" "" "" "$side"
  done
  printf ']\n'
} >"$index"
put "$index" models/index.json

# The image panel's models: every image model of models/ (with its sidecar), else a random-weight
# classifier from the test-model maker (build/qkv_test_models, when built) standing in for one.
images="$(mktemp)" fixture=""
trap 'rm -f "$manifest" "$index" "$images" "$fixture"' EXIT
{
  printf '['
  sep=""
  for m in models/*.gguf; do
    [ -f "$m" ] && is_image_model "$m" || continue
    put "$m" "models/$(basename "$m")"
    side=""
    if [ -f "${m%.gguf}.json" ]; then side="${m%.gguf}.json"; fi
    printf '%s\n' "$sep"
    manifest "$m" "" "$(basename "$m")" "" "" "" "" "$side"
    sep=","
  done
  if [ -z "$sep" ] && [ -x build/qkv_test_models ]; then
    fixture="$(mktemp --suffix=.gguf)"
    build/qkv_test_models --image-classifier "$fixture"
    put "$fixture" models/test-image-classifier.gguf
    printf '\n'
    manifest "$fixture" "" test-image-classifier.gguf "" \
      "A random-weight ViT classifier (CLIP layout, 32 x 32 pixels in 8 x 8 patches, 5 labels): a test fixture standing in until a trained image model is in models/. Its classes mean nothing; its attention is real." \
      "Test fixture of this repository." "" ""
  fi
  printf ']\n'
} >"$images"
[ -n "$sep" ] || [ -n "$fixture" ] || log "no image model (models/*.gguf with clip.vision.* keys) and no build/qkv_test_models: the image panel will say so"
put "$images" models/images.json

# Remove what no longer belongs to the site (an old default model, a deleted module).
removed=0
while IFS= read -r -d '' f; do
  if [ -z "${keep[$f]:-}" ]; then rm -f "$f"; removed=$((removed + 1)); fi
done < <(find "$out" -type f -print0)
find "$out" -mindepth 1 -type d -empty -delete

log "web/dist ready ($changed file(s) updated, $removed removed; default model $mname)"
