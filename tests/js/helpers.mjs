// Shared paths and process helpers for the node:test suites.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const shared = resolve(root, '..', 'shared');
export const models = join(shared, 'models');
export const reference = join(shared, 'reference');
export const nativeBin = process.env.QKV_NATIVE_BIN || join(root, 'build', 'qkv');
export const haveNative = existsSync(nativeBin);
export const wasmCli = join(root, 'bin', 'qkv.mjs');

/** Runs the WASM CLI (node bin/qkv.mjs) with args; returns {status, signal, stdout (Buffer), stderr}. */
export function runWasm(args, opts = {}) {
  const r = spawnSync(process.execPath, [wasmCli, ...args], { maxBuffer: 1 << 26, timeout: 120000, ...opts });
  return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr.toString() };
}

/** Runs the native CLI with args. */
export function runNative(args, opts = {}) {
  const r = spawnSync(nativeBin, args, { maxBuffer: 1 << 26, timeout: 120000, ...opts });
  return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr.toString() };
}

/** The reference cases: [reference file, CLI args]. */
export const referenceCases = [
  ['aidreams260K.greedy.i-dream-of.n60.txt',
    [join(models, 'aidreams260K.bin'), '-z', join(models, 'aidreams-tok512.bin'), '-t', '0', '-n', '60', '-i', 'I dream of']],
  ['aidreams260K.t1-p0.9-s42.i-dream-of.n60.txt',
    [join(models, 'aidreams260K.bin'), '-z', join(models, 'aidreams-tok512.bin'), '-t', '1.0', '-p', '0.9', '-s', '42', '-n', '60', '-i', 'I dream of']],
  ['stories260K.greedy.aidreams-tok512.n64.txt',
    [join(models, 'stories260K.bin'), '-z', join(models, 'aidreams-tok512.bin'), '-t', '0', '-n', '64']],
];
