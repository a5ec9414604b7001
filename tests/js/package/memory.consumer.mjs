// Load -> generate -> dispose cycles must not leak: the WASM heap (which never shrinks) stops growing.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { loadModel } from 'qkv';
import { AIDREAMS, TOK } from './common.mjs';

const MODEL_BYTES = new Uint8Array(readFileSync(AIDREAMS));
const TOK_BYTES = new Uint8Array(readFileSync(TOK));

async function cycles(n, threads) {
  const heap = [];
  for (let i = 0; i < n; i++) {
    const m = await loadModel(MODEL_BYTES, { tokenizer: TOK_BYTES, threads });
    const s = m.createSession();
    await s.complete('I dream of', { maxTokens: 20, seed: i + 1, stopTokens: [] });
    assert.equal(s.lastGeneration.generatedTokens, 20);
    // An abandoned stream and an extra session must be freed by dispose() too.
    for await (const _ of m.generate('I dream of', { maxTokens: 20, seed: i + 1 })) break;
    heap.push(m.info.memory.heapBytes);
    m.dispose();
  }
  return heap;
}

test('100 cycles of load -> generate 20 tokens -> dispose (threads 1): the heap stops growing', async () => {
  const t0 = performance.now();
  const heap = await cycles(100, 1);
  assert.ok(heap[9] > 0);
  assert.equal(heap[99], heap[9], `heap grew from ${heap[9]} bytes (cycle 10) to ${heap[99]} (cycle 100): a leak; ` +
    `heap by cycle: ${[...new Set(heap)].join(', ')}`);
  assert.ok(performance.now() - t0 < 30000);
});

test('40 cycles on the pthreads build (threads 2): the heap stops growing', async () => {
  const heap = await cycles(40, 2);
  assert.equal(heap[39], heap[9], `heap grew from ${heap[9]} to ${heap[39]} bytes`);
});

test('1000 sessions created, used and disposed on one model: the heap stops growing', async () => {
  const m = await loadModel(MODEL_BYTES, { tokenizer: TOK_BYTES, threads: 1 });
  try {
    const heap = [];
    for (let i = 0; i < 1000; i++) {
      const s = m.createSession();
      s.feed([1, 300, 301]);
      s.logits();
      s.dispose();
      if (i % 100 === 99) heap.push(m.info.memory.heapBytes);
    }
    assert.equal(heap.at(-1), heap[0], `heap by 100 sessions: ${heap.join(', ')}`);
    assert.equal(m.info.memory.kvCacheBytes, 0);
  } finally {
    m.dispose();
  }
});

test('the measure can see a leak: models that are not disposed do grow the heap', async () => {
  const kept = [];
  try {
    const before = (kept.push(await loadModel(MODEL_BYTES, { tokenizer: TOK_BYTES, threads: 1 })), kept[0].info.memory.heapBytes);
    for (let i = 0; i < 40; i++) kept.push(await loadModel(MODEL_BYTES, { tokenizer: TOK_BYTES, threads: 1 }));
    assert.ok(kept.at(-1).info.memory.heapBytes > before, '41 live models (~40 MB) did not grow the heap');
  } finally {
    for (const m of kept) m.dispose();
  }
});
