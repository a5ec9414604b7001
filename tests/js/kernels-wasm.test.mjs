// The kernel tests (tests/native/kernels/, the same GoogleTest files the native suite runs)
// compiled to WebAssembly and run in Node: the SIMD128 paths, which the native build never runs.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const tests = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'build-wasm', 'qkv_kernel_tests.cjs');

test('WASM SIMD128 kernels pass the native kernel tests', { skip: !existsSync(tests) && 'build-wasm/qkv_kernel_tests.cjs not built (scripts/build.sh wasm)' }, () => {
  // Brief output: a full gtest log (~100 KB) through the pipe was seen cut short, with status 0,
  // on a loaded machine; failures are still printed in full.
  const r = spawnSync(process.execPath, [tests, '--gtest_brief=1'], { encoding: 'utf8', maxBuffer: 1 << 26 });
  assert.equal(r.status, 0, r.stdout.slice(-20000) + r.stderr);
  assert.match(r.stdout, /kernels compiled for wasm,/, 'the SIMD128 build');
  assert.match(r.stdout, /^\[  PASSED  \] \d+ tests/m, r.stdout.slice(-4000));
  assert.doesNotMatch(r.stdout, /^\[  FAILED  \]/m);
});
