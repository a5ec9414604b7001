// Rerankers against llama.cpp: random-weight BERT GGUFs with rank pooling and a classification
// head (with and without cls.output), written by `build/qkv_test_models --rerankers`, scored by
// qkv (the WASM build under Node, in-process, through the worker, createOpenAI and qkv serve's
// /v1/rerank) and by llama.cpp (@wllama/wllama 3.8.1, headless Chromium, createRerank). Each
// document's (query, document) pair must count the same tokens and its score agree within 1%
// (of the score, at least 1e-2 absolute): llama.cpp's CPU GELU reads a float16 table, so its
// encoder states differ from qkv's float ones by ~1e-3 relative (embed_wllama.test.mjs), which
// the head's random gains carry into the score. qkv's order must be llama.cpp's where the scores
// are apart by more than that. Bad input gets typed errors.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { chromiumPath, haveChromium, launchBrowser, openPage } from './browser.mjs';
import { root } from './helpers.mjs';
import { startServer } from './server.mjs';
import { loadModel } from '../../src/js/node.js';
import { createOpenAI } from '../../src/js/openai.js';
import { serve } from '../../src/js/serve.js';
import { createWorker } from '../../src/js/worker-client.js';

const maker = join(root, 'build', 'qkv_test_models');
const outDir = join(root, 'test-artifacts', 'reranker-models');

const QUERY = 'Where does the quick brown fox sleep?';
const DOCS = [
  'The quick brown fox jumps over the lazy dog.',
  'A fox sleeps in its den under the old oak tree.',
  'Café naïve über résumé façade Ærø',
  '日本語のテキスト、你好，世界！',
  'digits 1234567 3.14159 2024-11-22',
  '',
  'the cat sat on the mat [SEP] the dog sat on the log',
  'MiXeD CaSe HELLO hello_world x+=1; a<=b',
  'once upon a time there was a little robot who dreamed of the stars and it was a dream that we would share',
  'a',
];

const tol = (score) => 1e-2 * Math.max(1, Math.abs(score));
const skipBuild = !existsSync(maker) ? `${maker} is not built (scripts/build.sh native)` : false;
const skip = skipBuild || (!haveChromium ? `no Chromium at ${chromiumPath}` : false);
let browser, server, names = [];

before(async () => {
  if (skipBuild) return;
  mkdirSync(outDir, { recursive: true });
  const r = spawnSync(maker, ['--rerankers', outDir], { encoding: 'utf8' });
  assert.equal(r.status, 0, `qkv_test_models failed: ${r.stderr}`);
  names = JSON.parse(r.stdout);
  if (skip) return;
  browser = await launchBrowser();
  server = await startServer(dirname(root), { coopCoep: false });
});
after(async () => { await browser?.close(); await server?.close(); });

test('llama.cpp conformance: reranker scores, pair token counts and order', { skip, timeout: 180000 }, async (t) => {
  const { page, errors } = await openPage(browser, `${server.url}${basename(root)}/tests/js/pages/wllama-embed.html`);
  await page.waitForFunction(() => window.__ready === true, null, { timeout: 30000 });
  const failures = [], summary = [];
  for (const name of names) {
    const path = join(outDir, `${name}.gguf`);
    const model = await loadModel(path, { threads: 1 });
    try {
      assert.equal(model.info.reranker, true, `${name} is a reranker`);
      assert.equal(model.info.pooling, 'rank');
      const ours = await model.rerank(QUERY, DOCS);
      assert.equal(ours.length, DOCS.length);
      const byIndex = [];
      for (const r of ours) byIndex[r.index] = r;
      const ref = await page.evaluate(([u, q, d]) => window.__wllamaRerank(u, q, d), [`/${relative(dirname(root), path)}`, QUERY, DOCS]);
      let worst = 0;
      DOCS.forEach((doc, i) => {
        const where = `${name} document ${i} ${JSON.stringify(doc).slice(0, 24)}`;
        const want = ref.each[i];
        if (want.error !== undefined) return failures.push(`${where}: llama.cpp failed: ${want.error}`);
        if (want.tokens !== byIndex[i].tokens) failures.push(`${where}: ${want.tokens} tokens in llama.cpp, ${byIndex[i].tokens} in qkv`);
        const diff = Math.abs(byIndex[i].score - want.score);
        worst = Math.max(worst, diff / Math.max(1, Math.abs(want.score)));
        if (!(diff <= tol(want.score))) failures.push(`${where}: score ${byIndex[i].score} vs llama.cpp's ${want.score}`);
      });
      // llama.cpp scoring all documents at once gives the scores it gave one by one.
      ref.order.forEach((idx, k) => {
        if (Math.abs(ref.allScores[k] - ref.each[idx].score) > 1e-5) failures.push(`${name}: llama.cpp's batch score of ${idx} differs from its single one`);
      });
      // Highest first, as llama.cpp orders them (where two scores are too close to tell, either order).
      for (let k = 1; k < ours.length; k++) {
        const a = ref.each[ours[k - 1].index].score, b = ref.each[ours[k].index].score;
        if (a < b - tol(a) - tol(b)) failures.push(`${name}: qkv ranks ${ours[k - 1].index} above ${ours[k].index}, llama.cpp scores them ${a} < ${b}`);
      }
      const spread = Math.max(...ours.map((r) => r.score)) - Math.min(...ours.map((r) => r.score));
      assert.ok(spread > 1e-2, `${name}: the documents' scores hardly differ (${spread}); the comparison would say little`);
      summary.push(`${name}: worst score difference ${worst.toExponential(2)} (relative, at least 1 absolute), score spread ${spread.toFixed(3)}`);
    } finally {
      model.dispose();
    }
  }
  t.diagnostic(summary.join('; '));
  assert.deepEqual(failures, [], 'llama.cpp and qkv disagree');
  assert.deepEqual(errors.filter((e) => !/favicon/.test(e)), [], 'page errors');
  assert.equal(names.length, 2);
});

test('rerank: topN, batches, the worker, createOpenAI and qkv serve give the in-process scores; bad input gets typed errors', { skip: skipBuild, timeout: 60000 }, async () => {
  const path = join(outDir, 'bert-rerank.gguf');
  const model = await loadModel(path, { threads: 1 });
  const w = await createWorker();
  let srv;
  try {
    const all = await model.rerank(QUERY, DOCS);
    const top = await model.rerank(QUERY, DOCS, { topN: 3, batchSize: 2 });
    assert.deepEqual(top, all.slice(0, 3), 'topN keeps the best, batching changes nothing');
    const alone = await model.rerank(QUERY, [DOCS[4]]);
    assert.equal(alone[0].score, all.find((r) => r.index === 4).score, 'a document alone and among others scores alike');
    for (let k = 1; k < all.length; k++) assert.ok(all[k - 1].score >= all[k].score, 'highest first');

    const rm = await w.loadModel(path, { threads: 1 });
    assert.equal(rm.info.reranker, true);
    const remote = await rm.rerank(QUERY, DOCS, { topN: 4 });
    assert.equal(remote.length, 4);
    remote.forEach((r, k) => {
      assert.equal(r.index, all[k].index);
      assert.ok(Math.abs(r.score - all[k].score) < 1e-6);
    });
    await assert.rejects(rm.rerank(QUERY, []), { name: 'QkvError', code: 'bad_argument' });
    await assert.rejects(rm.rerank(QUERY, ['x'], 7), { name: 'QkvError', code: 'bad_argument' });
    await rm.dispose();

    // createOpenAI and /v1/rerank: llama.cpp's response shape (Jina/Cohere's).
    const api = createOpenAI(model, { modelName: 'rr' });
    const res = await api.rerank.create({ model: 'rr', query: QUERY, documents: DOCS, top_n: 2, return_documents: true });
    assert.equal(res.object, 'list');
    assert.deepEqual(res.results, all.slice(0, 2).map((r) => ({ index: r.index, relevance_score: r.score, document: { text: DOCS[r.index] } })));
    const tokens = all.reduce((a, r) => a + r.tokens, 0);
    assert.deepEqual(res.usage, { prompt_tokens: tokens, total_tokens: tokens });
    srv = await serve(model, { port: 0, modelName: 'rr' });
    const client = new OpenAI({ baseURL: srv.url, apiKey: 'unused', maxRetries: 0 });
    const http = await client.post('/rerank', { body: { model: 'rr', query: QUERY, documents: DOCS.map((text) => ({ text })) } });
    assert.deepEqual(http.results.map((r) => r.index), all.map((r) => r.index));
    http.results.forEach((r, k) => assert.ok(Math.abs(r.relevance_score - all[k].score) < 1e-6));
    await assert.rejects(client.post('/rerank', { body: { query: QUERY, documents: DOCS, top_k: 2 } }), (e) => {
      assert.equal(e.status, 400);
      assert.match(e.message, /unknown field 'top_k'/);
      return true;
    });
    await assert.rejects(client.post('/rerank', { body: { query: QUERY, documents: [1] } }), { status: 400 });
    await assert.rejects(api.rerank.create({ documents: DOCS }), { code: 'bad_argument', message: /query/ });

    const bad = async (args, code, re) => assert.rejects(model.rerank(...args), (e) => {
      assert.equal(e.name, 'QkvError');
      assert.equal(e.code, code);
      assert.match(e.message, re);
      return true;
    });
    await bad([QUERY, []], 'bad_argument', /at least one document/);
    await bad([5, ['a']], 'bad_argument', /query must be a string/);
    await bad([QUERY, 'a'], 'bad_argument', /array of document strings/);
    await bad([QUERY, ['a', null]], 'bad_argument', /document 1 is not a string/);
    await bad([QUERY, ['a'], { topN: 0 }], 'bad_argument', /topN/);
    await bad([QUERY, ['a'], { top_n: 2 }], 'bad_argument', /top_n/);
    await bad([QUERY, ['a', 'word '.repeat(model.info.contextLength)]], 'bad_argument', /document 1 with the query is \d+ tokens long/);
    const ac = new AbortController();
    ac.abort();
    await bad([QUERY, ['a', 'b'], { signal: ac.signal }], 'aborted', /abort/);
    // An embedding model without a head is no reranker; embed() on a reranker gives its [CLS] state.
    const [v] = await model.embed('hello');
    assert.equal(v.length, model.info.dim);
    assert.equal(Math.abs(Math.hypot(...v) - 1) < 1e-5, true, 'a unit vector');
    model.dispose();
    await bad([QUERY, ['a']], 'disposed', /disposed/);
  } finally {
    await srv?.close();
    model.dispose();
    await w.terminate();
  }
});

test('rerank on a model that is not a reranker is refused by name', { skip: skipBuild, timeout: 60000 }, async () => {
  const dir = join(root, 'test-artifacts', 'encoder-models');
  mkdirSync(dir, { recursive: true });
  const r = spawnSync(maker, ['--encoders', dir], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const model = await loadModel(join(dir, 'bert.gguf'), { threads: 1 });
  try {
    assert.equal(model.info.reranker, false);
    await assert.rejects(model.rerank(QUERY, ['a']), { name: 'QkvError', code: 'unsupported', message: /not a reranker/ });
    await assert.rejects(createOpenAI(model).rerank.create({ query: QUERY, documents: ['a'] }), { code: 'unsupported' });
  } finally {
    model.dispose();
  }
});
