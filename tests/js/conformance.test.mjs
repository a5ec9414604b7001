// The WASM engine against llama2.c's reference outputs (byte for byte) and against the native
// engine (same stdout bytes; logits within 1e-4 relative over the first positions, block types
// within a normalised squared error, see BLOCK_NMSE_TOL).
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { haveNative, models, reference, referenceCases, runNative, runWasm } from './helpers.mjs';

for (const [ref, args] of referenceCases) {
  test(`WASM CLI reproduces ${ref} byte for byte`, () => {
    const r = runWasm(['run', ...args]);
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(r.stdout, readFileSync(join(reference, ref)));
  });
  test(`native and WASM CLIs print identical bytes for ${ref} with other seeds`, { skip: !haveNative && 'no native build' }, () => {
    for (const seed of ['1', '7', '123456']) {
      const a = [...args.filter((x, i) => args[i - 1] !== '-s' && x !== '-s'), '-s', seed, '-t', '0.8'];
      const n = runNative(['run', ...a]);
      const w = runWasm(['run', ...a]);
      assert.equal(n.status, 0, n.stderr);
      assert.equal(w.status, 0, w.stderr);
      assert.deepEqual(w.stdout, n.stdout, `seed ${seed}`);
    }
  });
}

// The llama2.c models converted to GGUF (by the native `qkv convert`) print the same bytes
// through the WASM CLI, with the tokenizer taken from the file.
test('WASM CLI reproduces every reference from converted GGUF files', { skip: !haveNative && 'no native build' }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'qkv-gguf-'));
  try {
    for (const m of ['aidreams260K', 'stories260K']) {
      const r = runNative(['convert', join(models, `${m}.bin`), '-z', join(models, 'aidreams-tok512.bin'), '-o', join(dir, `${m}.gguf`)]);
      assert.equal(r.status, 0, r.stderr);
    }
    for (const [ref, args] of referenceCases) {
      const ggufArgs = [join(dir, args[0].endsWith('stories260K.bin') ? 'stories260K.gguf' : 'aidreams260K.gguf'),
        ...args.slice(3)];  // drop the model and -z TOKENIZER
      const w = runWasm(['run', ...ggufArgs]);
      assert.equal(w.status, 0, w.stderr);
      assert.deepEqual(w.stdout, readFileSync(join(reference, ref)), ref);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

const LOGIT_TOL = 1e-4;  // relative to the largest |logit| of the position
// Block types (Q8_0, Q4_0, Q5_1) quantize each matmul's activations to 8 bits: a 1e-7 float
// difference between the two builds can tip one activation's rounding (one step, max/127), a
// discontinuity no per-logit tolerance covers. For them the whole logit array must agree in
// normalised squared error (measured here: 0 to 2e-4 when a value tips; rounding all the
// activations to 8 bits moves these models' logits by ~1e-2) and in the argmax of nearly
// every position. The kernels themselves are checked against their references in WASM by
// kernels-wasm.test.mjs.
const BLOCK_NMSE_TOL = 1e-3, BLOCK_ARGMAX_AGREE = 0.9;
for (const [model, tok, prompt] of [
  ['aidreams260K.bin', 'aidreams-tok512.bin', 'I dream of electric sheep and quiet circuits'],
  ['stories260K.bin', 'aidreams-tok512.bin', 'Once upon a time there was a dream'],
]) {
  test(`native vs WASM logits within ${LOGIT_TOL} on ${model} (f32 .bin, F16 GGUF; Q8_0 / Q4_0 / Q5_1 GGUF within NMSE ${BLOCK_NMSE_TOL})`, { skip: !haveNative && 'no native build' }, () => {
    const dir = mkdtempSync(join(tmpdir(), 'qkv-logits-'));
    try {
      for (const type of ['q8_0', 'q4_0', 'q5_1', 'f16']) {
        const out = join(dir, `${type}.gguf`);
        const r = runNative(['convert', join(models, model), '-z', join(models, tok), '-o', out, '--type', type]);
        assert.equal(r.status, 0, r.stderr);
        compareLogits(dir, [out, '-i', prompt], type !== 'f16');
      }
      compareLogits(dir, [join(models, model), '-z', join(models, tok), '-i', prompt]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

/**
 * Native and WASM `qkv logits` on the same arguments agree within LOGIT_TOL at every position
 * (or, for block types, within BLOCK_NMSE_TOL with the same argmax almost everywhere).
 */
function compareLogits(dir, args, block = false) {
  const n = runNative(['logits', ...args, '-o', join(dir, 'n.f32')]);
  assert.equal(n.status, 0, n.stderr);
  const w = runWasm(['logits', ...args, '-o', join(dir, 'w.f32')]);
  assert.equal(w.status, 0, w.stderr);
  const a = new Float32Array(readFileSync(join(dir, 'n.f32')).buffer.slice(0));
  const b = new Float32Array(readFileSync(join(dir, 'w.f32')).buffer.slice(0));
  assert.equal(a.length, b.length);
  const V = 512, positions = a.length / V;
  assert.ok(positions >= 5, `only ${positions} positions`);
  let worst = 0, se = 0, ss = 0, agree = 0;
  for (let p = 0; p < positions; p++) {
    let scale = 0, diff = 0, am = p * V, bm = p * V;
    for (let i = p * V; i < (p + 1) * V; i++) {
      scale = Math.max(scale, Math.abs(a[i]));
      diff = Math.max(diff, Math.abs(a[i] - b[i]));
      se += (a[i] - b[i]) ** 2;
      ss += a[i] ** 2;
      if (a[i] > a[am]) am = i;
      if (b[i] > b[bm]) bm = i;
    }
    assert.ok(scale > 0.1, 'logits look empty');
    worst = Math.max(worst, diff / scale);
    if (am === bm) agree++;
  }
  if (!block) {
    assert.ok(worst <= LOGIT_TOL, `max relative difference ${worst} (${args[0]})`);
    return;
  }
  assert.ok(se / ss <= BLOCK_NMSE_TOL, `normalised squared error ${se / ss} (${args[0]})`);
  assert.ok(agree >= BLOCK_ARGMAX_AGREE * positions, `argmax agrees at ${agree} of ${positions} positions (${args[0]})`);
}
