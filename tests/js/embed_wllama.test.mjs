// Encoder models (BERT, Nomic BERT) against llama.cpp: random-weight GGUF encoders written by
// `build/qkv_test_models --encoders` are embedded by qkv (the WASM build under Node, in-process
// and through the worker) and by llama.cpp (@wllama/wllama 3.8.1, headless Chromium, CPU
// backend, createEmbedding). For a varied text set both must agree per text within 1e-3 cosine
// and count the same tokens; llama.cpp embedding qkv's token ids must give llama.cpp's own
// embedding of the text (so the ids are llama.cpp's, not just their number). Bad input to
// embed() must get typed errors.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { after, before, test } from 'node:test';
import { chromiumPath, haveChromium, launchBrowser, openPage } from './browser.mjs';
import { root } from './helpers.mjs';
import { startServer } from './server.mjs';
import { loadModel } from '../../src/js/node.js';
import { createWorker } from '../../src/js/worker-client.js';

const maker = join(root, 'build', 'qkv_test_models');
const outDir = join(root, 'test-artifacts', 'encoder-models');

const TEXTS = [
  'The quick brown fox jumps over the lazy dog.',
  'Hello, world! (Hello again?) "quoted" — dash; semi: colon...',
  'Café naïve über résumé façade Ærø',
  '日本語のテキスト、你好，世界！中文字符',
  'digits 1234567 3.14159 2024-11-22 1,000,000 and ٣٤٥',
  'MiXeD CaSe HELLO hello_world x+=1; a<=b || c>>d $5 ^ ~',
  'emoji 🙂🚀 and unknown ☃ symbols',
  '',
  '   \t\n  ',
  'zero\u200Bwidth and soft\u00ADhyphen',
  'Привет, мир! 한국어 텍스트',
  'the cat sat on the mat [SEP] the dog sat on the log',
  'a',
  'once upon a time there was a little robot who dreamed of the stars and it was a dream that we would share',
];

const skipBuild = !existsSync(maker) ? `${maker} is not built (scripts/build.sh native)` : false;
const skip = skipBuild || (!haveChromium ? `no Chromium at ${chromiumPath}` : false);
let browser, server, names = [];

function makeModels() {
  mkdirSync(outDir, { recursive: true });
  const r = spawnSync(maker, ['--encoders', outDir], { encoding: 'utf8' });
  assert.equal(r.status, 0, `qkv_test_models failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

before(async () => {
  if (skipBuild) return;
  names = makeModels();
  if (skip) return;
  browser = await launchBrowser();
  server = await startServer(dirname(root), { coopCoep: false });
});
after(async () => { await browser?.close(); await server?.close(); });

const cosine = (a, b) => {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) { ab += a[i] * b[i]; aa += a[i] * a[i]; bb += b[i] * b[i]; }
  return ab / Math.sqrt(aa * bb);
};

test('llama.cpp conformance: embeddings and token ids of bert and nomic-bert encoders', { skip, timeout: 180000 }, async (t) => {
  const { page, errors } = await openPage(browser, `${server.url}${basename(root)}/tests/js/pages/wllama-embed.html`);
  await page.waitForFunction(() => window.__ready === true, null, { timeout: 30000 });
  // Each model with its own pooling, and BERT with the pooling overridden on both sides.
  const runs = names.map((name) => ({ name })).concat([{ name: 'bert', pooling: 'cls' }, { name: 'bert', pooling: 'last' }]);
  const failures = [], summary = [];
  for (const { name, pooling } of runs) {
    const path = join(outDir, `${name}.gguf`);
    const model = await loadModel(path, { threads: 1 });
    try {
      assert.equal(model.info.encoder, true);
      assert.equal(model.info.tokenizer, 'wordpiece');
      const ours = await model.embed(TEXTS, pooling ? { pooling } : {});
      // The ids embed() reads: the text's with [CLS] first, then [SEP].
      const ids = TEXTS.map((text) => [...model.tokenize(text, { special: true }), model.info.eosId]);
      assert.equal(model.lastEmbedding.tokens, ids.reduce((s, x) => s + x.length, 0), 'embed counts the tokenize ids');
      const url = `/${relative(dirname(root), path)}`;
      const ref = await page.evaluate(([u, inputs, p]) => window.__wllamaEmbed(u, inputs, { pooling: p }), [url, [...TEXTS, ...ids], pooling]);
      let worst = 1;
      TEXTS.forEach((text, i) => {
        const where = `${name}${pooling ? ` (${pooling})` : ''} ${JSON.stringify(text).slice(0, 30)}`;
        const byText = ref[i], byIds = ref[TEXTS.length + i];
        if (byText.error !== undefined || byIds.error !== undefined) return failures.push(`${where}: llama.cpp failed: ${byText.error ?? byIds.error}`);
        if (byText.tokens !== ids[i].length) return failures.push(`${where}: ${byText.tokens} tokens in llama.cpp, ${ids[i].length} in qkv`);
        const same = cosine(byText.embedding, byIds.embedding);
        if (!(same >= 1 - 1e-6)) failures.push(`${where}: llama.cpp embeds qkv's ids differently from the text (cosine ${same}): the ids differ`);
        const c = cosine(ours[i], byText.embedding);
        worst = Math.min(worst, c);
        if (!(c >= 1 - 1e-3)) failures.push(`${where}: cosine ${c.toFixed(6)} with llama.cpp`);
        const norm = Math.hypot(...ours[i]);
        if (Math.abs(norm - 1) > 1e-4) failures.push(`${where}: qkv's vector has norm ${norm}`);
      });
      summary.push(`${name}${pooling ? `/${pooling}` : ''}: worst cosine ${worst.toFixed(7)}`);
    } finally {
      model.dispose();
    }
  }
  t.diagnostic(summary.join('; '));
  assert.deepEqual(failures, [], 'llama.cpp and qkv disagree');
  assert.deepEqual(errors.filter((e) => !/favicon/.test(e)), [], 'page errors');
  assert.ok(names.length >= 3, `only ${names.length} encoder models`);
});

test('embed: the worker gives the in-process vectors; bad input gets typed errors', { skip: skipBuild, timeout: 60000 }, async () => {
  const path = join(outDir, 'bert.gguf');
  const model = await loadModel(path, { threads: 1 });
  const w = await createWorker();
  try {
    const local = await model.embed(TEXTS.slice(0, 4), { batchSize: 3 });
    const single = await model.embed(TEXTS[2]);
    assert.deepEqual(single[0], local[2], 'a text alone and in a batch embed alike');
    const rm = await w.loadModel(path, { threads: 1 });
    const remote = await rm.embed(TEXTS.slice(0, 4));
    assert.equal(remote.length, 4);
    remote.forEach((v, i) => {
      assert.ok(v instanceof Float32Array && v.length === model.info.dim);
      for (let d = 0; d < v.length; d++) assert.ok(Math.abs(v[d] - local[i][d]) < 1e-6, `text ${i} element ${d}`);
    });
    await assert.rejects(rm.embed([]), { name: 'QkvError', code: 'bad_argument' });
    await rm.dispose();

    const bad = async (args, code, re) => assert.rejects(model.embed(...args), (e) => {
      assert.equal(e.name, 'QkvError');
      assert.equal(e.code, code);
      assert.match(e.message, re);
      return true;
    });
    await bad([[]], 'bad_argument', /at least one text/);
    await bad([null], 'bad_argument', /array of strings/);
    await bad([['ok', 5]], 'bad_argument', /text 1 is not a string/);
    await bad([['ok'], { pooling: 'max' }], 'bad_argument', /pooling/);
    await bad([['ok'], { normalize: 'yes' }], 'bad_argument', /normalize/);
    await bad([['ok'], { batchSize: 0 }], 'bad_argument', /batchSize/);
    await bad([['ok'], 7], 'bad_argument', /options/);
    const long = 'word '.repeat(model.info.contextLength + 10);
    await bad([['ok', long]], 'bad_argument', /text 1 is \d+ tokens long/);
    await bad([['ok'], { truncate: 1 }], 'bad_argument', /truncate/);
    const [cut] = await model.embed([long], { truncate: true });
    assert.equal(model.lastEmbedding.tokens, model.info.contextLength, 'cut to the context');
    assert.equal(cut.length, model.info.dim);
    const ac = new AbortController();
    ac.abort();
    await bad([['a', 'b'], { signal: ac.signal, batchSize: 1 }], 'aborted', /abort/);
    // An encoder has no language-model head: generation is refused by name.
    await assert.rejects(model.complete('hello', { maxTokens: 2 }), { name: 'QkvError', code: 'unsupported' });
    model.dispose();
    await bad([['ok']], 'disposed', /disposed/);
  } finally {
    model.dispose();
    await w.terminate();
  }
});

test('qkv embed (native and Node CLIs) prints one JSON array per text, the API\'s vectors', { skip: skipBuild, timeout: 60000 }, async () => {
  const path = join(outDir, 'nomic-bert.gguf');
  const texts = ['Hello, world!', 'café 日本', ''];
  const model = await loadModel(path, { threads: 1 });
  const want = await model.embed(texts, { pooling: 'last', normalize: false });
  model.dispose();
  const clis = [[process.execPath, [join(root, 'bin', 'qkv.mjs')]]];
  const native = join(root, 'build', 'qkv');
  if (existsSync(native)) clis.push([native, []]);
  const outs = [];
  for (const [bin, pre] of clis) {
    const r = spawnSync(bin, [...pre, 'embed', path, ...texts, '--pooling', 'last', '--no-normalize', '--threads', '1'], { encoding: 'utf8' });
    assert.equal(r.status, 0, `${bin}: ${r.stderr}`);
    const lines = r.stdout.trimEnd().split('\n');
    assert.equal(lines.length, texts.length);
    lines.forEach((l, i) => {
      const v = JSON.parse(l);
      assert.equal(v.length, want[i].length);
      v.forEach((x, d) => assert.ok(Math.abs(x - want[i][d]) < 1e-4, `${bin} text ${i} element ${d}: ${x} vs ${want[i][d]}`));
    });
    outs.push(r.stdout);
    const bad = spawnSync(bin, [...pre, 'embed', path, 'x', '--pooling', 'max'], { encoding: 'utf8' });
    assert.equal(bad.status, 1);
    assert.match(bad.stderr, /qkv: error \[bad_argument\]: .*pooling/);
  }
});
