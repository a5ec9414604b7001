// WebGPU attention benchmark (not a test): attention-only wall time of src/js/webgpu.js (including
// upload and readback, one submit per call) against a plain JS flash-style CPU baseline, for
// prefill (nQ = nKv = 512, 2048) and decode (nQ = 1 at context 512, 2048, 8192).
// Shape: 32 query heads, 8 kv heads, head_dim 128 (Llama-3-8B-like), causal, f32.
// Usage: node bench/bench-webgpu.mjs [--quick] [--heads H --kv-heads K --dim D]
// In Node without a GPU it re-runs itself on SwiftShader (VK_ICD_FILENAMES); SwiftShader is a CPU
// emulation: its timings check that the code runs, they say nothing about GPU speed.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(name) ? Number(argv[argv.indexOf(name) + 1]) : def);
const quick = argv.includes('--quick');
const nHeads = opt('--heads', 32), nKvHeads = opt('--kv-heads', 8), headDim = opt('--dim', 128);
const ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

if (!process.env.VK_ICD_FILENAMES && !process.env.QKV_BENCH_CHILD && existsSync(ICD)) {
  const env = {
    ...process.env, QKV_BENCH_CHILD: '1', VK_ICD_FILENAMES: ICD,
    LD_LIBRARY_PATH: [process.env.LD_LIBRARY_PATH, '/usr/lib/chromium'].filter(Boolean).join(':'),
  };
  const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), ...argv], { env, stdio: 'inherit' });
  process.exit(r.status ?? 1);
}

/** CPU baseline: tiled online-softmax attention in plain JS (one thread), causal, f32 arrays. */
function attentionJs(a) {
  const { nQ, nKv, nHeads: H, nKvHeads: KH, headDim: D, q, k, v, scale, qPos0 } = a;
  const out = new Float32Array(nQ * H * D), acc = new Float32Array(D), group = H / KH;
  for (let h = 0; h < H; h++) {
    const g = (h / group) | 0;
    for (let i = 0; i < nQ; i++) {
      const qo = i * H * D + h * D, end = Math.min(nKv, qPos0 + i + 1);
      let m = -Infinity, l = 0;
      acc.fill(0);
      for (let j = 0; j < end; j++) {
        const ko = j * KH * D + g * D;
        let s = 0;
        for (let d = 0; d < D; d++) s += q[qo + d] * k[ko + d];
        s *= scale;
        if (s > m) { const c = Math.exp(m - s); l *= c; for (let d = 0; d < D; d++) acc[d] *= c; m = s; }
        const p = Math.exp(s - m);
        l += p;
        for (let d = 0; d < D; d++) acc[d] += p * v[ko + d];
      }
      for (let d = 0; d < D; d++) out[qo + d] = l > 0 ? acc[d] / l : 0;
    }
  }
  return out;
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

let gpuLabel = 'unavailable', att = null;
try {
  const { create, globals } = await import('webgpu');
  Object.assign(globalThis, globals);
  const { requestQkvDevice, createAttention } = await import('../src/js/webgpu.js');
  const { device, adapterInfo } = await requestQkvDevice({ gpu: create([]) });
  gpuLabel = `${adapterInfo.vendor} ${adapterInfo.architecture} ${adapterInfo.description}`.trim();
  att = createAttention(device);
} catch (e) {
  console.log(`WebGPU unavailable: ${e.message}`);
}
const swiftshader = /swiftshader/i.test(gpuLabel);
console.log(`qkv WebGPU attention benchmark, node ${process.version}; adapter: ${gpuLabel}`);
console.log(`shape: ${nHeads} heads / ${nKvHeads} kv heads, head_dim ${headDim}, causal, f32; median wall ms ` +
  '(WebGPU includes upload + readback)');
if (swiftshader) console.log('NOTE: SwiftShader is a CPU emulation of a GPU: these WebGPU timings are for correctness only.');

const cases = [
  ['prefill', 512, 512], ['prefill', 2048, 2048],
  ['decode', 1, 512], ['decode', 1, 2048], ['decode', 1, 8192],
].filter(([, nQ]) => !(quick && nQ === 2048));
console.log(`${'case'.padEnd(22)}${'JS CPU ms'.padStart(12)}${'WebGPU ms'.padStart(12)}${'max diff'.padStart(11)}  kernel`);
for (const [kind, nQ, nKv] of cases) {
  const a = inputs(nQ, nKv);
  // SwiftShader is very slow on big prefill: one rep there.
  const reps = kind === 'prefill' && nQ >= 2048 ? 1 : 3;
  let ref;
  const cpu = await time(async () => { ref = attentionJs(a); }, kind === 'prefill' && nQ >= 2048 ? 0 : reps);
  let gpu = NaN, diff = NaN, mode = '-';
  if (att) {
    let res;
    gpu = await time(async () => { res = await att.run(a); }, reps);
    mode = res.mode;
    diff = 0;
    for (let i = 0; i < ref.length; i++) diff = Math.max(diff, Math.abs(ref[i] - res.out[i]));
  }
  console.log(`${`${kind} nQ=${nQ} ctx=${nKv}`.padEnd(22)}${cpu.toFixed(1).padStart(12)}${gpu.toFixed(1).padStart(12)}` +
    `${diff.toExponential(1).padStart(11)}  ${mode}`);
}
process.exit(0);
