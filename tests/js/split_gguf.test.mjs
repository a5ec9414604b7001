// Split GGUF models (llama.cpp's gguf-split: NAME-00001-of-0000N.gguf, ...): the native and Node
// CLIs given the first file, and loadModel given every file (paths, Blobs) or the first path,
// produce what the single file produces; every way of giving the files wrongly is a clear error.
// The split files are written by bench/gguf-split.mjs (the format as llama.cpp writes it: all
// metadata in the first file, split.no / split.count / split.tensors.count in each).
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, before, test } from 'node:test';
import { splitGguf } from '../../bench/gguf-split.mjs';
import { loadModel, QkvError, quantize } from '../../src/js/node.js';
import { modelParts } from '../../src/js/source.js';
import { createWorker } from '../../src/js/worker-client.js';
import { haveNative, models, nativeBin, runNative, runWasm } from './helpers.mjs';

const dir = mkdtempSync(join(tmpdir(), 'qkv-split-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const single = join(dir, 'stories.gguf');
let parts = [];
const skip = !haveNative && `no native CLI at ${nativeBin} (it writes the GGUF)`;

before(() => {
  if (skip) return;
  // stories260K (GQA) as a Q8_0 GGUF carrying the 512-piece tokenizer, split into files of at
  // most 60 kB of tensor data: six files, the tensors of one layer spread over two.
  const r = runNative(['quantize', join(models, 'stories260K.bin'), single, '--type', 'q8_0', '-z', join(models, 'aidreams-tok512.bin')]);
  assert.equal(r.status, 0, r.stderr);
  parts = splitGguf(single, 60000);
});

const run = ['-t', '0', '-n', '48', '-i', 'Once upon', '--threads', '1'];

test('the split files are what llama.cpp writes: several, named NAME-0000k-of-0000N.gguf', { skip }, () => {
  assert.ok(parts.length >= 4, `only ${parts.length} files`);
  parts.forEach((p, i) => assert.equal(basename(p), `stories-${String(i + 1).padStart(5, '0')}-of-${String(parts.length).padStart(5, '0')}.gguf`));
  const sum = parts.reduce((n, p) => n + statSync(p).size, 0);
  assert.ok(sum > statSync(single).size, 'each file has its own header');
});

test('both CLIs given the first file print what the single file prints', { skip }, () => {
  const want = runNative(['run', single, ...run]);
  assert.equal(want.status, 0, want.stderr);
  assert.ok(want.stdout.length > 20, want.stdout);
  for (const cli of [runNative, runWasm]) {
    const got = cli(['run', parts[0], ...run]);
    assert.equal(got.status, 0, got.stderr);
    assert.deepEqual(got.stdout, want.stdout);
  }
});

test('both CLIs refuse a later part, a missing part and a lone part, naming the fix', { skip }, () => {
  const n = String(parts.length).padStart(5, '0');
  for (const cli of [runNative, runWasm]) {
    const later = cli(['run', parts[2], ...run]);
    assert.notEqual(later.status, 0);
    assert.match(later.stderr, new RegExp(`is part 3 of ${parts.length} of a split model: pass the first, .*stories-00001-of-${n}\\.gguf`));
  }
  const moved = `${parts[3]}.away`;
  renameSync(parts[3], moved);
  try {
    for (const cli of [runNative, runWasm]) {
      const missing = cli(['run', parts[0], ...run]);
      assert.notEqual(missing.status, 0);
      assert.match(missing.stderr, new RegExp(`cannot open .*stories-00004-of-${n}\\.gguf`));
    }
  } finally {
    renameSync(moved, parts[3]);
  }
  const lone = join(dir, 'lone.gguf');  // a part renamed so that nothing finds its siblings
  copyFileSync(parts[0], lone);
  for (const cli of [runNative, runWasm]) {
    const r = cli(['run', lone, ...run]);
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, new RegExp(`part 1 of a model split into ${parts.length} files.*load all of them`));
  }
});

test('qkv quantize (native and Node) reads a split model as one and writes one file', { skip }, () => {
  const a = join(dir, 'from-single.gguf');
  const r0 = runNative(['quantize', single, a, '--type', 'q4_0', '--allow-requantize']);  // the input is Q8_0
  assert.equal(r0.status, 0, r0.stderr);
  const total = parts.reduce((n, p) => n + statSync(p).size, 0);
  for (const [cli, name] of [[runNative, 'native'], [runWasm, 'node']]) {
    const b = join(dir, `from-split-${name}.gguf`);
    const r = cli(['quantize', parts[0], b, '--type', 'q4_0', '--allow-requantize']);
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(readFileSync(b), readFileSync(a), `${name}: the split keys are not copied into the output`);
    // The input's size is every file's, not the first's.
    const size = /\(GGUF, ([\d.]+) (KiB|MiB)\)/.exec(r.stdout);
    assert.ok(size, r.stdout);
    assert.ok(Math.abs(Number(size[1]) * (size[2] === 'KiB' ? 1024 : 1 << 20) - total) < 0.01 * total, `${name}: ${r.stdout}`);
    const run2 = runNative(['run', b, ...run]);
    assert.equal(run2.status, 0, run2.stderr);
  }
  const later = runWasm(['quantize', parts[1], join(dir, 'x.gguf'), '--type', 'q4_0', '--allow-requantize']);
  assert.notEqual(later.status, 0);
  assert.match(later.stderr, /is part 2 of .* pass the first/);
});

test('quantize(): every file (paths or Blobs), the first path, or the worker: the single file\'s output', { skip }, async () => {
  const want = await quantize(single, { type: 'q4_k', allowRequantize: true });
  const total = parts.reduce((n, p) => n + statSync(p).size, 0);
  for (const source of [parts, parts[0], parts.map((p) => new Blob([readFileSync(p)]))]) {
    const got = await quantize(source, { type: 'q4_k', allowRequantize: true });
    assert.deepEqual(got.bytes, want.bytes);
    assert.equal(got.inBytes, total);
    assert.deepEqual(got.tensors, want.tensors);
  }
  const w = await createWorker();
  try {
    const got = await w.quantize(parts, { type: 'q4_k', allowRequantize: true });
    assert.deepEqual(got.bytes, want.bytes);
  } finally {
    await w.terminate();
  }
  await assert.rejects(quantize([parts[0], parts[2], parts[1], ...parts.slice(3)], { type: 'q4_k', allowRequantize: true }),
    (e) => e instanceof QkvError && e.code === 'bad_model' && /out of order/.test(e.message));
});

async function greedy(source) {
  const m = await loadModel(source, { threads: 1 });
  try {
    const text = await m.complete('Once upon', { maxTokens: 40, temperature: 0 });
    return { text, logits: Array.from(m.session.logits()) };
  } finally {
    m.dispose();
  }
}

test('loadModel: every file (paths or Blobs) or the first path gives the single file\'s tokens and logits', { skip }, async () => {
  const want = await greedy(single);
  assert.ok(want.text.length > 10);
  const blobs = parts.map((p) => new Blob([readFileSync(p)]));
  for (const source of [parts, parts[0], blobs, new URL(`file://${parts[0]}`)]) {
    const got = await greedy(source);
    assert.equal(got.text, want.text);
    assert.deepEqual(got.logits, want.logits);
  }
});

test('the worker API takes the files of a split model too', { skip }, async () => {
  const want = await greedy(single);
  const w = await createWorker();
  try {
    for (const source of [parts, parts.map((p) => new Blob([readFileSync(p)]))]) {
      const rm = await w.loadModel(source, { threads: 1 });
      assert.equal(await rm.complete('Once upon', { maxTokens: 40, temperature: 0 }), want.text);
      await rm.dispose();
    }
  } finally {
    await w.terminate();
  }
});

test('loadModel: progress counts the bytes of every file', { skip }, async () => {
  const seen = [];
  const m = await loadModel(parts, { threads: 1, onProgress: (p) => seen.push(p) });
  m.dispose();
  const total = parts.reduce((n, p) => n + statSync(p).size, 0);
  const last = seen.at(-1);
  assert.equal(last.loaded, total);
  assert.equal(last.total, total);
  for (let i = 1; i < seen.length; i++) assert.ok(seen[i].loaded >= seen[i - 1].loaded, 'progress went backwards');
});

test('loadModel: files out of order, too few, a later part by name, or an empty list are errors', { skip }, async () => {
  const swapped = [parts[0], parts[2], parts[1], ...parts.slice(3)];
  await assert.rejects(loadModel(swapped), (e) => e instanceof QkvError && e.code === 'bad_model' &&
    /out of order: file 2 is part 3/.test(e.message));
  await assert.rejects(loadModel(parts.slice(0, 3)), (e) => e instanceof QkvError && e.code === 'bad_model' &&
    new RegExp(`says the model has ${parts.length} parts`).test(e.message));
  await assert.rejects(loadModel(parts[1]), (e) => e instanceof QkvError && e.code === 'bad_argument' &&
    /is part 2 of .* pass the first/.test(e.message));
  await assert.rejects(loadModel([parts[0], parts[0], ...parts.slice(2)]), (e) => e instanceof QkvError && e.code === 'bad_model');
  await assert.rejects(loadModel([]), (e) => e instanceof QkvError && e.code === 'bad_argument');
});

test('modelParts: the sibling names of a first file; other sources pass through', () => {
  assert.deepEqual(modelParts('m/x-00001-of-00003.gguf'), ['m/x-00001-of-00003.gguf', 'm/x-00002-of-00003.gguf', 'm/x-00003-of-00003.gguf']);
  assert.deepEqual(modelParts('https://h/a/x-00001-of-00002.gguf').map(String), ['https://h/a/x-00001-of-00002.gguf', 'https://h/a/x-00002-of-00002.gguf']);
  assert.deepEqual(modelParts(new URL('https://h/x-00001-of-00002.gguf')).map(String), ['https://h/x-00001-of-00002.gguf', 'https://h/x-00002-of-00002.gguf']);
  for (const s of ['x-00001-of-00001.gguf', 'x.gguf', 'x-1-of-2.gguf']) assert.deepEqual(modelParts(s), [s]);
  const chunks = [new Uint8Array(3), new Uint8Array(2)];  // an iterable of byte chunks is one source
  assert.deepEqual(modelParts(chunks), [chunks]);
  assert.throws(() => modelParts('x-00002-of-00003.gguf'), (e) => e.code === 'bad_argument');
});
