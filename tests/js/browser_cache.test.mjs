// The model cache (loadModel's `cache` option) in headless Chromium, in OPFS and in the Cache API:
// a generated 9 MB GGUF served by a local server that records its requests, answers Range and
// conditional requests, and can cut a body mid-way (tests/js/range-server.mjs). Every load's
// logits are checked against an uncached load of the same file (same bytes, same kernels: equal).
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { writeBigGguf } from './big-gguf.mjs';
import { chromiumPath, haveChromium, launchBrowser, openPage } from './browser.mjs';
import { root, shared } from './helpers.mjs';
import { startRangeServer } from './range-server.mjs';
import { startServer } from './server.mjs';

const SHAPE = { dim: 32, hidden: 64, layers: 1, heads: 4, kvHeads: 2, context: 64 };
const SEG = 1 << 20;

const only = process.env.QKV_CACHE_TESTS?.split(',');  // e.g. cache-api,gpu: some of the three while working on them
const skip = (name) => (!haveChromium && `no Chromium at ${chromiumPath}`) || (only && !only.includes(name) && `not in QKV_CACHE_TESTS`);

/** Serves the model files and the repository (pages, scripts) from one origin, opens the test page in headless Chromium, runs fn. */
async function withPage(fn) {
  const dir = join(root, 'test-artifacts', 'model-cache');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'tiny.gguf');
  writeBigGguf(file, join(shared, 'vocab', 'ggml-vocab-llama-spm.gguf'), SHAPE);
  const bytes = readFileSync(file);
  const statics = await startServer(root, { coopCoep: false });
  const proxy = (req, res) => {  // pages and scripts from the static server, same origin as the model
    const up = request(new URL(req.url, statics.url), { method: req.method, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  };
  const srv = await startRangeServer({ '/m.gguf': bytes, '/n.gguf': bytes }, { fallback: proxy });
  const browser = await launchBrowser();
  try {
    const { page, errors } = await openPage(browser, `${srv.url}tests/js/pages/cache.html`);
    const reload = async () => { await page.reload(); await page.waitForFunction(() => window.__ready === true); };
    await page.waitForFunction(() => window.__ready === true);
    const call = (name, ...args) => page.evaluate(([n, a]) => window.qkvCache[n](...a), [name, args]);
    const since = (n) => srv.log.slice(n).map(({ range, status, sent }) => ({ range, status, sent }));
    const ref = await call('logits', '/m.gguf', { cache: false });
    assert.equal(ref.error, undefined, ref.error?.message);
    await fn({ srv, size: bytes.length, call, since, reload, ref });
    // Chromium reports the responses cut on purpose as failed requests.
    const cut = (e) => /^requestfailed: \S+\/[mn]\.gguf net::ERR_/.test(e) || e === 'console.error: Failed to load resource: net::ERR_CONTENT_LENGTH_MISMATCH';
    assert.deepEqual(errors.filter((e) => !cut(e)), []);
  } finally {
    await browser.close();
    await srv.close();
    await statics.close();
  }
}

for (const backend of ['opfs', 'cache-api']) {
  test(`browser: the model cache in ${backend} keeps, serves, resumes and repairs downloads`, { skip: skip(backend), timeout: 900000 }, (t) => withPage(async ({ srv, size, call, since, reload, ref }) => {
    const same = (r, what) => {
      assert.equal(r.error, undefined, `${what}: ${r.error?.code} ${r.error?.message}`);
      assert.deepEqual(r.logits, ref.logits, `${what}: the logits of the uncached load`);
    };
    {
      const cache = { backend, segmentBytes: SEG };
      const keys = (url) => call(backend === 'opfs' ? 'opfsFiles' : 'cacheKeys', url);
      const entry = async (url) => (await call('list', { cache: backend })).find((e) => e.url === `${srv.url}${url.slice(1)}`);
      await t.test(`${backend}: the first load downloads once; after a reload the cache serves it without the body`, async () => {
        let n = srv.log.length;
        same(await call('logits', '/m.gguf', { cache }), 'first load');
        assert.deepEqual(since(n), [{ range: null, status: 200, sent: size }]);
        assert.deepEqual(await entry('/m.gguf'), {
          url: `${srv.url}m.gguf`, backend, size, cachedBytes: size, complete: true, etag: '"v1"',
          lastModified: 'Thu, 01 Jan 2026 00:00:00 GMT', updated: (await entry('/m.gguf')).updated,
        });
        await reload();
        n = srv.log.length;
        same(await call('logits', '/m.gguf', { cache }), 'from the cache');
        assert.deepEqual(since(n), [{ range: null, status: 304, sent: 0 }], 'only a conditional request, answered 304');
      });
      await t.test(`${backend}: a download cut mid-way resumes with a Range request`, async () => {
        assert.equal(await call('remove', '/m.gguf', { cache: backend }), 1);
        srv.set('/m.gguf', { cutAfter: 3.5 * SEG });
        const cut = await call('logits', '/m.gguf', { cache });
        assert.equal(cut.error?.code, 'io', JSON.stringify(cut));
        // The 3 whole segments sent before the cut (fewer only if the browser dropped bytes it had received).
        const kept = (await entry('/m.gguf')).cachedBytes;
        assert.ok(kept % SEG === 0 && kept >= SEG && kept <= 3 * SEG, `${kept} bytes kept`);
        assert.deepEqual(await keys('/m.gguf'), ['meta.json', ...Array.from({ length: kept / SEG }, (_, k) => `seg-0000${k}`)], 'nothing of the cut segment');
        await reload();
        const n = srv.log.length;
        same(await call('logits', '/m.gguf', { cache }), 'resumed');
        assert.deepEqual(since(n), [{ range: `bytes=${kept}-`, status: 206, sent: size - kept }]);
        assert.equal((await entry('/m.gguf')).complete, true);
      });
      await t.test(`${backend}: a server without Range support restarts the download`, async () => {
        await call('remove', '/m.gguf', { cache: backend });
        srv.set('/m.gguf', { cutAfter: 2.5 * SEG });
        assert.equal((await call('logits', '/m.gguf', { cache })).error?.code, 'io');
        srv.set('/m.gguf', { ranges: false });
        const n = srv.log.length;
        same(await call('logits', '/m.gguf', { cache }), 'restarted');
        assert.equal(since(n).length, 1);
        assert.match(since(n)[0].range, /^bytes=\d+-$/);
        assert.deepEqual({ ...since(n)[0], range: null }, { range: null, status: 200, sent: size });
        assert.equal((await entry('/m.gguf')).complete, true);
        srv.set('/m.gguf', { ranges: true });
      });
      await t.test(`${backend}: a short segment is detected and fetched again; a garbled manifest restarts`, async () => {
        await call('truncate', backend, '/m.gguf', 4, 1000);
        let n = srv.log.length;
        same(await call('logits', '/m.gguf', { cache }), 'repaired');
        assert.deepEqual(since(n).filter((e) => e.status !== 304), [{ range: `bytes=${4 * SEG}-`, status: 206, sent: size - 4 * SEG }]);
        assert.equal((await entry('/m.gguf')).complete, true);
        n = srv.log.length;
        same(await call('logits', '/m.gguf', { cache }), 'repaired, then from the cache');
        assert.deepEqual(since(n), [{ range: null, status: 304, sent: 0 }]);
        await call('garbleMeta', backend, '/m.gguf');
        n = srv.log.length;
        same(await call('logits', '/m.gguf', { cache }), 'after a garbled manifest');
        assert.deepEqual(since(n), [{ range: null, status: 200, sent: size }]);
      });
      await t.test(`${backend}: quota: too little space fails before writing, with the sizes`, async () => {
        await call('stubEstimate', 6e6, 1e6);
        const n = srv.log.length;
        const r = await call('logits', '/n.gguf', { cache });
        assert.equal(r.error?.code, 'quota', JSON.stringify(r));
        assert.equal(r.error.needed, size);
        assert.equal(r.error.available, 5e6);
        assert.match(r.error.message, /needs 8\.5 MiB but only 4\.8 MiB is left \(quota 5\.7 MiB, 1\.0 MiB used\)/);
        assert.equal(await entry('/n.gguf'), undefined, 'nothing cached');
        assert.equal(since(n).length, 1);
        await call('unstub');
      });
      await t.test(`${backend}: quota: a write refused mid-way keeps only whole segments, and resumes`, async () => {
        await call('stubQuotaAfter', 2);
        const r = await call('logits', '/n.gguf', { cache });
        assert.equal(r.error?.code, 'quota', JSON.stringify(r));
        assert.equal(r.error.needed, size - 2 * SEG);
        assert.deepEqual(await keys('/n.gguf'), ['meta.json', 'seg-00000', 'seg-00001']);
        await call('unstub');
        const n = srv.log.length;
        same(await call('logits', '/n.gguf', { cache }), 'resumed after the quota error');
        assert.deepEqual(since(n), [{ range: `bytes=${2 * SEG}-`, status: 206, sent: size - 2 * SEG }]);
      });
    }
  }));
}

test("browser: weights: 'gpu' streams into the GPU and the model cache in one pass; the cached load is the same", { skip: skip('gpu'), timeout: 900000 }, () => withPage(async ({ srv, size, call, since, reload }) => {
    const gpu = { device: 'webgpu', weights: 'gpu' };
    const plain = await call('logits', '/m.gguf', gpu);
    assert.equal(plain.error, undefined, plain.error?.message);
    assert.equal(plain.backend, 'webgpu');
    let n = srv.log.length;
    const first = await call('logits', '/m.gguf', { ...gpu, cache: true });
    assert.deepEqual(first.logits, plain.logits);
    assert.deepEqual(since(n), [{ range: null, status: 200, sent: size }]);
    await reload();
    n = srv.log.length;
    const again = await call('logits', '/m.gguf', { ...gpu, cache: true });
    assert.deepEqual(again.logits, plain.logits);
    assert.deepEqual(since(n), [{ range: null, status: 304, sent: 0 }]);
    const list = await call('list');
    assert.deepEqual(list.map((e) => [e.backend, e.complete]), [['opfs', true]], 'cache: true is OPFS here');
    }));
