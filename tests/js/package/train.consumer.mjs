// createTrainer from the installed package: a tiny model trains in process and in a worker
// thread (the package's own train-worker.js), and its GGUF loads back.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { QkvError, TRAIN_PRESETS, createTrainer, loadModel } from 'qkv';

const text = 'the cat sat on the mat. the dog ran to the park. a bird sang in the tree. '.repeat(60);
const opts = { text, shape: { dim: 32, layers: 1, heads: 2, hiddenDim: 64 }, tokenizer: { vocab: 280 }, seq: 16, batch: 2, steps: 4, seed: 3 };

test('createTrainer trains in process and in a worker with the same losses; the GGUF loads', async () => {
  assert.equal(TRAIN_PRESETS.tiny.dim, 64);
  const a = await createTrainer({ ...opts, threads: 1 });
  const want = [];
  await a.run({ onStep: (s) => want.push(s.loss) });
  const m = await loadModel(await a.toGGUF(), { threads: 1 });
  assert.equal(m.info.dim, 32);
  m.dispose();
  a.dispose();
  const b = await createTrainer({ ...opts, threads: 1, worker: true });
  const got = [];
  for await (const s of b.steps()) got.push(s.loss);
  await b.dispose();
  assert.deepEqual(got, want);
  await assert.rejects(createTrainer({ ...opts, steps: -1 }), (e) => e instanceof QkvError && e.code === 'bad_argument');
});
