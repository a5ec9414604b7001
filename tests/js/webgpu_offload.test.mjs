// Partial offload (loadModel({gpuLayers}), as llama.cpp's n_gpu_layers): the first N layers on
// WebGPU, the hidden states read back, the remaining layers, final norm and classifier in WASM
// (Session.feedHidden). Against the WASM path, its reference: at every split point N = 0..L of
// stories260K the logits of a prefill over a chunk boundary and of decode steps within the GPU
// path's tolerance, and the same greedy tokens; a GPU-resident load (weights: 'gpu') of a
// generated GGUF with its last layers and classifier in the heap gives the logits of the normal
// load; 'auto' on a device with a simulated small memory keeps the layers that fit and reports
// why; one submit per decoded token; a lost device mid-generation moves a heap-loaded model to
// WASM with the same text, and a GPU-resident one to 'webgpu_failed'; bad gpuLayers values are
// bad_argument. Runs on SwiftShader (no GPU here): correctness only, no timings.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeBigGguf } from './big-gguf.mjs';
import { dawnGpu, gpuSkipReason, runGpuChild } from './gpu-env.mjs';
import { models, root, shared } from './helpers.mjs';

// As webgpu_model.test.mjs: relative to the logits' largest magnitude (the same f32 products in
// another order on the GPU).
const TOL = 1e-4;
const MODEL = 'stories260K.bin';
const LAYERS = 5;  // stories260K's
const dir = join(root, 'test-artifacts', 'webgpu-offload');
const GGUF_SHAPE = { dim: 64, hidden: 128, layers: 3, heads: 4, kvHeads: 2, context: 128 };
const PROMPT = 'Once upon a time';

function maxRel(a, b) {
  let scale = 0, diff = 0;
  for (let i = 0; i < a.length; i++) { scale = Math.max(scale, Math.abs(b[i])); diff = Math.max(diff, Math.abs(a[i] - b[i])); }
  return diff / Math.max(scale, 1e-30);
}

async function tokensOf(model, prompt, opts) {
  const out = [];
  for await (const t of model.generate(prompt, opts)) if (t.token >= 0) out.push(t.token);
  return out;
}

/**
 * A device whose memory runs out at layer `k`: a buffer for layer k or later (labelled
 * `${layer}:${role}`) made inside an 'out-of-memory' error scope makes that scope report an
 * error, as a real device reports an allocation past its memory. Returns a function that
 * restores the prototype.
 */
function memoryEndsAt(k) {
  const P = GPUDevice.prototype, { createBuffer, pushErrorScope, popErrorScope } = P;
  const scopes = [];
  P.createBuffer = function (d) {
    const layer = /^(\d+):/.exec(String(d.label ?? ''));
    if (layer && Number(layer[1]) >= k) { const s = scopes.findLast((x) => x.filter === 'out-of-memory'); if (s) s.oom = true; }
    return createBuffer.call(this, d);
  };
  P.pushErrorScope = function (filter) { scopes.push({ filter, oom: false }); return pushErrorScope.call(this, filter); };
  P.popErrorScope = function () {
    const s = scopes.pop();
    return popErrorScope.call(this).then((e) => e ?? (s?.oom ? { message: `simulated: the device's memory ends at layer ${k}` } : null));
  };
  return () => Object.assign(P, { createBuffer, pushErrorScope, popErrorScope });
}

async function child() {
  const emit = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
  const gpu = await dawnGpu();
  const { loadModel } = await import('../../src/js/node.js');
  const tokenizer = join(models, 'aidreams-tok512.bin');
  const load = (extra) => loadModel(join(models, MODEL), { tokenizer, threads: 1, gpu, ...extra });
  // QKV_OFFLOAD_ONLY=weights,auto: only the runs whose names start so (a quicker run while working on them).
  const only = process.env.QKV_OFFLOAD_ONLY?.split(',');
  const run = async (name, fn) => {
    if (only && !only.some((o) => name.startsWith(o))) return;
    const r = { name };
    try { Object.assign(r, await fn()); } catch (e) { r.error = `${e?.code ?? ''} ${e?.stack ?? e}`; }
    emit(r);
  };
  const ids = Array.from({ length: 68 }, (_, i) => 1 + ((i * 37) % 511));
  /** Logits of a 66-token prefill (rows over the chunk boundary), then of 2 single-token steps, and greedy tokens. */
  async function outputs(m) {
    const s = m.createSession();
    await s.feed(ids.slice(0, 66), { allLogits: true });
    const rows = [0, 63, 64, 65].map((i) => Array.from(s.logits(i)));
    for (const id of ids.slice(66)) { await s.feed([id]); rows.push(Array.from(s.logits())); }
    const backend = s.backend;
    s.dispose();
    return { rows, backend, tokens: await tokensOf(m, PROMPT, { temperature: 0, maxTokens: 16 }) };
  }

  const w = await load({ device: 'wasm' });
  const want = await outputs(w);
  w.dispose();
  const diff = (got) => Math.max(...got.rows.map((r, i) => maxRel(r, want.rows[i])));

  // Each load compiles its kernels on its own device (slow on SwiftShader): one load per split,
  // which also carries the other checks: the submits per token (split 2), a lost device (split 3).
  for (let n = 0; n <= LAYERS; n++) {
    await run(`split ${n}`, async () => {
      // The whole model on the GPU from the multi-threaded build, whose heap is a SharedArrayBuffer
      // (which Dawn's writeBuffer refuses: the uploads go through webgpu.js's writeBytes).
      const m = await load({ device: 'webgpu', gpuLayers: n, onWarning: () => {}, ...(n === LAYERS ? { threads: 2 } : {}) });
      const got = await outputs(m);
      const { device, memory } = m.info;
      const r = { diff: diff(got), same: got.tokens.join() === want.tokens.join(), tokens: got.tokens.length, backend: got.backend, device, memory, warnings: m.warnings.slice() };
      if (n === 2) {
        const s = m.createSession();
        await s.feed(ids.slice(0, 10));
        const submit = GPUQueue.prototype.submit;
        let submits = 0;
        GPUQueue.prototype.submit = function (b) { submits++; return submit.call(this, b); };
        try { for (const id of ids.slice(10, 14)) await s.feed([id]); } finally { GPUQueue.prototype.submit = submit; }
        r.submitsPerToken = submits / 4;
      }
      if (n === 3) {  // a lost device mid-generation: WASM, the same tokens
        const lost = [];
        for await (const t of m.generate(PROMPT, { temperature: 0, maxTokens: 16 })) {
          if (t.token >= 0) lost.push(t.token);
          if (lost.length === 6) m._gpu.device.destroy();  // what a lost GPU looks like from here
        }
        r.lost = { same: lost.join() === want.tokens.join(), device: m.info.device, warnings: m.warnings.map((x) => x.code) };
      }
      m.dispose();
      return r;
    });
  }

  await run('auto on a device with room for 2 layers', async () => {
    const restore = memoryEndsAt(2);
    let m;
    try { m = await load({ device: 'webgpu' }); } finally { restore(); }
    const got = await outputs(m);
    const r = { diff: diff(got), same: got.tokens.join() === want.tokens.join(), device: m.info.device };
    m.dispose();
    return r;
  });

  // weights: 'gpu': the GPU layers' matrices streamed to GPU buffers, the rest into the heap.
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'offload.gguf');
  writeBigGguf(file, join(shared, 'vocab', 'ggml-vocab-llama-spm.gguf'), GGUF_SHAPE);
  const gg = (extra) => loadModel(file, { threads: 1, gpu, ...extra });
  const prompt = async (m) => {
    const s = m.createSession();
    await s.feed(m.tokenize(PROMPT));
    const l = Array.from(s.logits());
    s.dispose();
    return l;
  };
  const ref = await gg({ device: 'wasm' });
  const refLogits = await prompt(ref);
  const refMemory = ref.info.memory;
  ref.dispose();
  for (const n of [1, GGUF_SHAPE.layers]) {
    await run(`weights gpu, split ${n}`, async () => {
      const m = await gg({ device: 'webgpu', weights: 'gpu', gpuLayers: n, onWarning: () => {}, ...(n === GGUF_SHAPE.layers ? { threads: 2 } : {}) });
      const r = { diff: maxRel(await prompt(m), refLogits), device: m.info.device, memory: m.info.memory, refWeightBytes: refMemory.weightBytes };
      if (n === 1) {  // a lost device: its first layer was on the GPU only
        const s = m.createSession();
        await s.feed(m.tokenize(PROMPT));
        m._gpu.device.destroy();
        try { await s.feed([100]); } catch (e) { r.lost = { code: e.code, message: e.message }; }
      }
      m.dispose();
      return r;
    });
  }
  await run('weights gpu, auto on a device with room for 2 layers', async () => {
    const restore = memoryEndsAt(2);
    let m;
    try { m = await gg({ device: 'webgpu', weights: 'gpu' }); } finally { restore(); }
    const r = { diff: maxRel(await prompt(m), refLogits), device: m.info.device, memory: m.info.memory };
    m.dispose();
    return r;
  });
  process.exit(0);  // Dawn keeps the event loop alive otherwise
}

if (process.argv.includes('--child')) {
  await child();
} else {
  const { test } = await import('node:test');
  const assert = (await import('node:assert/strict')).default;
  const skipReason = gpuSkipReason();
  const { loadModel } = await import('../../src/js/node.js');

  test('gpuLayers: bad values are bad_argument', async () => {
    const tokenizer = join(models, 'aidreams-tok512.bin');
    const bad = async (gpuLayers, extra, pattern) => {
      await assert.rejects(loadModel(join(models, MODEL), { tokenizer, threads: 1, device: 'webgpu', gpuLayers, ...extra }),
        (e) => e.code === 'bad_argument' && pattern.test(e.message), `gpuLayers ${gpuLayers}`);
    };
    for (const v of [-1, 1.5, '2', null, Infinity, NaN, 'all']) await bad(v, {}, /gpuLayers must be 'auto' or a whole number of layers >= 0/);
    await bad(LAYERS + 1, {}, new RegExp(`gpuLayers is ${LAYERS + 1}, but the model has ${LAYERS} layers`));
    await bad(2, { device: 'wasm' }, /cannot go with device: 'wasm'/);
    await bad(0, { weights: 'gpu' }, /leaves no weights for weights: 'gpu'/);
    // gpuLayers 0 is WASM, said in info.device, without touching a GPU.
    const m = await loadModel(join(models, MODEL), { tokenizer, threads: 1, device: 'webgpu', gpuLayers: 0 });
    assert.equal(m.info.backend, 'wasm');
    assert.equal(m.info.device.gpuLayers, 0);
    assert.equal(m.info.device.cpuLayers, LAYERS);
    m.dispose();
  });

  test('partial offload on WebGPU (SwiftShader)', { timeout: 1200000 }, async (t) => {
    if (skipReason) { t.skip(skipReason); return; }
    const { code, lines, stderr } = await runGpuChild(fileURLToPath(import.meta.url));
    assert.equal(code, 0, `child exited ${code}\n${stderr}`);
    const byName = new Map(lines.map((l) => [l.name, l]));
    const get = (name) => {
      const r = byName.get(name);
      assert.ok(r, `no result for ${name}\n${stderr}`);
      assert.ok(!r.error, r.error);
      return r;
    };
    for (let n = 0; n <= LAYERS; n++) {
      await t.test(`gpuLayers ${n} of ${LAYERS}: the WASM logits and greedy tokens`, () => {
        const r = get(`split ${n}`);
        t.diagnostic(`split ${n}: max relative logit difference ${r.diff.toExponential(2)}; ${r.device.reason}`);
        assert.ok(r.diff <= TOL, `logits differ by ${r.diff}`);
        assert.ok(r.same, 'greedy tokens differ');
        assert.ok(r.tokens >= 16, `only ${r.tokens} tokens`);  // maxTokens 16: no early end
        assert.deepEqual(r.warnings, []);
        assert.equal(r.device.gpuLayers, n);
        assert.equal(r.device.cpuLayers, LAYERS - n);
        assert.equal(r.backend, n === 0 ? 'wasm' : 'webgpu');
        if (n > 0 && n < LAYERS) assert.match(r.device.reason, new RegExp(`layers 0..${n - 1} on WebGPU, ${n}..${LAYERS - 1} in WASM`));
        // Each side caches its own layers only.
        assert.equal(r.memory.gpuKvCacheBytes > 0, n > 0, `GPU KV cache ${r.memory.gpuKvCacheBytes}`);
        assert.equal(r.memory.kvCacheBytes > 0, n < LAYERS, `CPU KV cache ${r.memory.kvCacheBytes}`);
      });
    }
    await t.test('partial offload: one submit per decoded token', () => {
      assert.equal(get('split 2').submitsPerToken, 1);
    });
    await t.test("'auto' keeps the layers a small device holds and runs the rest in WASM", () => {
      const r = get('auto on a device with room for 2 layers');
      t.diagnostic(r.device.reason);
      assert.equal(r.device.kind, 'webgpu');
      assert.equal(r.device.gpuLayers, 2);
      assert.equal(r.device.cpuLayers, LAYERS - 2);
      assert.match(r.device.reason, /layer 2 did not fit: .*simulated/);
      assert.ok(r.diff <= TOL, `logits differ by ${r.diff}`);
      assert.ok(r.same, 'greedy tokens differ');
    });
    await t.test('a lost device under a partial offload: WASM, the same tokens, a warning', () => {
      const r = get('split 3').lost;
      assert.ok(r.same, 'tokens differ after the fallback');
      assert.equal(r.device.kind, 'wasm');
      assert.equal(r.device.gpuLayers, 0);
      assert.equal(r.device.cpuLayers, LAYERS);
      assert.deepEqual(r.warnings, ['webgpu_failed']);
    });
    const L = GGUF_SHAPE.layers;
    for (const n of [1, L]) {
      await t.test(`weights: 'gpu', gpuLayers ${n} of ${L}: the normal load's logits, the CPU layers in the heap`, () => {
        const r = get(`weights gpu, split ${n}`);
        t.diagnostic(`split ${n}: ${r.diff.toExponential(2)}; heap weights ${r.memory.heapWeightBytes}, GPU weights ${r.memory.gpuWeightBytes} of ${r.refWeightBytes}`);
        assert.ok(r.diff <= TOL, `logits differ by ${r.diff}`);
        assert.equal(r.device.gpuLayers, n);
        assert.equal(r.device.cpuLayers, L - n);
        assert.equal(r.device.weights, 'gpu');
        // The heap holds the CPU layers (and the classifier) beside the vectors; the GPU the rest.
        if (n < L) assert.ok(r.memory.heapWeightBytes > r.refWeightBytes / 4, `heap weights ${r.memory.heapWeightBytes}`);
        else assert.ok(r.memory.heapWeightBytes < r.refWeightBytes / 50, `heap weights ${r.memory.heapWeightBytes}`);
      });
    }
    await t.test("weights: 'gpu' with 'auto' on a small device: the layers that do not fit go to the heap", () => {
      const r = get('weights gpu, auto on a device with room for 2 layers');
      t.diagnostic(r.device.reason);
      assert.equal(r.device.gpuLayers, 2);
      assert.match(r.device.reason, /layers 2..2 in the heap, run in WASM \(layer 2 did not fit: .*simulated/);
      assert.ok(r.diff <= TOL, `logits differ by ${r.diff}`);
      assert.ok(r.memory.heapWeightBytes > 0);
    });
    await t.test("weights: 'gpu' with a partial offload: a lost device is webgpu_failed", () => {
      const r = get('weights gpu, split 1').lost;
      assert.ok(r, 'the feed after the loss did not throw');
      assert.equal(r.code, 'webgpu_failed');
      assert.match(r.message, /GPU memory only/);
    });
  });
}
