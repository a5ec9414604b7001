// Streaming, early exit, abort and KV-cache reuse through the installed package.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { QkvError, loadModel } from 'qkv';
import { AIDREAMS, REFERENCES, STORIES, TOK, collect, expectedText, rejectsQkv } from './common.mjs';

let aidreams, stories;
before(async () => {
  aidreams = await loadModel(AIDREAMS, { tokenizer: TOK, threads: 1 });
  stories = await loadModel(STORIES, { tokenizer: TOK, threads: 2 });
});
after(() => { aidreams?.dispose(); stories?.dispose(); });

test('generate() streams {token, text} items whose text concatenates to complete() for the same seed', async () => {
  for (const m of [aidreams, stories]) {
    const opts = { seed: 7, temperature: 0.9, maxTokens: 40, stopTokens: [] };
    const s = m.createSession();
    const items = await collect(s.generate('I dream of', opts));
    assert.ok(items.length >= 10, `only ${items.length} items`);
    for (const it of items) {
      assert.deepEqual(Object.keys(it).sort(), ['text', 'token']);
      assert.equal(typeof it.text, 'string');
      assert.ok(Number.isInteger(it.token) && it.token >= -1 && it.token < m.info.vocabSize, `token ${it.token}`);
    }
    assert.equal(items.filter((t) => t.token >= 0).length, 40);
    assert.equal(s.lastGeneration.generatedTokens, 40);
    assert.equal(s.lastGeneration.seed, 7);
    const whole = await m.createSession().complete('I dream of', opts);
    assert.equal(items.map((t) => t.text).join(''), whole);
    // The same seed twice in the same session gives the same text again.
    assert.equal(await s.complete('I dream of', opts), whole);
  }
});

test('lastGeneration reports the figures of the run', async () => {
  const s = aidreams.createSession();
  const text = await s.complete('I dream of', { temperature: 0, maxTokens: 12 });
  const g = s.lastGeneration;
  assert.equal(g.promptTokens, aidreams.tokenize('I dream of').length);
  assert.equal(g.reusedTokens, 0);
  assert.equal(g.generatedTokens, 12);
  assert.equal(g.finishReason, 'length');
  assert.ok(g.prefillMs >= 0 && g.decodeMs >= 0);
  assert.ok(Number.isInteger(g.seed));
  assert.ok(expectedText(REFERENCES[0]).startsWith(text));
  assert.equal(s.position, g.promptTokens + 12);
});

test('breaking out of the loop early leaves the session usable', async () => {
  const s = aidreams.createSession();
  const want = expectedText(REFERENCES[0]);
  let n = 0, text = '';
  for await (const t of s.generate('I dream of', { temperature: 0, maxTokens: 40 })) {
    text += t.text;
    if (++n === 5) break;
  }
  assert.equal(n, 5);
  assert.ok(want.startsWith(text), JSON.stringify(text));
  // Again from the start (the cache holds the prompt: it is reused), then a different prompt.
  assert.equal(await s.complete('I dream of', { temperature: 0, maxTokens: 20 }),
    await aidreams.createSession().complete('I dream of', { temperature: 0, maxTokens: 20 }));
  assert.ok(s.lastGeneration.reusedTokens > 0);
  const other = await s.complete('Hello', { temperature: 0, maxTokens: 10 });
  assert.equal(other, await aidreams.createSession().complete('Hello', { temperature: 0, maxTokens: 10 }));
  // The default session too.
  for await (const _ of aidreams.generate('I dream of', { temperature: 0 })) break;
  assert.equal(await aidreams.complete('I dream of', { temperature: 0, maxTokens: 54, stopTokens: [1] }), want);
});

test('a stop string ends generation and is not returned', async () => {
  const s = aidreams.createSession();
  const want = expectedText(REFERENCES[0]);  // " 0.000000. Dimensions unfold, as I softly refine, ..."
  const stop = 'as I';
  const text = await s.complete('I dream of', { temperature: 0, maxTokens: 54, stop: [stop, 'zzzz'] });
  assert.equal(text, want.slice(0, want.indexOf(stop)));
  assert.equal(s.lastGeneration.finishReason, 'stop');
});

test('aborting mid-generation: the iterator throws QkvError aborted and the session stays usable', async () => {
  const s = aidreams.createSession();
  const ac = new AbortController();
  let n = 0;
  await assert.rejects(async () => {
    for await (const _ of s.generate('I dream of', { temperature: 0, maxTokens: 50, signal: ac.signal })) {
      if (++n === 3) ac.abort();
    }
  }, (e) => e instanceof QkvError && e.code === 'aborted');
  assert.equal(n, 3, 'no item after the abort');
  assert.equal(s.lastGeneration.finishReason, 'aborted');
  assert.equal(s.lastGeneration.generatedTokens, 3);
  assert.equal(await s.complete('I dream of', { temperature: 0, maxTokens: 54, stopTokens: [1] }), expectedText(REFERENCES[0]));
});

test('an abort from a timer stops a long generation (the loop yields to the event loop)', async () => {
  const s = stories.createSession();
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 30);
  let n = 0;
  const t0 = performance.now();
  try {
    await rejectsQkv(async () => {
      for await (const _ of s.generate('', { maxTokens: 1 << 20, stopTokens: [], signal: ac.signal })) n++;
    }, 'aborted');
  } finally {
    clearTimeout(timer);
  }
  assert.ok(n > 0 && n < 511, `${n} tokens before the abort`);
  assert.ok(performance.now() - t0 < 2000);
  assert.equal(s.lastGeneration.finishReason, 'aborted');
  assert.equal(typeof await s.complete('Once', { maxTokens: 5 }), 'string');
});

test('an already-aborted signal: generate() throws on the first next(), complete() rejects', async () => {
  const ac = new AbortController();
  ac.abort();
  const s = aidreams.createSession();
  const it = s.generate('I dream of', { signal: ac.signal });
  await rejectsQkv(it.next(), 'aborted');
  await rejectsQkv(s.complete('I dream of', { signal: ac.signal }), 'aborted');
  assert.equal(s.position, 0, 'nothing was computed');
  await rejectsQkv(aidreams.complete('I dream of', { signal: AbortSignal.abort() }), 'aborted');
});

test('session reuse: a follow-up that extends the text reuses the cached prefix and continues as a fresh session would', async () => {
  for (const m of [aidreams, stories]) {
    const s = m.createSession();
    const p1 = 'I dream of';
    const g1 = await s.complete(p1, { temperature: 0, maxTokens: 20, stopTokens: [] });
    const p2 = p1 + g1 + ' more';
    const g2 = await s.complete(p2, { temperature: 0, maxTokens: 20, stopTokens: [] });
    const st = s.lastGeneration;
    assert.equal(st.promptTokens, m.tokenize(p2).length);
    assert.ok(st.reusedTokens >= m.tokenize(p1).length, `reused ${st.reusedTokens} tokens`);
    assert.ok(st.reusedTokens < st.promptTokens);
    const fresh = m.createSession();
    assert.equal(g2, await fresh.complete(p2, { temperature: 0, maxTokens: 20, stopTokens: [] }));
    assert.equal(fresh.lastGeneration.reusedTokens, 0);
    // The cache ends with the prompt and the generated tokens.
    assert.deepEqual(s.tokens.slice(0, st.promptTokens), m.tokenize(p2));
    s.dispose();
    fresh.dispose();
  }
});

test('sessions are independent: interleaving two sessions does not change their text', async () => {
  const a = aidreams.createSession(), b = aidreams.createSession();
  const ia = a.generate('I dream of', { temperature: 0, maxTokens: 30 });
  const ib = b.generate('Hello', { temperature: 0, maxTokens: 30 });
  let ta = '', tb = '';
  for (;;) {
    const [ra, rb] = [await ia.next(), await ib.next()];
    if (!ra.done) ta += ra.value.text;
    if (!rb.done) tb += rb.value.text;
    if (ra.done && rb.done) break;
  }
  assert.equal(ta, await aidreams.createSession().complete('I dream of', { temperature: 0, maxTokens: 30 }));
  assert.equal(tb, await aidreams.createSession().complete('Hello', { temperature: 0, maxTokens: 30 }));
});

test("a session's context is the limit: finishReason 'context'", async () => {
  const s = stories.createSession({ contextLength: 16 });
  assert.equal(s.contextLength, 16);
  const text = await s.complete('Once', { temperature: 0, maxTokens: 100, stopTokens: [] });
  assert.equal(typeof text, 'string');
  assert.equal(s.lastGeneration.finishReason, 'context');
  assert.equal(s.position, 16);
});
