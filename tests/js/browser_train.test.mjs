// createTrainer in headless Chromium: in the page and in its dedicated Worker the same options
// give the same losses, on the pthreads build (2 threads, COOP/COEP) and on the single-thread
// build (no isolation); the trained GGUF loads back in the page.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { chromiumPath, haveChromium, launchBrowser, openPage } from './browser.mjs';
import { root } from './helpers.mjs';
import { startServer } from './server.mjs';

let browser;
before(async () => { if (haveChromium) browser = await launchBrowser(); });
after(async () => { await browser?.close(); });

for (const [name, serverOpts, query, threads] of [
  ['with COOP/COEP: pthreads, 2 threads', { coopCoep: true }, '?threads=2', 2],
  ['without COOP/COEP: one thread', { coopCoep: false }, '', 1],
]) {
  test(`browser: createTrainer in the page and in a Worker, ${name}`, { skip: !haveChromium && `no Chromium at ${chromiumPath}` }, async () => {
    const srv = await startServer(root, serverOpts);
    try {
      const { page, context, errors } = await openPage(browser, `${srv.url}tests/js/pages/train.html${query}`);
      try {
        await page.waitForFunction(() => window.__result !== undefined || window.__error !== undefined, null, { timeout: 120000 });
        const { result, error } = await page.evaluate(() => ({ result: window.__result, error: window.__error }));
        assert.equal(error, undefined, error);
        assert.deepEqual(errors, [], 'console or page errors');
        assert.equal(result.isolated, threads === 2);
        assert.equal(result.page.worker, false);
        assert.equal(result.worker.worker, true);
        assert.equal(result.page.threads, threads);
        assert.equal(result.worker.threads, threads);
        assert.equal(result.page.losses.length, 6);
        assert.deepEqual(result.worker.losses, result.page.losses);
        assert.ok(result.page.losses.every(Number.isFinite) && result.page.losses[5] < result.page.losses[0], String(result.page.losses));
        assert.equal(result.page.dim, 32);
      } finally {
        await context.close();
      }
    } finally {
      await srv.close();
    }
  });
}
