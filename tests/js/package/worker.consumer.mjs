// qkv/worker from the installed package: the engine in a worker thread, the package's own worker.js.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { QkvError } from 'qkv';
import { createWorker } from 'qkv/worker';
import { AIDREAMS, REFERENCES, TOK, expectedText } from './common.mjs';

let w, m;
before(async () => {
  w = await createWorker();
  m = await w.loadModel(AIDREAMS, { tokenizer: TOK });
});
after(async () => { await m?.dispose(); await w?.terminate(); });

test('the worker reproduces the greedy and sampled references', async () => {
  for (const ref of REFERENCES.slice(0, 2)) {
    const promptTokens = (await m.tokenize(ref.prompt)).length;
    const s = await m.createSession();
    const text = await s.complete(ref.prompt, { ...ref.sampling, maxTokens: ref.n - promptTokens + 1, stopTokens: [1] });
    assert.equal(text, expectedText(ref), ref.file);
    await s.dispose();
  }
  assert.equal(m.info.arch, 'llama');
});

test('worker errors are typed QkvErrors with stable codes', async () => {
  await assert.rejects(w.loadModel(`${AIDREAMS}.missing`, { tokenizer: TOK }), (e) => e instanceof QkvError && e.code === 'io');
  await assert.rejects(m.tokenize(5), (e) => e instanceof QkvError && e.code === 'bad_argument');
});

test('worker streaming: break, then abort, then the model is still usable', async () => {
  for await (const _ of m.generate('I dream of', { maxTokens: 30 })) break;
  const ac = new AbortController();
  let n = 0;
  // Abort after the worker has certainly produced every token: the iterator must still throw
  // 'aborted' on its next step (as in-process), not hand out the tokens already queued.
  await assert.rejects(async () => {
    for await (const _ of m.generate('I dream of', { maxTokens: 50, stopTokens: [], signal: ac.signal })) {
      if (++n === 2) { await sleep(100); ac.abort(); }
    }
  }, (e) => e instanceof QkvError && e.code === 'aborted');
  assert.equal(n, 2, `${n} items came after the abort`);
  const s = await m.createSession();
  assert.equal(await s.complete('I dream of', { temperature: 0, maxTokens: 54, stopTokens: [1] }), expectedText(REFERENCES[0]));
});
