// The ViT classifier qkv trained (models/shapes-vit.gguf, models/recipes/shapes.sh) through the
// JS API: it loads as an image encoder, embedImage matches an independent float64 forward pass
// (tests/js/vision_forward.py, written from Hugging Face's CLIP definitions) within 1e-4, and an
// independent GGUF reader (tests/js/gguf_read.py) finds the classifier head in the agreed format:
// v.head.weight [dim, classes] and v.head.bias [classes] in f32, clip.vision.labels. (The held-out
// accuracy is VitShippedModel.* in build/qkv_tests.)
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { root } from './helpers.mjs';
import { loadModel } from '../../src/js/node.js';

const modelPath = join(root, 'models', 'shapes-vit.gguf');
const script = join(root, 'tests', 'js', 'vision_forward.py');
const outDir = join(root, 'test-artifacts', 'vit-train');
const TOL = 1e-4;
const python = spawnSync('python3', ['--version']).status === 0;
const skip = !python ? 'python3 is missing' : false;

// A shape of colour fg on bg, centred at (cx, cy) with radius r, in a w x h RGBA picture.
function picture(w, h, inside, { fg = [230, 40, 40], bg = [20, 30, 90], cx = w / 2, cy = h / 2, r = Math.min(w, h) * 0.35 } = {}) {
  const data = new Uint8Array(w * h * 4);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const u = (x + 0.5 - cx) / r, v = (y + 0.5 - cy) / r, c = inside(u, v) ? fg : bg, i = (y * w + x) * 4;
      data[i] = c[0]; data[i + 1] = c[1]; data[i + 2] = c[2]; data[i + 3] = 255;
    }
  }
  return { data, width: w, height: h };
}
const SHAPES = {
  circle: (u, v) => u * u + v * v <= 1,
  ring: (u, v) => u * u + v * v <= 1 && u * u + v * v >= 0.36,
  square: (u, v) => Math.abs(u) <= 0.78 && Math.abs(v) <= 0.78,
  cross: (u, v) => (Math.abs(u) <= 0.3 && Math.abs(v) <= 1) || (Math.abs(v) <= 0.3 && Math.abs(u) <= 1),
};

// Float64: the pooled vector, then the head's logits (in Python, reading the file itself).
function float64(img) {
  mkdirSync(outDir, { recursive: true });
  const input = join(outDir, 'input.json');
  writeFileSync(input, JSON.stringify({ width: img.width, height: img.height, rgba: Array.from(img.data), normalize: false, project: false }));
  const r = spawnSync('python3', [script, modelPath, input], { encoding: 'utf8', maxBuffer: 1 << 26 });
  assert.equal(r.status, 0, `vision_forward.py failed: ${r.stderr}`);
  const embedding = JSON.parse(r.stdout).embedding;
  const head = spawnSync('python3', ['-c', `
import json, struct, sys
sys.path.insert(0, ${JSON.stringify(join(root, 'tests', 'js'))})
from gguf_read import read_gguf
meta, tens, b, base = read_gguf(${JSON.stringify(modelPath)})
e = json.loads(sys.stdin.read())
(wd, wt, wo), (bd, bt, bo) = tens['v.head.weight'], tens['v.head.bias']
assert wt == 0 and bt == 0 and len(wd) == 2 and wd[0] == len(e) and bd == [wd[1]]
W = struct.unpack_from('<%df' % (wd[0] * wd[1]), b, base + wo); B = struct.unpack_from('<%df' % bd[0], b, base + bo)
z = [B[c] + sum(W[c * wd[0] + i] * e[i] for i in range(wd[0])) for c in range(wd[1])]
print(json.dumps({'labels': meta['clip.vision.labels'], 'logits': z}))`], { input: JSON.stringify(embedding), encoding: 'utf8' });
  assert.equal(head.status, 0, `head: ${head.stderr}`);
  return { embedding, ...JSON.parse(head.stdout) };
}

test('the trained ViT: embedImage matches float64, and the file holds its classifier head', { skip }, async (t) => {
  assert.ok(existsSync(modelPath), `${modelPath} is missing (models/recipes/shapes.sh)`);
  const model = await loadModel(modelPath, { threads: 1 });
  try {
    assert.equal(typeof model.embedImage, 'function', 'loads as an image encoder');
    const cases = [
      ['circle', picture(32, 32, SHAPES.circle)],
      ['square', picture(32, 32, SHAPES.square, { fg: [250, 250, 120], bg: [60, 60, 60] })],
      ['cross', picture(32, 32, SHAPES.cross, { fg: [10, 10, 10], bg: [200, 220, 240], cx: 13, cy: 18, r: 10 })],
      ['ring', picture(48, 40, SHAPES.ring, { fg: [40, 200, 60], bg: [240, 240, 240] })],  // resized and cropped to 32
    ];
    for (const [name, img] of cases) {
      const got = await model.embedImage(img, { normalize: false });
      const want = float64(img);
      let w = 0;
      assert.equal(got.length, want.embedding.length);
      for (let i = 0; i < got.length; i++) w = Math.max(w, Math.abs(got[i] - want.embedding[i]));
      t.diagnostic(`${name}: max |qkv - float64| = ${w.toExponential(2)}`);
      assert.ok(w <= TOL, `${name}: embedImage differs from float64 by ${w}`);
      assert.deepEqual(want.labels, ['circle', 'ring', 'square', 'triangle', 'cross', 'star']);
      assert.equal(want.logits.length, want.labels.length);
      assert.ok(want.logits.every(Number.isFinite));
      t.diagnostic(`${name}: head scores ${want.logits.map((z) => z.toFixed(2)).join(' ')}`);
    }
  } finally {
    model.dispose();
  }
});
