// WebGPU attention benchmark (not a test). Attention only: WebGPU (src/js/webgpu.js) against the
// WASM kernel (attention_flash, the engine's own) at 1 and 2 threads, for prefill (nQ = nKv = 512,
// 2048, 8192; WebGPU time includes the upload and readback of one call) and decode (nQ = 1 at
// context 512, 2048, 8192, with the keys/values already in the GPU KV cache as the engine keeps
// them: one layer's step, q/k/v up and the output back). Then end to end: tokens/s of a model
// with device 'wasm' and device 'webgpu'.
// Shape: 32 query heads, 8 kv heads, head_dim 128 (Llama-3-8B-like), causal, f32.
// Usage: node bench/bench-webgpu.mjs [--quick] [--full] [--heads H --kv-heads K --dim D]
//                                    [--model PATH [--tokenizer PATH]] [--tokens N]
// In Node without a GPU it re-runs itself on SwiftShader (VK_ICD_FILENAMES); SwiftShader is a CPU
// emulation: its timings check that the code runs, they say nothing about GPU speed (prefill of
// 2048 and 8192 tokens, minutes there, is skipped unless --full).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : def);
const quick = argv.includes('--quick'), full = argv.includes('--full');
const nHeads = Number(opt('--heads', 32)), nKvHeads = Number(opt('--kv-heads', 8)), headDim = Number(opt('--dim', 128));
const ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';
const here = fileURLToPath(import.meta.url);

if (!process.env.VK_ICD_FILENAMES && !process.env.QKV_BENCH_CHILD && existsSync(ICD)) {
  const env = {
    ...process.env, QKV_BENCH_CHILD: '1', VK_ICD_FILENAMES: ICD,
    LD_LIBRARY_PATH: [process.env.LD_LIBRARY_PATH, '/usr/lib/chromium'].filter(Boolean).join(':'),
  };
  const r = spawnSync(process.execPath, [here, ...argv], { env, stdio: 'inherit' });
  process.exit(r.status ?? 1);
}

function inputs(nQ, nKv) {
  let x = 0x2545f491;
  const rand = (n) => {
    const f = new Float32Array(n);
    for (let i = 0; i < n; i++) { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; f[i] = (x >>> 0) / 2147483648 - 1; }
    return f;
  };
  return {
    nQ, nKv, nHeads, nKvHeads, headDim, q: rand(nQ * nHeads * headDim), k: rand(nKv * nKvHeads * headDim),
    v: rand(nKv * nKvHeads * headDim), scale: 1 / Math.sqrt(headDim), qPos0: nKv - nQ, causal: true,
  };
}

async function time(fn, reps) {
  const t0 = performance.now();
  await fn();  // warm-up (pipeline compile); the only sample when reps is 0
  const ts = reps ? [] : [performance.now() - t0];
  for (let r = 0; r < reps; r++) { const t = performance.now(); await fn(); ts.push(performance.now() - t); }
  return ts.sort((a, b) => a - b)[ts.length >> 1];
}

let gpuLabel = 'unavailable', att = null, device = null, gpu = null;
const { createKvCache } = await import('../src/js/webgpu.js');
try {
  const { create, globals } = await import('webgpu');
  Object.assign(globalThis, globals);
  const { requestQkvDevice, createAttention } = await import('../src/js/webgpu.js');
  gpu = create([]);
  let adapterInfo;
  ({ device, adapterInfo } = await requestQkvDevice({ gpu }));
  gpuLabel = `${adapterInfo.vendor} ${adapterInfo.architecture} ${adapterInfo.description}`.trim();
  att = createAttention(device);
} catch (e) {
  console.log(`WebGPU unavailable: ${e.message}`);
}
const { loadWasmModule } = await import('../src/js/wasm-node.mjs');
const { mod } = await loadWasmModule({ threads: 2 });
const swiftshader = /swiftshader/i.test(gpuLabel);
console.log(`qkv WebGPU attention benchmark, node ${process.version}; adapter: ${gpuLabel}`);
console.log(`shape: ${nHeads} heads / ${nKvHeads} kv heads, head_dim ${headDim}, causal, f32; median wall ms`);
if (swiftshader) console.log('NOTE: SwiftShader is a CPU emulation of a GPU: these WebGPU timings are for correctness only.');

const cases = [
  ['prefill', 512, 512], ['prefill', 2048, 2048], ['prefill', 8192, 8192],
  ['decode', 1, 512], ['decode', 1, 2048], ['decode', 1, 8192],
].filter(([kind, nQ]) => !(quick && nQ >= 2048) && !(kind === 'prefill' && nQ >= 2048 && swiftshader && !full));
console.log(`${'case'.padEnd(24)}${'WASM 1T'.padStart(10)}${'WASM 2T'.padStart(10)}${'WebGPU'.padStart(10)}${'2T/GPU'.padStart(9)}`);
for (const [kind, nQ, nKv] of cases) {
  const big = nQ >= 2048;
  const wasm = (threads) => mod.benchAttention(threads, nHeads, nKvHeads, headDim, nKv, nQ, big ? 1 : 3);
  const w1 = wasm(1), w2 = wasm(2);
  let g = NaN;
  if (att) {
    const a = inputs(nQ, nKv);
    if (kind === 'prefill') {
      g = await time(() => att.run(a), big && swiftshader ? 0 : 3);
    } else {
      const cache = createKvCache(device, att, { layers: 1, heads: nHeads, kvHeads: nKvHeads, headDim, context: nKv });
      cache.write(0, a.k, a.v, 0, nKv - 1);
      const kvd = nKvHeads * headDim, last = a.k.subarray((nKv - 1) * kvd);
      g = await time(() => cache.layer(0, { q: a.q, k: last, v: last, rows: 1, pos: nKv - 1 }, () => {}), 5);
      cache.dispose();
    }
  }
  console.log(`${`${kind} nQ=${nQ} ctx=${nKv}`.padEnd(24)}${w1.toFixed(2).padStart(10)}${w2.toFixed(2).padStart(10)}` +
    `${g.toFixed(2).padStart(10)}${(w2 / g).toFixed(2).padStart(8)}x`);
}

// End to end: the same model and prompt with attention in WASM and on WebGPU.
const modelPath = opt('--model', join(here, '..', '..', '..', 'shared', 'models', 'stories260K.bin'));
const tokPath = opt('--tokenizer', modelPath.endsWith('.bin') ? join(modelPath, '..', 'aidreams-tok512.bin') : undefined);
const nTok = Number(opt('--tokens', 128));
if (existsSync(modelPath)) {
  const { loadModel } = await import('../src/js/node.js');
  console.log(`\nend to end: ${modelPath}, greedy, ${nTok} tokens, 2 threads`);
  console.log(`${'device'.padEnd(10)}${'prefill tok/s'.padStart(15)}${'decode tok/s'.padStart(15)}`);
  for (const dev of ['wasm', 'webgpu']) {
    if (dev === 'webgpu' && !att) continue;
    const m = await loadModel(modelPath, { tokenizer: tokPath, threads: 2, device: dev, gpu, onWarning: (w) => console.log(w.message) });
    const s = m.createSession();
    const prompt = 'Once upon a time, '.repeat(8);
    await s.complete(prompt, { temperature: 0, maxTokens: 4 });  // warm-up
    s.reset();
    await s.complete(prompt, { temperature: 0, maxTokens: nTok, stopTokens: [] });
    const g = s.lastGeneration;
    console.log(`${m.info.backend.padEnd(10)}${(g.promptTokens / (g.prefillMs / 1000)).toFixed(1).padStart(15)}` +
      `${(g.generatedTokens / (g.decodeMs / 1000)).toFixed(1).padStart(15)}`);
    m.dispose();
  }
}
process.exit(0);
