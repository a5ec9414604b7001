// Every further pre-tokenizer against llama.cpp (@wllama/wllama in headless Chromium): one
// random-weight model per tokenizer.ggml.pre kind (names "pre-*" from build/qkv_test_models,
// a byte-level BPE vocabulary learned with that pre-tokenizer's own splits), and many tricky
// strings. llama.cpp's completion reports its prompt token count and its greedy first token,
// which on random weights depends on every prompt id; both must match qkv's. The real
// vocabularies of some kinds are checked id for id natively (tests/native/tokenizer/test_tokenizers.cpp).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { after, before, test } from 'node:test';
import { chromiumPath, haveChromium, launchBrowser, openPage } from './browser.mjs';
import { models as sharedModels, root } from './helpers.mjs';
import { startServer } from './server.mjs';
import { loadModel } from '../../src/js/node.js';
import { qkvGreedy } from './greedy.mjs';

const maker = join(root, 'build', 'qkv_test_models');
const outDir = join(root, 'test-artifacts', 'wllama-pre-models');
const TIE = 0.005;

// Each stresses a part of some pattern: contractions in both cases, digit runs (groups of 1, 3,
// from the right), letter case changes, marks, CJK and kana, fullwidth and CJK punctuation,
// Unicode spaces, CR/LF runs, long whitespace, symbols, emoji, the chameleon/poro literals.
const TEXTS = [
  "I'm sure they're here; we'll see, you've done it, she'd said DON'T and I'LL",
  '1 12 123 1234 12345 123456 1234567 3.14159 2024-11-22 1,000,000 ٣٤٥ ½ Ⅻ',
  'helloWorld HTTPServer getURLForID iPhone McDonald ΑΒΓ αβγ ǅungla',
  'café naïve e\u0301 a\u0308 क्षत्रिय ผู้ใหญ่ 안녕하세요 日本語のテキスト カタカナ ひらがな 你好，世界！',
  '   leading\ttabs\t\tand\n\n\nnew lines\r\n\r\n  trailing   \u00a0nbsp\u3000ideographic \u2028sep  ',
  'def main(argv):\n    for i in range(10):\n        print(f"value {i}")  # loop\n    return 0\n',
  'x+=1; a<=b || c>>d; $5 ~tilde ^caret `tick` |pipe| <tag attr="v"/> @user #hash 100%',
  '🙂🚀 emoji 👩‍👩‍👧 € £ ¥ © ® ™ ° ± × ÷ → ⇒ ∀ ∃',
  '<sentinel:12> IMGIMGABCZ text    four  two\ttab',
  'Hi. Hello, world! Really? Yes… 。、，؛ ۔ ، । end',
  '                                                                    long spaces',
  "'s 'S 'T 're 'RE 've 'Ve 'm 'M 'll 'LL 'd 'D ' 'x",
  'ABCdefGHIjkl ABC123def 12abc34 a1b2c3 ___ --- ... !!! ???',
  '\n\n\n\n\n\n\n\n\nx\r\r\r\ry',
  '',
  ' ',
  'ℂℍℕ K Ω ﬀ ﬁ Ａｂｃ 𐐀𐐨 𞤀',
];

const skip = !haveChromium ? `no Chromium at ${chromiumPath}` : !existsSync(maker) ? `${maker} is not built (scripts/build.sh native)` : false;
let browser, server, names = [];

before(async () => {
  if (skip) return;
  mkdirSync(outDir, { recursive: true });
  const r = spawnSync(maker, [outDir, sharedModels], { encoding: 'utf8' });
  assert.equal(r.status, 0, `qkv_test_models failed: ${r.stderr}`);
  names = JSON.parse(r.stdout).filter((n) => n.startsWith('pre-'));
  browser = await launchBrowser();
  server = await startServer(dirname(root), { coopCoep: false });
});
after(async () => { await browser?.close(); await server?.close(); });

test('llama.cpp conformance: prompt tokens and first greedy token for every pre-tokenizer', { skip, timeout: 240000 }, async (t) => {
  const { page } = await openPage(browser, `${server.url}${basename(root)}/tests/js/pages/wllama.html`);
  await page.waitForFunction(() => window.__ready === true, null, { timeout: 30000 });
  const failures = [], summary = [];
  for (const name of names) {
    const path = join(outDir, `${name}.gguf`);
    const model = await loadModel(path, { threads: 1 });
    try {
      const V = model.info.vocabSize;
      const banned = [];
      for (let id = 0; id < V; id++) {
        const text = model.detokenize([id]);
        if (text === '' || text.includes('\uFFFD')) banned.push(id);
      }
      const bannedSet = new Set(banned);
      const texts = TEXTS.filter((s) => s !== '');  // llama.cpp refuses an empty prompt
      const expected = texts.map((text) => {
        const ids = model.tokenize(text, { special: true });
        const g = qkvGreedy(model, ids, bannedSet, 1);
        const second = g.seconds.length ? model.detokenize([g.seconds[0]]) : null;
        return { ids, first: model.detokenize(g.out), second, gap: g.gaps[0] ?? Infinity };
      });
      const url = `/${relative(dirname(root), path)}`;
      const { out } = await page.evaluate(([u, reqs]) => window.__wllama(u, reqs),
        [url, texts.map((prompt) => ({ prompt, maxTokens: 1, banned }))]);
      let same = 0;
      out.forEach((r, i) => {
        const where = `${name} ${JSON.stringify(texts[i]).slice(0, 40)}`;
        if (r.error !== undefined) return failures.push(`${where}: llama.cpp failed: ${r.error}`);
        const n = r.raw.usage.prompt_tokens, got = r.raw.choices[0].text;
        if (n !== expected[i].ids.length) return failures.push(`${where}: ${n} prompt tokens in llama.cpp, ${expected[i].ids.length} in qkv`);
        // Two float engines may order a near-tie (logits within TIE) either way.
        if (got !== expected[i].first && !(expected[i].gap < TIE && got === expected[i].second)) return failures.push(`${where}: first token ${JSON.stringify(got)} in llama.cpp, ${JSON.stringify(expected[i].first)} in qkv`);
        same++;
      });
      summary.push(`${name}: ${same}/${texts.length}`);
    } finally {
      model.dispose();
    }
  }
  t.diagnostic(summary.join('; '));
  assert.deepEqual(failures, [], 'llama.cpp and qkv tokenize differently');
  assert.ok(names.length >= 20, `only ${names.length} pre-tokenizer models`);
});
