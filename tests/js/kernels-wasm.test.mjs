// The WASM SIMD128 kernels (integer dot products of every block type with 8-bit activations,
// f16 conversion) against their scalar references, compiled to WebAssembly and run in Node:
// the native test suite only ever runs the x86 paths.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const check = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'build-wasm', 'qkv_kernel_check.cjs');

test('WASM SIMD128 kernels match their scalar references', { skip: !existsSync(check) && 'build-wasm/qkv_kernel_check.cjs not built (scripts/build.sh wasm)' }, () => {
  const r = spawnSync(process.execPath, [check], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /^ok wasm-simd128 /m, r.stdout);
});
