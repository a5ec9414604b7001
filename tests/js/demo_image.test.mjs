// The web demo's image panel (web/image.js) in headless Chromium: a PNG picked through the file
// input gives the class probabilities that classifyImage gives in Node for the same pixels,
// clicking a patch moves the heatmap's query and redraws it, and a drawing is classified too.
// Uses the first model of web/dist/models/images.json (the build's fixture classifier when
// models/ has no image model).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { browserUnavailableReason, launchBrowser, openPage } from './browser.mjs';
import { root } from './helpers.mjs';
import { startServer } from './server.mjs';
import { loadModel } from '../../src/js/node.js';

const dist = join(root, 'web', 'dist');
const reason = await browserUnavailableReason();
// The site build's fixture needs the test-model maker unless models/ holds an image model.
const imageModelInRepo = readdirSync(join(root, 'models')).some((f) => f.endsWith('.gguf') &&
  readFileSync(join(root, 'models', f)).subarray(0, 65536).includes('clip.vision.'));
const skip = reason ?? (!imageModelInRepo && !existsSync(join(root, 'build', 'qkv_test_models')) ? 'no image model in models/ and no build/qkv_test_models for the fixture' : false);
// The page may run the relaxed-SIMD build (fused multiply-adds), Node the baseline one.
const TOL = 1e-5;

test('image panel: picked PNG -> probabilities equal to Node\'s classifyImage; a clicked patch changes the heatmap', { skip, timeout: 300000 }, async () => {
  const r = spawnSync('bash', ['scripts/build-web.sh'], { cwd: root, encoding: 'utf8', timeout: 600000 });
  assert.equal(r.status, 0, `scripts/build-web.sh failed:\n${r.stdout}\n${r.stderr}`);
  const list = JSON.parse(readFileSync(join(dist, 'models', 'images.json'), 'utf8'));
  assert.ok(list.length >= 1, 'models/images.json lists an image model');
  const srv = await startServer(dist, { coopCoep: true });
  const browser = await launchBrowser();
  try {
    const { page, errors } = await openPage(browser, srv.url, { context: { viewport: { width: 1280, height: 900 } } });
    await page.click('#image-panel > summary');
    const state = (s) => page.waitForFunction((want) => document.getElementById('image-panel').dataset.state === want, s, { timeout: 60000 });
    await state('ready');
    // An opaque picture (PNG keeps it exactly): a gradient and a disc off centre.
    const made = await page.evaluate(async () => {
      const c = new OffscreenCanvas(40, 30);
      const ctx = c.getContext('2d');
      const g = ctx.createLinearGradient(0, 0, 40, 30);
      g.addColorStop(0, '#f0f0f0');
      g.addColorStop(1, '#203080');
      ctx.fillStyle = g;
      ctx.fillRect(0, 0, 40, 30);
      ctx.fillStyle = '#d02020';
      ctx.beginPath();
      ctx.arc(14, 12, 8, 0, 2 * Math.PI);
      ctx.fill();
      const png = new Uint8Array(await (await c.convertToBlob({ type: 'image/png' })).arrayBuffer());
      return { png: Array.from(png), rgba: Array.from(ctx.getImageData(0, 0, 40, 30).data) };
    });
    await page.setInputFiles('#image-file', { name: 'disc.png', mimeType: 'image/png', buffer: Buffer.from(made.png) });
    await state('done');
    const shown = await page.$$eval('#image-classes li', (lis) => lis.map((li) => ({ index: Number(li.dataset.index), probability: Number(li.dataset.probability), label: li.querySelector('.class-label').textContent })));

    const model = await loadModel(join(dist, 'models', list[0].model), { threads: 1 });
    let want;
    try {
      want = await model.classifyImage({ data: new Uint8Array(made.rgba), width: 40, height: 30 }, { topK: model.info.labels.length });
    } finally {
      model.dispose();
    }
    assert.equal(shown.length, want.length, 'every class is shown');
    assert.deepEqual(shown.map((c) => [c.index, c.label]), want.map((c) => [c.index, c.label]));
    shown.forEach((c, i) => assert.ok(Math.abs(c.probability - want[i].probability) <= TOL, `${c.label}: ${c.probability} in the page, ${want[i].probability} in Node`));

    // The heatmap starts from the class token; a click on a patch makes it the query and redraws.
    const view = async () => page.$eval('#image-view', (c) => ({ query: c.dataset.query, png: c.toDataURL() }));
    const before = await view();
    assert.equal(before.query, 'cls');
    await page.locator('#image-view').scrollIntoViewIfNeeded();
    const box = await page.locator('#image-view').boundingBox();
    await page.locator('#image-view').click({ position: { x: box.width * 0.15, y: box.height * 0.7 } });
    const grid = await page.evaluate(() => document.getElementById('image-caption').textContent);
    const after = await view();
    const g = Number(/(\d+)x\d+ patches/.exec(await page.getAttribute('#image-view', 'aria-label'))[1]);
    assert.equal(after.query, `${Math.floor(0.15 * g)},${Math.floor(0.7 * g)}`, grid);
    assert.notEqual(after.png, before.png, 'the heatmap changed');
    // Another layer or head redraws too.
    await page.selectOption('#image-head', '0');
    assert.notEqual((await view()).png, after.png);

    // A stroke on the drawing canvas is classified.
    await page.locator('#image-draw').scrollIntoViewIfNeeded();
    const d = await page.locator('#image-draw').boundingBox();
    await page.mouse.move(d.x + d.width * 0.2, d.y + d.height * 0.2);
    await page.mouse.down();
    await page.mouse.move(d.x + d.width * 0.8, d.y + d.height * 0.8, { steps: 8 });
    await page.mouse.up();
    await page.waitForFunction(() => document.getElementById('image-status').textContent.startsWith('224x224 image'), null, { timeout: 60000 });
    assert.equal(await page.$$eval('#image-classes li', (lis) => lis.length), want.length);
    await page.locator('#image-panel').screenshot({ path: join(root, 'test-artifacts', 'demo-image-panel.png') }).catch(() => {});
    // Chromium sometimes reports a fetch whose body was read to its end as ERR_ABORTED (as demo_e2e.test.mjs filters).
    assert.deepEqual(errors.filter((e) => !/^requestfailed: \S+\/models\/\S+\.(bin|gguf) net::ERR_ABORTED$/.test(e)), []);
  } finally {
    await browser.close();
    await srv.close();
  }
});
