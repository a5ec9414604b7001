#!/usr/bin/env node
// npm's prepack step: refuses to pack a tree whose WASM builds are missing, so a package without
// its engine cannot be published by accident. Checks every dist/ file that package.json ships.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const wanted = (pkg.files ?? []).filter((f) => f.startsWith('dist/'));
const missing = wanted.filter((f) => !existsSync(join(root, f)));
if (wanted.length === 0 || missing.length > 0) {
  console.error(`qkv: refusing to pack: the WASM build is incomplete (${missing.length} of ${wanted.length} dist/ files ` +
    `missing: ${missing.join(', ')}).\nBuild it first: bash scripts/build.sh wasm`);
  process.exit(1);
}
