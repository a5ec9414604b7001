// qkv's own models (models/*.gguf, trained by `qkv train`): the JS API loads them with the
// tokenizer from the file, and greedy text is the same bytes as the native CLI's. A checkpoint
// freshly written by the native trainer passes the same check.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { EncoderDecoderModel, ImageEncoderModel, loadModel } from '../../src/js/node.js';
import { haveNative, root, runNative } from './helpers.mjs';

const shipped = readdirSync(join(root, 'models')).filter((f) => f.endsWith('.gguf')).map((f) => join(root, 'models', f));

async function sameAsNative(path, prompt) {
  const n = runNative(['run', path, '-t', '0', '-n', '40', '-i', prompt]);
  assert.equal(n.status, 0, n.stderr);
  const model = await loadModel(path);
  try {
    assert.equal(model.info.arch, 'llama');
    // -n 40 runs positions 0..39; the last one's token is printed too: 41 - (BOS + prompt) new tokens.
    const text = await model.complete(prompt, { maxTokens: 41 - model.tokenize(prompt).length, temperature: 0, stopTokens: [1] });
    assert.equal(`${prompt}${text}\n`, n.stdout.toString('utf8'));
  } finally {
    model.dispose();
  }
}

// Encoder-decoder models (the dates translator): generate(source) is the native CLI's greedy
// target, and it is the source date in ISO form.
async function sameAsNativeEncDec(path, model) {
  for (const [source, iso] of [['the twenty-third of March, nineteen ninety-four', '1994-03-23'], ['July 4th, 1976', '1976-07-04']]) {
    const n = runNative(['run', path, '-t', '0', '-n', '20', '-i', source]);
    assert.equal(n.status, 0, n.stderr);
    const text = await model.complete(source, { maxTokens: 20, temperature: 0 });
    assert.equal(text, n.stdout.toString('utf8').replace(/\n$/, ''));
    assert.equal(text, iso, source);
  }
}

// Image encoders (the shapes ViT): embedImage of a picture is the native CLI's embed-image of it.
async function sameAsNativeImage(path, model) {
  const w = 32, h = 32, rgb = Buffer.alloc(w * h * 3), data = new Uint8Array(w * h * 4);
  for (let i = 0; i < w * h; i++) {
    const x = i % w, y = Math.floor(i / w), on = (x - 15) ** 2 + (y - 12) ** 2 < 64;
    for (let c = 0; c < 3; c++) rgb[i * 3 + c] = data[i * 4 + c] = on ? 40 + 90 * c : 230 - 60 * c;
    data[i * 4 + 3] = 255;
  }
  const dir = mkdtempSync(join(tmpdir(), 'qkv-image-'));
  try {
    writeFileSync(join(dir, 'p.ppm'), Buffer.concat([Buffer.from(`P6\n${w} ${h}\n255\n`), rgb]));
    const n = runNative(['embed-image', path, join(dir, 'p.ppm')]);
    assert.equal(n.status, 0, n.stderr);
    const want = JSON.parse(n.stdout.toString());
    const got = await model.embedImage({ data, width: w, height: h });
    assert.equal(got.length, want.length);
    for (let i = 0; i < got.length; i++) assert.ok(Math.abs(got[i] - want[i]) <= 1e-5, `[${i}] ${got[i]} vs ${want[i]}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

for (const path of shipped) {
  test(`${path.slice(root.length + 1)} loads through the JS API and generates what the native CLI does`,
    { skip: !haveNative && 'no native build' }, async () => {
      const model = await loadModel(path);
      const encdec = model instanceof EncoderDecoderModel, image = model instanceof ImageEncoderModel;
      try {
        if (encdec) await sameAsNativeEncDec(path, model);
        if (image) await sameAsNativeImage(path, model);
      } finally {
        model.dispose();
      }
      if (!encdec && !image) await sameAsNative(path, 'In the beginning');
    });
}

test('a checkpoint from the native trainer loads through the JS API', { skip: !haveNative && 'no native build' }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'qkv-train-'));
  try {
    const lines = ['the cat sat on the mat.', 'the dog ran to the park.', 'a bird sang in the tree.'];
    let text = '';
    for (let i = 0; i < 600; i++) text += lines[(i * 7) % 3] + (i % 5 === 4 ? '\n\n' : ' ');
    writeFileSync(join(dir, 'data.txt'), text);
    writeFileSync(join(dir, 'c.conf'), 'dim=32\nn_layers=2\nn_heads=4\nhidden_dim=64\nseq_len=32\nvocab=300\n' +
      'batch=4\nsteps=30\nwarmup=3\nlr=1e-2\neval_interval=0\nval_fraction=0.1\ndtype=f16\n');
    const r = runNative(['train', join(dir, 'c.conf'), `data=${join(dir, 'data.txt')}`, `out=${join(dir, 'm.gguf')}`, 'quiet=1']);
    assert.equal(r.status, 0, r.stderr);
    await sameAsNative(join(dir, 'm.gguf'), 'the cat');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
