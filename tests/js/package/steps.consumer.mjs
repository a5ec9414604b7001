// The step-level API: feed, logits, sample, prefill/truncate, attention capture.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { loadModel } from 'qkv';
import { AIDREAMS, STORIES, TOK, argmax, collect } from './common.mjs';

const models = {};
before(async () => {
  models.aidreams = await loadModel(AIDREAMS, { tokenizer: TOK, threads: 1 });
  models.stories = await loadModel(STORIES, { tokenizer: TOK, threads: 2 });
});
after(() => { for (const m of Object.values(models)) m.dispose(); });

const PROMPT = 'I dream of';

/** Same logits up to float rounding (1e-4 of the largest), same argmax. */
function assertClose(a, b) {
  assert.equal(a.length, b.length);
  let scale = 0, diff = 0;
  for (let i = 0; i < a.length; i++) { scale = Math.max(scale, Math.abs(a[i])); diff = Math.max(diff, Math.abs(a[i] - b[i])); }
  assert.ok(diff <= 1e-4 * scale, `max |diff| ${diff} vs max |logit| ${scale}`);
  assert.equal(argmax(a), argmax(b));
}

for (const name of ['aidreams', 'stories']) {
  test(`${name}: feed + logits + argmax decode step by step equals greedy generate()`, async () => {
    const m = models[name];
    const V = m.info.vocabSize;
    const ids = m.tokenize(PROMPT);
    const greedy = (await collect(m.createSession().generate(PROMPT, { temperature: 0, maxTokens: 12, stopTokens: [] })))
      .map((t) => t.token).filter((t) => t >= 0);
    assert.equal(greedy.length, 12);
    const s = m.createSession();
    assert.equal(s.position, 0);
    s.feed(ids);
    assert.equal(s.position, ids.length);
    assert.deepEqual(s.tokens, ids);
    const steps = [];
    for (let i = 0; i < 12; i++) {
      const logits = s.logits();
      assert.ok(logits instanceof Float32Array);
      assert.equal(logits.length, V);
      assert.ok(logits.every(Number.isFinite));
      const next = argmax(logits);
      assert.equal(s.sample({ temperature: 0 }), next, 'sample({temperature: 0}) is the argmax');
      steps.push(next);
      s.feed([next]);
    }
    assert.deepEqual(steps, greedy);
    assert.equal(s.position, ids.length + 12);
    s.dispose();
  });

  test(`${name}: one batched feed and token-by-token feeds give the same logits`, () => {
    const m = models[name];
    const ids = m.tokenize('Once upon a time there was a dream');
    const a = m.createSession(), b = m.createSession();
    a.feed(ids);
    for (const id of ids) b.feed([id]);
    const la = a.logits(), lb = b.logits();
    assertClose(la, lb);
    // The returned arrays are copies: more feeds do not change them.
    const copy = la.slice();
    a.feed([5, 6, 7]);
    assert.deepEqual(la, copy);
    a.dispose(); b.dispose();
  });

  test(`${name}: attention capture: rows sum to 1, future keys are 0`, () => {
    const m = models[name];
    const { layers, heads } = m.info;
    const s = m.createSession();
    assert.equal(s.captureAttention, false);
    s.captureAttention = true;
    assert.equal(s.captureAttention, true);
    const ids = m.tokenize(PROMPT);
    const check = (queries, keys) => {
      for (let l = 0; l < layers; l++) {
        for (let h = 0; h < heads; h++) {
          const a = s.attention(l, h);
          assert.equal(a.queries, queries);
          assert.equal(a.keys, keys);
          assert.ok(a.probs instanceof Float32Array);
          assert.equal(a.probs.length, queries * keys);
          for (let i = 0; i < queries; i++) {
            const pos = keys - queries + i;
            let sum = 0;
            for (let j = 0; j < keys; j++) {
              const p = a.probs[i * keys + j];
              if (j > pos) assert.equal(p, 0, `layer ${l} head ${h}: query ${pos} attends to future key ${j}`);
              else assert.ok(p >= 0 && p <= 1, `probability ${p}`);
              sum += p;
            }
            assert.ok(Math.abs(sum - 1) < 1e-4, `layer ${l} head ${h} row ${i} sums to ${sum}`);
          }
        }
      }
    };
    s.feed(ids);
    check(ids.length, ids.length);
    // The first query (BOS) can only attend to itself.
    assert.equal(s.attention(0, 0).probs[0], 1);
    s.feed([300, 301, 302]);
    check(3, ids.length + 3);
    s.dispose();
  });
}

test('sample() with a seed is deterministic and stays in the vocabulary', () => {
  const m = models.aidreams;
  const s = m.createSession();
  s.feed(m.tokenize(PROMPT));
  const a = s.sample({ temperature: 1, seed: 5 });
  assert.equal(s.sample({ temperature: 1, seed: 5 }), a);
  assert.ok(Number.isInteger(a) && a >= 0 && a < m.info.vocabSize);
  assert.equal(s.position, m.tokenize(PROMPT).length, 'sample() does not feed');
  // topK 1 is greedy whatever the temperature.
  assert.equal(s.sample({ temperature: 2, topK: 1, seed: 9 }), argmax(s.logits()));
  s.dispose();
});

test('prefill reuses the cached prefix; truncate and reset shorten the cache', () => {
  const m = models.stories;
  const s = m.createSession();
  const ids = m.tokenize('Once upon a time');
  assert.equal(s.prefill(ids), ids.length);
  assert.deepEqual(s.tokens, ids);
  const longer = [...ids, 300, 301];
  assert.equal(s.prefill(longer), 2, 'only the new tokens are computed');
  const fresh = m.createSession();
  fresh.feed(longer);
  assertClose(s.logits(), fresh.logits());
  s.truncate(3);
  assert.equal(s.position, 3);
  assert.deepEqual(s.tokens, ids.slice(0, 3));
  s.reset();
  assert.equal(s.position, 0);
  assert.deepEqual(s.tokens, []);
  s.feed(longer);
  assertClose(s.logits(), fresh.logits());
  s.dispose(); fresh.dispose();
});

test('KV-cache memory is reported per session and freed on dispose', () => {
  const m = models.stories;
  const base = m.info.memory.kvCacheBytes;
  const s = m.createSession();
  s.feed(m.tokenize('Once upon a time'));
  assert.ok(m.info.memory.kvCacheBytes > base);
  s.dispose();
  assert.equal(m.info.memory.kvCacheBytes, base);
  assert.ok(m.info.memory.weightBytes > 900000);
  assert.ok(m.info.memory.heapBytes >= m.info.memory.weightBytes);
});
