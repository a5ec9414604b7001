// The memory target: peak memory <= model bytes + KV cache + 10%. A random-weight
// llama2.c model of about 200 MB (large enough that the fixed start-up heap does not dominate)
// is written to a temp dir, loaded through the JS API, prefilled and decoded; the WASM heap
// (which never shrinks, so its final size is its peak) must stay within the bound. The native
// counterpart (peak RSS of the CLI) is tests/native/engine/peak_memory.cpp.
import assert from 'node:assert/strict';
import { closeSync, mkdtempSync, openSync, rmSync, statSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { loadModel } from '../../src/js/node.js';
import { models } from './helpers.mjs';

// dim 1024, hidden 2816, 4 layers, 16 heads, vocab 512 (the aidreams tokenizer), context 512.
const SHAPE = { dim: 1024, hidden: 2816, layers: 4, heads: 16, kvHeads: 16, vocab: 512, seqLen: 512 };

/** Writes a llama2.c checkpoint with small random weights (norm weights 1), block by block. */
function writeRandomLlama2c(path, s, seed = 1) {
  const fd = openSync(path, 'w');
  let state = Math.imul(seed, 2654435761) >>> 0 || 1;
  const random = (n, scale) => {
    const a = new Float32Array(n);
    for (let i = 0; i < n; i++) {  // xorshift32
      state ^= state << 13; state >>>= 0; state ^= state >>> 17; state ^= state << 5; state >>>= 0;
      a[i] = (state / 4294967296 - 0.5) * 2 * scale;
    }
    return a;
  };
  const ones = (n) => new Float32Array(n).fill(1);
  const put = (a) => writeSync(fd, new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
  try {
    put(new Int32Array([s.dim, s.hidden, s.layers, s.heads, s.kvHeads, s.vocab, s.seqLen]));
    const kvDim = s.dim / s.heads * s.kvHeads, L = s.layers, d = s.dim, h = s.hidden;
    put(random(s.vocab * d, 0.5));
    put(ones(L * d));
    const mats = (rows, cols) => { for (let l = 0; l < L; l++) put(random(rows * cols, 1.7 / Math.sqrt(cols))); };
    mats(d, d); mats(kvDim, d); mats(kvDim, d); mats(d, d);  // wq wk wv wo
    put(ones(L * d));
    mats(h, d); mats(d, h); mats(h, d);  // w1 w2 w3
    put(ones(d));
  } finally {
    closeSync(fd);
  }
}

let dir, path;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'qkv-mem-'));
  path = join(dir, 'random200m.bin');
  writeRandomLlama2c(path, SHAPE);
});
after(() => rmSync(dir, { recursive: true, force: true }));

test('peak WASM heap <= model bytes + KV cache + 10% on a ~200 MB model', { timeout: 60000 }, async (t) => {
  const fileBytes = statSync(path).size;
  assert.ok(fileBytes > 150e6 && fileBytes < 260e6, `model is ${fileBytes} bytes`);
  const m = await loadModel(path, { tokenizer: join(models, 'aidreams-tok512.bin'), threads: 1 });
  try {
    const heapAfterLoad = m.info.memory.heapBytes;
    const s = m.createSession();
    s.feed(m.tokenize('Once upon a time there was a little robot who dreamed of the stars'));
    for (let i = 0; i < 24; i++) s.feed([s.sample({ temperature: 0 })]);
    const { heapBytes, kvCacheBytes, weightBytes } = m.info.memory;
    const bound = (fileBytes + kvCacheBytes) * 1.10;
    t.diagnostic(`file ${(fileBytes / 2 ** 20).toFixed(1)} MiB, weights ${(weightBytes / 2 ** 20).toFixed(1)} MiB, ` +
      `KV cache ${(kvCacheBytes / 2 ** 20).toFixed(1)} MiB, heap after load ${(heapAfterLoad / 2 ** 20).toFixed(1)} MiB, ` +
      `peak heap ${(heapBytes / 2 ** 20).toFixed(1)} MiB = ${(heapBytes / (fileBytes + kvCacheBytes)).toFixed(3)} x (file + KV)`);
    assert.ok(kvCacheBytes > 0);
    assert.ok(heapBytes >= fileBytes, 'the heap holds the weights');
    assert.ok(heapBytes <= bound, `peak heap ${heapBytes} > (file ${fileBytes} + KV ${kvCacheBytes}) x 1.10 = ${Math.round(bound)}`);
    s.dispose();
  } finally {
    m.dispose();
  }
});
