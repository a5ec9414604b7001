// The stored-type integer kernels (Q8_0, Q4_0, Q4_K, Q6_K; activations quantized per call) timed
// in headless Chromium's WebAssembly engine, 1 thread: decode (one token) against a matrix in
// cache and one out of it, and a 64-token prefill; the f32 product of a 64-token prefill (the
// packed-token kernel) at the 110M shape's two matrix shapes, with the tile height the build
// picks (f32) and with each kept (f32-r4, f32-r6); then decode attention (attention_flash, the
// 110M shape: 12 heads of 64 against 320 cached positions) over one layer's cache ("attn-1l",
// in cache) and twelve layers' in turn ("attn-12l", out of it). A benchmark (prints GFLOP/s),
// not a test.
//
//   node bench/bench-kernels-chromium.mjs [--rounds 15] [--only f32,q8_0] [BUILD.mjs ...]
//
// --only keeps the cases of the listed types (q8_0, q4_0, q4_k, q6_k, f32, f32-r4, f32-r6, attn-1l, attn-12l,
// q8_0-dram, q4_0-dram, q4_k-dram, q6_k-dram, q4_0-layers, q8_0-layers; TYPE-tile and TYPE-gemm,
// the 64-token prefill with the grouped tile or the packed GEMM kept, for all eight integer types;
// q4_k-ktile, q5_k-ktile, q6_k-ktile: that prefill through the super-block kernel's tile over the
// stored rows, q4_k-kpanel, q5_k-kpanel, q6_k-kpanel: over rows decoded once per token block; f32-dec and
// f32-dec-dram: f32 decode, matvec_f32_simd, in and out of cache).
//
// With no BUILD, it runs build-wasm/qkv_kernel_bench_web.mjs (`cmake --build build-wasm --target
// qkv_kernel_bench_web`; build-wasm-relaxed/ has the relaxed-SIMD kernels). Given
// several builds (say one built from a branch and one from main, anywhere on disk), it runs
// them in one page and alternates them case by case, so the columns compare on a noisy machine.
//
// Why in the browser: V8 in Node 20 and in Chromium lower SIMD128 differently (a kernel change
// measured 20% faster in one and slower in the other), and Chromium is where the targets are.
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { launchBrowser } from '../tests/js/browser.mjs';
import { serveBenchPage } from './bench-server.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
let rounds = 15;
let only = null;
const builds = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--rounds') {
    rounds = Number(args[++i]);
    if (!Number.isInteger(rounds) || rounds < 1 || rounds > 1000) {
      console.error('bench-kernels-chromium: --rounds takes an integer from 1 to 1000');
      process.exit(2);
    }
  } else if (args[i] === '--only') {
    only = String(args[++i] ?? '').split(',').filter(Boolean);
    if (only.length === 0) {
      console.error('bench-kernels-chromium: --only takes a comma-separated list of case types (say f32,q8_0)');
      process.exit(2);
    }
  } else if (args[i].startsWith('-')) {
    console.error(`bench-kernels-chromium: unknown option ${args[i]}; usage: node bench/bench-kernels-chromium.mjs [--rounds N] [--only TYPES] [BUILD.mjs ...]`);
    process.exit(2);
  } else {
    builds.push(resolve(args[i]));
  }
}
if (builds.length === 0 && existsSync(join(root, 'build-wasm', 'qkv_kernel_bench_web.mjs')))
  builds.push(join(root, 'build-wasm', 'qkv_kernel_bench_web.mjs'));
if (builds.length === 0) {
  console.error('bench-kernels-chromium: no build found; run: cmake --build build-wasm --target qkv_kernel_bench_web');
  process.exit(2);
}
for (const b of builds)
  if (!existsSync(b) || !existsSync(b.replace(/\.mjs$/, '.wasm'))) {
    console.error(`bench-kernels-chromium: ${b} (and its .wasm beside it) not found`);
    process.exit(2);
  }

// Each build's folder is linked into one served folder (b0/, b1/, ...): the module finds its
// .wasm beside itself.
const served = mkdtempSync(join(tmpdir(), 'qkv-kbench-'));
const urls = builds.map((b, i) => {
  symlinkSync(dirname(b), join(served, `b${i}`));
  return `/models/b${i}/${basename(b)}`;
});
const { server, base } = await serveBenchPage({ root, modelDir: served, title: 'qkv kernels', script: '/qkv/bench/kernels-page.mjs' });
const browser = await launchBrowser();
let out;
try {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(base);
  await page.waitForFunction(() => window.benchReady === true, null, { timeout: 60000 });
  out = await page.evaluate((cfg) => window.benchKernels(cfg), { builds: urls, rounds, only }).catch((e) => {
    throw new Error(`${String(e.message || e).split('\n')[0]}${errors.length ? ` (${errors[0]})` : ''}`);
  });
} finally {
  await browser.close();
  server.close();
  rmSync(served, { recursive: true, force: true });
}

const names = builds.map((b) => `${basename(dirname(b))}/${basename(b)}`);
console.log(`kernels, 1 thread, GFLOP/s, best of ${rounds} alternating rounds (${out.userAgent.match(/Chrome\/[\d.]+/)?.[0] ?? 'Chromium'})\n`);
names.forEach((n, i) => console.log(`  [${i}] ${n}`));
console.log('\n' + ['type', 'd x n', 'tokens', ...names.map((_, i) => `[${i}]`)].map((s, k) => (k < 2 ? s.padEnd(12) : s.padStart(8))).join(''));
out.cases.forEach((c, k) => {
  if (out.best[0][k] === null) return;  // left out by --only
  const cells = out.best.map((b) => (c.flops / b[k] * 1e-9).toFixed(1));
  console.log([c.type, `${c.d}x${c.n}`, String(c.tokens), ...cells].map((s, j) => (j < 2 ? s.padEnd(12) : s.padStart(8))).join(''));
});
