// Image encoders (llama.cpp mmproj GGUF: CLIP, SigLIP) against an independent float64 forward
// pass (tests/js/vision_forward.py, plain Python written from Hugging Face's definitions, the
// preprocessing included): the random-weight fixtures of `qkv_test_models --vision` embed random
// RGBA images through qkv's WASM build, and every component must be within TOL of the float64
// one, for the model's own input size and for another (positions interpolated). Then the bad
// inputs (typed errors), and both CLIs' embed-image against the JS API.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { haveNative, root, runNative, runWasm } from './helpers.mjs';
import { loadModel, QkvError } from '../../src/js/node.js';

const maker = join(root, 'build', 'qkv_test_models');
const outDir = join(root, 'test-artifacts', 'vision-models');
const script = join(root, 'tests', 'js', 'vision_forward.py');
const TOL = 1e-4;
const python = spawnSync('python3', ['--version']).status === 0;
const skip = !existsSync(maker) ? `${maker} is not built (scripts/build.sh native)` : !python ? 'python3 is missing' : false;

// A deterministic RGBA image with smooth and sharp parts (a gradient, a disc, noise).
function image(width, height, seed) {
  let s = seed >>> 0;
  const rnd = () => ((s = (s * 1664525 + 1013904223) >>> 0) >>> 24);
  const data = new Uint8Array(width * height * 4);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 4;
      const disc = (x - width / 2) ** 2 + (y - height / 3) ** 2 < (Math.min(width, height) / 4) ** 2;
      data[i] = Math.round(255 * x / Math.max(1, width - 1));
      data[i + 1] = disc ? 230 : rnd();
      data[i + 2] = Math.round(255 * y / Math.max(1, height - 1)) ^ (rnd() & 15);
      data[i + 3] = rnd();  // alpha: ignored
    }
  }
  return { data, width, height };
}

function writeInput(img, options) {
  const input = join(outDir, 'input.json');
  writeFileSync(input, JSON.stringify({ width: img.width, height: img.height, rgba: Array.from(img.data), normalize: true, project: true, ...options }));
  return input;
}

function float64(model, img, options = {}) {
  const r = spawnSync('python3', [script, join(outDir, `${model}.gguf`), writeInput(img, options)], { encoding: 'utf8', maxBuffer: 1 << 26 });
  assert.equal(r.status, 0, `vision_forward.py failed: ${r.stderr}`);
  return JSON.parse(r.stdout).embedding;
}

function worst(got, want) {
  assert.equal(got.length, want.length);
  let w = 0;
  for (let i = 0; i < want.length; i++) w = Math.max(w, Math.abs(got[i] - want[i]));
  return w;
}

before(() => {
  if (skip) return;
  mkdirSync(outDir, { recursive: true });
  const r = spawnSync(maker, ['--vision', outDir], { encoding: 'utf8' });
  assert.equal(r.status, 0, `qkv_test_models --vision failed: ${r.stderr}`);
});

const CASES = [
  ['clip', image(23, 17, 1), {}],                                   // crop of a wide image, class token, quick GELU
  ['clip', image(12, 30, 2), { pooling: 'mean', normalize: false }],  // a tall one upsampled, mean of the patches
  ['clip', image(40, 40, 3), { size: 24 }],                          // a 6 x 6 grid: positions interpolated from 4 x 4
  ['clip-proj', image(31, 26, 4), {}],                               // tanh GELU, F16 weights, legacy ffn names, projection
  ['clip-proj', image(31, 26, 4), { project: false }],
  ['siglip', image(18, 25, 5), {}],                                  // no class token, no pre-norm, squash, mean
  ['siglip', image(18, 25, 6), { size: 12, resize: 'crop' }],
];

for (const [name, img, options] of CASES) {
  test(`${name} ${img.width}x${img.height} ${JSON.stringify(options)}: within ${TOL} of a float64 forward pass`, { skip }, async (t) => {
    const model = await loadModel(join(outDir, `${name}.gguf`), { threads: 1 });
    try {
      assert.equal(model.info.imageEncoder, true);
      const got = await model.embedImage(img, options);
      assert.ok(got instanceof Float32Array);
      assert.equal(got.length, options.project === false ? model.info.dim : model.info.embeddingDim);
      const want = float64(name, img, options);
      const w = worst(got, want);
      t.diagnostic(`max |qkv - float64| = ${w.toExponential(2)}`);
      assert.ok(w <= TOL, `${name}: differs from float64 by up to ${w}`);
      // The same bytes as a Uint8ClampedArray (what ImageData holds) give the same vector.
      const again = await model.embedImage({ ...img, data: new Uint8ClampedArray(img.data) }, options);
      assert.deepEqual(again, got);
    } finally {
      model.dispose();
    }
  });
}

for (const [name, options] of [['clip', { size: 20 }], ['siglip', {}]]) {
  test(`${name} inspectImage ${JSON.stringify(options)}: every layer's and head's attention within ${TOL} of float64`, { skip }, async (t) => {
    const model = await loadModel(join(outDir, `${name}.gguf`), { threads: 1 });
    try {
      const img = image(21, 19, 7);
      const r = await model.inspectImage(img, options);
      const want = JSON.parse(spawnSync('python3', [script, join(outDir, `${name}.gguf`), writeInput(img, { ...options, attention: true })],
        { encoding: 'utf8', maxBuffer: 1 << 26 }).stdout);
      assert.ok(worst(r.embedding, want.embedding) <= TOL);
      assert.deepEqual(r.embedding, await model.embedImage(img, options));  // capturing changes nothing
      assert.equal(r.rows, r.gridHeight * r.gridWidth + (r.classToken ? 1 : 0));
      assert.equal(r.gridWidth, (options.size ?? model.info.imageSize) / model.info.patchSize);
      let w = 0;
      for (let l = 0; l < r.layers; l++) {
        for (let h = 0; h < r.heads; h++) {
          const rows = r.attention(l, h);
          assert.equal(rows.length, r.rows);
          rows.forEach((row, i) => { w = Math.max(w, worst(row, want.attention[l][h][i])); });
        }
      }
      t.diagnostic(`max |qkv - float64| over ${r.layers} x ${r.heads} maps = ${w.toExponential(2)}`);
      assert.ok(w <= TOL, `attention differs from float64 by up to ${w}`);
      assert.throws(() => r.attention(r.layers, 0), (e) => e.code === 'bad_argument');
    } finally {
      model.dispose();
    }
  });
}

function float64Classify(model, img, options = {}) {
  const r = spawnSync('python3', [script, join(outDir, `${model}.gguf`), writeInput(img, { ...options, classify: true })], { encoding: 'utf8', maxBuffer: 1 << 26 });
  assert.equal(r.status, 0, `vision_forward.py failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

for (const [img, options] of [[image(23, 17, 11), {}], [image(30, 30, 12), { size: 24 }], [image(14, 26, 13), { resize: 'squash' }]]) {
  test(`clip-cls classifyImage ${img.width}x${img.height} ${JSON.stringify(options)}: softmax of the head within ${TOL} of float64`, { skip }, async (t) => {
    const model = await loadModel(join(outDir, 'clip-cls.gguf'), { threads: 1 });
    try {
      const want = float64Classify('clip-cls', img, options);
      assert.deepEqual(model.info.labels, want.labels);
      const got = await model.classifyImage(img, { ...options, topK: want.labels.length });
      assert.equal(got.length, want.labels.length);
      let w = 0;
      for (const { index, label, probability } of got) {
        assert.equal(label, want.labels[index]);
        w = Math.max(w, Math.abs(probability - want.probabilities[index]));
      }
      t.diagnostic(`max |qkv - float64| = ${w.toExponential(2)}, probabilities ${want.probabilities.map((p) => p.toFixed(3))}`);
      assert.ok(w <= TOL, `probabilities differ from float64 by up to ${w}`);
      for (let i = 1; i < got.length; i++) assert.ok(got[i - 1].probability >= got[i].probability, 'sorted, most likely first');
      // The default topK is 5; a smaller one is the head of the same list.
      assert.deepEqual(await model.classifyImage(img, { ...options, topK: 2 }), got.slice(0, 2));
    } finally {
      model.dispose();
    }
  });
}

test('classifyImage: models without a head and bad options are typed errors', { skip }, async () => {
  const plain = await loadModel(join(outDir, 'clip.gguf'), { threads: 1 });
  const cls = await loadModel(join(outDir, 'clip-cls.gguf'), { threads: 1 });
  try {
    const ok = image(8, 8, 1);
    assert.deepEqual(plain.info.labels, []);
    await assert.rejects(plain.classifyImage(ok), (e) => e instanceof QkvError && e.code === 'unsupported' && /no classifier head/.test(e.message));
    for (const [opts, re] of [[{ topK: 0 }, /topK/], [{ topK: 1.5 }, /topK/], [{ pooling: 'mean' }, /pooling/], [{ size: 7 }, /multiple of the patch size/]]) {
      await assert.rejects(cls.classifyImage(ok, opts), (e) => e instanceof QkvError && e.code === 'bad_argument' && re.test(e.message), JSON.stringify(opts));
    }
    await assert.rejects(cls.classifyImage({ data: new Uint8Array(3), width: 1, height: 1 }), (e) => e.code === 'bad_argument');
    const ac = new AbortController();
    ac.abort();
    await assert.rejects(cls.classifyImage(ok, { signal: ac.signal }), (e) => e.name === 'AbortError' || e.code === 'aborted');
  } finally {
    plain.dispose();
    cls.dispose();
  }
  await assert.rejects(cls.classifyImage(image(4, 4, 1)), (e) => e.code === 'disposed');
});

test('both CLIs: classify-image on a PPM matches the JS API', { skip }, async () => {
  const img = image(21, 15, 14);
  const rgb = Buffer.alloc(img.width * img.height * 3);
  for (let i = 0; i < img.width * img.height; i++) for (let c = 0; c < 3; c++) rgb[i * 3 + c] = img.data[i * 4 + c];
  const ppm = join(outDir, 'classify.ppm');
  writeFileSync(ppm, Buffer.concat([Buffer.from(`P6\n${img.width} ${img.height}\n255\n`), rgb]));
  const model = await loadModel(join(outDir, 'clip-cls.gguf'), { threads: 1 });
  let want;
  try {
    want = await model.classifyImage(img, { topK: 3 });
  } finally {
    model.dispose();
  }
  const args = ['classify-image', join(outDir, 'clip-cls.gguf'), ppm, ppm, '--top', '3', '--threads', '1'];
  const runs = [['node', runWasm(args)]];
  if (haveNative) runs.push(['native', runNative(args)]);
  for (const [which, r] of runs) {
    assert.equal(r.status, 0, `${which}: ${r.stderr}`);
    const lines = r.stdout.toString().trim().split('\n');
    assert.equal(lines.length, 2, `${which}: one line per image`);
    for (const line of lines) {
      const got = JSON.parse(line);
      assert.deepEqual(got.map((c) => [c.index, c.label]), want.map((c) => [c.index, c.label]), which);
      got.forEach((c, i) => assert.ok(Math.abs(c.probability - want[i].probability) <= 1e-6, `${which}: ${c.probability} vs ${want[i].probability}`));
    }
  }
  for (const r of [runWasm(['classify-image', join(outDir, 'clip.gguf'), ppm]), ...(haveNative ? [runNative(['classify-image', join(outDir, 'clip.gguf'), ppm])] : [])]) {
    assert.equal(r.status, 1);
    assert.match(r.stderr, /error \[unsupported\]: .*no classifier head/);
  }
  for (const r of [runWasm(['classify-image', join(outDir, 'clip-cls.gguf'), ppm, '--top', '0']), ...(haveNative ? [runNative(['classify-image', join(outDir, 'clip-cls.gguf'), ppm, '--top', '0'])] : [])]) {
    assert.equal(r.status, 1);
    assert.match(r.stderr, /error \[bad_argument\]: --top must be an integer/);
  }
});

test('bad images and options are typed errors', { skip }, async () => {
  const model = await loadModel(join(outDir, 'clip.gguf'), { threads: 1 });
  const siglip = await loadModel(join(outDir, 'siglip.gguf'), { threads: 1 });
  try {
    const bad = async (img, opts, code, re) => {
      await assert.rejects(model.embedImage(img, opts), (e) => e instanceof QkvError && e.code === code && re.test(e.message));
    };
    const ok = image(8, 8, 1);
    await bad({ data: new Uint8Array(0), width: 0, height: 0 }, {}, 'bad_argument', /width must be/);
    await bad({ data: new Uint8Array(10), width: 2, height: 2 }, {}, 'bad_argument', /holds 10 bytes.*16/);
    await bad({ data: new Uint8Array(4), width: 1e6, height: 1 }, {}, 'bad_argument', /width/);
    await bad({ data: [1, 2, 3, 4], width: 1, height: 1 }, {}, 'bad_argument', /Uint8Array/);
    await bad('image.png', {}, 'bad_argument', /takes \{data, width, height\}/);
    await bad(null, {}, 'bad_argument', /takes/);
    await bad(ok, { pooling: 'last' }, 'bad_argument', /pooling/);
    await bad(ok, { size: 10 }, 'bad_argument', /multiple of the patch size 4/);
    await bad(ok, { resize: 'fit' }, 'bad_argument', /resize/);
    await bad(ok, { sise: 16 }, 'bad_argument', /sise/);
    await assert.rejects(siglip.embedImage(ok, { pooling: 'cls' }), (e) => e.code === 'bad_argument' && /class token/.test(e.message));
    if (typeof Blob !== 'undefined' && typeof createImageBitmap !== 'function') {
      await bad(new Blob([new Uint8Array([1, 2, 3])]), {}, 'bad_argument', /not an image qkv reads: PNG, JPEG/);
    }
  } finally {
    model.dispose();
    siglip.dispose();
  }
  await assert.rejects(model.embedImage(image(4, 4, 1)), (e) => e.code === 'disposed');
});

test('a corrupt mmproj file is a typed error', { skip }, async () => {
  const { readFileSync } = await import('node:fs');
  const bytes = readFileSync(join(outDir, 'clip.gguf'));
  const cut = join(outDir, 'clip-cut.gguf');
  writeFileSync(cut, bytes.subarray(0, bytes.length >> 1));
  await assert.rejects(loadModel(cut, { threads: 1 }), (e) => e instanceof QkvError && e.code === 'bad_model');
});

test('both CLIs: embed-image on a PPM matches the JS API', { skip }, async () => {
  const img = image(19, 14, 9);
  const rgb = Buffer.alloc(img.width * img.height * 3);
  for (let i = 0; i < img.width * img.height; i++) for (let c = 0; c < 3; c++) rgb[i * 3 + c] = img.data[i * 4 + c];
  const ppm = join(outDir, 'image.ppm');
  writeFileSync(ppm, Buffer.concat([Buffer.from(`P6\n${img.width} ${img.height}\n255\n`), rgb]));
  const model = await loadModel(join(outDir, 'clip-proj.gguf'), { threads: 1 });
  let want;
  try {
    want = Array.from(await model.embedImage(img, { pooling: 'mean' }));
  } finally {
    model.dispose();
  }
  const args = ['embed-image', join(outDir, 'clip-proj.gguf'), ppm, '--pooling', 'mean', '--threads', '1'];
  const runs = [['node', runWasm(args)]];
  if (haveNative) runs.push(['native', runNative(args)]);
  for (const [which, r] of runs) {
    assert.equal(r.status, 0, `${which}: ${r.stderr}`);
    const got = JSON.parse(r.stdout.toString());
    assert.ok(worst(got, want) <= 1e-5, `${which} CLI differs from the JS API`);
  }
  // A corrupt image: the same typed error line from both.
  writeFileSync(join(outDir, 'bad.ppm'), 'P6\n4 4\n255\n\x01\x02');
  const badArgs = ['embed-image', join(outDir, 'clip.gguf'), join(outDir, 'bad.ppm')];
  for (const r of [runWasm(badArgs), ...(haveNative ? [runNative(badArgs)] : [])]) {
    assert.equal(r.status, 1);
    assert.match(r.stderr, /error \[bad_argument\]: .*bad\.ppm: PNM image: truncated/);
  }
});
