// Additive and block-sparse attention layers in the WASM build (docs/attention-kinds.md): the
// qkv-kinds test model (a block-sparse, an additive and a softmax layer) against the float64
// forward of tests/js/float64_forward.py, which takes the sparse layer as dense attention under
// the pattern's mask (from sparseMask()); the model's description of its kinds; bad arguments.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { models as sharedModels, root } from './helpers.mjs';
import { QkvError, loadModel } from '../../src/js/node.js';
import { gpuUnsupported } from '../../src/js/gpu-model.js';

const maker = join(root, 'build', 'qkv_test_models');
const outDir = join(root, 'test-artifacts', 'attention-kinds-models');
const script = join(root, 'tests', 'js', 'float64_forward.py');
const TOL = 1e-4;  // as float64.test.mjs: float32 engine vs float64 definitions, logits of about +-10
const python = spawnSync('python3', ['--version']).status === 0;
const skip = !existsSync(maker) ? `${maker} is not built (scripts/build.sh native)` : !python ? 'python3 is missing' : false;
const path = join(outDir, 'qkv-kinds.gguf');

before(() => {
  if (skip) return;
  mkdirSync(outDir, { recursive: true });
  const r = spawnSync(maker, [outDir, sharedModels], { encoding: 'utf8' });
  assert.equal(r.status, 0, `qkv_test_models failed: ${r.stderr}`);
});

test('the model describes its attention kinds and pattern', { skip }, async () => {
  const model = await loadModel(path, { threads: 1 });
  try {
    const i = model.info;
    assert.deepEqual(i.attentionKinds, ['block_sparse', 'additive', 'softmax']);
    assert.equal(i.additiveLength, 8);
    assert.deepEqual(i.sparsePattern, { blockSize: 4, windowBlocks: 1, globalTokens: 2, randomBlocks: 1, seed: 7 });
    const m = model.sparseMask({ queryStart: 10, queries: 2, keys: 12 });
    assert.equal(m.length, 24);
    assert.equal(m[0 * 12 + 0], 1, 'global tokens are seen');
    assert.equal(m[0 * 12 + 10], 1, 'the own block is seen');
    for (const bad of [{ queries: -1, keys: 3 }, { queries: 2 }, { queries: 1.5, keys: 2 }, { queries: 2, keys: 2, causal: true }, null]) {
      assert.throws(() => model.sparseMask(bad), (e) => e instanceof QkvError && e.code === 'bad_argument', JSON.stringify(bad));
    }
  } finally {
    model.dispose();
  }
});

test('WebGPU refuses the kinds, naming the first such layer (the model then runs in WASM)', () => {
  const d = { positional: 'rope', layerAttn: ['softmax', 'additive', 'block_sparse'] };
  assert.equal(gpuUnsupported(d), 'layer 1 uses additive attention, which is not implemented on WebGPU');
});

test('logits within TOL of a float64 forward pass (sparse layer as masked dense attention)', { skip }, async (t) => {
  const model = await loadModel(path, { threads: 1 });
  try {
    const ids = model.tokenize('Once upon a time, the little robot dreamed of the stars, and then of the sea.');
    const n = ids.length;
    const flat = model.sparseMask({ queries: n, keys: n });
    const mask = Array.from({ length: n }, (_, p) => Array.from(flat.subarray(p * n, (p + 1) * n)));
    let hidden = 0;
    for (let p = 0; p < n; p++) for (let j = 0; j <= p; j++) hidden += mask[p][j] ? 0 : 1;
    assert.ok(hidden > n, `the pattern must hide keys at ${n} tokens (hides ${hidden})`);
    const s = model.createSession();
    s.feed(ids);
    const got = s.logits();
    s.dispose();
    const idsFile = join(outDir, 'qkv-kinds.ids.json');
    writeFileSync(idsFile, JSON.stringify({ ids, mask }));
    const r = spawnSync('python3', [script, path, idsFile], { encoding: 'utf8', maxBuffer: 1 << 26 });
    assert.equal(r.status, 0, `float64_forward.py failed: ${r.stderr}`);
    const want = JSON.parse(r.stdout).logits;
    assert.equal(got.length, want.length);
    let worst = 0;
    for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]));
    t.diagnostic(`${n} tokens: max |qkv - float64| = ${worst.toExponential(2)}`);
    assert.ok(worst <= TOL, `logits differ from float64 by up to ${worst}`);
  } finally {
    model.dispose();
  }
});

// The shipped translator with additive cross-attention (models/dates-encdec-additive.gguf, trained
// by qkv: models/README.md) in WASM: its kinds, translations (ISO dates: the task's definition) and
// cross-attention rows that are distributions.
const DATES = [
  ['the twenty-third of March, nineteen ninety-four', '1994-03-23'],
  ['July 4th, 1976', '1976-07-04'],
  ['31/12/1999', '1999-12-31'],
  ['9 November 1989', '1989-11-09'],
  ['21st of June 2039', '2039-06-21'],
  ['Mar 5, 1921', '1921-03-05'],
];
test('the additive dates translator runs in WASM', async () => {
  const model = await loadModel(join(root, 'models', 'dates-encdec-additive.gguf'), { threads: 1 });
  try {
    assert.deepEqual(model.info.crossAttentionKinds, ['additive', 'additive']);
    assert.deepEqual(model.info.decoderAttentionKinds, ['softmax', 'softmax']);
    assert.equal(model.info.additiveLength, 16);
    let right = 0;
    for (const [source, iso] of DATES) right += (await model.complete(source, { maxTokens: 16, temperature: 0 })) === iso ? 1 : 0;
    assert.equal(right, DATES.length, `${right} of ${DATES.length} right`);
    const [source] = DATES[0];
    const m = await model.inspect(source, { maxTokens: 12 });
    for (let l = 0; l < m.decoderLayers; l++) {
      for (let h = 0; h < m.heads; h++) {
        for (const row of m.cross(l, h)) {
          assert.equal(row.length, source.length + 1);
          assert.ok(Math.abs(row.reduce((a, b) => a + b, 0) - 1) < 1e-4);
        }
      }
    }
  } finally {
    model.dispose();
  }
});
