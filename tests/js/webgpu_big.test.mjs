// GPU-resident loads (loadModel(src, {device: 'webgpu', weights: 'gpu'}), src/js/gpu-resident.js):
// a generated Llama-shaped model of 64 MiB of f32 weights (tests/js/big-gguf.mjs) loads from a
// path, from a URL (a local server) and from split files with its matrices streamed to the GPU,
// and gives the logits and greedy tokens of the normal path (weights read into the heap, then
// uploaded): the same bytes through the same kernels, so they must be equal. The heap meanwhile
// stays below a third of the weights' size: it holds the header, the vectors and the sessions,
// never a matrix (the GPU-resident runs come first; a heap never shrinks, so its size then is its
// peak). An abort mid-upload destroys every GPU buffer made (instrumented); a lost device gives
// 'webgpu_failed' and reload() a model with the same logits; a model that is not GGUF is refused
// by name. Each load compiles its kernels on its own device, slow on SwiftShader: only the path
// load and the normal one decode.
// Runs on SwiftShader (no GPU here): correctness only, no timings.
import { closeSync, mkdirSync, openSync, rmSync, truncateSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { splitGguf } from '../../bench/gguf-split.mjs';
import { writeBigGguf } from './big-gguf.mjs';
import { dawnGpu, gpuSkipReason, runGpuChild } from './gpu-env.mjs';
import { models, root, shared } from './helpers.mjs';
import { startServer } from './server.mjs';

const dir = join(root, 'test-artifacts', 'webgpu-big');
const file = join(dir, 'big.gguf');
const SHAPE = { dim: 256, hidden: 512, layers: 1, heads: 4, kvHeads: 2, context: 256 };
const PROMPT = 'Once upon a time, there was';
const TOKENS = 4;

async function child() {
  const emit = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
  const gpu = await dawnGpu();
  const { loadModel } = await import('../../src/js/node.js');
  mkdirSync(dir, { recursive: true });
  const weightBytes = writeBigGguf(file, join(shared, 'vocab', 'ggml-vocab-llama-spm.gguf'), SHAPE);
  const parts = splitGguf(file, 24 * 1024 * 1024);
  const server = await startServer(dir, { coopCoep: false });

  /** Logits after the prompt, and (decode: true) the greedy tokens after it. */
  async function outputs(m, decode) {
    const s = m.createSession();
    await s.feed(m.tokenize(PROMPT));
    const logits = s.logits();
    s.dispose();
    const tokens = [];
    if (decode) for await (const x of m.generate(PROMPT, { temperature: 0, maxTokens: TOKENS })) if (x.token >= 0) tokens.push(x.token);
    return { logits, tokens };
  }
  const runs = {};
  const run = async (name, fn) => {
    const r = { name };
    try { Object.assign(r, await fn()); } catch (e) { r.error = `${e?.code ?? ''} ${e?.stack ?? e}`; }
    return r;
  };
  // Each load compiles its kernels again on its own device (slow on SwiftShader): the URL and split
  // loads check the prefill's logits only.
  const resident = async (name, src, decode) => run(name, async () => {
    let progress = null;
    const m = await loadModel(src, { device: 'webgpu', weights: 'gpu', gpu, threads: 1, onProgress: (p) => { progress = p; } });
    const out = await outputs(m, decode);
    const r = { ...out, info: { backend: m.info.backend, device: m.info.device, memory: m.info.memory }, progress, warnings: m.warnings };
    m.dispose();
    runs[name] = r;
    return r;
  });

  const results = [];
  results.push(await resident('path', file, true));
  results.push(await resident('url', `${server.url}big.gguf`, false));
  results.push(await resident('split files', parts, false));

  results.push(await run('abort mid-upload destroys every GPU buffer', async () => {
    const made = new Set(), destroyed = new Set();
    const create = GPUDevice.prototype.createBuffer, destroy = GPUBuffer.prototype.destroy;
    GPUDevice.prototype.createBuffer = function (d) { const b = create.call(this, d); made.add(b); return b; };
    GPUBuffer.prototype.destroy = function () { destroyed.add(this); return destroy.call(this); };
    const ac = new AbortController();
    let err = null, abortedAt = null;
    try {
      await loadModel(file, {
        device: 'webgpu', weights: 'gpu', gpu, threads: 1, signal: ac.signal,
        onProgress: (p) => { if (abortedAt === null && p.loaded > p.total / 2) { abortedAt = p.loaded; ac.abort(); } },
      });
    } catch (e) {
      err = e;
    } finally {
      GPUDevice.prototype.createBuffer = create;
      GPUBuffer.prototype.destroy = destroy;
    }
    return { code: err?.code, message: err?.message, made: made.size, left: [...made].filter((b) => !destroyed.has(b)).map((b) => b.label), abortedAt, weightBytes };
  }));

  results.push(await run('a lost device: webgpu_failed, then reload()', async () => {
    const warnings = [];
    const m = await loadModel(file, { device: 'webgpu', weights: 'gpu', gpu, threads: 1, onWarning: (w) => warnings.push(w) });
    const s = m.createSession();
    await s.feed(m.tokenize(PROMPT));
    m._gpu.device.destroy();  // what a lost GPU looks like from here
    let err = null, later = null;
    try { await s.feed([100]); } catch (e) { err = e; }
    try { m.createSession().tokens; } catch (e) { later = e; }
    const fresh = await m.reload();
    const again = await outputs(fresh, false);
    const r = {
      code: err?.code, message: err?.message, laterCode: later?.code, warnings: warnings.map((w) => w.code),
      logits: again.logits, freshBackend: fresh.info.backend, oldDisposed: m._h === null,
    };
    fresh.dispose();
    return r;
  }));

  results.push(await run('a llama2.c checkpoint is refused by name', async () => {
    try {
      await loadModel(join(models, 'stories260K.bin'), { device: 'webgpu', weights: 'gpu', gpu, threads: 1 });
      return { code: null };
    } catch (e) {
      return { code: e.code, message: e.message };
    }
  }));

  // The normal path last: its heap (weights read into it) would hide the GPU-resident runs' peak.
  const normal = await run('normal path', async () => {
    const m = await loadModel(file, { device: 'webgpu', gpu, threads: 1 });
    const out = await outputs(m, true);
    const r = { ...out, backend: m.info.backend, heapBytes: m.info.memory.heapBytes };
    m.dispose();
    return r;
  });
  for (const r of results) {
    if (r.logits) {
      let diff = 0;
      for (let i = 0; i < r.logits.length; i++) diff = Math.max(diff, Math.abs(r.logits[i] - normal.logits[i]));
      r.diff = normal.logits ? diff : null;
      r.want = normal.tokens;
      r.vocab = r.logits.length;
      delete r.logits;
    }
    r.weightBytes = weightBytes;
    emit(r);
  }
  delete normal.logits;
  emit(normal);
  await server.close();
  process.exit(0);  // Dawn keeps the event loop alive otherwise
}

if (process.argv.includes('--child')) {
  await child();
} else {
  const { test } = await import('node:test');
  const assert = (await import('node:assert/strict')).default;
  const skipReason = gpuSkipReason();
  const { loadModel } = await import('../../src/js/node.js');

  test("weights: 'gpu' is checked before anything is read", async () => {
    await assert.rejects(loadModel(join(models, 'stories260K.bin'), { weights: 'gpu', device: 'wasm' }),
      (e) => e.code === 'bad_argument' && /weights: 'gpu' runs on WebGPU/.test(e.message));
    await assert.rejects(loadModel(join(models, 'stories260K.bin'), { weights: 'vram' }),
      (e) => e.code === 'bad_argument' && /weights must be one of 'heap', 'gpu'/.test(e.message));
    await assert.rejects(loadModel(join(models, 'stories260K.bin'), { weight: 'gpu' }),
      (e) => e.code === 'bad_argument' && /did you mean 'weights'/.test(e.message));
  });

  test("'auto' and a file the heap cannot hold: GPU memory if there is WebGPU, else out_of_memory naming both", async () => {
    mkdirSync(dir, { recursive: true });
    const huge = join(dir, 'huge.gguf');
    const fd = openSync(huge, 'w');
    writeSync(fd, Buffer.from('GGUF'));
    closeSync(fd);
    truncateSync(huge, 5 * 1024 ** 3);  // sparse: nothing is read, the size alone decides
    try {
      await assert.rejects(loadModel(huge, { threads: 1 }), (e) => e.code === 'out_of_memory' &&
        /can hold at most 4096\.0 MiB .*; nor can its weights go to GPU memory instead: WebGPU is not available in Node/.test(e.message));
      await assert.rejects(loadModel(huge, { threads: 1, weights: 'heap' }), (e) => e.code === 'out_of_memory' && !/GPU memory/.test(e.message));
      await assert.rejects(loadModel(huge, { threads: 1, device: 'wasm' }), (e) => e.code === 'out_of_memory' && !/GPU memory/.test(e.message));
    } finally {
      rmSync(huge, { force: true });
    }
  });

  test('GPU-resident loads (SwiftShader)', { timeout: 1800000 }, async (t) => {
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
    const normal = get('normal path');
    assert.equal(normal.backend, 'webgpu');
    assert.equal(normal.tokens.length, TOKENS);
    for (const name of ['path', 'url', 'split files']) {
      await t.test(`from ${name === 'path' ? 'a path' : name === 'url' ? 'a URL' : 'split files'}: the normal path's logits and tokens, the heap far below the weights`, () => {
        const r = get(name);
        assert.equal(r.info.backend, 'webgpu');
        assert.equal(r.info.device.weights, 'gpu');
        assert.deepEqual(r.warnings, []);
        assert.equal(r.vocab, 32000);
        assert.equal(r.diff, 0, 'the same bytes through the same kernels');
        if (name === 'path') assert.deepEqual(r.tokens, r.want);
        const mem = r.info.memory;
        t.diagnostic(`${name}: heap ${(mem.heapBytes / 2 ** 20).toFixed(1)} MiB (of it weights ${(mem.heapWeightBytes / 1024).toFixed(1)} KiB), ` +
          `GPU weights ${(mem.gpuWeightBytes / 2 ** 20).toFixed(1)} MiB, staging ${(mem.stagingBytes / 2 ** 20).toFixed(1)} MiB; ` +
          `the normal path's heap ${(normal.heapBytes / 2 ** 20).toFixed(1)} MiB`);
        assert.ok(mem.heapBytes < r.weightBytes / 3, `heap ${mem.heapBytes} bytes for ${r.weightBytes} bytes of weights`);
        assert.ok(mem.gpuWeightBytes >= r.weightBytes - 4 * SHAPE.dim * (1 + 2 * SHAPE.layers), 'every matrix is on the GPU');
        assert.ok(mem.heapWeightBytes <= 4 * SHAPE.dim * (1 + 2 * SHAPE.layers), 'only the norms are in the heap');
        assert.ok(mem.stagingBytes > 0 && mem.stagingBytes < r.weightBytes / 8);
        assert.equal(r.progress.loaded, r.progress.total);
      });
    }
    await t.test('an abort mid-upload destroys every GPU buffer it made', () => {
      const r = get('abort mid-upload destroys every GPU buffer');
      assert.equal(r.code, 'aborted', r.message);
      assert.ok(r.abortedAt > 0 && r.abortedAt < r.weightBytes);
      assert.ok(r.made > 4, `${r.made} buffers made`);
      assert.deepEqual(r.left, []);
    });
    await t.test("a lost device: 'webgpu_failed' saying to reload, and reload() gives the same logits", () => {
      const r = get('a lost device: webgpu_failed, then reload()');
      assert.equal(r.code, 'webgpu_failed', r.message);
      assert.match(r.message, /weights were in GPU memory only .*model\.reload\(\)/);
      assert.equal(r.laterCode, 'webgpu_failed');
      assert.deepEqual(r.warnings, ['webgpu_failed']);
      assert.equal(r.diff, 0, 'the reloaded model gives the same logits');
      assert.equal(r.freshBackend, 'webgpu');
      assert.ok(r.oldDisposed);
    });
    await t.test('a model that is not GGUF is refused by name', () => {
      const r = get('a llama2.c checkpoint is refused by name');
      assert.equal(r.code, 'unsupported');
      assert.match(r.message, /streams GGUF files.*without weights: 'gpu'/);
    });
  });
}
