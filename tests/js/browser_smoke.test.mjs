// Browser smoke test: dist/qkv.mjs + qkv.wasm load and run in headless Chromium, with and without
// cross-origin isolation, and under a strict Content-Security-Policy.
// Skipped only when Chromium (/usr/bin/chromium) is not installed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { root } from './helpers.mjs';
import { startServer } from './server.mjs';
import { chromiumPath, haveChromium, launchBrowser, openPage } from './browser.mjs';

const SMOKE = 'tests/js/pages/smoke.html';
const STRICT_CSP = "script-src 'self' 'wasm-unsafe-eval'";

/** Serves the repo root with opts, opens the smoke page, waits for its report. */
async function runSmoke(browser, opts) {
  const srv = await startServer(root, opts);
  try {
    const { page, context, errors } = await openPage(browser, srv.url + SMOKE);
    try {
      await page.waitForFunction(() => window.__result !== undefined || window.__error !== undefined,
        null, { timeout: 10000 });
      const { result, error } = await page.evaluate(() => ({ result: window.__result, error: window.__error }));
      return { result, error, errors };
    } finally {
      await context.close();
    }
  } finally {
    await srv.close();
  }
}

test('browser smoke: qkv.mjs runs in headless Chromium', async (t) => {
  if (!haveChromium) {
    t.skip(`Chromium not installed at ${chromiumPath} (apt-get install chromium)`);
    return;
  }
  assert.ok(existsSync(join(root, 'dist', 'qkv.mjs')) && existsSync(join(root, 'dist', 'qkv.wasm')),
    'dist/qkv.mjs and dist/qkv.wasm missing: run NODE_PATH=/usr/share/nodejs bash scripts/build.sh wasm');

  const browser = await launchBrowser();
  t.after(() => browser.close());

  await t.test('COOP/COEP: cross-origin isolated, simdArch() is "wasm"', async () => {
    const { result, error, errors } = await runSmoke(browser, { coopCoep: true });
    assert.equal(error, undefined, `page error: ${error}`);
    assert.equal(result.simdArch, 'wasm');
    assert.equal(result.crossOriginIsolated, true);
    assert.equal(result.sharedArrayBuffer, true);
    assert.deepEqual(errors, []);
  });

  await t.test('no COOP/COEP: not isolated, still works', async () => {
    const { result, error, errors } = await runSmoke(browser, { coopCoep: false });
    assert.equal(error, undefined, `page error: ${error}`);
    assert.equal(result.simdArch, 'wasm');
    assert.equal(result.crossOriginIsolated, false);
    assert.deepEqual(errors, []);
  });

  await t.test(`strict CSP (${STRICT_CSP}): no eval needed`, async () => {
    const { result, error, errors } = await runSmoke(browser, { coopCoep: true, csp: STRICT_CSP });
    assert.equal(error, undefined, `page error: ${error}`);
    assert.equal(result.simdArch, 'wasm');
    assert.equal(result.crossOriginIsolated, true);
    assert.deepEqual(result.violations, []);
    assert.deepEqual(errors, []);
  });
});
