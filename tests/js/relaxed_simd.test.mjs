// The relaxed-SIMD builds (dist/qkv-relaxed.*, qkv-mt-relaxed.*): the opcode rewrite that makes
// them (scripts/wasm-relaxed.mjs), their kernels against the scalar references, the llama2.c
// reference outputs byte for byte, logits and training losses against the baseline builds, and
// how `simd` picks a build. Node 20 runs relaxed SIMD behind --experimental-wasm-relaxed-simd,
// so the relaxed runs happen in child processes started with it; this process has it off.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { rewriteRelaxed } from '../../scripts/wasm-relaxed.mjs';
import { loadModel, QkvError } from '../../src/js/node.js';
import { relaxedSimdSupported } from '../../src/js/util.js';
import { models, reference, referenceCases, root, wasmCli } from './helpers.mjs';

const RELAXED = ['--experimental-wasm-relaxed-simd'];
const dist = join(root, 'dist');
const built = ['qkv-relaxed.wasm', 'qkv-mt-relaxed.wasm'].every((f) => existsSync(join(dist, f)));
const skip = !built && 'the relaxed-SIMD builds are not present (scripts/build.sh wasm)';

const leb = (v) => { const out = []; do { let b = v & 0x7f; v >>>= 7; if (v) b |= 0x80; out.push(b); } while (v); return out; };
const v128zero = [0xfd, 0x0c, ...new Array(16).fill(0)];

// A module whose one function holds `body` (no locals), for the rewriter.
function moduleWith(body) {
  const fn = [0x00, ...body, 0x0b];
  const code = [0x01, ...leb(fn.length), ...fn];
  return new Uint8Array([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x04, 0x01, 0x60, 0x00, 0x00,
    0x03, 0x02, 0x01, 0x00, 0x0a, ...leb(code.length), ...code]);
}

test('the rewriter turns f32x4.fma into relaxed_madd and leaves look-alike immediates alone', () => {
  // i32.const whose LEB128 immediate is the bytes fd af 01 (22525), then a real pre-standard fma.
  const decoy = [0x41, 0xfd, 0xaf, 0x01, 0x1a];
  const bytes = moduleWith([...decoy, ...v128zero, ...v128zero, ...v128zero, 0xfd, 0xaf, 0x01, 0x1a]);
  const before = Array.from(bytes);
  const { rewritten, already } = rewriteRelaxed(bytes);
  assert.equal(rewritten, 1);
  assert.equal(already, 0);
  const at = before.length - 5;  // the fma: ... fd af 01 1a 0b
  assert.deepEqual(Array.from(bytes.slice(at, at + 3)), [0xfd, 0x85, 0x02]);
  const decoyAt = before.findIndex((b, i) => b === 0x41 && before[i + 1] === 0xfd && before[i + 2] === 0xaf);
  assert.ok(decoyAt > 0);
  assert.deepEqual(Array.from(bytes.slice(decoyAt, decoyAt + 4)), [0x41, 0xfd, 0xaf, 0x01], 'an immediate was rewritten');
  assert.equal(rewriteRelaxed(bytes).already, 1, 'a second pass finds the standard opcode');
  // Unknown instructions and the pre-standard fms stop the build instead of being guessed at.
  assert.throws(() => rewriteRelaxed(moduleWith([0xff])), /unknown opcode 0xff/);
  assert.throws(() => rewriteRelaxed(moduleWith([...v128zero, ...v128zero, ...v128zero, 0xfd, 0xb0, 0x01, 0x1a])), /0xb0 has no rewrite/);
});

test('the shipped relaxed builds hold only standard relaxed_madd and validate with relaxed SIMD', { skip }, () => {
  for (const f of ['qkv-relaxed.wasm', 'qkv-mt-relaxed.wasm']) {
    const bytes = readFileSync(join(dist, f));
    const { rewritten, already } = rewriteRelaxed(bytes);
    assert.equal(rewritten, 0, `${f} still holds pre-standard f32x4.fma`);
    assert.ok(already > 20, `${f}: only ${already} relaxed_madd (were the kernels built with QKV_RELAXED_SIMD?)`);
  }
  const r = spawnSync(process.execPath, [...RELAXED, '--input-type=module', '-e', `
    import { readFileSync } from 'node:fs';
    for (const f of ['qkv-relaxed.wasm', 'qkv-mt-relaxed.wasm'])
      if (!WebAssembly.validate(readFileSync(${JSON.stringify(dist)} + '/' + f))) { console.log('invalid ' + f); process.exit(1); }
    console.log('valid');`], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});

const kernelTests = join(root, 'build-wasm-relaxed', 'qkv_kernel_tests.cjs');
test('relaxed-SIMD kernels pass the native kernel tests', { skip: !existsSync(kernelTests) && 'build-wasm-relaxed not built' }, () => {
  const r = spawnSync(process.execPath, [...RELAXED, '--no-experimental-fetch', kernelTests, '--gtest_brief=1'], { encoding: 'utf8', maxBuffer: 1 << 26 });
  assert.equal(r.status, 0, r.stdout.slice(-20000) + r.stderr);
  assert.match(r.stdout, /kernels compiled for wasm-relaxed,/, 'the relaxed-SIMD build');
  assert.match(r.stdout, /^\[  PASSED  \] \d+ tests/m, r.stdout.slice(-4000));
  assert.doesNotMatch(r.stdout, /^\[  FAILED  \]/m);
});

test('relaxed-SIMD CLI reproduces every llama2.c reference byte for byte', { skip }, () => {
  for (const [ref, args] of referenceCases) {
    const r = spawnSync(process.execPath, [...RELAXED, wasmCli, 'run', ...args], { maxBuffer: 1 << 26, timeout: 120000 });
    assert.equal(r.status, 0, r.stderr.toString());
    assert.deepEqual(r.stdout, readFileSync(join(reference, ref)), ref);
  }
});

// In a child with relaxed SIMD on: both variants load side by side; logits of every position agree
// to 1e-4 of the largest logit (fused multiply-adds round once instead of twice), and a training
// run's losses agree to 1e-4, single-thread and pthreads builds alike.
test('relaxed and baseline builds agree on logits and training losses', { skip }, () => {
  const api = pathToFileURL(join(root, 'src', 'js', 'node.js')).href;
  const script = `
    import { createTrainer, loadModel } from ${JSON.stringify(api)};
    const out = { logits: [], losses: {}, modes: {} };
    for (const threads of [1, 2]) {
      const [a, b] = await Promise.all(['relaxed', 'baseline'].map((simd) =>
        loadModel(${JSON.stringify(join(models, 'stories260K.bin'))}, { tokenizer: ${JSON.stringify(join(models, 'aidreams-tok512.bin'))}, threads, simd })));
      out.modes[threads] = [a.info.simd, b.info.simd, a.info.threading.mode];
      const ids = a.tokenize('Once upon a time there was a little dog who liked to run in the park');
      const sa = a.createSession(), sb = b.createSession();
      sa.feed(ids, { allLogits: true });
      sb.feed(ids, { allLogits: true });
      let worst = 0;
      for (let i = 0; i < ids.length; i++) {
        const x = sa.logits(i), y = sb.logits(i);
        let mag = 0, d = 0;
        for (let j = 0; j < x.length; j++) { mag = Math.max(mag, Math.abs(y[j])); d = Math.max(d, Math.abs(x[j] - y[j])); }
        worst = Math.max(worst, d / mag);
      }
      out.logits.push(worst);
      a.dispose(); b.dispose();
      for (const simd of ['relaxed', 'baseline']) {
        const t = await createTrainer({ text: 'the lord is my shepherd; I shall not want. '.repeat(200),
          tokenizer: { vocab: 300 }, shape: 'tiny', steps: 4, batch: 2, seq: 32, seed: 3, threads, simd });
        const ls = [];
        for (let i = 0; i < 4; i++) ls.push((await t.step()).loss);
        out.losses[simd + threads] = ls;
        out.modes['train' + simd + threads] = t.info.simd;
        t.dispose();
      }
    }
    console.log(JSON.stringify(out));`;
  const r = spawnSync(process.execPath, [...RELAXED, '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 300000 });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout.trim().split('\n').pop());
  assert.deepEqual(out.modes[1], ['wasm-relaxed', 'wasm', 'single']);
  assert.deepEqual(out.modes[2], ['wasm-relaxed', 'wasm', 'pthreads']);
  for (const th of [1, 2]) {
    assert.equal(out.modes[`trainrelaxed${th}`], 'wasm-relaxed');
    assert.equal(out.modes[`trainbaseline${th}`], 'wasm');
    const a = out.losses[`relaxed${th}`], b = out.losses[`baseline${th}`];
    assert.ok(a[3] < a[0], `relaxed training loss does not fall: ${a}`);
    for (let i = 0; i < 4; i++) assert.ok(Math.abs(a[i] - b[i]) <= 1e-4 * Math.abs(b[i]), `step ${i}: ${a[i]} vs ${b[i]}`);
  }
  for (const w of out.logits) assert.ok(w > 0 && w <= 1e-4, `logits differ by ${w} of the largest (0 would mean the same build ran twice)`);
});

test('simd option: auto falls back where relaxed SIMD is off; relaxed is refused by name; bad values are bad_argument', async () => {
  assert.equal(relaxedSimdSupported(), false, 'this test process should run with relaxed SIMD off (Node 20 default)');
  const model = join(models, 'stories260K.bin'), tokenizer = join(models, 'aidreams-tok512.bin');
  const m = await loadModel(model, { tokenizer, threads: 1 });
  try {
    assert.equal(m.info.simd, 'wasm');
    assert.match(m.info.simdReason, /no relaxed SIMD/);
  } finally {
    m.dispose();
  }
  await assert.rejects(loadModel(model, { tokenizer, simd: 'relaxed' }),
    (e) => e instanceof QkvError && e.code === 'unsupported' && /relaxed SIMD/.test(e.message));
  await assert.rejects(loadModel(model, { tokenizer, simd: 'fma' }),
    (e) => e instanceof QkvError && e.code === 'bad_argument' && /simd must be one of 'auto', 'relaxed', 'baseline'/.test(e.message));
});
