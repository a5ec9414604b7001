#!/usr/bin/env bash
# Builds the API reference from types/*.d.ts with TypeDoc (typedoc.json) into build-docs/api, not
# committed; warnings are errors. Extra arguments go to typedoc (e.g. --out DIR); QKV_TYPEDOC_OPTIONS
# names another options file.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x node_modules/.bin/typedoc ] || { echo "api-docs: typedoc missing: run npm install (scripts/setup.sh)" >&2; exit 1; }
exec node node_modules/typedoc/bin/typedoc --options "${QKV_TYPEDOC_OPTIONS:-typedoc.json}" "$@"
