// Strict options, one generation per session, and bounded work, through the installed package:
// misspelled options are refused by name, two streams on one session never interleave (the second
// is a 'busy' error, in process and through the worker), and a stream nobody reads stops computing.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createTrainer, loadModel, quantize } from 'qkv';
import { createWorker } from 'qkv/worker';
import { AIDREAMS, TOK, rejectsQkv, throwsQkv } from './common.mjs';

let m;
before(async () => { m = await loadModel(AIDREAMS, { tokenizer: TOK, threads: 1 }); });
after(() => m?.dispose());

test('a misspelled option is refused with bad_argument naming it and the option it resembles', async () => {
  const didYouMean = (key, near) => new RegExp(`unknown option '${key}' \\(did you mean '${near}'\\?\\)`);
  throwsQkv(() => m.generate('And', { maxToken: 5 }), 'bad_argument', didYouMean('maxToken', 'maxTokens'));
  await rejectsQkv(() => m.complete('And', { temprature: 0 }), 'bad_argument', didYouMean('temprature', 'temperature'));
  throwsQkv(() => m.chat([{ role: 'user', content: 'Hi' }], { templatevars: {} }), 'bad_argument', didYouMean('templatevars', 'templateVars'));
  throwsQkv(() => m.tokenize('And', { BOS: false }), 'bad_argument', didYouMean('BOS', 'bos'));
  throwsQkv(() => m.createSession({ contextLen: 64 }), 'bad_argument', didYouMean('contextLen', 'contextLength'));
  const s = m.createSession();
  throwsQkv(() => s.feed([1, 300], { allLogit: true }), 'bad_argument', didYouMean('allLogit', 'allLogits'));
  throwsQkv(() => s.sample({ topk: 3 }), 'bad_argument', didYouMean('topk', 'topK'));
  throwsQkv(() => s.generate('And', { stopToken: [1] }), 'bad_argument', didYouMean('stopToken', 'stopTokens'));
  s.dispose();
  await rejectsQkv(() => m.embed(['a'], { normalise: true }), 'bad_argument', didYouMean('normalise', 'normalize'));
  await rejectsQkv(() => loadModel(AIDREAMS, { tokeniser: TOK }), 'bad_argument', didYouMean('tokeniser', 'tokenizer'));
  await rejectsQkv(() => loadModel(AIDREAMS, { tokenizer: TOK, thread: 1 }), 'bad_argument', didYouMean('thread', 'threads'));
  await rejectsQkv(() => quantize(AIDREAMS, { type: 'q8_0', tokenzier: TOK }), 'bad_argument', didYouMean('tokenzier', 'tokenizer'));
  await rejectsQkv(() => createTrainer({ text: 'x'.repeat(100), step: 5 }), 'bad_argument', didYouMean('step', 'steps'));
  // Nothing close: the message lists what there is.
  throwsQkv(() => m.generate('And', { frobnicate: 1 }), 'bad_argument', /unknown option 'frobnicate'; the options are .*'maxTokens'/);
});

test('a bad value shows its type: threads "2" is a string, not 2', async () => {
  await rejectsQkv(() => loadModel(AIDREAMS, { tokenizer: TOK, threads: '2' }), 'bad_argument', /got "2"/);
  throwsQkv(() => m.generate('And', { maxTokens: '5' }), 'bad_argument', /maxTokens must be a number, got "5"/);
  throwsQkv(() => m.generate('And', { temperature: [0] }), 'bad_argument', /got an array/);
});

test('a disposed model says so once', async () => {
  const d = await loadModel(AIDREAMS, { tokenizer: TOK, threads: 1 });
  d.dispose();
  throwsQkv(() => d.tokenize('x'), 'disposed', /this model was disposed/);
  try { d.tokenize('x'); } catch (e) { assert.equal(e.message.match(/disposed/g).length, 1, e.message); }
});

test('two generations at once on one session: the second is a busy error, the first is intact', async () => {
  const expected = await m.createSession().complete('I dream of', { temperature: 0, maxTokens: 30, stopTokens: [] });
  const a = m.generate('I dream of', { temperature: 0, maxTokens: 30, stopTokens: [] });
  let text = '';
  const first = await a.next();
  text += first.value.text;
  await rejectsQkv(() => m.generate('And the LORD', { temperature: 0, maxTokens: 30 }).next(), 'busy', /already running/);
  throwsQkv(() => m.session.feed([300]), 'busy');
  for await (const t of a) text += t.text;
  assert.equal(text, expected, 'the first stream was disturbed');
  // Once it ended (or was left with break) the session takes the next one.
  for await (const _ of m.generate('I dream of', { maxTokens: 5 })) break;
  assert.ok((await m.complete('I dream of', { maxTokens: 3 })).length >= 0);
  // Separate sessions run side by side.
  const s1 = m.createSession(), s2 = m.createSession();
  const [x, y] = await Promise.all([s1.complete('I dream of', { temperature: 0, maxTokens: 30, stopTokens: [] }),
    s2.complete('I dream of', { temperature: 0, maxTokens: 30, stopTokens: [] })]);
  assert.equal(x, expected);
  assert.equal(y, expected);
});

test('a stream nobody reads computes nothing more (in process)', async () => {
  const s = m.createSession();
  const it = s.generate('I dream of', { maxTokens: 200, stopTokens: [] });
  for (let i = 0; i < 3; i++) await it.next();
  const at = s.position;
  await sleep(300);
  assert.equal(s.position, at, 'tokens were computed while nobody read them');
  assert.equal(s.lastGeneration.generatedTokens, 3);
  await it.return();
});

test('maxMemory: a model whose declared context needs more is refused up front with the sizes', async () => {
  // llama2.c header: 7 int32s (dim, hidden, layers, heads, kvHeads, vocab, seqLen). aidreams260K
  // ends with RoPE tables of seqLen x headDim floats, which a checkpoint may leave out: cut them
  // and declare a context of a million positions.
  const bytes = new Uint8Array(readFileSync(AIDREAMS));
  const h = new DataView(bytes.buffer, bytes.byteOffset);
  const tables = h.getInt32(24, true) * (h.getInt32(0, true) / h.getInt32(12, true)) * 4;
  const huge = bytes.slice(0, bytes.length - tables);
  new DataView(huge.buffer).setInt32(24, 1_000_000, true);
  await rejectsQkv(() => loadModel(huge, { tokenizer: TOK, threads: 1, maxMemory: 512 * 1024 ** 2 }), 'out_of_memory',
    /over maxMemory \(512\.0 MiB\).*KV cache [\d.]+ MiB for a context of 1000000 tokens/);
  // The real one fits, and a session asking for more context than is left is refused the same way.
  const ok = await loadModel(bytes, { tokenizer: TOK, threads: 1, maxMemory: 8 * 1024 ** 2 });
  try {
    const kv = ok.info.layers * ok.info.kvHeads * ok.info.headDim * 2 * 4 * ok.info.contextLength;
    assert.ok(ok.info.weightBytes + kv < 8 * 1024 ** 2);
    const sessions = [];
    assert.throws(() => { for (let i = 0; i < 100; i++) sessions.push(ok.createSession()); },
      (e) => e.code === 'out_of_memory' && /other sessions/.test(e.message));
    assert.ok(sessions.length >= 1 && sessions.length < 100);
  } finally {
    ok.dispose();
  }
  await rejectsQkv(() => loadModel(bytes, { tokenizer: TOK, maxMemory: '1GB' }), 'bad_argument', /maxMemory must be a number, got "1GB"/);
});

test('through the worker: busy for a second stream on one session, no run-ahead, options checked', async () => {
  const w = await createWorker();
  try {
    const wm = await w.loadModel(AIDREAMS, { tokenizer: TOK, threads: 1 });
    const s = await wm.createSession();
    const it = s.generate('I dream of', { maxTokens: 200, stopTokens: [] });
    for (let i = 0; i < 3; i++) await it.next();
    await sleep(500);
    const ahead = await s.position() - (await wm.tokenize('I dream of')).length - 3;
    assert.ok(ahead <= 4, `the worker computed ${ahead} tokens nobody asked for (at most 4 in flight)`);
    await rejectsQkv(async () => { for await (const _ of s.generate('And', { maxTokens: 3 })) { /* nothing */ } }, 'busy');
    await it.return();
    await rejectsQkv(() => s.complete('And', { maxToken: 3 }), 'bad_argument', /did you mean 'maxTokens'/);
    await rejectsQkv(() => w.loadModel(AIDREAMS, { tokenizr: TOK }), 'bad_argument', /did you mean 'tokenizer'/);
    assert.ok((await s.complete('I dream of', { maxTokens: 3 })).length >= 0, 'the session works after the refused calls');
  } finally {
    await w.terminate();
  }
});
