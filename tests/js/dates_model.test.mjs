// The shipped encoder-decoder model (models/dates-encdec-t5.gguf, trained by qkv: see
// models/README.md) through the JS API: it translates written-out dates to their ISO form, and its
// cross-attention inspection has the source-by-target shape with rows that sum to 1. llama.cpp
// (@wllama/wllama in headless Chromium) loads the file and counts the same source tokens (its
// server never runs the encoder, so only the loading and tokenization can be compared; see
// encdec.test.mjs).
import assert from 'node:assert/strict';
import { basename, dirname, join, relative } from 'node:path';
import { after, before, test } from 'node:test';
import { chromiumPath, haveChromium, launchBrowser, openPage } from './browser.mjs';
import { root } from './helpers.mjs';
import { startServer } from './server.mjs';
import { EncoderDecoderModel, loadModel } from '../../src/js/node.js';

const path = join(root, 'models', 'dates-encdec-t5.gguf');
// Each source and the date it names (the ISO form is the task's definition, not a model output).
const DATES = [
  ['the twenty-third of March, nineteen ninety-four', '1994-03-23'],
  ['July 4th, 1976', '1976-07-04'],
  ['31/12/1999', '1999-12-31'],
  ['Feb 29, 2024', '2024-02-29'],
  ['the first of January, two thousand', '2000-01-01'],
  ['9 November 1989', '1989-11-09'],
  ['October twelfth, nineteen oh five', '1905-10-12'],
  ['21st of June 2039', '2039-06-21'],
];

let model;
before(async () => { model = await loadModel(path, { threads: 1 }); });
after(() => model?.dispose());

test('the dates model translates written-out dates to ISO 8601', async () => {
  assert.ok(model instanceof EncoderDecoderModel);
  assert.equal(model.info.arch, 't5');
  for (const [source, iso] of DATES) assert.equal(await model.complete(source, { maxTokens: 16, temperature: 0 }), iso, source);
});

test('its cross-attention: one row per target token over the source characters and EOS, rows summing to 1', async () => {
  const [source] = DATES[0];
  const m = await model.inspect(source, { maxTokens: 12 });
  assert.equal(m.sourceTokens.length, source.length + 1);
  assert.equal(m.targetTokens.length, 11);  // the start token and "1994-03-23"
  for (let l = 0; l < m.decoderLayers; l++) {
    for (let h = 0; h < m.heads; h++) {
      for (const row of m.cross(l, h)) {
        assert.equal(row.length, source.length + 1);
        assert.ok(Math.abs(row.reduce((a, b) => a + b, 0) - 1) < 1e-4);
      }
    }
  }
});

test('llama.cpp (wllama) loads the dates model and counts the same source tokens', { skip: !haveChromium && `no Chromium at ${chromiumPath}`, timeout: 120000 }, async () => {
  const browser = await launchBrowser();
  const server = await startServer(dirname(root), { coopCoep: false });
  try {
    const { page, errors } = await openPage(browser, `${server.url}${basename(root)}/tests/js/pages/wllama.html`);
    await page.waitForFunction(() => window.__ready === true, null, { timeout: 30000 });
    const requests = DATES.map(([prompt]) => ({ prompt, maxTokens: 1, banned: [] }));
    const { out } = await page.evaluate(([u, reqs]) => window.__wllama(u, reqs), [`/${relative(dirname(root), path)}`, requests]);
    out.forEach((r, i) => {
      assert.equal(r.error, undefined, `llama.cpp failed on ${DATES[i][0]}: ${r.error}`);
      assert.equal(r.raw.usage.prompt_tokens, model.tokenize(DATES[i][0]).length, DATES[i][0]);
    });
    assert.deepEqual(errors.filter((e) => !/favicon/.test(e)), [], 'page errors');
  } finally {
    await browser.close();
    await server.close();
  }
});
