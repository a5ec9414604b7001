// Typed errors with stable codes and informative messages.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { loadModel } from 'qkv';
import { AIDREAMS, LLAMA_TOK, STORIES, TOK, rejectsQkv, throwsQkv } from './common.mjs';

const dir = mkdtempSync(join(tmpdir(), 'qkv-consumer-errors-'));
let m;
before(async () => { m = await loadModel(AIDREAMS, { tokenizer: TOK, threads: 1 }); });
after(() => { m?.dispose(); rmSync(dir, { recursive: true, force: true }); });

test('bad sources: bad_argument for values that are no source', async () => {
  for (const src of [null, undefined, 5, {}, true, { length: 3 }]) {
    await rejectsQkv(loadModel(src, { tokenizer: TOK }), 'bad_argument', /cannot load the model|source|pass a URL/i);
  }
  // (An array of paths, URLs or Blobs is the files of a split model; one with bytes is chunks.)
  await rejectsQkv(loadModel([new Uint8Array(4), 'not bytes'], { tokenizer: TOK, threads: 1 }), 'bad_argument', /chunk/);
  await rejectsQkv(loadModel(AIDREAMS, { tokenizer: 42, threads: 1 }), 'bad_argument', /tokenizer/);
});

test("files that cannot be read: 'io' naming the path", async () => {
  const missing = join(dir, 'no-such-model.bin');
  await rejectsQkv(loadModel(missing, { tokenizer: TOK, threads: 1 }), 'io', /no such file/i);
  await rejectsQkv(loadModel(missing, { tokenizer: TOK, threads: 1 }), 'io', new RegExp('no-such-model\\.bin'));
  await rejectsQkv(loadModel(pathToFileURL(missing), { tokenizer: TOK, threads: 1 }), 'io', /no such file/i);
  // A directory is read as a Hugging Face checkpoint; one without config.json is named as not one.
  await rejectsQkv(loadModel(dir, { tokenizer: TOK, threads: 1 }), 'io', /directory without config\.json: not a Hugging Face checkpoint/);
  await rejectsQkv(loadModel(dir, { tokenizer: TOK, threads: 1 }), 'io', new RegExp(dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  await rejectsQkv(loadModel(AIDREAMS, { tokenizer: join(dir, 'no-tok.bin'), threads: 1 }), 'io', /no-tok\.bin/);
  await rejectsQkv(loadModel('http://127.0.0.1:1/model.bin', { tokenizer: TOK, threads: 1 }), 'io', /127\.0\.0\.1/);
});

test("a truncated or foreign model: 'bad_model'", async () => {
  const bytes = readFileSync(STORIES);
  await rejectsQkv(loadModel(bytes.subarray(0, 1000), { tokenizer: TOK, threads: 1 }), 'bad_model', /truncated/);
  await rejectsQkv(loadModel(bytes.subarray(0, 20), { tokenizer: TOK, threads: 1 }), 'bad_model', /header/);
  await rejectsQkv(loadModel(bytes.subarray(0, bytes.length - 1), { tokenizer: TOK, threads: 1 }), 'bad_model', /truncated|corrupt/);
  await rejectsQkv(loadModel(new Uint8Array(4096), { tokenizer: TOK, threads: 1 }), 'bad_model', /dim/);
  await rejectsQkv(loadModel(TOK, { tokenizer: TOK, threads: 1 }), 'bad_model', /looks like a llama2\.c tokenizer/);
});

test("a tokenizer that does not belong to the model: 'bad_tokenizer'", async () => {
  await rejectsQkv(loadModel(STORIES, { tokenizer: LLAMA_TOK, threads: 1 }), 'bad_tokenizer', /32000.*512|vocabulary/);
  await rejectsQkv(loadModel(STORIES, { tokenizer: STORIES, threads: 1 }), 'bad_tokenizer', /tokenizer/);
  await rejectsQkv(loadModel(STORIES, { tokenizer: new Uint8Array(100), threads: 1 }), 'bad_tokenizer', /max_token_length/);
  await rejectsQkv(loadModel(STORIES, { tokenizer: readFileSync(TOK).subarray(0, 3000), threads: 1 }), 'bad_tokenizer', /truncated/);
});

test("missing or bad load options: 'bad_argument' naming the option", async () => {
  await rejectsQkv(loadModel(AIDREAMS), 'bad_argument', /tokenizer/);
  await rejectsQkv(loadModel(AIDREAMS, {}), 'bad_argument', /options\.tokenizer/);
  await rejectsQkv(loadModel(AIDREAMS, null), 'bad_argument', /options/);
  for (const threads of [0, -1, 1.5, 'many', 1000]) {
    await rejectsQkv(loadModel(AIDREAMS, { tokenizer: TOK, threads }), 'bad_argument', /threads/);
  }
  await rejectsQkv(loadModel(AIDREAMS, { tokenizer: TOK, onProgress: 'x' }), 'bad_argument', /onProgress/);
});

test("a load signal that is no AbortSignal: 'bad_argument' (as generate() does)", async () => {
  await rejectsQkv(loadModel(AIDREAMS, { tokenizer: TOK, threads: 1, signal: 5 }), 'bad_argument', /signal/);
});

const BAD_GENERATION_OPTIONS = [
  [{ temperature: -1 }, /temperature/], [{ temperature: 'hot' }, /temperature/], [{ temperature: NaN }, /temperature/],
  [{ topP: 2 }, /topP/], [{ topP: -0.1 }, /topP/], [{ topK: -1 }, /topK/], [{ topK: 1.5 }, /topK/], [{ minP: 2 }, /minP/],
  [{ maxTokens: 1.5 }, /maxTokens/], [{ maxTokens: -1 }, /maxTokens/], [{ maxTokens: '10' }, /maxTokens/],
  [{ seed: -1 }, /seed/], [{ seed: 1.5 }, /seed/],
  [{ stop: 5 }, /stop/], [{ stop: '' }, /stop/], [{ stop: [5] }, /stop/],
  [{ stopTokens: 'x' }, /stopTokens/], [{ stopTokens: [1.5] }, /stopTokens/],
  [{ repetitionPenalty: 0 }, /repetitionPenalty/], [{ signal: 5 }, /signal/],
];

test("bad generation options: generate() throws at once, complete() rejects, 'bad_argument' naming the option", async () => {
  const s = m.createSession();
  for (const [opts, keyword] of BAD_GENERATION_OPTIONS) {
    throwsQkv(() => m.generate('I dream of', opts), 'bad_argument', keyword);
    throwsQkv(() => s.generate('I dream of', opts), 'bad_argument', keyword);
    await rejectsQkv(m.complete('I dream of', opts), 'bad_argument', keyword);
  }
  for (const opts of [null, 5, 'greedy']) {
    throwsQkv(() => m.generate('I dream of', opts), 'bad_argument', /options/);
  }
  s.feed(m.tokenize('I dream of'));
  for (const [opts, keyword] of [[{ temperature: -1 }, /temperature/], [{ topP: 2 }, /topP/], [{ seed: -1 }, /seed/]]) {
    throwsQkv(() => s.sample(opts), 'bad_argument', keyword);
  }
  assert.equal(s.position, m.tokenize('I dream of').length, 'failed calls change nothing');
});

test("bad arguments to the model and session methods: 'bad_argument'", async () => {
  for (const prompt of [5, undefined, null, {}, ['I dream']]) {
    throwsQkv(() => m.generate(prompt), 'bad_argument', /prompt/);
    await rejectsQkv(m.complete(prompt), 'bad_argument', /prompt/);
  }
  throwsQkv(() => m.tokenize(5), 'bad_argument', /tokenize/);
  throwsQkv(() => m.tokenize(undefined), 'bad_argument', /tokenize/);
  throwsQkv(() => m.detokenize(5), 'bad_argument', /detokenize/);
  throwsQkv(() => m.detokenize([100000]), 'bad_argument', /100000/);
  throwsQkv(() => m.detokenize([-1]), 'bad_argument', /-1/);
  throwsQkv(() => m.createSession({ contextLength: -1 }), 'bad_argument', /contextLength/);
  throwsQkv(() => m.createSession({ contextLength: 100000 }), 'bad_argument', /context/);
  const s = m.createSession();
  throwsQkv(() => s.logits(), 'bad_argument', /feed/);
  throwsQkv(() => s.feed([]), 'bad_argument', /feed/);
  throwsQkv(() => s.feed('abc'), 'bad_argument', /feed/);
  throwsQkv(() => s.feed([512]), 'bad_argument', /512/);
  throwsQkv(() => s.prefill([]), 'bad_argument', /prefill/);
  throwsQkv(() => s.truncate('x'), 'bad_argument', /truncate/);
  throwsQkv(() => s.attention(0, 0), 'bad_argument', /capture/);
  s.captureAttention = true;
  s.feed([1, 300]);
  throwsQkv(() => s.truncate(10), 'bad_argument', /truncate/);
  throwsQkv(() => s.attention(99, 0), 'bad_argument', /layer/);
  throwsQkv(() => s.attention(0, 99), 'bad_argument', /head/);
  throwsQkv(() => s.attention('0', 0), 'bad_argument', /attention/);
  const small = m.createSession({ contextLength: 8 });
  await rejectsQkv(small.complete('I dream of electric sheep and quiet circuits', { maxTokens: 2 }), 'bad_argument', /context/);
  assert.equal(s.position, 2);
});

test('non-integer token ids are refused, not truncated', () => {
  const s = m.createSession();
  throwsQkv(() => s.feed([1, 1.5]), 'bad_argument', /token/);
  throwsQkv(() => m.detokenize([300.7]), 'bad_argument', /token/);
});

test("a disposed model or session: 'disposed' from every method; dispose() twice is fine", async () => {
  const model = await loadModel(AIDREAMS, { tokenizer: TOK, threads: 1 });
  const s = model.createSession();
  const s2 = model.createSession();
  s.feed([1]);
  s.dispose();
  s.dispose();
  for (const f of [() => s.feed([1]), () => s.logits(), () => s.position, () => s.tokens, () => s.prefill([1]),
    () => s.sample(), () => s.truncate(0), () => s.attention(0, 0), () => s.generate('x')]) {
    throwsQkv(f, 'disposed', /disposed/);
  }
  await rejectsQkv(s.complete('x'), 'disposed', /session/);
  model.dispose();
  model.dispose();
  for (const f of [() => model.info, () => model.tokenize('x'), () => model.detokenize([1]), () => model.createSession(),
    () => model.session, () => model.generate('x'), () => s2.feed([1]), () => s2.position]) {
    throwsQkv(f, 'disposed', /disposed/);
  }
  await rejectsQkv(async () => model.complete('x'), 'disposed', /model/);
});

test('complete() on a disposed model returns a rejected promise (like Session.complete), it does not throw', async () => {
  const model = await loadModel(AIDREAMS, { tokenizer: TOK, threads: 1 });
  model.dispose();
  let p;
  assert.doesNotThrow(() => { p = model.complete('x'); p.catch(() => {}); }, 'Model.complete threw synchronously');
  await rejectsQkv(p, 'disposed', /disposed/);
});

test("disposing the session or the model in the middle of a generation: the iterator throws 'disposed'", async () => {
  const model = await loadModel(AIDREAMS, { tokenizer: TOK, threads: 1 });
  try {
    for (const which of ['session', 'model']) {
      const s = which === 'model' ? model.session : model.createSession();
      let n = 0;
      await rejectsQkv(async () => {
        for await (const _ of s.generate('I dream of', { maxTokens: 50 })) {
          if (++n === 3) (which === 'model' ? model : s).dispose();
        }
      }, 'disposed', /disposed/);
    }
  } finally {
    model.dispose();
  }
});
