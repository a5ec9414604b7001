// llama2.c's reference outputs reproduced through the JS API, single-thread and pthreads builds.
import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { test } from 'node:test';
import { loadModel } from 'qkv';
import { REFERENCES, STORIES, TOK, expectedText, referenceOptions } from './common.mjs';

for (const ref of REFERENCES) {
  test(`generate() reproduces ${ref.file} with threads 1 and 2`, async () => {
    const want = expectedText(ref);
    const got = {};
    for (const threads of [1, 2]) {
      const m = await loadModel(ref.model, { tokenizer: TOK, threads });
      try {
        const opts = referenceOptions(m, ref);
        got[threads] = await m.createSession().complete(ref.prompt, opts);
        assert.equal(got[threads], want, `threads ${threads}`);
        // The default session and streaming give the same text.
        let streamed = '';
        for await (const t of m.generate(ref.prompt, opts)) streamed += t.text;
        assert.equal(streamed, want, `threads ${threads}, streamed`);
      } finally {
        m.dispose();
      }
    }
    assert.equal(got[1], got[2]);
  });
}

test('threads 1 and threads 2 give identical greedy text for 100 tokens (stories260K, GQA)', async () => {
  const texts = {};
  for (const threads of [1, 2]) {
    const m = await loadModel(STORIES, { tokenizer: TOK, threads });
    try {
      const s = m.createSession();
      texts[threads] = await s.complete('Once upon a time', { temperature: 0, maxTokens: 100, stopTokens: [] });
      assert.equal(s.lastGeneration.generatedTokens, 100);
      assert.equal(s.lastGeneration.finishReason, 'length');
    } finally {
      m.dispose();
    }
  }
  assert.ok(texts[1].length > 0);
  assert.equal(texts[2], texts[1]);
});

test("info.threading: 'single' for threads 1, 'pthreads' for threads 2 and 'auto'", async () => {
  const cases = [[1, 'single', 1], [2, 'pthreads', 2], ['auto', 'pthreads', Math.min(availableParallelism(), 8)]];
  for (const [threads, mode, n] of cases) {
    const m = await loadModel(STORIES, { tokenizer: TOK, threads });
    try {
      const i = m.info;
      assert.equal(i.threading.mode, mode, `threads ${threads}`);
      assert.equal(i.threads, n, `threads ${threads}: info.threads`);
      assert.equal(i.threading.threads, n, `threads ${threads}: info.threading.threads`);
      assert.equal(typeof i.threading.reason, 'string');
      assert.equal(i.arch, 'llama');
      assert.equal(i.kvHeads, 4);
      assert.equal(i.heads, 8);
      assert.equal(i.contextLength, 512);
    } finally {
      m.dispose();
    }
  }
});
