// The JS training API (createTrainer) in Node: the loss falls; the losses match the native
// trainer's for the same configuration; resume and stop/run continue exactly; fine-tuning
// starts from the model's weights (checked against the inference engine's own loss); the
// worker path gives the same losses; bad options are typed errors.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { QkvError, createTrainer, loadModel } from '../../src/js/node.js';
import { haveNative, root, runNative } from './helpers.mjs';

const tmp = mkdtempSync(join(tmpdir(), 'qkv-train-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

/** Short sentences in a fixed pseudo-random order (documents of 8 sentences). */
function toyCorpus(n = 600) {
  const s = ['the cat sat on the mat.', 'the dog ran to the park.', 'a bird sang in the tree.',
    'the sun rose over the hill.', 'we walked along the river.', 'she read a book by the fire.'];
  let x = 12345, text = '';
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    text += s[(x >>> 16) % 6] + (i % 8 === 7 ? '\n\n' : ' ');
  }
  return text;
}
const TEXT = toyCorpus();
const SHAPE = { dim: 32, layers: 2, heads: 4, kvHeads: 2, hiddenDim: 64 };
const BASE = { text: TEXT, shape: SHAPE, tokenizer: { vocab: 300 }, seq: 32, batch: 4, steps: 12, warmup: 2, lr: 1e-2, seed: 7, valFraction: 0.1, evalBatches: 2 };

async function losses(trainer, n) {
  const out = [];
  for (let i = 0; i < n; i++) out.push((await trainer.step()).loss);
  return out;
}

test('a tiny model learns: the loss falls, the GGUF loads and generates', async () => {
  const t = await createTrainer({ ...BASE, steps: 30, threads: 1 });
  try {
    assert.equal(t.info.worker, false);
    assert.equal(t.info.vocabSize, 300);
    const l = await losses(t, 30);
    const last = l.slice(-5).reduce((a, b) => a + b) / 5;
    assert.ok(last < 0.7 * l[0], `first ${l[0]}, last five ${last}`);
    assert.ok(t.done);
    await assert.rejects(t.step(), (e) => e instanceof QkvError && e.code === 'bad_argument' && /complete/.test(e.message));
    const val = await t.evaluate();
    assert.ok(val < 0.7 * l[0], `held-out ${val}`);
    const m = await loadModel(await t.toGGUF({ dtype: 'f16', name: 'toy' }), { threads: 1 });
    assert.equal(m.info.dim, 32);
    const text = await m.complete('the cat', { temperature: 0, maxTokens: 12 });
    assert.ok(text.length > 5, text);
    m.dispose();
  } finally {
    t.dispose();
  }
});

test('same configuration and thread count: the losses of the native trainer (qkv train)', { skip: !haveNative && 'no native build' }, async () => {
  // The same tokenizer file for both (learned once natively), the same data, one thread.
  const data = join(tmp, 'toy.txt'), tok = join(tmp, 'toy-tok.gguf');
  writeFileSync(data, TEXT);
  let r = runNative(['train-tokenizer', data, '--vocab', '300', '--out', tok]);
  assert.equal(r.status, 0, r.stderr);
  const steps = 6;
  const conf = join(tmp, 'toy.conf');
  writeFileSync(conf, `dim = 32\nn_layers = 2\nn_heads = 4\nn_kv_heads = 2\nhidden_dim = 64\nseq_len = 32\nbatch = 4\n` +
    `steps = ${steps}\nwarmup = 2\nlr = 1e-2\nseed = 7\nval_fraction = 0.1\neval_interval = 0\nlog_interval = 1\nthreads = 1\n` +
    `data = ${data}\ntokenizer = ${tok}\nout = ${join(tmp, 'native.gguf')}\n`);
  r = runNative(['train', conf]);
  assert.equal(r.status, 0, r.stderr);
  const native = [...r.stderr.matchAll(/step +\d+\/\d+ \| loss ([0-9.]+)/g)].map((m) => Number(m[1]));
  assert.equal(native.length, steps, r.stderr);
  const t = await createTrainer({ ...BASE, tokenizer: readFileSync(tok), steps, threads: 1 });
  try {
    const js = await losses(t, steps);
    // The native build sums in 16-float (AVX-512) or 8-float vectors, WASM in 4-float ones: the
    // same arithmetic up to float rounding, printed by the CLI to 4 decimals.
    for (let i = 0; i < steps; i++) assert.ok(Math.abs(js[i] - native[i]) < 2e-4, `step ${i + 1}: JS ${js[i]}, native ${native[i]}`);
  } finally {
    t.dispose();
  }
});

test('attention kinds (a block-sparse and an additive layer): the losses of the native trainer, and the GGUF keeps the kinds', { skip: !haveNative && 'no native build' }, async () => {
  // seq 32 in blocks of 4 with a window of 1 and one random block: the pattern hides keys, so a
  // trainer that dropped it would give other losses; the later steps' losses follow the gradients.
  const data = join(tmp, 'toy.txt'), tok = join(tmp, 'toy-kinds-tok.gguf');
  writeFileSync(data, TEXT);
  let r = runNative(['train-tokenizer', data, '--vocab', '300', '--out', tok]);
  assert.equal(r.status, 0, r.stderr);
  const steps = 6;
  const conf = join(tmp, 'toy-kinds.conf');
  writeFileSync(conf, `dim = 32\nn_layers = 2\nn_heads = 4\nn_kv_heads = 2\nhidden_dim = 64\nseq_len = 32\nbatch = 4\n` +
    `attention = block_sparse, additive\nadditive_dim = 12\nsparse_block = 4\nsparse_window = 1\nsparse_global = 2\n` +
    `sparse_random = 1\nsparse_seed = 5\n` +
    `steps = ${steps}\nwarmup = 2\nlr = 1e-2\nseed = 7\nval_fraction = 0.1\neval_interval = 0\nlog_interval = 1\nthreads = 1\n` +
    `data = ${data}\ntokenizer = ${tok}\nout = ${join(tmp, 'native-kinds.gguf')}\n`);
  r = runNative(['train', conf]);
  assert.equal(r.status, 0, r.stderr);
  const native = [...r.stderr.matchAll(/step +\d+\/\d+ \| loss ([0-9.]+)/g)].map((m) => Number(m[1]));
  assert.equal(native.length, steps, r.stderr);
  const pattern = { blockSize: 4, windowBlocks: 1, globalTokens: 2, randomBlocks: 1, seed: 5 };
  const t = await createTrainer({ ...BASE, tokenizer: readFileSync(tok), steps, threads: 1, simd: 'baseline',
    attention: ['block_sparse', 'additive'], additiveDim: 12, sparsePattern: pattern });
  try {
    assert.deepEqual(t.info.attentionKinds, ['block_sparse', 'additive']);
    assert.equal(t.info.additiveLength, 12);
    assert.deepEqual(t.info.sparsePattern, pattern);
    const js = await losses(t, steps);
    for (let i = 0; i < steps; i++) assert.ok(Math.abs(js[i] - native[i]) < 2e-4, `step ${i + 1}: JS ${js[i]}, native ${native[i]}`);
    // The written model carries the kinds it trained with, as the engine reads them back.
    const m = await loadModel(await t.toGGUF({ dtype: 'f32' }), { threads: 1, simd: 'baseline' });
    try {
      assert.deepEqual(m.info.attentionKinds, ['block_sparse', 'additive']);
      assert.equal(m.info.additiveLength, 12);
      assert.deepEqual(m.info.sparsePattern, pattern);
    } finally {
      m.dispose();
    }
  } finally {
    t.dispose();
  }
});

test('saveState/loadState and stop()/run() continue exactly', async () => {
  const whole = await createTrainer({ ...BASE, threads: 1 });
  const want = await losses(whole, 12);
  const valWant = await whole.evaluate();
  whole.dispose();

  const a = await createTrainer({ ...BASE, threads: 1 });
  const first = await losses(a, 5);
  const state = await a.saveState();
  a.dispose();
  const b = await createTrainer({ ...BASE, threads: 1 });
  await b.loadState(state);
  assert.equal(b.stepsDone, 5);
  const rest = await losses(b, 7);
  assert.deepEqual([...first, ...rest], want);
  assert.equal(await b.evaluate(), valWant);
  // A state of another run, or damaged, is refused.
  await assert.rejects(b.loadState(state.subarray(0, 100)), (e) => e instanceof QkvError && e.code === 'bad_model');
  const other = await createTrainer({ ...BASE, seed: 8, threads: 1 });
  await assert.rejects(other.loadState(state), (e) => e instanceof QkvError && e.code === 'bad_argument' && /another run/.test(e.message));
  other.dispose();
  b.dispose();

  // run() streams steps; stop() ends it after the current step; run() again resumes.
  const c = await createTrainer({ ...BASE, threads: 1 });
  const seen = [];
  const r1 = await c.run({ onStep: (s) => { seen.push(s.loss); if (s.step === 4) c.stop(); } });
  assert.deepEqual(r1, { stepsDone: 4, stopped: true, valLoss: null });
  const r2 = await c.run({ onStep: (s) => seen.push(s.loss), evalEvery: 6 });
  assert.equal(r2.stopped, false);
  assert.equal(r2.valLoss, valWant);
  assert.deepEqual(seen, want);
  assert.deepEqual(c.history.map((s) => s.loss), want);
  assert.ok(c.history.every((s) => s.tokens === 128 && s.tokensPerSecond > 0));
  // The async iterator: the same steps; leaving the loop stops, a new loop resumes.
  const e = await createTrainer({ ...BASE, threads: 1 });
  const it = [];
  for await (const s of e.steps()) { it.push(s.loss); if (s.step === 3) break; }
  assert.equal(e.stepsDone, 3);
  for await (const s of e.steps()) it.push(s.loss);
  assert.deepEqual(it, want);
  e.dispose();
  // An aborted run rejects with 'aborted' after the current step.
  const d = await createTrainer({ ...BASE, threads: 1 });
  const ac = new AbortController();
  await assert.rejects(d.run({ signal: ac.signal, onStep: (s) => { if (s.step === 2) ac.abort(); } }), (e) => e.code === 'aborted');
  assert.equal(d.stepsDone, 2);
  d.dispose();
  c.dispose();
});

test('fine-tuning models/kjv-2m.gguf starts from its weights: held-out loss = the inference engine\'s', async () => {
  const path = join(root, 'models', 'kjv-2m.gguf');
  const text = 'In the beginning God created the heaven and the earth. And the earth was without form, and void; ' +
    'and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. '.repeat(6);
  const t = await createTrainer({ text, model: path, seq: 32, batch: 2, steps: 3, lr: 1e-4, valFraction: 0.5, evalBatches: 2, threads: 1 });
  const m = await loadModel(path, { threads: 1 });
  try {
    assert.equal(t.info.dim, 192);
    assert.equal(t.info.contextLength, 128);
    assert.equal(t.info.seq, 32);
    const val = await t.evaluate();
    // The same windows scored by the inference engine (one document: the ids are the prompt's).
    const ids = m.tokenize(text);
    const T = 32, nVal = Math.floor(ids.length * 0.5), nTrain = ids.length - nVal;
    const windows = Math.min(Math.floor((nVal - 1) / T), 2 * 2);
    let sum = 0;
    const s = m.createSession();
    for (let w = 0; w < windows; w++) {
      const win = ids.slice(nTrain + w * T, nTrain + w * T + T + 1);
      s.reset();
      s.feed(win.slice(0, T), { allLogits: true });
      for (let i = 0; i < T; i++) {
        const lg = s.logits(i);
        let mx = -Infinity;
        for (const v of lg) mx = Math.max(mx, v);
        let z = 0;
        for (const v of lg) z += Math.exp(v - mx);
        sum += Math.log(z) + mx - lg[win[i + 1]];
      }
    }
    const want = sum / (windows * T);
    assert.ok(Math.abs(val - want) < 1e-3 * want, `trainer ${val}, inference engine ${want}`);
    assert.ok(val < 4, `a trained model scores its own kind of text well (got ${val}; a fresh one would be ~7.6)`);
    const l = await losses(t, 3);
    assert.ok(l.every(Number.isFinite));
    const g = await loadModel(await t.toGGUF(), { threads: 1 });
    assert.equal(g.info.vocabSize, m.info.vocabSize);
    g.dispose();
  } finally {
    t.dispose();
    m.dispose();
  }
});

test('the worker trainer gives the in-process losses and the same interface', async () => {
  const local = await createTrainer({ ...BASE, steps: 6, threads: 2 });
  const want = await losses(local, 6);
  local.dispose();
  const w = await createTrainer({ ...BASE, steps: 6, threads: 2, worker: true });
  try {
    assert.equal(w.info.worker, true);
    assert.equal(w.info.threads, 2);
    const got = [(await w.step()).loss];
    const r = await w.run({ onStep: (s) => { got.push(s.loss); if (s.step === 3) w.stop(); } });
    assert.equal(r.stopped, true);
    assert.equal(w.stepsDone, 3);
    await w.run({ onStep: (s) => got.push(s.loss) });
    assert.deepEqual(got, want);
    const bytes = await w.toGGUF();
    const m = await loadModel(bytes, { threads: 1 });
    assert.equal(m.info.layers, 2);
    m.dispose();
    await assert.rejects(w.step(), (e) => e.code === 'bad_argument');
  } finally {
    await w.dispose();
  }
  await assert.rejects(w.step(), (e) => e.code === 'disposed');
});

test('onStep: stop() in it ends the run at that step, a throw ends it with the error, a promise is awaited (in process and in a worker)', async () => {
  for (const worker of [false, true]) {
    const t = await createTrainer({ ...BASE, steps: 8, threads: 1, worker });
    try {
      // Stopping at every step: each run does exactly one (a worker must not start the next one
      // before the page has seen this one).
      for (let k = 1; k <= 3; k++) {
        const r = await t.run({ onStep: () => t.stop() });
        assert.deepEqual([r.stepsDone, r.stopped], [k, true], `worker ${worker}, run ${k}`);
      }
      const boom = new Error('boom');
      await assert.rejects(t.run({ onStep: () => { throw boom; } }), (e) => e === boom);
      assert.equal(t.stepsDone, 4, `worker ${worker}: the throwing onStep's step counts, no later one`);
      const seen = [];
      const r = await t.run({ onStep: async (s) => { await new Promise((res) => setTimeout(res, 5)); seen.push(s.step); } });
      assert.deepEqual(seen, [5, 6, 7, 8]);
      assert.equal(r.stopped, false);
    } finally {
      await t.dispose();
    }
  }
});

test('bad options are typed errors naming the problem', async () => {
  const bad = async (opts, code, re) => {
    await assert.rejects(createTrainer(opts), (e) => {
      assert.ok(e instanceof QkvError, `not a QkvError: ${e}`);
      assert.equal(e.code, code, e.message);
      assert.match(e.message, re);
      return true;
    });
  };
  await bad(null, 'bad_argument', /options object/);
  await bad({ ...BASE, text: '' }, 'bad_argument', /text is empty/);
  await bad({ ...BASE, text: 42 }, 'bad_argument', /text must be a string/);
  await bad({ ...BASE, steps: '10' }, 'bad_argument', /steps must be an integer/);
  await bad({ ...BASE, steps: 1e9 }, 'bad_argument', /steps must be in/);
  await bad({ ...BASE, lr: -1 }, 'bad_argument', /lr must be in/);
  await bad({ ...BASE, lr: NaN }, 'bad_argument', /lr must be a finite number/);
  await bad({ ...BASE, batch: 0 }, 'bad_argument', /batch must be in/);
  await bad({ ...BASE, shape: 'huge' }, 'bad_argument', /shape must be one of/);
  await bad({ ...BASE, shape: { ...SHAPE, heads: 5 } }, 'bad_argument', /not a multiple of shape.heads/);
  await bad({ ...BASE, shape: { ...SHAPE, dim: 1e6 } }, 'bad_argument', /dim must be in/);
  await bad({ ...BASE, tokenizer: { vocab: 10 } }, 'bad_argument', /vocab must be in/);
  await bad({ ...BASE, learningRate: 1 }, 'bad_argument', /unknown option 'learningRate'/);
  await bad({ ...BASE, warmup: 50 }, 'bad_argument', /warmup must be in/);
  await bad({ ...BASE, worker: 'yes' }, 'bad_argument', /worker must be/);
  await bad({ ...BASE, model: join(root, 'models', 'kjv-2m.gguf'), shape: 'tiny' }, 'bad_argument', /not both/);
  await bad({ ...BASE, text: 'too short' }, 'bad_argument', /training tokens/);
  await bad({ ...BASE, model: 42, shape: undefined }, 'bad_argument', /model must be/);
  await bad({ ...BASE, model: join(tmp, 'missing.gguf'), shape: undefined, tokenizer: undefined }, 'io', /missing\.gguf/);
  await bad({ ...BASE, model: new Uint8Array(64), shape: undefined, tokenizer: undefined }, 'bad_model', /./);
  // Attention kinds: unknown kinds, wrong counts, options without their layers, a fine-tuned model's kinds.
  await bad({ ...BASE, attention: 'dense' }, 'bad_argument', /attention kind "dense" is not one of/);
  await bad({ ...BASE, attention: ['softmax', 'additive', 'softmax'] }, 'bad_argument', /3 kinds for 2 layers/);
  await bad({ ...BASE, attention: 7 }, 'bad_argument', /attention must be a kind or an array/);
  await bad({ ...BASE, attention: 'linear' }, 'bad_argument', /not one of 'softmax', 'additive', 'block_sparse'/);
  await bad({ ...BASE, attention: 'additive', additiveDim: 0 }, 'bad_argument', /additiveDim must be in/);
  await bad({ ...BASE, additiveDim: 8 }, 'bad_argument', /additiveDim .* attention has none/);
  await bad({ ...BASE, attention: 'block_sparse', sparsePattern: { blockSize: 0 } }, 'bad_argument', /sparsePattern.blockSize must be in/);
  await bad({ ...BASE, attention: 'block_sparse', sparsePattern: { block: 8 } }, 'bad_argument', /unknown option 'block'/);
  await bad({ ...BASE, attention: 'block_sparse', sparsePattern: { seed: -1 } }, 'bad_argument', /sparsePattern.seed must be in/);
  await bad({ ...BASE, attention: 'block_sparse', sparsePattern: 'local' }, 'bad_argument', /sparsePattern must be/);
  await bad({ ...BASE, sparsePattern: { blockSize: 8 } }, 'bad_argument', /sparsePattern .* attention has none/);
  await bad({ ...BASE, model: join(root, 'models', 'kjv-2m.gguf'), shape: undefined, tokenizer: undefined, attention: 'additive' },
    'bad_argument', /keeps its own attention kinds/);
  // Memory: refused up front (estimate against maxMemory), never an allocation failure midway.
  await bad({ ...BASE, shape: { dim: 4096, layers: 64, heads: 32, hiddenDim: 16384 }, batch: 64, seq: 1024, threads: 1 },
    'out_of_memory', /needs about .* over the cap/);
  await bad({ ...BASE, maxMemory: 1e6, threads: 1 }, 'out_of_memory', /over the cap of/);
});
