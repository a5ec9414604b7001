// A GPU-resident load (weights: 'gpu') in headless Chromium on SwiftShader: the generated 64 MiB
// model (tests/js/big-gguf.mjs) fetched from a local server streams into GPU memory and gives the
// logits of the load through the heap, with the heap under a third of the weights' size
// (tests/js/pages/big.mjs). Correctness only, no timings.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { writeBigGguf } from './big-gguf.mjs';
import { chromiumPath, haveChromium, launchBrowser, openPage } from './browser.mjs';
import { root, shared } from './helpers.mjs';
import { startServer } from './server.mjs';

const SHAPE = { dim: 256, hidden: 512, layers: 1, heads: 4, kvHeads: 2, context: 256 };

test("browser: weights 'gpu' streams a model into GPU memory, the heap path's logits", { skip: !haveChromium && `no Chromium at ${chromiumPath}`, timeout: 900000 }, async (t) => {
  const dir = join(root, 'test-artifacts', 'webgpu-big');
  mkdirSync(dir, { recursive: true });
  const weightBytes = writeBigGguf(join(dir, 'big.gguf'), join(shared, 'vocab', 'ggml-vocab-llama-spm.gguf'), SHAPE);
  const srv = await startServer(root, { coopCoep: false });
  const browser = await launchBrowser();
  try {
    const q = new URLSearchParams({ model: '/test-artifacts/webgpu-big/big.gguf', prompt: 'Once upon a time, there was' });
    const { page, errors } = await openPage(browser, `${srv.url}tests/js/pages/big.html?${q}`);
    await page.waitForFunction(() => window.__result !== undefined || window.__error !== undefined, null, { timeout: 850000 });
    const { result, error } = await page.evaluate(() => ({ result: window.__result, error: window.__error }));
    assert.equal(error, undefined, `page error: ${error}`);
    // Chromium sometimes reports a fetch whose body was read to its end as ERR_ABORTED (as browser_api.test.mjs).
    assert.deepEqual(errors.filter((e) => !/^requestfailed: \S+\/big\.gguf net::ERR_ABORTED$/.test(e)), []);
    assert.equal(result.gpu.backend, 'webgpu');
    assert.equal(result.gpu.weights, 'gpu');
    assert.equal(result.heap.backend, 'webgpu');
    assert.equal(result.vocab, 32000);
    assert.equal(result.diff, 0, 'the same bytes through the same kernels');
    const mem = result.gpu.memory;
    t.diagnostic(`heap ${(mem.heapBytes / 2 ** 20).toFixed(1)} MiB with weights: 'gpu' (GPU weights ${(mem.gpuWeightBytes / 2 ** 20).toFixed(1)} MiB), ` +
      `${(result.heap.memory.heapBytes / 2 ** 20).toFixed(1)} MiB through the heap`);
    assert.ok(mem.heapBytes < weightBytes / 3, `heap ${mem.heapBytes} bytes for ${weightBytes} bytes of weights`);
  } finally {
    await browser.close();
    await srv.close();
  }
});
