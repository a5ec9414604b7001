// Session step API details the attention explorer relies on: logits of every position of a feed.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadModel, QkvError } from '../../src/js/node.js';
import { models } from './helpers.mjs';

test('feed(ids, {allLogits}) gives every position the logits a token-by-token feed gives', async () => {
  const m = await loadModel(join(models, 'stories260K.bin'), { tokenizer: join(models, 'aidreams-tok512.bin'), threads: 1 });
  try {
    const ids = m.tokenize('I dream of a cat that sings');
    const all = m.createSession(), step = m.createSession();
    all.feed(ids, { allLogits: true });
    let worst = 0, scale = 0;
    for (let i = 0; i < ids.length; i++) {
      step.feed([ids[i]]);
      const x = all.logits(i), y = step.logits();
      for (let k = 0; k < x.length; k++) { worst = Math.max(worst, Math.abs(x[k] - y[k])); scale = Math.max(scale, Math.abs(y[k])); }
    }
    assert.ok(scale > 0.5 && worst / scale < 1e-4, `relative difference ${worst / scale}`);
    assert.deepEqual(Array.from(all.logits()), Array.from(all.logits(ids.length - 1)));
    step.feed(ids.slice(0, 3));
    assert.throws(() => step.logits(0), (e) => e instanceof QkvError && e.code === 'bad_argument' && /allLogits/.test(e.message));
    assert.throws(() => all.logits(ids.length), (e) => e.code === 'bad_argument');
  } finally {
    m.dispose();
  }
});

test('a sample()/feed() loop with a seed gives generate()\'s tokens; the stream restarts when the loop does', async () => {
  const m = await loadModel(join(models, 'aidreams260K.bin'), { tokenizer: join(models, 'aidreams-tok512.bin'), threads: 1 });
  try {
    const opts = { temperature: 1, topP: 0.9, seed: 42 };
    const g = m.createSession();
    const want = [];
    for await (const { token } of g.generate('I dream of', { ...opts, maxTokens: 40, stopTokens: [] })) if (token >= 0) want.push(token);
    assert.equal(want.length, 40);
    const prompt = g.tokens.slice(0, g.lastGeneration.promptTokens);

    const loop = () => {
      const s = m.createSession();
      s.feed(prompt);
      const got = [];
      for (let i = 0; i < want.length; i++) { got.push(s.sample(opts)); s.feed([got[i]]); }
      s.dispose();
      return got;
    };
    assert.deepEqual(loop(), want);
    assert.deepEqual(loop(), want, 'a second loop starts the stream again from the seed');
    // More than one distinct token: the stream moves on (one coin for every token would not).
    assert.ok(new Set(want).size > 5);

    // sample() again without a feed starts the stream again: the same token. Other options
    // start their own stream, and going back starts the first one again.
    const s = m.createSession();
    s.feed(prompt);
    const first = s.sample(opts);
    assert.equal(s.sample(opts), first);
    assert.equal(s.sample(opts), want[0]);
    s.sample({ ...opts, seed: 7 });
    assert.equal(s.sample(opts), want[0]);
    s.feed([want[0]]);
    s.truncate(prompt.length - 1);  // back to the prompt: not a continuation, the stream starts again
    s.feed([prompt.at(-1)]);
    assert.equal(s.sample(opts), want[0]);
    s.dispose();
    assert.throws(() => s.sample(opts), (e) => e.code === 'disposed');
  } finally {
    m.dispose();
  }
});
