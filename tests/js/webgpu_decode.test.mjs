// The decode-speed side of the whole-model WebGPU path:
// - GPU top-k readback (src/webgpu/topk.wgsl, src/js/gpu-topk.js): the kernel's candidates
//   against a sort written here (logit descending, id ascending, NaN as -inf) on odd vocabularies
//   with long runs of ties; the row rebuilt from candidates against the full row through the WASM
//   sampler (the reference) over many seeds and settings: the same token whenever the rebuilt row
//   is used; generate() on WebGPU against WASM with greedy and seeded top-k, the bytes read back
//   per token counted by instrumentation.
// - Split-K decode attention (src/webgpu/attention_cached.wgsl partial) and RMSNorm folded into the
//   decode products (matvec.wgsl NORM): decode logits against WASM at positions that take 1 to 5
//   splits, and the dispatches per decoded token counted by instrumentation.
// Runs on SwiftShader (no GPU here): correctness and counts only, no timings.
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { dawnGpu, gpuSkipReason, runGpuChild } from './gpu-env.mjs';
import { models } from './helpers.mjs';

const TOL = 1e-4;  // logits against WASM, relative to the largest magnitude (webgpu_model.test.mjs)

/** xorshift32 in [0, 1). */
function rng(seed) {
  let x = seed | 0 || 1;
  return () => { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; return (x >>> 0) / 4294967296; };
}
function normal(r) { return Math.sqrt(-2 * Math.log(r() + 1e-12)) * Math.cos(2 * Math.PI * r()); }

/** A logits row: normal(scale), optionally rounded (long runs of equal values), with NaN and -inf sprinkled. */
function makeRow(V, seed, { scale = 3, round = false, specials = false } = {}) {
  const r = rng(seed), a = new Float32Array(V);
  for (let i = 0; i < V; i++) a[i] = round ? Math.round(normal(r) * scale) : normal(r) * scale;
  if (specials) for (let i = 0; i < V; i += 97) a[i] = i % 2 ? NaN : -Infinity;
  return a;
}

/** The first K (id, logit bits) of the order topk.wgsl promises. */
function referenceTop(row, K) {
  const key = (v) => (Number.isNaN(v) ? -Infinity : v);
  const ids = Array.from(row.keys()).sort((a, b) => key(row[b]) - key(row[a]) || a - b).slice(0, K);
  const pairs = new Uint32Array(2 * K), bits = new Uint32Array(row.buffer);
  ids.forEach((id, i) => { pairs[2 * i] = id; pairs[2 * i + 1] = bits[id]; });
  return pairs;
}

async function child() {
  const emit = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
  const run = async (name, fn) => {
    const r = { name }, t0 = performance.now();
    try { Object.assign(r, await fn(), { ms: Math.round(performance.now() - t0) }); } catch (e) { r.error = `${e?.code ?? ''} ${e?.stack ?? e}`; }
    emit(r);
  };
  const gpu = await dawnGpu();
  const { requestQkvDevice } = await import('../../src/js/webgpu.js');
  const { createTopK, candidateLogits, gpuCandidates, TOPK_MAX } = await import('../../src/js/gpu-topk.js');
  const { loadModel } = await import('../../src/js/node.js');

  await run('topk kernel', async () => {
    const { device } = await requestQkvDevice({ gpu });
    const bad = [];
    let checked = 0;
    // One pipeline per vocabulary (a constant of the kernel); k is per step.
    for (const [V, Ks] of [[7, [1, 7]], [600, [1, 40]], [2049, [1, 256]], [20011, [40]]]) {
      const logits = device.createBuffer({ size: V * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
      const step = device.createBuffer({ size: 16, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
      const read = device.createBuffer({ size: 256 * 8, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
      const op = createTopK(device, { logits, vocab: V, step });
      await op.ready;
      for (const K of Ks) {
        for (const variant of [{}, { round: true, scale: 1.5 }, { specials: true }, { round: true, scale: 0 }]) {
          const row = makeRow(V, V + K, variant);
          device.queue.writeBuffer(logits, 0, row);
          device.queue.writeBuffer(step, 0, new Uint32Array([1, 0, K, 0]));
          const enc = device.createCommandEncoder();
          const pass = enc.beginComputePass();
          op.encode(pass);
          pass.end();
          enc.copyBufferToBuffer(op.out, 0, read, 0, K * 8);
          device.queue.submit([enc.finish()]);
          await read.mapAsync(GPUMapMode.READ, 0, K * 8);
          const got = new Uint32Array(read.getMappedRange(0, K * 8).slice(0));
          read.unmap();
          const want = referenceTop(row, K);
          const diff = want.findIndex((w, i) => w !== got[i]);
          if (diff >= 0) bad.push({ V, K, variant, at: diff >> 1, got: [got[diff & ~1], got[diff | 1]], want: [want[diff & ~1], want[diff | 1]] });
          checked++;
        }
      }
      op.dispose(); logits.destroy(); step.destroy(); read.destroy();
    }
    device.destroy();
    return { bad, checked };
  });

  await run('rebuilt rows draw what full rows draw', async () => {
    const m = await loadModel(join(models, 'stories260K.bin'), { tokenizer: join(models, 'aidreams-tok512.bin'), threads: 1, device: 'wasm' });
    const V = m.info.vocabSize, mod = m._mod, h = m.createSession()._h;
    const draw = (row, o) => {
      const s = new mod.Sampler(V, o);
      h.truncate(0);
      h.feedLogits([1], row, 1);
      const t = h.sample(s);
      s.delete();
      return t;
    };
    let same = 0, fallback = 0, refused = 0;
    const differ = [];
    let seed = 1;
    for (const variant of [{ scale: 0.3 }, { scale: 3 }, { scale: 20 }, { round: true, scale: 1 }, { specials: true, scale: 3 }]) {
      for (const o of [
        { temperature: 0 }, { temperature: 1, topK: 1 }, { temperature: 1, topK: 5 }, { temperature: 0.7, topK: 40, topP: 0.9 },
        { temperature: 1.5, topK: 40, topP: 1 }, { temperature: 1, topK: 20, minP: 0.05 }, { temperature: 2, topK: 240 },
        { temperature: 1, topK: 0, topP: 0.9 }, { temperature: 0, repetitionPenalty: 1.2 },
      ]) {
        for (let rep = 0; rep < 6; rep++, seed++) {
          const row = makeRow(V, 1000 + seed, variant);
          const opts = { topP: 1, minP: 0, repetitionPenalty: 1, ...o, seed };
          const K = gpuCandidates(opts, V);
          if (!K) { refused++; continue; }
          const rebuilt = candidateLogits(referenceTop(row, K), V, opts);
          if (!rebuilt) { fallback++; continue; }
          const a = draw(row, opts), b = draw(rebuilt, opts);
          if (a === b) same++; else differ.push({ o, variant, seed, full: a, rebuilt: b });
        }
      }
    }
    m.dispose();
    return { same, fallback, refused, differ };
  });

  // One model pair for the model-level parts: on SwiftShader compiling the pipelines is the cost.
  const tokenizer = join(models, 'aidreams-tok512.bin');
  const load = (device) => loadModel(join(models, 'stories260K.bin'), { tokenizer, threads: 1, gpu, device });
  const g = await load('webgpu'), w = await load('wasm');
  await run('generate on WebGPU with top-k readback', async () => {
    const sizes = [];
    const range = GPUBuffer.prototype.getMappedRange;
    GPUBuffer.prototype.getMappedRange = function (...a) { const r = range.apply(this, a); sizes.push(r.byteLength); return r; };
    const out = [];
    for (const o of [{ temperature: 0 }, { temperature: 1, topK: 40, seed: 7 }, { temperature: 0.8, topK: 5, topP: 0.9, seed: 3 }]) {
      const opts = { maxTokens: 24, ...o };
      const tokens = async (m) => {
        const s = m.createSession(), t = [];
        for await (const x of s.generate('Once upon a time', opts)) if (x.token >= 0) t.push(x.token);
        return { t, s };
      };
      sizes.length = 0;
      const a = await tokens(g);
      const mapped = [...sizes];
      const b = await tokens(w);
      // After the generation logits() holds the whole row again (read back once).
      const la = a.s.logits(), lb = b.s.logits();
      let scale = 0, diff = 0;
      for (let i = 0; i < la.length; i++) { scale = Math.max(scale, Math.abs(lb[i])); diff = Math.max(diff, Math.abs(la[i] - lb[i])); }
      // A seeded draw whose coin lands within the two engines' float difference of a boundary of
      // the cumulative distribution may take the neighbouring token: at the first divergence, the
      // WASM row there (the common prefix fed again) must rank the two tokens next to each other.
      const at = a.t.findIndex((x, i) => x !== b.t[i]);
      let divergence = null;
      if (at >= 0 && at < b.t.length) {
        const s = w.createSession();
        await s.feed([...w.tokenize('Once upon a time'), ...b.t.slice(0, at)]);
        const row = s.logits();
        s.dispose();
        const order = Array.from(row.keys()).sort((x, y) => row[y] - row[x]);
        divergence = { at, gpuRank: order.indexOf(a.t[at]), wasmRank: order.indexOf(b.t[at]) };
      }
      out.push({ o, gpu: a.t, wasm: b.t, divergence, K: gpuCandidates({ topP: 1, ...o }, g.info.vocabSize), mapped, vocab: g.info.vocabSize, logits: diff / scale, backend: a.s.backend });
      a.s.dispose(); b.s.dispose();
    }
    GPUBuffer.prototype.getMappedRange = range;
    return { runs: out, TOPK_MAX };
  });
  await run('split-K decode attention against WASM', async () => {
    const counts = { dispatches: 0 };
    const dispatch = GPUComputePassEncoder.prototype.dispatchWorkgroups;
    GPUComputePassEncoder.prototype.dispatchWorkgroups = function (...a) { counts.dispatches++; return dispatch.apply(this, a); };
    const sg = g.createSession(), sw = w.createSession();
    const ids = Array.from({ length: 512 }, (_, i) => 1 + ((i * 131) % 511));
    const steps = [];
    const decode = async (upto) => {
      while (sg.position < upto) {
        const id = ids[sg.position], before = counts.dispatches;
        await sg.feed([id]);
        sw.feed([id]);
        const a = sg.logits(), b = sw.logits();
        let scale = 0, diff = 0;
        for (let i = 0; i < a.length; i++) { scale = Math.max(scale, Math.abs(b[i])); diff = Math.max(diff, Math.abs(a[i] - b[i])); }
        steps.push({ position: sg.position - 1, rel: diff / scale, dispatches: counts.dispatches - before });
      }
    };
    // Keys 63..66 (one split, then two), 129..131 (three), 256..258 (four, then five).
    await sg.feed(ids.slice(0, 62)); sw.feed(ids.slice(0, 62));
    await decode(66);
    await sg.feed(ids.slice(66, 128)); sw.feed(ids.slice(66, 128));
    await decode(131);
    await sg.feed(ids.slice(131, 255)); sw.feed(ids.slice(131, 255));
    await decode(258);
    GPUComputePassEncoder.prototype.dispatchWorkgroups = dispatch;
    const r = { steps, layers: g.info.layers, backend: sg.backend };
    sg.dispose(); sw.dispose();
    return r;
  });
  g.dispose(); w.dispose();
  process.exit(0);  // Dawn keeps the event loop alive otherwise
}

if (process.argv.includes('--child')) {
  await child();
} else {
  const { test } = await import('node:test');
  const assert = (await import('node:assert/strict')).default;
  const skipReason = gpuSkipReason();

  test('gpuCandidates: which sampling settings can use GPU candidates', async () => {
    const { gpuCandidates, TOPK_MAX } = await import('../../src/js/gpu-topk.js');
    assert.equal(gpuCandidates({ temperature: 0 }, 32000), 1);
    assert.equal(gpuCandidates({ temperature: 1, topK: 40 }, 32000), 56);
    assert.equal(gpuCandidates({ temperature: 1, topK: 40 }, 50), 50);
    assert.equal(gpuCandidates({ temperature: 1, topK: 0, topP: 0.9 }, 32000), 0, 'top-p alone reads every logit');
    assert.equal(gpuCandidates({ temperature: 1, topK: TOPK_MAX }, 32000), 0);
    assert.equal(gpuCandidates({ temperature: 0, repetitionPenalty: 1.1 }, 32000), 0);
    assert.equal(gpuCandidates({ temperature: 0, logitBias: { 5: 1 } }, 32000), 0);
    assert.equal(gpuCandidates({ temperature: 0, grammar: 'root ::= "a"' }, 32000), 0);
    assert.equal(gpuCandidates({ temperature: 0, logprobs: 0 }, 32000), 0);
    assert.equal(gpuCandidates({ temperature: 0, presencePenalty: 0.5 }, 32000), 0);
    assert.equal(gpuCandidates(null, 32000), 0);
  });

  test('WebGPU decode: top-k readback (SwiftShader)', { timeout: 600000 }, async (t) => {
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
    await t.test('top-k kernel: the sorted candidates, ties by id, NaN as -inf', () => {
      const r = get('topk kernel');
      assert.deepEqual(r.bad, []);
      assert.equal(r.checked, 28);
    });
    await t.test('a row rebuilt from candidates draws the full row\'s token (WASM sampler)', () => {
      const r = get('rebuilt rows draw what full rows draw');
      t.diagnostic(`${r.same} draws equal, ${r.fallback} steps fell back to the whole row, ${r.refused} settings read every logit`);
      assert.deepEqual(r.differ, []);
      assert.ok(r.same >= 150, `only ${r.same} draws compared`);
      assert.equal(r.refused, 5 * 2 * 6);
    });
    await t.test('generate: WASM\'s tokens, candidates only read back', () => {
      const r = get('generate on WebGPU with top-k readback');
      for (const run of r.runs) {
        assert.equal(run.backend, 'webgpu');
        assert.ok(run.wasm.length >= 16, `only ${run.wasm.length} tokens`);
        if (run.divergence) {  // a seeded draw at a boundary: the neighbouring token, greedy never
          t.diagnostic(`${JSON.stringify(run.o)}: diverges at token ${run.divergence.at} (ranks ${run.divergence.wasmRank} / ${run.divergence.gpuRank} in WASM's row)`);
          assert.ok(run.o.temperature > 0, 'greedy tokens differ');
          assert.equal(Math.abs(run.divergence.gpuRank - run.divergence.wasmRank), 1, JSON.stringify(run.divergence));
          assert.ok(run.divergence.at >= 8, `diverges early, at token ${run.divergence.at}`);
          assert.equal(r.runs.filter((x) => x.divergence).length, 1, 'more than one run diverges');
        } else {
          assert.deepEqual(run.gpu, run.wasm, JSON.stringify(run.o));
        }
        assert.ok(run.K >= 1 && run.K < run.vocab);
        // Every map is K pairs, but one: the whole row once the generation ends (for logits()).
        const whole = run.mapped.filter((b) => b > 8 * run.K);
        assert.deepEqual(whole, [4 * run.vocab], `maps: ${run.mapped.join(', ')}`);
        assert.equal(run.mapped.length, run.gpu.length + 2, 'one map per fed token, plus the prompt\'s and the final row');
        assert.ok(run.logits <= TOL, `logits after the generation differ by ${run.logits}`);
        const per = (run.mapped.reduce((a, b) => a + b, 0) - 4 * run.vocab) / (run.mapped.length - 1);
        t.diagnostic(`${JSON.stringify(run.o)}: ${run.gpu.length} tokens as WASM; ${per} bytes read back per token (whole row: ${4 * run.vocab})`);
      }
    });
    await t.test('split-K decode attention, folded norms: logits as WASM at 1 to 5 splits', () => {
      const r = get('split-K decode attention against WASM');
      assert.equal(r.backend, 'webgpu');
      assert.deepEqual(r.steps.map((x) => x.position), [62, 63, 64, 65, 128, 129, 130, 255, 256, 257]);
      for (const x of r.steps) assert.ok(x.rel <= TOL, `position ${x.position}: logits differ by ${x.rel}`);
      // Past 64 keys the attention is two dispatches per layer (splits, then their reduction).
      const one = r.steps.find((x) => x.position === 63).dispatches;
      // Fused decode (RMSNorm folded into q/k/v, gate x up and the classifier; RoPE and the
      // cache write in the q/k/v epilogues; residual adds in the o and down products): the
      // embedding row, per layer q, k, v, attention, o, gate x up, down, then the classifier.
      // It was 2 + 8 per layer with a RoPE dispatch, 3 + 10 unfused.
      assert.equal(one, 2 + 7 * r.layers, 'dispatches per decoded token');
      for (const x of r.steps) assert.equal(x.dispatches, one + (x.position >= 64 ? r.layers : 0), `position ${x.position}`);
      t.diagnostic(`max relative logit difference ${Math.max(...r.steps.map((x) => x.rel)).toExponential(2)}; ` +
        `dispatches per decoded token: ${one} (one split), ${one + r.layers} (split-K)`);
    });
  });
}
