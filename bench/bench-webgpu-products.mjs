// WebGPU weight-product benchmark (not a test): per stored type, the decode product (one token,
// src/webgpu/matvec.wgsl) in GB/s of weight bytes read, beside the GPU's copy bandwidth measured
// with a copy kernel, and the prefill product (src/webgpu/matmul.wgsl) in GFLOP/s.
// Shapes: a ~1B model's products (2048x2048 attention, 5632x2048 gate/up, 2048x5632 down,
// 32000x2048 classifier); prefill on 512 tokens.
// Usage: node bench/bench-webgpu-products.mjs [--quick] [--types q4_0,q4_k] [--reps N] [--gpu]
//   --quick: small shapes and few repetitions (to check that it runs, e.g. on SwiftShader).
//   --gpu:   never fall back to SwiftShader (use the Vulkan driver Dawn finds).
// In Node without a GPU it re-runs itself on SwiftShader (VK_ICD_FILENAMES); SwiftShader is a CPU
// emulation: its timings check that the code runs and say nothing about GPU speed.
//
// Timing: `reps` dispatches of the same product recorded in one compute pass (WebGPU orders them,
// as consecutive layers are), one submit, wall time to onSubmittedWorkDone, divided by reps;
// median of 5 such runs after a warm-up.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : def);
const quick = argv.includes('--quick');
const ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';
const here = fileURLToPath(import.meta.url);

if (!argv.includes('--gpu') && !process.env.VK_ICD_FILENAMES && !process.env.QKV_BENCH_CHILD && existsSync(ICD)) {
  const env = {
    ...process.env, QKV_BENCH_CHILD: '1', VK_ICD_FILENAMES: ICD,
    LD_LIBRARY_PATH: [process.env.LD_LIBRARY_PATH, '/usr/lib/chromium'].filter(Boolean).join(':'),
  };
  const r = spawnSync(process.execPath, [here, ...argv], { env, stdio: 'inherit' });
  process.exit(r.status ?? 1);
}

const { create, globals } = await import('webgpu');
Object.assign(globalThis, globals);
const { requestQkvDevice } = await import('../src/js/webgpu.js');
const { createProducts, GPU_WEIGHT_TYPES, gpuRowBytes } = await import('../src/js/gpu-products.js');

const { device, adapterInfo } = await requestQkvDevice({ gpu: create([]) });
const swiftshader = /swiftshader/i.test(`${adapterInfo.architecture} ${adapterInfo.description}`);
const types = opt('--types', GPU_WEIGHT_TYPES.join(',')).split(',');
const reps = Number(opt('--reps', quick ? 2 : 50));
const shapes = quick ? [[256, 512], [96, 256]] : [[2048, 2048], [5632, 2048], [2048, 5632], [32000, 2048]];
const prefillTokens = quick ? 40 : 512;
const U = GPUBufferUsage;

let seed = 0x2545f491;
function randomBytes(n) {
  const b = new Uint8Array(n), u = new Uint32Array(b.buffer, 0, n >> 2);
  for (let i = 0; i < u.length; i++) { seed ^= seed << 13; seed ^= seed >>> 17; seed ^= seed << 5; u[i] = seed; }
  return b;
}

async function median(run) {
  await run();  // warm-up: pipeline compile, first touch
  const ts = [];
  for (let i = 0; i < (quick ? 1 : 5); i++) ts.push(await run());
  return ts.sort((a, b) => a - b)[ts.length >> 1];
}

/** Seconds per dispatch group: `reps` encodes in one pass, one submit. */
function timer(encode) {
  return async () => {
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    for (let r = 0; r < reps; r++) encode(pass);
    pass.end();
    const t0 = performance.now();
    device.queue.submit([enc.finish()]);
    await device.queue.onSubmittedWorkDone();
    return (performance.now() - t0) / 1000 / reps;
  };
}

// Copy bandwidth: a vec4<u32> copy kernel over a buffer as large as the largest weight.
async function copyBandwidth(bytes) {
  const n = Math.ceil(bytes / 16 / 256) * 256;
  const module = device.createShaderModule({
    code: `@group(0) @binding(0) var<storage, read> a: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> b: array<vec4<u32>>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let i = g.x + g.y * nw.x * 256u;
  if (i < arrayLength(&a)) { b[i] = a[i]; }
}`,
  });
  const pipe = await device.createComputePipelineAsync({ layout: 'auto', compute: { module, entryPoint: 'main' } });
  const a = device.createBuffer({ size: n * 16, usage: U.STORAGE });
  const b = device.createBuffer({ size: n * 16, usage: U.STORAGE });
  const group = device.createBindGroup({
    layout: pipe.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: a } }, { binding: 1, resource: { buffer: b } }],
  });
  const groups = n / 256, gx = Math.min(groups, 65535), gy = Math.ceil(groups / gx);
  const s = await median(timer((pass) => { pass.setPipeline(pipe); pass.setBindGroup(0, group); pass.dispatchWorkgroups(gx, gy); }));
  a.destroy(); b.destroy();
  return (2 * n * 16) / s / 1e9;  // bytes read + written
}

const products = createProducts(device);
const step = device.createBuffer({ size: 16, usage: U.UNIFORM | U.COPY_DST });
const maxCols = Math.max(...shapes.map((s) => s[1])), maxRows = Math.max(...shapes.map((s) => s[0]));
const x = device.createBuffer({ size: 4 * prefillTokens * maxCols, usage: U.STORAGE | U.COPY_DST });
const y = device.createBuffer({ size: 4 * prefillTokens * maxRows, usage: U.STORAGE });
device.queue.writeBuffer(x, 0, new Float32Array(prefillTokens * maxCols).fill(0.5));

const largest = Math.max(...shapes.map(([r, c]) => r * c * 4));
const copy = await copyBandwidth(largest);
console.log(`adapter: ${adapterInfo.vendor} ${adapterInfo.architecture} ${adapterInfo.description}`.trim());
if (swiftshader) console.log('SwiftShader (CPU emulation): these figures only show that the kernels run; they are not GPU speed.');
console.log(`copy kernel: ${copy.toPrecision(3)} GB/s (bytes read + written)`);
console.log(`decode: GB/s of weight bytes per product (% of copy); prefill (${prefillTokens} tokens): GFLOP/s\n`);
const head = ['type', ...shapes.map(([r, c]) => `${r}x${c}`), `prefill ${shapes[0][0]}x${shapes[0][1]}`, `prefill ${shapes[1][0]}x${shapes[1][1]}`];
console.log(head.map((h, i) => (i ? h.padStart(20) : h.padEnd(6))).join(''));
for (const type of types) {
  const cells = [];
  const prefill = [];
  for (const [si, [rows, cols]] of shapes.entries()) {
    const bytes = randomBytes(rows * gpuRowBytes(type, cols));
    const weight = products.upload({ type, rows, cols, bytes, label: `${type} ${rows}x${cols}` });
    const doPrefill = si < 2;
    const op = products.product({ weight, x: { buffer: x }, y: { buffer: y }, maxTokens: doPrefill ? prefillTokens : 1, step });
    await op.ready;
    device.queue.writeBuffer(step, 0, new Uint32Array([1, 0, 0, 0]));
    const s = await median(timer((pass) => op.encode(pass, 1)));
    const gbs = bytes.length / s / 1e9;
    cells.push(`${gbs.toPrecision(3)} (${((100 * gbs) / copy).toFixed(0)}%)`);
    if (doPrefill) {
      device.queue.writeBuffer(step, 0, new Uint32Array([prefillTokens, 0, 0, 0]));
      const sp = await median(timer((pass) => op.encode(pass, prefillTokens)));
      prefill.push((2 * rows * cols * prefillTokens / sp / 1e9).toPrecision(3));
    }
    weight.destroy();
  }
  console.log([type.padEnd(6), ...[...cells, ...prefill].map((c) => c.padStart(20))].join(''));
}
products.dispose();
device.destroy();
process.exit(0);
