// Every kind of source loads the same model; progress; aborting a load.
import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { QkvError, loadModel } from 'qkv';
import { AIDREAMS, REFERENCES, TOK, expectedText, rejectsQkv } from './common.mjs';

const SIZE = statSync(AIDREAMS).size;
const BYTES = readFileSync(AIDREAMS);
const GREEDY = expectedText(REFERENCES[0]);

/** Yields the bytes in chunks of the given (odd) sizes, cycling, with an optional delay between them. */
async function* chunked(bytes, sizes, delayMs = 0) {
  let i = 0;
  for (let k = 0; i < bytes.length; k++) {
    const n = sizes[k % sizes.length];
    yield bytes.subarray(i, i + n);
    i += n;
    if (delayMs) await sleep(delayMs);
  }
}

const sources = {
  'a path string': () => AIDREAMS,
  'a file: URL object': () => pathToFileURL(AIDREAMS),
  'a file: URL string': () => pathToFileURL(AIDREAMS).href,
  'a Uint8Array': () => new Uint8Array(BYTES),
  'a Node Buffer': () => readFileSync(AIDREAMS),
  'a Uint8Array view at an offset in a larger buffer': () => {
    const big = new Uint8Array(SIZE + 1001);
    big.set(BYTES, 777);
    return big.subarray(777, 777 + SIZE);
  },
  'a DataView': () => { const u = new Uint8Array(BYTES); return new DataView(u.buffer, u.byteOffset, u.byteLength); },
  'an ArrayBuffer': () => { const u = new Uint8Array(BYTES); return u.buffer.slice(u.byteOffset, u.byteOffset + u.byteLength); },
  'a Blob': () => new Blob([BYTES]),
  'an async iterable of odd-sized chunks': () => chunked(BYTES, [1, 7777, 65537, 3, 100003]),
  'a sync iterable of ArrayBuffer chunks': () => [BYTES.subarray(0, 5001), BYTES.subarray(5001)]
    .map((c) => c.buffer.slice(c.byteOffset, c.byteOffset + c.byteLength)),
};

for (const [name, make] of Object.entries(sources)) {
  test(`loads from ${name}: same greedy text, progress monotonic up to the size`, async () => {
    const progress = [];
    const m = await loadModel(make(), { tokenizer: TOK, threads: 1, onProgress: (p) => progress.push({ ...p }) });
    try {
      assert.equal(await m.complete('I dream of', { temperature: 0, maxTokens: 54, stopTokens: [1] }), GREEDY);
      assert.ok(progress.length >= 1, 'onProgress was not called');
      const iterable = /iterable/.test(name);
      for (let i = 0; i < progress.length; i++) {
        const p = progress[i];
        assert.ok(Number.isInteger(p.loaded) && p.loaded >= 0, JSON.stringify(p));
        // The size of an iterable is not known in advance: total is null (types/index.d.ts).
        assert.equal(p.total, iterable ? null : SIZE, JSON.stringify(p));
        if (i > 0) assert.ok(p.loaded >= progress[i - 1].loaded, `loaded went back: ${JSON.stringify(progress)}`);
      }
      assert.equal(progress.at(-1).loaded, SIZE, 'the last call reports every byte');
      if (name.startsWith('an async iterable')) assert.ok(progress.length >= 10, `${progress.length} progress calls for 15 chunks`);
    } finally {
      m.dispose();
    }
  });
}

test('the tokenizer can come from bytes, a Blob or a URL too', async () => {
  const tok = readFileSync(TOK);
  for (const tokenizer of [tok, new Blob([tok]), pathToFileURL(TOK), chunked(tok, [333])]) {
    const m = await loadModel(BYTES, { tokenizer, threads: 1 });
    try {
      assert.equal(await m.complete('I dream of', { temperature: 0, maxTokens: 54, stopTokens: [1] }), GREEDY);
    } finally {
      m.dispose();
    }
  }
});

test('aborting mid-load (slow async iterable, abort after the first chunk) rejects with code aborted', async () => {
  const ac = new AbortController();
  let served = 0;
  async function* slow() {
    for (let i = 0; i < SIZE; i += 100000) {
      served++;
      yield BYTES.subarray(i, i + 100000);
      await sleep(20);
    }
  }
  const t0 = performance.now();
  let calls = 0;
  await rejectsQkv(loadModel(slow(), {
    tokenizer: TOK, threads: 1, signal: ac.signal,
    onProgress: () => { if (++calls === 1) ac.abort(); },
  }), 'aborted');
  assert.ok(served < Math.ceil(SIZE / 100000), `the whole source was read (${served} chunks) despite the abort`);
  assert.ok(performance.now() - t0 < 1000);
});

test('aborting from a timer while a chunked load is under way rejects with code aborted', async () => {
  const ac = new AbortController();
  setTimeout(() => ac.abort(), 30);
  await rejectsQkv(loadModel(chunked(BYTES, [50000], 10), { tokenizer: TOK, threads: 1, signal: ac.signal }), 'aborted');
});

test('aborting while the tokenizer loads rejects with code aborted', async () => {
  const ac = new AbortController();
  async function* slowTok() { await sleep(10); ac.abort(); await sleep(10); yield readFileSync(TOK); }
  await rejectsQkv(loadModel(BYTES, { tokenizer: slowTok(), threads: 1, signal: ac.signal }), 'aborted');
});

test('an already-aborted signal rejects at once, before reading the source', async () => {
  let pulled = false;
  async function* src() { pulled = true; yield BYTES; }
  const t0 = performance.now();
  await rejectsQkv(loadModel(src(), { tokenizer: TOK, signal: AbortSignal.abort() }), 'aborted');
  await rejectsQkv(loadModel(AIDREAMS, { tokenizer: TOK, threads: 1, signal: AbortSignal.abort() }), 'aborted');
  assert.equal(pulled, false);
  assert.ok(performance.now() - t0 < 500);
});

test('aborting while an async-iterable source is stalled rejects promptly (without waiting for the next chunk)', async () => {
  const ac = new AbortController();
  async function* stalled() { yield BYTES.subarray(0, 1000); await new Promise(() => {}); }
  const p = loadModel(stalled(), { tokenizer: TOK, threads: 1, signal: ac.signal, onProgress: () => setTimeout(() => ac.abort(), 5) });
  const outcome = await Promise.race([
    p.then(() => 'loaded', (e) => (e instanceof QkvError ? e.code : `threw ${e}`)),
    sleep(1000).then(() => 'still pending 1 s after the abort'),
  ]);
  assert.equal(outcome, 'aborted');
});
