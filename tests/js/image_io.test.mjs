// Encoded images in the JS API, both CLIs and the Worker wrapper: PNG and JPEG files made by
// Debian's encoders (netpbm's pnmtopng, libjpeg-turbo's cjpeg) from a picture generated here go
// in as Buffer / Uint8Array / ArrayBuffer / Blob bytes and as files (told apart by content, not by
// name), decoded by qkv's WASM decoders. A PNG must embed exactly as its raw RGBA pixels do; a
// JPEG as the pixels libjpeg decodes (djpeg -dct float, the reference the native decoder tests
// hold it to). Bad bytes are typed errors everywhere.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { haveNative, root, runNative, runWasm } from './helpers.mjs';
import { loadModel, QkvError } from '../../src/js/node.js';

const maker = join(root, 'build', 'qkv_test_models');
const outDir = join(root, 'test-artifacts', 'image-io');
const tools = ['pnmtopng', 'cjpeg', 'djpeg'].every((t) => spawnSync('sh', ['-c', `command -v ${t}`]).status === 0);
const skip = !existsSync(maker) ? `${maker} is not built (scripts/build.sh native)`
  : !tools ? 'netpbm / libjpeg-turbo-progs missing (scripts/setup.sh installs them)' : false;

// A deterministic RGB picture (gradients, a disc, noise) as raw RGBA and as a binary PPM.
function picture(width, height, seed) {
  let s = seed >>> 0;
  const rnd = () => ((s = (s * 1664525 + 1013904223) >>> 0) >>> 24);
  const data = new Uint8Array(width * height * 4);
  const rgb = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = y * width + x;
      const disc = (x - width / 2) ** 2 + (y - height / 3) ** 2 < (Math.min(width, height) / 4) ** 2;
      const px = [Math.round(255 * x / (width - 1)), disc ? 230 : rnd(), Math.round(255 * y / (height - 1)) ^ (rnd() & 15)];
      for (let c = 0; c < 3; c++) data[i * 4 + c] = rgb[i * 3 + c] = px[c];
      data[i * 4 + 3] = 255;
    }
  }
  return { raw: { data, width, height }, ppm: Buffer.concat([Buffer.from(`P6\n${width} ${height}\n255\n`), rgb]) };
}

function sh(cmd) {
  const r = spawnSync('sh', ['-c', cmd], { maxBuffer: 1 << 26 });
  assert.equal(r.status, 0, `${cmd}: ${r.stderr}`);
  return r.stdout;
}

// djpeg's binary PPM -> raw RGBA.
function ppmToRaw(buf) {
  const m = /^P6\s+(\d+)\s+(\d+)\s+255\s/.exec(buf.subarray(0, 64).toString('latin1'));
  const [width, height] = [Number(m[1]), Number(m[2])];
  const px = buf.subarray(m[0].length);
  const data = new Uint8Array(width * height * 4);
  for (let i = 0; i < width * height; i++) {
    for (let c = 0; c < 3; c++) data[i * 4 + c] = px[i * 3 + c];
    data[i * 4 + 3] = 255;
  }
  return { data, width, height };
}

const same = (a, b, what) => assert.deepEqual(Array.from(a), Array.from(b), what);
const pic = picture(29, 21, 7);
let png, jpeg, jpegRaw, model;

before(async () => {
  if (skip) return;
  mkdirSync(outDir, { recursive: true });
  const r = spawnSync(maker, ['--vision', outDir], { encoding: 'utf8' });
  assert.equal(r.status, 0, `qkv_test_models --vision failed: ${r.stderr}`);
  const ppm = join(outDir, 'picture.ppm');
  writeFileSync(ppm, pic.ppm);
  // Named against their content on purpose: readers go by magic bytes.
  sh(`pnmtopng -interlace ${ppm} > ${join(outDir, 'picture.jpg')}`);
  sh(`cjpeg -sample 2x2 -progressive ${ppm} > ${join(outDir, 'picture.png')}`);
  png = readFileSync(join(outDir, 'picture.jpg'));
  jpeg = readFileSync(join(outDir, 'picture.png'));
  jpegRaw = ppmToRaw(sh(`djpeg -dct float -pnm ${join(outDir, 'picture.png')}`));
  model = await loadModel(join(outDir, 'clip.gguf'), { threads: 1 });
});

test('PNG and JPEG bytes, Buffers, ArrayBuffers and Blobs embed as their pixels', { skip }, async () => {
  const want = await model.embedImage(pic.raw);
  same(await model.embedImage(png), want, 'PNG Buffer');
  same(await model.embedImage(new Uint8Array(png)), want, 'PNG Uint8Array');
  same(await model.embedImage(png.buffer.slice(png.byteOffset, png.byteOffset + png.length)), want, 'PNG ArrayBuffer');
  same(await model.embedImage(new Blob([png])), want, 'PNG Blob (Node: decoded by qkv)');
  const wantJpeg = await model.embedImage(jpegRaw);
  const got = await model.embedImage(jpeg);
  // Pixels equal djpeg's but where its single-precision IDCT rounds a .5 tie the other way.
  let w = 0;
  for (let i = 0; i < got.length; i++) w = Math.max(w, Math.abs(got[i] - wantJpeg[i]));
  assert.ok(w <= 1e-2, `JPEG embedding differs from djpeg's pixels' by ${w}`);
  same(await model.embedImage(new Blob([jpeg])), got, 'JPEG Blob');
  const r = await model.inspectImage(png);
  same(r.embedding, want, 'inspectImage on PNG bytes');
});

test('corrupt, empty, unknown and unsupported image bytes are typed errors', { skip }, async () => {
  const bad = async (img, code, re) => {
    await assert.rejects(model.embedImage(img), (e) => e instanceof QkvError && e.code === code && re.test(e.message),
      `expected ${code} ${re}`);
  };
  const cut = png.subarray(0, png.length - 20);
  await bad(cut, 'bad_argument', /^embedImage: PNG image: /);
  const flipped = Buffer.from(png);
  flipped[20] ^= 0xff;  // inside IHDR
  await bad(flipped, 'bad_argument', /PNG image: the CRC of chunk/);
  await bad(jpeg.subarray(0, jpeg.length >> 1), 'bad_argument', /^embedImage: JPEG image: /);
  await bad(new Uint8Array(0), 'bad_argument', /empty/);
  await bad(Buffer.from('GIF89a....'), 'bad_argument', /not an image qkv reads: PNG, JPEG/);
  await bad(new Blob([Buffer.from('hello')]), 'bad_argument', /not an image qkv reads/);
  const arith = sh(`cjpeg -arithmetic ${join(outDir, 'picture.ppm')}`);
  await bad(arith, 'unsupported', /arithmetic coding/);
  await assert.rejects(model.inspectImage(cut), (e) => e.code === 'bad_argument' && /inspectImage: PNG image/.test(e.message));
});

test('both CLIs: embed-image reads PNG and JPEG by content, as the JS API does', { skip }, async () => {
  const proj = join(outDir, 'clip-proj.gguf');
  const m = await loadModel(proj, { threads: 1 });
  let want;
  try {
    want = [Array.from(await m.embedImage(png)), Array.from(await m.embedImage(jpeg))];
  } finally {
    m.dispose();
  }
  const args = ['embed-image', proj, join(outDir, 'picture.jpg'), join(outDir, 'picture.png'), '--threads', '1'];
  const runs = [['node', runWasm(args)]];
  if (haveNative) runs.push(['native', runNative(args)]);
  for (const [which, r] of runs) {
    assert.equal(r.status, 0, `${which}: ${r.stderr}`);
    const lines = r.stdout.toString().trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(lines.length, 2);
    for (let k = 0; k < 2; k++) {
      let w = 0;
      for (let i = 0; i < want[k].length; i++) w = Math.max(w, Math.abs(lines[k][i] - want[k][i]));
      assert.ok(w <= 1e-5, `${which} CLI differs from the JS API by ${w} on image ${k}`);
    }
  }
  writeFileSync(join(outDir, 'broken.png'), png.subarray(0, 60));
  const badArgs = ['embed-image', proj, join(outDir, 'broken.png')];
  for (const r of [runWasm(badArgs), ...(haveNative ? [runNative(badArgs)] : [])]) {
    assert.equal(r.status, 1);
    assert.match(r.stderr, /error \[bad_argument\]: .*broken\.png: PNG image: /);
  }
});

test('the Worker wrapper runs image encoders: embedImage, inspectImage, errors', { skip }, async () => {
  const { createWorker } = await import('../../src/js/worker-client.js');
  const w = await createWorker();
  try {
    const remote = await w.loadModel(join(outDir, 'clip.gguf'), { threads: 1 });
    assert.equal(remote.info.imageEncoder, true);
    same(await remote.embedImage(png), await model.embedImage(png), 'PNG bytes through the worker');
    same(await remote.embedImage(new Blob([jpeg])), await model.embedImage(jpeg), 'JPEG Blob through the worker');
    same(await remote.embedImage(pic.raw, { pooling: 'mean' }), await model.embedImage(pic.raw, { pooling: 'mean' }), 'raw RGBA');
    const [a, b] = [await remote.inspectImage(png), await model.inspectImage(png)];
    assert.equal(a.rows, b.rows);
    assert.equal(a.gridWidth, b.gridWidth);
    for (let l = 0; l < b.layers; l++) for (let h = 0; h < b.heads; h++) same(a.attention(l, h).flatMap((r) => Array.from(r)), b.attention(l, h).flatMap((r) => Array.from(r)));
    assert.throws(() => a.attention(b.layers, 0), (e) => e.code === 'bad_argument');
    const list = await remote.embedImages([png, jpeg]);
    same(list[1], await model.embedImage(jpeg));
    await assert.rejects(remote.embedImage(png.subarray(0, 30)), (e) => e instanceof QkvError && e.code === 'bad_argument' && /PNG image/.test(e.message));
    await assert.rejects(remote.embedImage(png, { pooling: 'last' }), (e) => e.code === 'bad_argument' && /pooling/.test(e.message));
    const ac = new AbortController();
    ac.abort();
    await assert.rejects(remote.embedImage(png, { signal: ac.signal }), (e) => e.code === 'aborted');
    await remote.dispose();
    await assert.rejects(remote.embedImage(png), (e) => e.code === 'disposed');
  } finally {
    await w.terminate();
  }
});

test('cleanup', { skip }, () => model.dispose());
