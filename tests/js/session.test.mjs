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
