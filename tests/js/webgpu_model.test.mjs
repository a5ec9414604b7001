// The engine with attention on WebGPU (loadModel({device: 'webgpu'})): the KV cache on the GPU,
// each layer's q/k/v up and the attention output back. On the shared reference models it must
// give the same greedy (and seeded) tokens as the WASM path, logits within 1e-4 relative, the
// same attention maps; a GPU lost mid-generation falls back to WASM with a warning and the text
// goes on unchanged; 'auto' chooses by a measurement it reports. Runs on SwiftShader (no GPU
// here): correctness only, no timings.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { dawnGpu, gpuSkipReason, runGpuChild } from './gpu-env.mjs';
import { models } from './helpers.mjs';

const LOGIT_TOL = 1e-4;
const PROB_TOL = 1e-4;

const cases = [
  { name: 'aidreams260K greedy', model: 'aidreams260K.bin', prompt: 'I dream of', opts: { temperature: 0, maxTokens: 100 } },
  { name: 'aidreams260K t=1 p=0.9 seed 42', model: 'aidreams260K.bin', prompt: 'I dream of', opts: { temperature: 1, topP: 0.9, seed: 42, maxTokens: 100 } },
  { name: 'stories260K (GQA) greedy', model: 'stories260K.bin', prompt: 'Once upon a time', opts: { temperature: 0, maxTokens: 300 } },
];

function maxRel(a, b) {
  let scale = 0, diff = 0;
  for (let i = 0; i < a.length; i++) { scale = Math.max(scale, Math.abs(a[i])); diff = Math.max(diff, Math.abs(a[i] - b[i])); }
  return diff / Math.max(scale, 1e-30);
}

async function tokensOf(model, prompt, opts) {
  const out = [];
  for await (const t of model.generate(prompt, opts)) if (t.token >= 0) out.push(t.token);
  return out;
}

async function child() {
  const emit = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
  const gpu = await dawnGpu();
  const { loadModel } = await import('../../src/js/node.js');
  const tokenizer = join(models, 'aidreams-tok512.bin');
  const load = (name, extra) => loadModel(join(models, name), { tokenizer, threads: 1, gpu, ...extra });
  const run = async (name, fn) => {
    const r = { name };
    try { Object.assign(r, await fn()); } catch (e) { r.error = `${e?.code ?? ''} ${e?.stack ?? e}`; }
    emit(r);
  };

  for (const c of cases) {
    await run(`tokens: ${c.name}`, async () => {
      const warnings = [];
      const g = await load(c.model, { device: 'webgpu', onWarning: (w) => warnings.push(w) });
      const w = await load(c.model, { device: 'wasm' });
      const gpuTokens = await tokensOf(g, c.prompt, c.opts);
      const wasmTokens = await tokensOf(w, c.prompt, c.opts);
      const r = {
        gpuTokens, wasmTokens, backend: g.info.backend, sessionBackend: g.session.backend, kvType: g.info.device.kvType,
        gpuKv: g.info.memory.gpuKvCacheBytes, cpuKv: g.info.memory.kvCacheBytes, warnings,
      };
      g.dispose(); w.dispose();
      return r;
    });
  }

  await run('logits and attention over a chunk boundary', async () => {
    const g = await load('stories260K.bin', { device: 'webgpu' });
    const w = await load('stories260K.bin', { device: 'wasm' });
    const ids = Array.from({ length: 150 }, (_, i) => 1 + ((i * 37) % 511));
    const sg = g.createSession(), sw = w.createSession();
    await sg.feed(ids.slice(0, 141), { allLogits: true });
    sw.feed(ids.slice(0, 141), { allLogits: true });
    let logits = 0;
    for (const i of [0, 63, 64, 65, 140]) logits = Math.max(logits, maxRel(sg.logits(i), sw.logits(i)));
    sg.captureAttention = true; sw.captureAttention = true;
    await sg.feed(ids.slice(141));
    sw.feed(ids.slice(141));
    logits = Math.max(logits, maxRel(sg.logits(), sw.logits()));
    let probs = 0, keys = 0;
    for (let l = 0; l < g.info.layers; l++) {
      for (let h = 0; h < g.info.heads; h++) {
        const a = sg.attention(l, h), b = sw.attention(l, h);
        keys = a.keys;
        for (let i = 0; i < a.probs.length; i++) probs = Math.max(probs, Math.abs(a.probs[i] - b.probs[i]));
      }
    }
    // prefill() reuses the cached prefix on the GPU too: only the changed tail is computed.
    const computed = await sg.prefill([...ids.slice(0, 100), 5, 6]);
    sw.prefill([...ids.slice(0, 100), 5, 6]);
    logits = Math.max(logits, maxRel(sg.logits(), sw.logits()));
    const r = { logits, probs, keys, computed };
    g.dispose(); w.dispose();
    return r;
  });

  await run('device lost mid-generation falls back to WASM', async () => {
    const warnings = [];
    const g = await load('aidreams260K.bin', { device: 'webgpu', onWarning: (x) => warnings.push(x) });
    const w = await load('aidreams260K.bin', { device: 'wasm' });
    const opts = { temperature: 0, maxTokens: 60 };
    const got = [];
    for await (const t of g.generate('I dream of', opts)) {
      if (t.token >= 0) got.push(t.token);
      if (got.length === 20) g._gpu.device.destroy();  // what a lost GPU looks like from here
    }
    const want = await tokensOf(w, 'I dream of', opts);
    const r = { got, want, warnings, backend: g.info.backend, sessionBackend: g.session.backend, reason: g.info.device.reason };
    g.dispose(); w.dispose();
    return r;
  });

  await run('auto measures and reports its choice', async () => {
    const m = await load('stories260K.bin', { device: 'auto' });
    const r = { device: m.info.device, backend: m.info.backend, text: await m.complete('Once', { temperature: 0, maxTokens: 8 }) };
    m.dispose();
    return r;
  });

  await run("gpuPrecision 'f16' without shader-f16", async () => {
    const warnings = [];
    const m = await load('aidreams260K.bin', { device: 'webgpu', gpuPrecision: 'f16', onWarning: (x) => warnings.push(x) });
    const r = { warnings, device: m.info.device, f16: gpu !== null && [...(m._gpu?.device.features ?? [])].includes('shader-f16') };
    m.dispose();
    return r;
  });

  await run('webgpu without an adapter falls back with a warning', async () => {
    const warnings = [];
    const m = await loadModel(join(models, 'aidreams260K.bin'), {
      tokenizer, threads: 1, device: 'webgpu', gpu: { requestAdapter: async () => null }, onWarning: (x) => warnings.push(x),
    });
    const r = { warnings, device: m.info.device, text: await m.complete('I dream of', { temperature: 0, maxTokens: 10 }) };
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

  test('loadModel rejects an unknown device', async () => {
    const { loadModel } = await import('../../src/js/node.js');
    await assert.rejects(loadModel(join(models, 'aidreams260K.bin'), { device: 'cuda' }),
      (e) => e.code === 'bad_argument' && /device must be one of/.test(e.message));
  });

  test('model-level WebGPU attention (SwiftShader)', { timeout: 300000 }, async (t) => {
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
    for (const c of cases) {
      await t.test(`same tokens as WASM: ${c.name}`, () => {
        const r = get(`tokens: ${c.name}`);
        assert.equal(r.backend, 'webgpu');
        assert.equal(r.sessionBackend, 'webgpu');
        assert.deepEqual(r.warnings, []);
        assert.equal(r.kvType, 'f32', 'SwiftShader has no shader-f16: an f32 cache, exact tokens');
        assert.ok(r.wasmTokens.length >= 20, `only ${r.wasmTokens.length} tokens generated`);
        assert.deepEqual(r.gpuTokens, r.wasmTokens);
        assert.ok(r.gpuKv > 0, 'the KV cache lives on the GPU');
        assert.equal(r.cpuKv, 0, 'no CPU KV cache is kept under WebGPU');
        t.diagnostic(`${c.name}: ${r.gpuTokens.length} tokens identical`);
      });
    }
    await t.test('logits and attention maps match WASM', () => {
      const r = get('logits and attention over a chunk boundary');
      t.diagnostic(`max relative logit difference ${r.logits.toExponential(2)}, max probability difference ${r.probs.toExponential(2)} over ${r.keys} keys`);
      assert.ok(r.logits <= LOGIT_TOL, `logits differ by ${r.logits}`);
      assert.ok(r.probs <= PROB_TOL, `attention probabilities differ by ${r.probs}`);
      assert.equal(r.keys, 150);
      assert.equal(r.computed, 2, 'prefill reuses the cached prefix');
    });
    await t.test('a lost device falls back to WASM, same tokens', () => {
      const r = get('device lost mid-generation falls back to WASM');
      assert.deepEqual(r.got, r.want);
      assert.equal(r.backend, 'wasm');
      assert.equal(r.sessionBackend, 'wasm');
      assert.equal(r.warnings.length, 1);
      assert.equal(r.warnings[0].code, 'webgpu_failed');
      assert.match(r.reason, /WebGPU failed/);
    });
    await t.test("'auto' reports a measured choice", () => {
      const r = get('auto measures and reports its choice');
      const m = r.device.measured;
      assert.ok(m && m.webgpuMs > 0 && m.wasmMs > 0, JSON.stringify(r.device));
      assert.equal(r.backend, m.webgpuMs < m.wasmMs ? 'webgpu' : 'wasm');
      assert.match(r.device.reason, /^auto: (WebGPU|WASM) is faster/);
      assert.ok(r.text.length > 0);
      t.diagnostic(r.device.reason);
    });
    await t.test("gpuPrecision 'f16' on a device without shader-f16: f32 cache and a warning", (tt) => {
      const r = get("gpuPrecision 'f16' without shader-f16");
      if (r.f16) { tt.skip('this adapter has shader-f16'); return; }
      assert.equal(r.device.kind, 'webgpu');
      assert.equal(r.device.kvType, 'f32');
      assert.deepEqual(r.warnings.map((w) => w.code), ['webgpu_f16_unavailable']);
    });
    await t.test("'webgpu' without an adapter: WASM and a typed warning", () => {
      const r = get('webgpu without an adapter falls back with a warning');
      assert.equal(r.device.kind, 'wasm');
      assert.equal(r.warnings.length, 1);
      assert.equal(r.warnings[0].code, 'webgpu_unavailable');
      assert.match(r.warnings[0].message, /no GPU adapter/);
      assert.ok(r.text.length > 0);
    });
  });
}
