// The whole model on WebGPU against WASM (a benchmark that prints figures, not a test).
// Per shape and stored type: prefill tok/s (a --prompt token prompt) and decode tok/s (--decode
// tokens, logits read back each token, as generation does) with device 'webgpu', and the same
// with device 'wasm' at --threads (default 2); next to the GPU's copy bandwidth measured by a
// copy kernel, decode is printed as a percentage of the rate that bandwidth allows
// (bandwidth / bytes per token; bytes per token = the weights, each read once per token: the
// benchmark models tie their classifier to the embedding table).
//
//   node bench/bench-webgpu.mjs [--shapes 110m,1b] [--types f32,f16,q8_0,q4_0,q4_k] [--threads 2]
// (the defaults: every figure issue 30 asks for in one run; the 1B shape skips f32, over a wasm32 heap)
//                               [--prompt 128] [--decode 32] [--dir build/bench-webgpu] [--quick]
// Models: bench/bench-models.mjs (random weights; needs the native CLI build/qkv to write them).
// QKV_BENCH_REAL_GPU=1: use the machine's GPU through Dawn/Vulkan, never SwiftShader (fails
// rather than falling back when there is none). See docs/webgpu-kernels.md for a device run.
// --quick: one tiny shape (dim 64, 2 layers) in f32 and q8_0 that runs on SwiftShader in seconds.
// In Node without a GPU it re-runs itself on SwiftShader (VK_ICD_FILENAMES); SwiftShader is a CPU
// emulation: its figures check that the code runs and say nothing about GPU speed (the table
// says so). On a machine with a GPU, Dawn's Node bindings (npm 'webgpu') use Vulkan.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SHAPES, benchModel } from './bench-models.mjs';

const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
const args = process.argv.slice(2);
const quick = args.includes('--quick');
const opt = (name, def) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : def;
};
const ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';
const here = fileURLToPath(import.meta.url);
if (!process.env.VK_ICD_FILENAMES && !process.env.QKV_BENCH_CHILD && !process.env.QKV_BENCH_REAL_GPU && existsSync(ICD)) {
  const env = {
    ...process.env, QKV_BENCH_CHILD: '1', VK_ICD_FILENAMES: ICD,
    LD_LIBRARY_PATH: [process.env.LD_LIBRARY_PATH, '/usr/lib/chromium'].filter(Boolean).join(':'),
  };
  const r = spawnSync(process.execPath, [here, ...args], { env, stdio: 'inherit' });
  process.exit(r.status ?? 1);
}

const shapes = quick ? ['tiny'] : opt('shapes', '110m,1b').split(',');
const types = (quick ? 'f32,q8_0' : opt('types', 'f32,f16,q8_0,q4_0,q4_k')).split(',');
const threads = Number(opt('threads', '2'));
const promptLen = Number(opt('prompt', quick ? '16' : '128')), decodeLen = Number(opt('decode', quick ? '4' : '32'));
const dir = resolve(opt('dir', join(root, 'build', 'bench-webgpu')));
const ALL = { ...SHAPES, tiny: { dim: 64, hidden: 128, layers: 2, heads: 4, kvHeads: 4, vocab: 512, seq: 256 } };
for (const s of shapes) if (!ALL[s]) { console.error(`bench-webgpu: unknown shape ${s} (110m, 1b)`); process.exit(2); }
const qkvBin = join(root, 'build', 'qkv');
if (!existsSync(qkvBin)) { console.error('bench-webgpu: build the native CLI first (bash scripts/build.sh native): it writes the model files'); process.exit(1); }
mkdirSync(dir, { recursive: true });

const { create, globals } = await import('webgpu');
Object.assign(globalThis, globals);
const gpu = create([]);
const { requestQkvDevice } = await import('../src/js/webgpu.js');
const { loadModel } = await import('../src/js/node.js');

/** Bytes/s of a buffer-to-buffer copy by a compute kernel (read + write), median of runs. */
async function copyBandwidth() {
  const { device, adapterInfo } = await requestQkvDevice({ gpu });
  const bytes = Math.min(256 << 20, device.limits.maxStorageBufferBindingSize, device.limits.maxBufferSize) & ~1023;
  const U = GPUBufferUsage;
  const a = device.createBuffer({ size: bytes, usage: U.STORAGE }), b = device.createBuffer({ size: bytes, usage: U.STORAGE });
  const module = device.createShaderModule({
    code: `@group(0) @binding(0) var<storage, read> a: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> b: array<vec4<u32>>;
@compute @workgroup_size(256) fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {
  let i = g.x + g.y * n.x * 256u;
  if (i < arrayLength(&a)) { b[i] = a[i]; }
}`,
  });
  const pipe = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
  const group = device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: a } }, { binding: 1, resource: { buffer: b } }] });
  const groups = bytes / 16 / 256, gx = Math.min(groups, 32768), gy = Math.ceil(groups / gx);
  const times = [];
  for (let r = 0; r < 7; r++) {
    const enc = device.createCommandEncoder(), pass = enc.beginComputePass();
    pass.setPipeline(pipe); pass.setBindGroup(0, group);
    for (let k = 0; k < 4; k++) pass.dispatchWorkgroups(gx, gy);
    pass.end();
    const t0 = performance.now();
    device.queue.submit([enc.finish()]);
    await device.queue.onSubmittedWorkDone();
    if (r > 1) times.push((performance.now() - t0) / 4);
  }
  times.sort((x, y) => x - y);
  device.destroy();
  return { bytesPerS: (2 * bytes) / (times[times.length >> 1] / 1000), adapter: adapterInfo };
}

async function measure(file, device) {
  const model = await loadModel(file, { device, threads: device === 'wasm' ? threads : 1, gpu });
  try {
    const info = model.info;
    if (info.backend !== device) return { error: `ran on ${info.backend}: ${info.device.reason}` };
    const V = info.vocabSize;
    const ids = Array.from({ length: promptLen }, (_, i) => 3 + ((i * 7919) % (V - 3)));
    const s = model.createSession();
    await s.feed(ids.slice(0, 8));  // warm-up: pipelines, first buffers
    s.reset();
    let t0 = performance.now();
    await s.feed(ids);
    const prefill = promptLen / ((performance.now() - t0) / 1000);
    await s.feed([ids[1]]);  // first decode step: matrix-vector pipelines
    t0 = performance.now();
    for (let i = 0; i < decodeLen; i++) await s.feed([ids[(i * 13) % promptLen]]);
    const decode = decodeLen / ((performance.now() - t0) / 1000);
    const dispatches = s._gpu?.dispatches.total;  // of the last decode step (structural, not a timing)
    // generate() greedy: on WebGPU only the top candidate is read back per token (gpu-topk.js).
    let generate;
    try {
      const g = model.createSession();
      for await (const _ of g.generate('Once upon a time', { temperature: 0, maxTokens: decodeLen, stopTokens: [] })) { /* consume */ }
      const st = g.lastGeneration;
      generate = st.generatedTokens / (st.decodeMs / 1000);
    } catch (e) {
      console.error(`[bench-webgpu] generate: ${e.message}`);
    }
    return { prefill, decode, generate, dispatches, weightBytes: info.memory.weightBytes, adapter: info.device.adapter };
  } finally {
    model.dispose();
  }
}

const bw = await copyBandwidth();
const soft = /swiftshader/i.test(bw.adapter.architecture + bw.adapter.description);
console.log(`GPU: ${bw.adapter.vendor} ${bw.adapter.architecture} ${bw.adapter.description}; copy bandwidth ${(bw.bytesPerS / 1e9).toFixed(1)} GB/s`);
if (soft && process.env.QKV_BENCH_REAL_GPU) { console.error('bench-webgpu: QKV_BENCH_REAL_GPU is set but the adapter is SwiftShader'); process.exit(1); }
if (soft) console.log('SwiftShader (a CPU emulation of a GPU): the figures below check that the path runs; they are not GPU speeds.');
console.log(`\n| shape | type | weights | WebGPU prefill tok/s | WebGPU decode tok/s | decode % of bandwidth | WebGPU generate tok/s (greedy, top-k readback) | dispatches / token | WASM ${threads}t prefill | WASM ${threads}t decode | prefill x | decode x |`);
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
for (const shape of shapes) {
  for (const type of types) {
    if (shape === '1b' && type === 'f32') continue;  // 3.5 GB: over a wasm32 heap
    const file = benchModel({ dir, qkvBin, shape: ALL[shape], name: shape, type, log: (m) => console.error(`[bench-webgpu] ${m}`) });
    const g = await measure(file, 'webgpu');
    const w = await measure(file, 'wasm');
    const fmt = (v) => (v === undefined ? '-' : v.toFixed(1));
    if (g.error || w.error) { console.log(`| ${shape} | ${type} | | ${g.error ?? ''} | | | | | ${w.error ?? ''} | | | |`); continue; }
    // Per decoded token the GPU reads every weight once (these models tie the classifier to the
    // embedding table, which is then read in full).
    const perToken = g.weightBytes;
    const pct = (100 * g.decode * perToken) / bw.bytesPerS;
    console.log(`| ${shape} | ${type} | ${(perToken / 1048576).toFixed(perToken < 104857600 ? 2 : 0)} MiB | ${fmt(g.prefill)} | ${fmt(g.decode)} | ${pct.toFixed(1)}% | ${fmt(g.generate)} | ${g.dispatches ?? '-'} | ` +
      `${fmt(w.prefill)} | ${fmt(w.decode)} | ${(g.prefill / w.prefill).toFixed(2)} | ${(g.decode / w.decode).toFixed(2)} |`);
  }
}
process.exit(0);  // Dawn keeps the event loop alive otherwise
