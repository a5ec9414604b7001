// `qkv quantize` in the Node CLI (WASM, bindings/quantize_bindings.cpp) and the JS quantize():
// the same output file, byte for byte, and the same report on stdout as the native CLI, on a
// llama2.c checkpoint whose rows split into K-quant blocks (dim 256) and on a GGUF; bad
// invocations are the native CLI's errors.
import assert from 'node:assert/strict';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { quantize, QkvError } from '../../src/js/node.js';
import { haveNative, models, nativeBin, runNative, runWasm } from './helpers.mjs';

const dir = mkdtempSync(join(tmpdir(), 'qkv-quant-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const tok = join(models, 'aidreams-tok512.bin');
const wide = join(dir, 'wide.bin');
const text = join(dir, 'text.txt');

/** A random llama2.c checkpoint: dim 256, hidden 512, 3 layers, 4 heads, vocab 512, context 128. */
function writeWide(path) {
  const [d, h, L, V, T] = [256, 512, 3, 512, 128];
  let s = 987654321;
  const rnd = (n, scale) => {
    const a = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
      a[i] = (s / 4294967296 - 0.5) * 2 * scale;
    }
    return a;
  };
  const fd = openSync(path, 'w');
  const put = (a) => writeSync(fd, new Uint8Array(a.buffer));
  put(new Int32Array([d, h, L, 4, 4, V, T]));
  put(rnd(V * d, 1));
  put(new Float32Array(L * d).fill(1));
  for (let m = 0; m < 4; m++) put(rnd(L * d * d, 0.1));
  put(new Float32Array(L * d).fill(1));
  put(rnd(L * h * d, 0.1)); put(rnd(L * d * h, 0.08)); put(rnd(L * h * d, 0.1));
  put(new Float32Array(d).fill(1));
  closeSync(fd);
}

before(() => {
  writeWide(wide);
  writeFileSync(text, 'Once upon a time, a little robot dreamed of the stars. It was a happy robot and it sang every day.\n'.repeat(4));
});

const skip = !haveNative && `no native CLI at ${nativeBin}`;

// Each CLI writes OUT relative to its own directory, so the report lines (which name OUT) match.
function both(args) {
  const out = {};
  for (const [name, run] of [['native', runNative], ['wasm', runWasm]]) {
    const cwd = join(dir, `${name}-${args.indexOf('--type') >= 0 ? args[args.indexOf('--type') + 1] : 'x'}`);
    mkdirSync(cwd, { recursive: true });
    const r = run(args, { cwd });
    out[name] = { ...r, file: r.status === 0 ? readFileSync(join(cwd, args[2])) : null };
  }
  return out;
}

test('Node CLI quantize: the native CLI\'s file and stdout, byte for byte', { skip, timeout: 180000 }, (t) => {
  for (const type of ['q5_k', 'q4_k']) {
    const r = both(['quantize', wide, 'out.gguf', '--type', type, '-z', tok]);
    assert.equal(r.native.status, 0, r.native.stderr);
    assert.equal(r.wasm.status, 0, r.wasm.stderr);
    assert.ok(r.native.file.equals(r.wasm.file), `${type}: the two CLIs wrote different files`);
    assert.equal(r.wasm.stdout.toString(), r.native.stdout.toString(), `${type}: different reports`);
    t.diagnostic(`${type}: ${r.native.stdout.toString().split('\n')[0]}`);
    if (type === 'q5_k') assert.match(r.native.stdout.toString(), /Q5_K.*Q6_K/);
  }
  // A GGUF input (the 260K model through the f32 writer) with perplexity before and after.
  const gguf = both(['quantize', join(models, 'aidreams260K.bin'), 'a.gguf', '--type', 'q8_0', '-z', tok]);
  assert.equal(gguf.native.status, 0, gguf.native.stderr);
  const src = join(dir, 'aidreams-q8_0.gguf');
  writeFileSync(src, gguf.native.file);
  const r = both(['quantize', src, 'b.gguf', '--type', 'q5_k', '--text', text, '--ctx', '64', '--threads', '1', '--allow-requantize']);
  assert.equal(r.native.status, 0, r.native.stderr);
  assert.equal(r.wasm.status, 0, r.wasm.stderr);
  assert.ok(r.native.file.equals(r.wasm.file), 'GGUF q5_k: different files');
  // The report is the same bytes up to the perplexities, which agree to float rounding (the
  // forward pass sums in a different order in AVX-512 and in SIMD128; as tests/js/perplexity).
  const re = /perplexity on (.*) \(([0-9]+) tokens predicted\): before ([0-9.]+), after ([0-9.]+) \(([-+][0-9.]+)%\)\n$/;
  const [w, nat] = [r.wasm.stdout.toString(), r.native.stdout.toString()];
  assert.equal(w.replace(re, ''), nat.replace(re, ''));
  const a = re.exec(w), b = re.exec(nat);
  assert.ok(a && b, nat);
  assert.equal(a[1], b[1]);
  assert.equal(a[2], b[2]);
  for (const k of [3, 4]) assert.ok(Math.abs(Number(a[k]) / Number(b[k]) - 1) < 1e-3, `${a[k]} vs ${b[k]}`);
  t.diagnostic(`q8_0 GGUF -> q5_k: ${b[0].trim()}`);
});

test('JS quantize(): the native file, a report per tensor, progress, typed errors', { skip, timeout: 120000 }, async () => {
  const n = both(['quantize', wide, 'js.gguf', '--type', 'q5_k', '-z', tok]);
  assert.equal(n.native.status, 0, n.native.stderr);
  const seen = [];
  const res = await quantize(wide, { type: 'q5_k', tokenizer: tok, name: 'wide.bin', onProgress: (p) => seen.push(p) });
  assert.ok(Buffer.from(res.bytes).equals(n.native.file), 'quantize() differs from the native CLI');
  assert.equal(res.outBytes, res.bytes.byteLength);
  assert.equal(res.fromGguf, false);
  assert.ok(res.tensors.some((x) => x.to === 'Q5_K') && res.tensors.some((x) => x.to === 'Q6_K' && /classifier/.test(x.note)));
  const q = seen.filter((p) => p.phase === 'quantize');
  assert.ok(q.length > 3 && q.at(-1).done === q.at(-1).total);
  // Chunks instead of one buffer: the same bytes.
  const chunks = [];
  const streamed = await quantize(readFileSync(wide), { type: 'q5_k', tokenizer: readFileSync(tok), name: 'wide.bin', onChunk: (c) => chunks.push(c) });
  assert.equal(streamed.bytes, null);
  assert.ok(Buffer.concat(chunks).equals(n.native.file));
  for (const [opts, re] of [[{ type: 'q3_k' }, /type must be one of/], [{}, /type must be one of/], [{ type: 'q8_0', onChunk: 3 }, /onChunk/]]) {
    await assert.rejects(quantize(wide, opts), (e) => e instanceof QkvError && e.code === 'bad_argument' && re.test(e.message));
  }
  await assert.rejects(quantize(new Uint8Array([71, 71, 85, 70, 3, 0, 0, 0]), { type: 'q8_0' }),
    (e) => e instanceof QkvError && e.code === 'bad_model');
  await assert.rejects(quantize(wide, { type: 'q8_0' }), (e) => e instanceof QkvError && /tokenizer/.test(e.message));
});

test('Node CLI quantize: bad invocations fail as the native CLI does', { skip, timeout: 60000 }, () => {
  const trunc = join(dir, 'trunc.gguf');
  writeFileSync(trunc, readFileSync(join(models, '..', 'models', 'aidreams260K.bin')).subarray(0, 100));
  for (const args of [
    ['quantize', wide, 'x.gguf'],
    ['quantize', wide, 'x.gguf', '--type', 'q3_k'],
    ['quantize', wide],
    ['quantize', join(dir, 'missing.bin'), 'x.gguf', '--type', 'q8_0'],
    ['quantize', trunc, 'x.gguf', '--type', 'q8_0', '-z', tok],
    ['quantize', wide, 'x.gguf', '--type', 'q8_0', '-z', tok, '--text', join(dir, 'missing.txt')],
  ]) {
    const r = both(args);
    assert.equal(r.wasm.status, 1, `${args.join(' ')}: ${r.wasm.stderr}`);
    assert.equal(r.native.status, 1);
    assert.equal(r.wasm.stderr.split('\n')[0], r.native.stderr.split('\n')[0], args.join(' '));
  }
});
