#!/usr/bin/env node
// Training throughput, WASM against native, in one run: the 10M-parameter configuration of
// bench/train_bench.cpp (dim 384, 6 layers, 6 heads / 3 kv heads, hidden 1024, vocabulary 2048,
// batch 8 x 256 tokens) trained by the same Trainer (src/train/trainer.cpp): natively through
// `qkv train` (build/qkv), and in WASM through the JS API (createTrainer) on the single-thread
// build (1 thread) and the pthreads build (2 threads), all in Node. Both sides time the same
// thing: the sum of the step times (batch sampling, forward, backward, clipping, AdamW).
//
// WASM runs in both SIMD variants: the baseline SIMD128 build and the relaxed-SIMD build (fused
// multiply-add); Node 20 runs the latter behind a V8 flag, which this script sets for itself.
//
//   node bench/bench-train.mjs [--steps N] [--rounds N] [--threads 1,2] [--small] [--only native|wasm]
//                              [--simd both|baseline|relaxed]
//
// Prints tokens/s per configuration and the WASM/native ratio at each thread count.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { createTrainer } from '../src/js/node.js';

setFlagsFromString('--experimental-wasm-relaxed-simd');  // Node 20; on by default from Node 22

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, def) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : def; };
const steps = Number(opt('--steps', '3'));
const rounds = Number(opt('--rounds', '2'));
const only = opt('--only', 'both');  // 'native' | 'wasm' | 'both'
const threadList = opt('--threads', '1,2').split(',').map(Number);
const small = args.includes('--small');
const simdList = { both: ['baseline', 'relaxed'], baseline: ['baseline'], relaxed: ['relaxed'] }[opt('--simd', 'both')];
if (!simdList) throw new Error('--simd must be both, baseline or relaxed');
const native = process.env.QKV_NATIVE_BIN || join(root, 'build', 'qkv');
const tokenizer = join(root, 'models', 'kjv-2m.gguf');  // a 2048-piece tokenizer

const shape = small ? { dim: 192, layers: 4, heads: 6, kvHeads: 6, hiddenDim: 512 }
  : { dim: 384, layers: 6, heads: 6, kvHeads: 3, hiddenDim: 1024 };
const batch = 8, seq = 256;

// Text: words drawn with a fixed generator (the throughput does not depend on the text).
const words = 'the and of to in that he shall unto for i his a lord they be is him not them it with all thou thy'.split(' ');
let x = 1;
let text = '';
for (let i = 0; i < 60000; i++) {
  x = (x * 1103515245 + 12345) >>> 0;
  text += words[(x >>> 8) % words.length] + (i % 17 === 16 ? '.\n' : ' ');
}

const tmp = mkdtempSync(join(tmpdir(), 'qkv-bench-train-'));
process.on('exit', () => rmSync(tmp, { recursive: true, force: true }));
const data = join(tmp, 'text.txt');
writeFileSync(data, text);

function runNative(threads) {
  const conf = join(tmp, `n${threads}.conf`);
  writeFileSync(conf, [
    `dim = ${shape.dim}`, `n_layers = ${shape.layers}`, `n_heads = ${shape.heads}`, `n_kv_heads = ${shape.kvHeads}`,
    `hidden_dim = ${shape.hiddenDim}`, `seq_len = ${seq}`, `batch = ${batch}`, `steps = ${steps}`, 'warmup = 1',
    'lr = 1e-3', 'seed = 1', 'val_fraction = 0', 'eval_interval = 0', `log_interval = ${steps}`, `threads = ${threads}`,
    `data = ${data}`, `tokenizer = ${tokenizer}`, `out = ${join(tmp, 'n.gguf')}`, '',
  ].join('\n'));
  // bash's `times` prints the CPU time of its children: the CPU-seconds the training used.
  const r = spawnSync('bash', ['-c', '"$0" train "$1" && times', native, conf], { encoding: 'utf8', timeout: 1800_000 });
  if (r.status !== 0) throw new Error(`qkv train failed: ${r.stderr}`);
  const m = /done: \d+ steps in \S+ \((\d+) tok\/s\)/.exec(r.stderr);
  if (!m) throw new Error(`no throughput in: ${r.stderr}`);
  const params = /([0-9.]+)M parameters/.exec(r.stderr)?.[1];
  const t = r.stdout.trim().split('\n').pop().split(/\s+/).map((x) => { const [mm, ss] = x.split('m'); return Number(mm) * 60 + parseFloat(ss); });
  // CPU time covers the whole process (reading, tokenizing, checkpoint): tokens per CPU-second is a lower bound.
  return { tps: Number(m[1]), cpuTps: (steps * batch * seq) / (t[0] + t[1]), params };
}

async function runWasm(threads, simd) {
  const t = await createTrainer({
    text, tokenizer, shape, seq, batch, steps, warmup: 1, lr: 1e-3, seed: 1, valFraction: 0, threads, simd,
  });
  try {
    let tokens = 0, ms = 0;
    const c0 = process.cpuUsage();
    for (let i = 0; i < steps; i++) {
      const s = await t.step();
      tokens += s.tokens;
      ms += s.ms;
    }
    const c = process.cpuUsage(c0);  // every thread of this process, the pthreads workers included
    return { tps: tokens / (ms / 1000), cpuTps: tokens / ((c.user + c.system) / 1e6), params: (t.info.params / 1e6).toFixed(2), mode: t.info.threading.mode };
  } finally {
    t.dispose();
  }
}

console.log(`training throughput: ${small ? 'small' : '10M'} model (dim ${shape.dim}, ${shape.layers} layers, ${shape.heads}/${shape.kvHeads} heads, ` +
  `hidden ${shape.hiddenDim}, vocab 2048), batch ${batch} x ${seq} tokens, ${steps} steps each; tokens/s = tokens / sum of step times`);
console.log(`best of ${rounds} alternating rounds; wall: tokens / sum of step times; CPU: tokens per CPU-second of all threads`);
console.log('threads | native tok/s wall (CPU) | WASM variant: tok/s wall (CPU), build | WASM / native wall (CPU)');
const best = (a, b) => (!a ? b : { ...b, tps: Math.max(a.tps, b.tps), cpuTps: Math.max(a.cpuTps, b.cpuTps) });
for (const th of threadList) {
  let n = null;
  const w = {};
  for (let r = 0; r < rounds; r++) {
    if (only !== 'wasm') n = best(n, runNative(th));
    if (only !== 'native') for (const v of simdList) w[v] = best(w[v], await runWasm(th, v));
  }
  const f = (x) => (x ? `${x.tps.toFixed(0)} (${x.cpuTps.toFixed(0)})` : '-');
  const rows = only === 'native' ? [null] : simdList;
  for (const v of rows) {
    const x = v ? w[v] : null;
    console.log(`${String(th).padStart(7)} | ${f(n).padStart(23)} | ${(v ?? '-').padEnd(8)}: ${f(x).padStart(12)}, ${x?.mode ?? '-'} | ` +
      (n && x ? `${(x.tps / n.tps).toFixed(2)} (${(x.cpuTps / n.cpuTps).toFixed(2)})` : '-') + `  [${(x ?? n).params}M parameters]`);
  }
}
console.log('(the same Trainer code on both sides; native: -march=native, WASM: SIMD128 or relaxed SIMD. Timings on a shared machine are noisy: compare the ratios of one run.)');
