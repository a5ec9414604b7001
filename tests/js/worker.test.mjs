// qkv/worker: the engine in a worker thread gives the same text as in-process, streams, aborts,
// and reports typed errors.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { createWorker } from '../../src/js/worker-client.js';
import { loadModel } from '../../src/js/node.js';
import { QkvError } from '../../src/js/errors.js';
import { models } from './helpers.mjs';

const MODEL = join(models, 'aidreams260K.bin'), TOK = join(models, 'aidreams-tok512.bin');
let w, rm;
before(async () => {
  w = await createWorker();
  rm = await w.loadModel(MODEL, { tokenizer: TOK });
});
after(async () => { await rm?.dispose(); await w?.terminate(); });

test('worker generate equals in-process generate for the same seed', async () => {
  const local = await loadModel(MODEL, { tokenizer: TOK, threads: 1 });
  const opts = { temperature: 0.9, topP: 0.9, seed: 1234, maxTokens: 40 };
  const want = await local.complete('I dream of', opts);
  local.dispose();
  const parts = [];
  for await (const t of rm.generate('I dream of', opts)) parts.push(t.text);
  assert.ok(parts.length > 5, `only ${parts.length} stream items`);
  assert.equal(parts.join(''), want);
});

test('worker sessions: step API and attention cross postMessage', async () => {
  const s = await rm.createSession();
  const ids = await rm.tokenize('I dream of');
  await s.setCaptureAttention(true);
  await s.feed(ids);
  const logits = await s.logits();
  assert.ok(logits instanceof Float32Array && logits.length === rm.info.vocabSize);
  const a = await s.attention(0, 0);
  assert.equal(a.queries, ids.length);
  assert.equal(a.probs.length, a.queries * a.keys);
  let argmax = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[argmax]) argmax = i;
  assert.equal(await s.sample({ temperature: 0 }), argmax);
  assert.deepEqual(await s.tokens(), ids);
  await s.dispose();
  await assert.rejects(s.tokens(), (e) => e instanceof QkvError && e.code === 'disposed');
});

test('abort and break stop generation in the worker; the model stays usable', async () => {
  const ac = new AbortController();
  let n = 0;
  await assert.rejects(async () => {
    for await (const _ of rm.generate('I dream of', { temperature: 1, seed: 3, maxTokens: 100, signal: ac.signal, stopTokens: [] })) {
      if (++n === 2) ac.abort();
    }
  }, (e) => e instanceof QkvError && e.code === 'aborted');
  for await (const _ of rm.generate('I dream of', { maxTokens: 50 })) break;
  const text = await rm.complete('I dream of', { temperature: 0, maxTokens: 10 });
  assert.ok(text.length > 0);
});

test('load errors and progress come back typed', async () => {
  await assert.rejects(w.loadModel(join(models, 'nope.bin'), { tokenizer: TOK }), (e) => e instanceof QkvError && e.code === 'io');
  await assert.rejects(w.loadModel(new Uint8Array(10), { tokenizer: TOK }), (e) => e.code === 'bad_model' && /truncated/.test(e.message));
  const seen = [];
  const m2 = await w.loadModel(MODEL, { tokenizer: TOK, onProgress: (p) => seen.push(p) });
  assert.ok(seen.length >= 2 && seen.at(-1).loaded === seen.at(-1).total);
  await m2.dispose();
  await assert.rejects(rm.generate(5).next(), (e) => e.code === 'bad_argument');
});

test('a stopped worker generation still reports its figures', async () => {
  const s = await rm.createSession();
  const ac = new AbortController();
  let n = 0;
  await assert.rejects(async () => {
    for await (const _ of s.generate('I dream of', { seed: 99, maxTokens: 100, stopTokens: [], signal: ac.signal })) {
      if (++n === 2) ac.abort();
    }
  }, (e) => e.code === 'aborted');
  assert.ok(s.lastGeneration, 'no stats after an abort');
  assert.equal(s.lastGeneration.seed, 99);
  assert.equal(s.lastGeneration.finishReason, 'aborted');
  await s.dispose();
});

test('worker chat equals in-process chat', async () => {
  const msgs = [{ role: 'user', content: 'I dream of' }];
  const opts = { temperature: 0.9, topP: 0.9, seed: 7, maxTokens: 20 };
  const local = await loadModel(MODEL, { tokenizer: TOK, threads: 1 });
  let want = '';
  for await (const t of local.chat(msgs, opts)) want += t.text;
  const wantPrompt = local.applyChatTemplate(msgs, { addGenerationPrompt: false });
  local.dispose();
  let got = '';
  for await (const t of rm.chat(msgs, opts)) got += t.text;
  assert.equal(got, want);
  assert.equal(await rm.applyChatTemplate(msgs, { addGenerationPrompt: false }), wantPrompt);
  await assert.rejects(async () => { for await (const _ of rm.chat([{ role: 'bot', content: 'x' }])) { /* none */ } },
    (e) => e instanceof QkvError && e.code === 'bad_argument');
});

test('worker quantize gives the bytes in-process quantize gives, whole or in chunks, with progress and typed errors', async () => {
  const { quantize } = await import('../../src/js/node.js');
  const src = join(models, 'stories260K.bin'), tokenizer = join(models, 'aidreams-tok512.bin');
  const local = await quantize(src, { type: 'q8_0', tokenizer });
  const phases = new Set();
  const remote = await w.quantize(src, { type: 'q8_0', tokenizer, onProgress: (p) => phases.add(p.phase) });
  assert.ok(remote.bytes instanceof Uint8Array && remote.bytes.byteLength > 0);
  assert.deepEqual(remote.bytes, local.bytes);
  assert.equal(remote.outBytes, local.outBytes);
  assert.deepEqual(remote.tensors, local.tensors);
  assert.ok(phases.has('quantize'), `progress phases: ${[...phases]}`);
  const chunks = [];
  const streamed = await w.quantize(src, { type: 'q8_0', tokenizer, onChunk: (c) => chunks.push(c) });
  assert.equal(streamed.bytes, null);
  assert.ok(chunks.length >= 1);
  const joined = new Uint8Array(chunks.reduce((a, c) => a + c.byteLength, 0));
  let o = 0; for (const c of chunks) { joined.set(c, o); o += c.byteLength; }
  assert.deepEqual(joined, local.bytes);
  // The result loads in the worker like any model.
  const m = await w.loadModel(remote.bytes.slice(), { threads: 1 });
  assert.ok((await m.complete('Once upon', { maxTokens: 5, temperature: 0 })).length > 0);
  await m.dispose();
  await assert.rejects(w.quantize(src, { type: 'q3_k', tokenizer }),
    (e) => e instanceof QkvError && e.code === 'bad_argument' && /type must be one of/.test(e.message));
  await assert.rejects(w.quantize(src, { type: 'q8_0', tokenizer, onChunk: 5 }),
    (e) => e instanceof QkvError && e.code === 'bad_argument' && /onChunk/.test(e.message));
  const ac = new AbortController();
  ac.abort();
  await assert.rejects(w.quantize(src, { type: 'q8_0', tokenizer, signal: ac.signal }), (e) => e.code === 'aborted');
});
