// The package's browser entry in headless Chromium: a static page imports it, loads a model
// over HTTP and streams text, in the page and in a Worker; pthreads on a cross-origin-isolated
// page, one thread (saying why) without the headers; works under a strict CSP.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { chromiumPath, haveChromium, launchBrowser, openPage } from './browser.mjs';
import { reference, root, shared } from './helpers.mjs';
import { startServer } from './server.mjs';

// Serve the folder holding both the repository and ../shared.
const top = dirname(root);
const repo = basename(root), sharedName = basename(shared);
const REF = readFileSync(join(reference, 'aidreams260K.t1-p0.9-s42.i-dream-of.n60.txt'), 'utf8');
const PROMPT = 'I dream of';
const want = REF.slice(PROMPT.length, -1);  // run.c echoes the prompt and ends with '\n'
const PROMPT_TOKENS = 7;  // BOS + 6: checked against the tokenizer by the package tests
const query = `?model=/${sharedName}/models/aidreams260K.bin&tokenizer=/${sharedName}/models/aidreams-tok512.bin` +
  `&maxTokens=${60 - PROMPT_TOKENS + 1}`;

let browser;
before(async () => { if (haveChromium) browser = await launchBrowser(); });
after(async () => { await browser?.close(); });

async function runPage(serverOpts, extraQuery = '') {
  const srv = await startServer(top, serverOpts);
  try {
    const { page, context, errors } = await openPage(browser, `${srv.url}${repo}/tests/js/pages/api.html${query}${extraQuery}`);
    try {
      await page.waitForFunction(() => window.__result !== undefined || window.__error !== undefined, null, { timeout: 60000 });
      const r = await page.evaluate(() => ({ result: window.__result, error: window.__error }));
      return { ...r, errors };
    } finally {
      await context.close();
    }
  } finally {
    await srv.close();
  }
}

for (const [name, serverOpts, mode] of [
  ['with COOP/COEP (threads)', { coopCoep: true }, 'pthreads'],
  ['without COOP/COEP (single thread)', { coopCoep: false }, 'single'],
  ["under CSP script-src 'self' 'wasm-unsafe-eval'", { coopCoep: true, csp: "script-src 'self' 'wasm-unsafe-eval'" }, 'pthreads'],
]) {
  test(`browser: the package streams llama2.c's reference text ${name}`, { skip: !haveChromium && `no Chromium at ${chromiumPath}` }, async () => {
    const { result, error, errors } = await runPage(serverOpts);
    assert.equal(error, undefined, error);
    // Chromium sometimes reports a fetch whose body stream was read to its end as ERR_ABORTED
    // (the renderer drops the finished stream before the network side reports completion).
    // The bytes were all there: the exact texts and progress (loaded === total) below prove it.
    const real = errors.filter((e) => !/^requestfailed: \S+\/models\/\S+\.bin net::ERR_ABORTED$/.test(e));
    assert.deepEqual(real, [], 'console or page errors');
    assert.deepEqual(result.violations, []);
    const { page, worker } = result;
    assert.equal(page.text, want, 'in-page text differs from run.c');
    assert.ok(page.items > 10, `streamed in only ${page.items} items`);
    assert.equal(page.again, want, 'the session gave a different text after a break');
    assert.equal(worker.text, want, 'worker text differs from run.c');
    for (const info of [page.info, worker.info]) {
      assert.equal(info.threading.mode, mode);
      if (mode === 'single') assert.match(info.threading.reason, /cross-origin isolated/);
      else assert.ok(info.threading.threads >= 2, `threads ${info.threading.threads}`);
    }
    assert.equal(page.progress.loaded, page.progress.total);
    assert.ok(page.progressCalls >= 2);
  });
}

// The whole model on WebGPU (Chromium's SwiftShader adapter, the flags of TOOLCHAIN.md), in the
// page and in a Worker, and still run.c's exact text; captured attention on the GPU as in WASM.
test('browser: device webgpu gives the reference text in the page and in a Worker', { skip: !haveChromium && `no Chromium at ${chromiumPath}` }, async () => {
  const { result, error, errors } = await runPage({ coopCoep: true }, '&device=webgpu');
  assert.equal(error, undefined, error);
  const real = errors.filter((e) => !/^requestfailed: \S+\/models\/\S+\.bin net::ERR_ABORTED$/.test(e));
  assert.deepEqual(real, [], 'console or page errors');
  assert.deepEqual(result.warnings, [], 'WebGPU should be available on SwiftShader');
  const { page, worker } = result;
  for (const [where, info] of [['page', page.info], ['worker', worker.info]]) {
    assert.equal(info.backend, 'webgpu', `${where}: ${JSON.stringify(info.device)}`);
    assert.equal(info.device.requested, 'webgpu');
  }
  assert.equal(page.text, want, 'in-page WebGPU text differs from run.c');
  assert.equal(page.again, want, 'the WebGPU session gave a different text after a break');
  assert.equal(worker.text, want, 'worker WebGPU text differs from run.c');
  assert.deepEqual(worker.warnings, []);
  // Captured attention computed on the GPU in the page, against the WASM engine's maps.
  assert.equal(page.capture.backend, 'webgpu');
  assert.equal(page.capture.keys, page.capture.want);
  assert.ok(page.capture.diff <= 1e-4, `captured attention differs from WASM by ${page.capture.diff}`);
});

// An adapter that cannot be had in the page (WebGPU disabled): 'webgpu' falls back to WASM with a
// typed warning, delivered from inside the Worker to the page's onWarning, and the text is exact.
test('browser: device webgpu without WebGPU warns and falls back, in the page and in a Worker', { skip: !haveChromium && `no Chromium at ${chromiumPath}` }, async () => {
  const { result, error } = await runPage({ coopCoep: true }, '&device=webgpu&disableGpu=1');
  assert.equal(error, undefined, error);
  const { page, worker } = result;
  for (const [where, info, warnings] of [['page', page.info, result.warnings], ['worker', worker.info, worker.warnings]]) {
    assert.equal(info.backend, 'wasm', where);
    assert.deepEqual(warnings.map((w) => w.code), ['webgpu_unavailable'], where);
  }
  assert.deepEqual(worker.modelWarnings.map((w) => w.code), ['webgpu_unavailable']);
  assert.equal(page.text, want);
  assert.equal(worker.text, want);
});
