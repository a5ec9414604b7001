// embedImage in headless Chromium through the platform's decoders: the same picture as a PNG Blob,
// an ImageBitmap, a canvas, ImageData and raw RGBA bytes gives one embedding, equal to Node's for
// the raw bytes (same WASM build). Needs the fixtures of vision.test.mjs' maker and Chromium.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { root } from './helpers.mjs';
import { startServer } from './server.mjs';
import { browserUnavailableReason, launchBrowser, openPage } from './browser.mjs';
import { loadModel } from '../../src/js/node.js';

const maker = join(root, 'build', 'qkv_test_models');
const outDir = join(root, 'test-artifacts', 'vision-browser');
const reason = await browserUnavailableReason();
const skip = !existsSync(maker) ? `${maker} is not built` : !existsSync(join(root, 'dist', 'qkv.wasm')) ? 'no dist/ build' : reason ?? false;

test('a PNG Blob, ImageBitmap, canvas, ImageData and raw RGBA give the same embedding in Chromium, equal to Node\'s', { skip, timeout: 120000 }, async () => {
  mkdirSync(outDir, { recursive: true });
  const r = spawnSync(maker, ['--vision', outDir], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const srv = await startServer(root, { coopCoep: false });
  const browser = await launchBrowser();
  try {
    const { page, errors } = await openPage(browser, `${srv.url}tests/js/pages/smoke.html`);
    const got = await page.evaluate(async (modelUrl) => {
      const { loadModel } = await import('/src/js/browser.js');
      // The baseline SIMD128 build, as Node runs it, so the two can be compared exactly.
      const m = await loadModel(modelUrl, { threads: 1, simd: 'baseline' });
      // A 29 x 21 picture with gradients and a disc, opaque (PNG keeps it exactly).
      const c = new OffscreenCanvas(29, 21);
      const ctx = c.getContext('2d');
      const g = ctx.createLinearGradient(0, 0, 29, 21);
      g.addColorStop(0, '#1030f0');
      g.addColorStop(1, '#f0d020');
      ctx.fillStyle = g;
      ctx.fillRect(0, 0, 29, 21);
      ctx.fillStyle = '#20c040';
      ctx.beginPath();
      ctx.arc(12, 9, 6, 0, 2 * Math.PI);
      ctx.fill();
      const data = ctx.getImageData(0, 0, 29, 21);
      const blob = await c.convertToBlob({ type: 'image/png' });
      const out = {
        raw: Array.from(await m.embedImage({ data: new Uint8Array(data.data), width: 29, height: 21 })),
        imageData: Array.from(await m.embedImage(data)),
        canvas: Array.from(await m.embedImage(c)),
        blob: Array.from(await m.embedImage(blob)),
        bitmap: Array.from(await m.embedImage(await createImageBitmap(blob))),
        rgba: Array.from(data.data),
      };
      try { await m.embedImage(new Blob([new Uint8Array([1, 2, 3])], { type: 'image/png' })); } catch (e) { out.corrupt = `${e.code}: ${e.message}`; }
      m.dispose();
      return out;
    }, `${srv.url}test-artifacts/vision-browser/clip.gguf`);
    // Chromium sometimes reports a fetch whose body was read to its end as ERR_ABORTED (as in browser_api.test.mjs).
    assert.deepEqual(errors.filter((e) => !/^requestfailed: \S+\/clip\.gguf net::ERR_ABORTED$/.test(e)), []);
    for (const k of ['imageData', 'canvas', 'blob', 'bitmap']) assert.deepEqual(got[k], got.raw, `${k} differs from the raw bytes`);
    assert.match(got.corrupt, /^bad_argument: .*could not be decoded/);
    const node = await loadModel(join(outDir, 'clip.gguf'), { threads: 1 });
    try {
      const want = await node.embedImage({ data: new Uint8Array(got.rgba), width: 29, height: 21 });
      let w = 0;
      for (let i = 0; i < want.length; i++) w = Math.max(w, Math.abs(want[i] - got.raw[i]));
      assert.ok(w <= 1e-6, `Chromium and Node differ by ${w}`);
    } finally {
      node.dispose();
    }
  } finally {
    await browser.close();
    await srv.close();
  }
});
