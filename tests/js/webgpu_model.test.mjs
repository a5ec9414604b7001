// The whole model on WebGPU (loadModel({device: 'webgpu'}), src/js/gpu-model.js) against the WASM
// path, its reference: on the shared llama2.c models the same greedy and seeded tokens; on the
// random-weight GGUF test models of every decoder architecture row and stored type qkv writes
// (build/qkv_test_models) the logits of a prefill over a chunk boundary and of decode steps
// within a stated tolerance, greedy tokens equal except at near-ties, and the attention maps of
// a captured feed (computed on the GPU); on the encoder test models (bert, nomic-bert) the
// embeddings of every pooling. A model stored in another type than f32 is checked against WASM
// running its exact f32 decoding (quantize() to f32): the GPU multiplies f32 activations with
// the weights as stored, while the WASM engine quantizes the activations to 8 bits for the
// block types (that difference, a few percent of the logits' range, is printed, not asserted).
// Instrumented: one submit per decoded token, no CPU forward and a constant number of binding
// calls per token, at most 4 x vocab bytes read back per token, no WASM forward or encoder pass
// under captured feeds and GPU embeddings. A device lost mid-generation falls back to WASM with
// the same text; 'auto' chooses by a measurement it reports. Runs on SwiftShader (no GPU here):
// correctness only, no timings.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { dawnGpu, gpuSkipReason, runGpuChild } from './gpu-env.mjs';
import { models, root } from './helpers.mjs';

// Relative to the logits' largest magnitude: both engines compute the same f32 products, in a
// different order.
const TOL = 1e-4;
// With gpuPrecision 'f16' (docs/webgpu-kernels.md): every cached key and value is rounded to f16
// (relative error <= 2^-11 = 4.9e-4), which moves scores and attention outputs by about that
// share, compounding over the layers; 1e-2 of the logits' magnitude bounds it with a margin.
const TOL_F16 = 1e-2;

const maker = join(root, 'build', 'qkv_test_models');
const outDir = join(root, 'test-artifacts', 'webgpu-models');
// [test model, its weights' types]
const GGUF = [
  ['llama-spm', 'f32'], ['qwen2', 'f32 + qkv biases'], ['qwen3', 'f32 + q/k norms'], ['qwen3-yarn', 'f32, YaRN'],
  ['gemma', 'f32'], ['gemma2', 'f32, soft-caps, post-norms, windows'], ['gemma3', 'f32, local RoPE base, windows'],
  ['phi3', 'f32, fused qkv and gate/up'], ['phi3-longrope', 'f32, LongRoPE'], ['gpt2', 'f32, LayerNorm, learned positions, GELU'],
  ['granite', 'f32, embedding/residual/attention/logit multipliers, biases'], ['minicpm', 'f32, Granite multipliers'],
  ['olmo2', 'f32, whole-projection Q/K norms, post-norms without pre-norms'], ['command-r', 'f32, parallel blocks, LayerNorm, logit scale'],
  ['smollm3', 'f32, layers without RoPE'], ['stablelm', 'f32, LayerNorm biases, partial rotary'], ['starcoder2', 'f32, biases everywhere, NeoX RoPE'],
  ['exaone', 'f32, NeoX RoPE'], ['internlm2', 'f32'],
  ['llama-f16', 'f16'], ['llama-bf16', 'bf16'], ['llama-q8_0', 'q8_0'], ['llama-q4_0', 'q4_0'], ['qwen2-q4_1', 'q4_1'],
  ['gpt2-q5_0', 'q5_0'], ['qwen3-q5_1', 'q5_1'], ['llama-q4_k', 'q4_k'], ['llama-q5_k', 'q5_k + q6_k'],
  // Mixture of experts: router, top-k and experts on the GPU (gpu-moe.js).
  // (webgpu_moe.test.mjs covers the routing variants and every stored type kernel by kernel.)
  ['olmoe', 'f32, 8 experts, 2 per token'],
  ['granitemoe', 'f32, 8 experts, 2 per token, Granite multipliers'], ['qwen3moe-q8_0', 'q8_0, 4 experts, 3 per token'],
];

// Test models whose captured attention maps are checked: plain, soft-cap and windows, local RoPE
// and windows, a custom score scale, per-head and whole-projection Q/K norms, layers without RoPE.
const CAPTURED = new Set(['llama-spm', 'gemma2', 'gemma3', 'granite', 'qwen3', 'olmo2', 'smollm3']);

// Dispatches per layer of the gguf checks' last decode step (past 64 cached keys: attention is
// two, split-K) and of their 2-token prefill chunk. A Llama layer: q, k, v (RoPE and the cache
// write in their epilogues), attention, o, gate x up, down, and in prefill the two norms. Per-head
// Q/K norms cost decode nothing more (normalised in the q and k products' epilogue: it was 3 more,
// two norms and rope_kv.wgsl); prefill keeps those 3. Gemma 3 adds its two post-norm adds.
const DISPATCHES = {
  'llama-spm': { decode: 8, prefill: 9 }, qwen3: { decode: 8, prefill: 12 }, 'qwen3-q5_1': { decode: 8, prefill: 12 },
  gemma3: { decode: 10, prefill: 14 },
};

// Encoders (qkv_test_models --encoders): [model, what it has]
const ENCODERS = [['bert', 'learned positions, token types, embedding norm, mean pooling'], ['bert-cls', 'CLS pooling'],
  ['nomic-bert', 'RoPE, SwiGLU']];

const cases = [
  { name: 'aidreams260K greedy', model: 'aidreams260K.bin', prompt: 'I dream of', opts: { temperature: 0, maxTokens: 40 } },
  { name: 'aidreams260K t=1 p=0.9 seed 42', model: 'aidreams260K.bin', prompt: 'I dream of', opts: { temperature: 1, topP: 0.9, seed: 42, maxTokens: 40 } },
  { name: 'stories260K (GQA) greedy', model: 'stories260K.bin', prompt: 'Once upon a time', opts: { temperature: 0, maxTokens: 40 } },
];

// QKV_WEBGPU_ONLY=granite,bert: only those test models' checks, or checks named in full (a quicker
// run while working on them).
const only = process.env.QKV_WEBGPU_ONLY ? process.env.QKV_WEBGPU_ONLY.split(',') : null;
const filtered = (name) => !!only && !only.some((o) => name === o || name.endsWith(`: ${o}`));

function maxRel(a, b) {
  let scale = 0, diff = 0;
  for (let i = 0; i < a.length; i++) { scale = Math.max(scale, Math.abs(b[i])); diff = Math.max(diff, Math.abs(a[i] - b[i])); }
  return diff / Math.max(scale, 1e-30);
}
const argmax = (a) => { let k = 0; for (let i = 1; i < a.length; i++) if (a[i] > a[k]) k = i; return k; };
const range = (a) => Math.max(...a) - Math.min(...a);

async function tokensOf(model, prompt, opts) {
  const out = [];
  for await (const t of model.generate(prompt, opts)) if (t.token >= 0) out.push(t.token);
  return out;
}

/** Counts submits and mapped bytes on every device, and calls into the Embind classes. */
function instrument(mod) {
  const counts = { submits: 0, dispatches: 0, mappedBytes: 0, calls: 0, forwards: 0, embeds: 0 };
  const submit = GPUQueue.prototype.submit;
  GPUQueue.prototype.submit = function (b) { counts.submits++; return submit.call(this, b); };
  const dispatch = GPUComputePassEncoder.prototype.dispatchWorkgroups;
  GPUComputePassEncoder.prototype.dispatchWorkgroups = function (...a) { counts.dispatches++; return dispatch.apply(this, a); };
  const range_ = GPUBuffer.prototype.getMappedRange;
  GPUBuffer.prototype.getMappedRange = function (offset, size) {
    const r = range_.call(this, offset, size);
    counts.mappedBytes += r.byteLength;
    return r;
  };
  for (const cls of [mod.Session, mod.Model]) {
    for (const name of Object.getOwnPropertyNames(cls.prototype)) {
      const f = cls.prototype[name];
      if (typeof f !== 'function' || name === 'constructor' || name === 'delete' || name.startsWith('$') || name.startsWith('is')) continue;
      cls.prototype[name] = function (...args) {
        counts.calls++;
        if (name === 'feed' || name === 'feedOne' || name === 'prefill') counts.forwards++;
        if (name === 'embed') counts.embeds++;
        return f.apply(this, args);
      };
    }
  }
  return counts;
}

async function child() {
  const emit = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
  const gpu = await dawnGpu();
  const { loadModel, quantize } = await import('../../src/js/node.js');
  const tokenizer = join(models, 'aidreams-tok512.bin');
  const load = (src, extra) => loadModel(typeof src === 'string' && !src.includes('/') ? join(models, src) : src, { tokenizer, threads: 1, gpu, ...extra });
  const run = async (name, fn) => {
    if (filtered(name)) return;
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
        gpuTokens, wasmTokens, backend: g.info.backend, sessionBackend: g.session.backend,
        gpuKv: g.info.memory.gpuKvCacheBytes, cpuKv: g.info.memory.kvCacheBytes, warnings,
      };
      g.dispose(); w.dispose();
      return r;
    });
  }

  await run('instrumented decode', async () => {
    const g = await load('stories260K.bin', { device: 'webgpu' });
    const counts = instrument(g._mod);
    const s = g.createSession();
    const prompt = g.tokenize('Once upon a time');
    await s.prefill(prompt);
    const prefill = s._gpu.dispatches;
    const before = { ...counts };
    const n = 10;
    for (let i = 0; i < n; i++) await s.feed([s.sample({ temperature: 0 })]);
    const per = (k) => (counts[k] - before[k]) / n;
    const r = {
      submitsPerToken: per('submits'), dispatchesPerToken: per('dispatches'), bytesPerToken: per('mappedBytes'), callsPerToken: per('calls'),
      cpuForwards: counts.forwards, vocab: g.info.vocabSize, layers: g.info.layers, decode: s._gpu.dispatches, prefill,
    };
    g.dispose();
    return r;
  });

  await run('logits over a chunk boundary, prefill reuse, captured attention', async () => {
    const g = await load('stories260K.bin', { device: 'webgpu' });
    const w = await load('stories260K.bin', { device: 'wasm' });
    const ids = Array.from({ length: 150 }, (_, i) => 1 + ((i * 37) % 511));
    const sg = g.createSession(), sw = w.createSession();
    await sg.feed(ids.slice(0, 141), { allLogits: true });
    sw.feed(ids.slice(0, 141), { allLogits: true });
    let logits = 0;
    for (const i of [0, 63, 64, 65, 127, 128, 140]) logits = Math.max(logits, maxRel(sg.logits(i), sw.logits(i)));
    // Captured feeds run on the GPU too (attention_full.wgsl keeps the probabilities).
    const counts = instrument(g._mod);
    sg.captureAttention = true; sw.captureAttention = true;
    const f0 = counts.forwards;
    await sg.feed(ids.slice(141, 145));
    const capturedForwards = counts.forwards - f0;
    sw.feed(ids.slice(141, 145));
    logits = Math.max(logits, maxRel(sg.logits(), sw.logits()));
    let probs = 0, keys = 0;
    for (let l = 0; l < g.info.layers; l++) {
      for (let h = 0; h < g.info.heads; h++) {
        const a = sg.attention(l, h), b = sw.attention(l, h);
        keys = a.keys;
        for (let i = 0; i < a.probs.length; i++) probs = Math.max(probs, Math.abs(a.probs[i] - b.probs[i]));
      }
    }
    sg.captureAttention = false; sw.captureAttention = false;
    await sg.feed(ids.slice(145));
    sw.feed(ids.slice(145));
    logits = Math.max(logits, maxRel(sg.logits(), sw.logits()));
    // prefill() reuses the cached prefix on the GPU too: only the changed tail is computed.
    const computed = await sg.prefill([...ids.slice(0, 100), 5, 6]);
    sw.prefill([...ids.slice(0, 100), 5, 6]);
    logits = Math.max(logits, maxRel(sg.logits(), sw.logits()));
    // A captured feed over two chunks (64 + 6 queries): rows placed as the WASM engine places them.
    const cg = g.createSession(), cw = w.createSession();
    cg.captureAttention = true; cw.captureAttention = true;
    await cg.feed(ids.slice(0, 70));
    cw.feed(ids.slice(0, 70));
    let chunked = 0;
    for (let l = 0; l < g.info.layers; l++) {
      for (let h = 0; h < g.info.heads; h++) {
        const a = cg.attention(l, h), b = cw.attention(l, h);
        if (a.queries !== b.queries || a.keys !== b.keys) chunked = Infinity;
        for (let i = 0; i < a.probs.length; i++) chunked = Math.max(chunked, Math.abs(a.probs[i] - b.probs[i]));
      }
    }
    // After a feed without capture, no maps (as the WASM engine says).
    cg.captureAttention = false;
    await cg.feed([3]);
    let after = null;
    try { cg.attention(0, 0); } catch (e) { after = `${e.code}: ${e.message}`; }
    const r = { logits, probs, keys, computed, backend: sg.backend, capturedForwards, chunked, after };
    g.dispose(); w.dispose();
    return r;
  });

  if (existsSync(maker)) {
    mkdirSync(outDir, { recursive: true });
    const made = spawnSync(maker, [outDir, models], { encoding: 'utf8' });
    if (made.status !== 0) emit({ name: 'test models', error: made.stderr });
    await run('instrumented MoE decode', async () => {
      const g = await load(join(outDir, 'olmoe.gguf'), { device: 'webgpu' });
      const counts = instrument(g._mod);
      const s = g.createSession();
      await s.prefill(Array.from({ length: 9 }, (_, i) => 1 + i * 7));
      const before = { ...counts };
      const n = 6;
      for (let i = 0; i < n; i++) await s.feed([s.sample({ temperature: 0 })]);
      const per = (k) => (counts[k] - before[k]) / n;
      const r = { submitsPerToken: per('submits'), bytesPerToken: per('mappedBytes'), cpuForwards: counts.forwards, vocab: g.info.vocabSize, backend: s.backend };
      g.dispose();
      return r;
    });
    for (const [name, types] of GGUF) {
      await run(`gguf: ${name}`, async () => {
        const path = join(outDir, `${name}.gguf`);
        const warnings = [];
        const g = await load(path, { device: 'webgpu', onWarning: (x) => warnings.push(x) });
        const f32 = types.startsWith('f32');
        const w = await load(f32 ? path : (await quantize(path, { type: 'f32' })).bytes, { device: 'wasm' });
        const V = w.info.vocabSize;
        const ids = Array.from({ length: 66 }, (_, i) => 1 + ((i * 37) % (V - 1)));
        const sg = g.createSession(), sw = w.createSession();
        await sg.feed(ids, { allLogits: true });
        sw.feed(ids, { allLogits: true });
        const prefillDispatches = sg._gpu.dispatches.perLayer;  // the second chunk's: 2 tokens
        let prefill = 0;
        for (const i of [0, 9, 63, 64, 65]) prefill = Math.max(prefill, maxRel(sg.logits(i), sw.logits(i)));
        // For the record: WASM on the stored types (8-bit activations for the block types).
        let stored = null;
        if (!f32) {
          const q = await load(path, { device: 'wasm' });
          const sq = q.createSession();
          sq.feed(ids);
          stored = maxRel(sg.logits(65), sq.logits());
          q.dispose();
        }
        // Greedy decode from the WASM path's choices; a differing choice must be a near-tie.
        let decode = 0, same = 0, nearTie = null;
        for (let step = 0; step < 4; step++) {
          const lg = sg.logits(), lw = sw.logits();
          decode = Math.max(decode, maxRel(lg, lw));
          const tg = argmax(lg), tw = argmax(lw);
          if (tg !== tw && nearTie === null) nearTie = { step, gap: (lw[tw] - lw[tg]) / range(lw) };
          if (tg === tw && nearTie === null) same++;
          await sg.feed([tw]);
          sw.feed([tw]);
        }
        const decodeDispatches = sg._gpu.dispatches.perLayer;
        // Captured attention of a two-token feed on the GPU against the WASM engine's maps.
        let probs = null, keys = 0, capturedForwards = null;
        if (CAPTURED.has(name)) {
          const counts = instrument(g._mod);
          sg.captureAttention = true; sw.captureAttention = true;
          const f0 = counts.forwards;
          await sg.feed([ids[1], ids[2]]);
          capturedForwards = counts.forwards - f0;
          sw.feed([ids[1], ids[2]]);
          decode = Math.max(decode, maxRel(sg.logits(), sw.logits()));
          probs = 0;
          for (let l = 0; l < g.info.layers; l++) {
            for (let h = 0; h < g.info.heads; h++) {
              const a = sg.attention(l, h), b = sw.attention(l, h);
              keys = a.keys;
              if (a.probs.length !== b.probs.length) probs = Infinity;
              for (let i = 0; i < a.probs.length; i++) probs = Math.max(probs, Math.abs(a.probs[i] - b.probs[i]));
            }
          }
        }
        const r = {
          types, prefill, decode, same, nearTie, stored, probs, keys, capturedForwards, backend: sg.backend, warnings, reason: g.info.device.reason,
          prefillDispatches, decodeDispatches,
        };
        g.dispose(); w.dispose();
        return r;
      });
    }
  }

  if (existsSync(maker)) {
    const encDir = join(outDir, 'encoders');
    mkdirSync(encDir, { recursive: true });
    const made = spawnSync(maker, ['--encoders', encDir], { encoding: 'utf8' });
    if (made.status !== 0) emit({ name: 'encoder models', error: made.stderr });
    const texts = ['hello world', 'The quick brown fox jumps over the lazy dog.', 'a',
      Array.from({ length: 13 }, (_, i) => `word${i % 7} and more`).join(' ')];  // over 64 tokens
    const tooLong = Array.from({ length: 40 }, (_, i) => `word${i % 7} and more`).join(' ');  // over the context of 128
    for (const [name] of ENCODERS) {
      await run(`encoder: ${name}`, async () => {
        const path = join(encDir, `${name}.gguf`);
        const warnings = [];
        const g = await loadModel(path, { threads: 1, gpu, device: 'webgpu', onWarning: (x) => warnings.push(x) });
        const w = await loadModel(path, { threads: 1, device: 'wasm' });
        const counts = instrument(g._mod);
        let diff = 0, wasmEmbeds = 0;
        const poolings = [];
        for (const opts of [{}, { pooling: 'cls', normalize: false }, { pooling: 'last' }, { pooling: 'mean', normalize: false }]) {
          const e0 = counts.embeds;
          const a = await g.embed(texts, opts);
          wasmEmbeds += counts.embeds - e0;
          const b = await w.embed(texts, opts);
          for (let i = 0; i < texts.length; i++) diff = Math.max(diff, maxRel(a[i], b[i]));
          poolings.push(opts.pooling ?? 'default');
        }
        // truncate: the engine's cut (first tokens and the closing [SEP]) on both paths.
        const a = await g.embed([tooLong], { truncate: true }), b = await w.embed([tooLong], { truncate: true });
        diff = Math.max(diff, maxRel(a[0], b[0]));
        const r = {
          diff, poolings, backend: g.info.backend, warnings, reason: g.info.device.reason, wasmEmbeds,
          tokens: g.lastEmbedding.tokens, wasmTokens: w.lastEmbedding.tokens,
        };
        g.dispose(); w.dispose();
        return r;
      });
    }
    await run('encoder-decoder: t5', async () => {
      const warnings = [];
      const m = await loadModel(join(outDir, 't5.gguf'), { threads: 1, gpu, device: 'webgpu', onWarning: (x) => warnings.push(x) });
      const r = { device: m.info.device, warnings };
      m.dispose();
      return r;
    });
    await run('encoder auto: bert', async () => {
      const m = await loadModel(join(encDir, 'bert.gguf'), { threads: 1, gpu, device: 'auto' });
      const r = { device: m.info.device, backend: m.info.backend, dim: (await m.embed('hello'))[0].length };
      m.dispose();
      return r;
    });
  }

  await run('device lost mid-generation falls back to WASM', async () => {
    const warnings = [];
    const g = await load('aidreams260K.bin', { device: 'webgpu', onWarning: (x) => warnings.push(x) });
    const w = await load('aidreams260K.bin', { device: 'wasm' });
    const opts = { temperature: 0, maxTokens: 30 };
    const got = [];
    for await (const t of g.generate('I dream of', opts)) {
      if (t.token >= 0) got.push(t.token);
      if (got.length === 10) g._gpu.device.destroy();  // what a lost GPU looks like from here
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

  await run("gpuPrecision 'f16'", async () => {
    const warnings = [];
    const m = await load('stories260K.bin', { device: 'webgpu', gpuPrecision: 'f16', onWarning: (x) => warnings.push(x) });
    const r = { warnings, device: m.info.device, shaderF16: !!m._gpu?.device.features.has('shader-f16') };
    if (m.info.device.kvType === 'f16') {
      // Where the adapter has shader-f16: logits of a prefill over a chunk boundary and of decode
      // steps (split-K past 64 keys) against WASM's f32 cache.
      const w = await load('stories260K.bin', { device: 'wasm' });
      const ids = Array.from({ length: 70 }, (_, i) => 1 + ((i * 37) % 511));
      const sg = m.createSession(), sw = w.createSession();
      await sg.feed(ids, { allLogits: true });
      sw.feed(ids, { allLogits: true });
      let diff = 0;
      for (const i of [0, 63, 64, 69]) diff = Math.max(diff, maxRel(sg.logits(i), sw.logits(i)));
      for (const id of [5, 6, 7]) {
        await sg.feed([id]);
        sw.feed([id]);
        diff = Math.max(diff, maxRel(sg.logits(), sw.logits()));
      }
      r.diff = diff;
      r.decodeDispatches = sg._gpu.dispatches.perLayer;
      r.gpuKv = m.info.memory.gpuKvCacheBytes;
      w.dispose();
    }
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
    const { loadModel, quantize } = await import('../../src/js/node.js');
    await assert.rejects(loadModel(join(models, 'aidreams260K.bin'), { device: 'cuda' }),
      (e) => e.code === 'bad_argument' && /device must be one of/.test(e.message));
  });

  test('the whole model on WebGPU (SwiftShader)', { timeout: 1200000 }, async (t) => {
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
      await t.test(`same tokens as WASM: ${c.name}`, { skip: filtered(`tokens: ${c.name}`) }, () => {
        const r = get(`tokens: ${c.name}`);
        assert.equal(r.backend, 'webgpu');
        assert.equal(r.sessionBackend, 'webgpu');
        assert.deepEqual(r.warnings, []);
        assert.ok(r.wasmTokens.length >= 20, `only ${r.wasmTokens.length} tokens generated`);
        assert.deepEqual(r.gpuTokens, r.wasmTokens);
        assert.ok(r.gpuKv > 0, 'the KV cache lives on the GPU');
        assert.equal(r.cpuKv, 0, 'no CPU KV cache is filled under WebGPU');
        t.diagnostic(`${c.name}: ${r.gpuTokens.length} tokens identical`);
      });
    }
    await t.test('one submit, no CPU forward, logits-only readback per decoded token', { skip: filtered('instrumented decode') }, () => {
      const r = get('instrumented decode');
      assert.equal(r.submitsPerToken, 1);
      assert.equal(r.cpuForwards, 0, 'no token went through the WASM forward');
      assert.ok(r.bytesPerToken <= 4 * r.vocab, `${r.bytesPerToken} bytes read back per token (vocab ${r.vocab})`);
      assert.ok(r.callsPerToken < r.layers, `${r.callsPerToken} binding calls per token: per-layer work on the CPU?`);
      t.diagnostic(`per token: ${r.submitsPerToken} submit, ${r.dispatchesPerToken} dispatches, ${r.bytesPerToken} bytes read back, ${r.callsPerToken} binding calls (${r.layers} layers)`);
    });
    await t.test('dispatches per layer of a llama-shaped model (what fusion removes)', { skip: filtered('instrumented decode') }, () => {
      const r = get('instrumented decode');
      // The model's own count agrees with every dispatchWorkgroups the device saw.
      assert.equal(r.decode.total, r.dispatchesPerToken);
      assert.equal(r.decode.perLayer.length, r.layers);
      // Decode: q, k, v products (RMSNorm folded in; RoPE and the KV-cache write in their
      // epilogues), attention, output (residual folded in), gate x up, down (residual folded in).
      // With a RoPE dispatch of its own it was 8.
      assert.deepEqual(r.decode.perLayer, Array(r.layers).fill(7), `decode dispatches per layer ${r.decode.perLayer}`);
      // Prefill: the two norms are their own dispatches (10 with a RoPE dispatch).
      assert.deepEqual(r.prefill.perLayer, Array(r.layers).fill(9), `prefill dispatches per layer ${r.prefill.perLayer}`);
      t.diagnostic(`decode: ${r.decode.total} dispatches per token, ${r.decode.perLayer[0]} per layer; prefill: ${r.prefill.perLayer[0]} per layer`);
    });
    await t.test('MoE: one submit, no CPU forward per decoded token', { skip: !existsSync(maker) ? `${maker} is not built` : filtered('instrumented MoE decode') }, () => {
      const r = get('instrumented MoE decode');
      assert.equal(r.backend, 'webgpu');
      assert.equal(r.submitsPerToken, 1);
      assert.equal(r.cpuForwards, 0, 'no token went through the WASM forward');
      assert.ok(r.bytesPerToken <= 4 * r.vocab, `${r.bytesPerToken} bytes read back per token (vocab ${r.vocab})`);
    });
    await t.test('logits and attention maps match WASM', { skip: filtered('logits over a chunk boundary, prefill reuse, captured attention') }, () => {
      const r = get('logits over a chunk boundary, prefill reuse, captured attention');
      t.diagnostic(`max relative logit difference ${r.logits.toExponential(2)}, max probability difference ${r.probs.toExponential(2)} over ${r.keys} keys`);
      assert.ok(r.logits <= TOL, `logits differ by ${r.logits}`);
      assert.ok(r.probs <= TOL, `attention probabilities differ by ${r.probs}`);
      assert.equal(r.keys, 145);
      assert.equal(r.capturedForwards, 0, 'the captured feed ran on the GPU');
      assert.ok(r.chunked <= TOL, `maps of a two-chunk captured feed differ by ${r.chunked}`);
      assert.match(r.after, /^bad_argument: no attention recorded/);
      assert.equal(r.computed, 2, 'prefill reuses the cached prefix');
      assert.equal(r.backend, 'webgpu');
    });
    const haveModels = existsSync(maker);
    for (const [name, types] of GGUF) {
      await t.test(`${name} (${types}): logits against WASM`, { skip: !haveModels ? `${maker} is not built` : filtered(`gguf: ${name}`) }, () => {
        const r = get(`gguf: ${name}`);
        const tol = TOL;
        assert.equal(r.backend, 'webgpu', r.reason);
        assert.deepEqual(r.warnings, []);
        t.diagnostic(`${name}: prefill ${r.prefill.toExponential(2)}, decode ${r.decode.toExponential(2)} (tol ${tol}); ` +
          `greedy: ${r.same}/4 equal${r.nearTie ? `, then a near-tie (gap ${r.nearTie.gap.toExponential(2)} of the logit range)` : ''}` +
          (r.stored === null ? '' : `; against WASM on the stored weights (8-bit activations for the block types): ${r.stored.toExponential(2)}`));
        assert.ok(r.prefill <= tol, `prefill logits differ by ${r.prefill}`);
        assert.ok(r.decode <= tol, `decode logits differ by ${r.decode}`);
        if (r.nearTie) assert.ok(r.nearTie.gap <= 2 * tol, `greedy choice differs at step ${r.nearTie.step} by ${r.nearTie.gap} of the range`);
        const want = DISPATCHES[name];
        if (want) {
          const layers = r.decodeDispatches.length;
          assert.deepEqual(r.decodeDispatches, Array(layers).fill(want.decode), 'decode dispatches per layer');
          assert.deepEqual(r.prefillDispatches, Array(layers).fill(want.prefill), 'prefill dispatches per layer');
        }
        if (CAPTURED.has(name)) {
          assert.equal(r.keys, 72, 'captured maps span every cached key');
          assert.ok(r.probs <= tol, `captured attention probabilities differ by ${r.probs}`);
          assert.equal(r.capturedForwards, 0, 'the captured feed ran on the GPU, not in WASM');
        }
      });
    }
    for (const [name, what] of ENCODERS) {
      await t.test(`encoder ${name} (${what}): embeddings on the GPU against WASM`, { skip: !haveModels ? `${maker} is not built` : filtered(`encoder: ${name}`) }, () => {
        const r = get(`encoder: ${name}`);
        assert.equal(r.backend, 'webgpu', r.reason);
        assert.deepEqual(r.warnings, []);
        assert.equal(r.wasmEmbeds, 0, 'no text was embedded by the WASM encoder');
        assert.deepEqual(r.tokens, r.wasmTokens);
        t.diagnostic(`${name}: max relative embedding difference ${r.diff.toExponential(2)} over poolings ${r.poolings.join(', ')}`);
        assert.ok(r.diff <= TOL, `embeddings differ by ${r.diff}`);
      });
    }
    await t.test("t5 with 'webgpu': WASM, with the reason and a warning", { skip: !haveModels ? `${maker} is not built` : filtered('encoder-decoder: t5') }, () => {
      const r = get('encoder-decoder: t5');
      assert.equal(r.device.kind, 'wasm');
      assert.equal(r.device.requested, 'webgpu');
      assert.match(r.device.reason, /relative-position biases and cross-attention/);
      assert.deepEqual(r.warnings.map((w) => w.code), ['webgpu_unsupported']);
    });
    await t.test("encoder 'auto': one embedding timed on each backend", { skip: !haveModels ? `${maker} is not built` : filtered('encoder auto: bert') }, () => {
      const r = get('encoder auto: bert');
      const m = r.device.measured;
      assert.ok(m && m.what === 'one embedding' && m.webgpuMs > 0 && m.wasmMs > 0, JSON.stringify(r.device));
      assert.equal(r.backend, m.webgpuMs < m.wasmMs ? 'webgpu' : 'wasm');
      assert.match(r.device.reason, /^auto: (WebGPU|WASM) is faster \(one embedding/);
      assert.equal(r.dim, 64);
      t.diagnostic(r.device.reason);
    });
    await t.test('a lost device falls back to WASM, same tokens', { skip: filtered('device lost mid-generation falls back to WASM') }, () => {
      const r = get('device lost mid-generation falls back to WASM');
      assert.deepEqual(r.got, r.want);
      assert.equal(r.backend, 'wasm');
      assert.equal(r.sessionBackend, 'wasm');
      assert.equal(r.warnings.length, 1);
      assert.equal(r.warnings[0].code, 'webgpu_failed');
      assert.match(r.reason, /WebGPU failed/);
    });
    await t.test("'auto' reports a measured choice", { skip: filtered('auto measures and reports its choice') }, () => {
      const r = get('auto measures and reports its choice');
      const m = r.device.measured;
      assert.ok(m && m.webgpuMs > 0 && m.wasmMs > 0, JSON.stringify(r.device));
      assert.equal(r.backend, m.webgpuMs < m.wasmMs ? 'webgpu' : 'wasm');
      assert.match(r.device.reason, /^auto: (WebGPU|WASM) is faster \(one decode step/);
      assert.ok(r.text.length > 0);
      t.diagnostic(r.device.reason);
    });
    await t.test("gpuPrecision 'f16': an f16 KV cache with shader-f16, else f32 and a warning", { skip: filtered("gpuPrecision 'f16'") }, () => {
      const r = get("gpuPrecision 'f16'");
      assert.equal(r.device.kind, 'webgpu');
      if (!r.shaderF16) {
        assert.equal(r.device.kvType, 'f32');
        assert.deepEqual(r.warnings.map((w) => w.code), ['webgpu_f16_unavailable']);
        t.diagnostic('this adapter has no shader-f16 (SwiftShader): the f32 fallback and its warning');
        return;
      }
      assert.equal(r.device.kvType, 'f16');
      assert.deepEqual(r.warnings, []);
      t.diagnostic(`f16 KV cache: max relative logit difference ${r.diff.toExponential(2)} (tol ${TOL_F16})`);
      assert.ok(r.diff <= TOL_F16, `logits differ by ${r.diff}`);
      // The f16 cache is written by the k and v products' epilogue, as the f32 one: no rope_kv.wgsl
      // (q, k, v, attention in two past 64 keys, o, gate x up, down).
      assert.deepEqual(r.decodeDispatches, Array(r.decodeDispatches.length).fill(8));
    });
    await t.test("'webgpu' without an adapter: WASM and a typed warning", { skip: filtered('webgpu without an adapter falls back with a warning') }, () => {
      const r = get('webgpu without an adapter falls back with a warning');
      assert.equal(r.device.kind, 'wasm');
      assert.equal(r.warnings.length, 1);
      assert.equal(r.warnings[0].code, 'webgpu_unavailable');
      assert.match(r.warnings[0].message, /no GPU adapter/);
      assert.ok(r.text.length > 0);
    });
  });
}
