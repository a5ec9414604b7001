// Embedding throughput, qkv vs wllama (llama.cpp compiled to WASM), in the same headless
// Chromium, same run, same GGUF encoder. A benchmark (prints figures), not a test:
//
//   node bench/bench-embed.mjs [--shape base|small] [--threads 1,2] [--texts 32] [--batch 32]
//                              [--tokens 32] [--runs 5] [--dir build/bench-embed] [--single]
//
// The model is a random-weight BERT written by build/qkv_test_models --encoder-shape: `base` is
// BERT-base's shape (12 layers, dim 768, 12 heads, hidden 3072, vocab 30522, f32: 418 MiB),
// `small` a MiniLM-like one (6 layers, dim 384, 12 heads, hidden 1536, vocab 30522). The texts
// are --texts sentences of single letters, each --tokens tokens long with [CLS] and [SEP] (the
// engines' token counts are printed and must agree), embedded --batch at a time. Sentences/s is
// the median of --runs passes after a warm-up, per engine and thread count, each engine in a page
// of its own, their passes alternating. wllama gets --batch texts per createEmbedding call with as
// many parallel slots (--single: one text per call instead).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchBrowser } from '../tests/js/browser.mjs';
import { serveBenchPage } from './bench-server.mjs';

const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
const args = process.argv.slice(2);
const KNOWN = ['--shape', '--threads', '--texts', '--batch', '--tokens', '--runs', '--dir'];
const single = args.includes('--single');
if (single) args.splice(args.indexOf('--single'), 1);
for (let i = 0; i < args.length; i += 2) {
  if (!KNOWN.includes(args[i])) {
    console.error(`bench-embed: unknown option ${args[i]} (see the header of bench/bench-embed.mjs)`);
    process.exit(2);
  }
}
const opt = (name, def) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : def;
};
const SHAPES = {
  base: { dim: 768, hidden: 3072, layers: 12, heads: 12, vocab: 30522 },
  small: { dim: 384, hidden: 1536, layers: 6, heads: 12, vocab: 30522 },
};
const shape = opt('shape', 'base');
if (!SHAPES[shape]) { console.error(`bench-embed: unknown shape ${shape} (base, small)`); process.exit(2); }
const threadList = opt('threads', '1,2').split(',').map(Number);
const nTexts = Number(opt('texts', '32')), batch = Number(opt('batch', '32')), perText = Number(opt('tokens', '32'));
const runs = Number(opt('runs', '5'));
const dir = resolve(opt('dir', join(root, 'build', 'bench-embed')));
const maker = join(root, 'build', 'qkv_test_models');
if (!existsSync(maker) || !existsSync(join(root, 'dist', 'qkv-mt.wasm'))) {
  console.error('bench-embed: build first (bash scripts/build.sh)');
  process.exit(1);
}
mkdirSync(dir, { recursive: true });
const s = SHAPES[shape];
const file = join(dir, `bert-${shape}.gguf`);
if (!existsSync(file)) {
  console.error(`[bench-embed] writing ${file} (random weights)`);
  execFileSync(maker, ['--encoder-shape', file, 'bert', s.dim, s.hidden, s.layers, s.heads, s.vocab].map(String), { stdio: 'inherit' });
}

// ---- server (bench/bench-server.mjs) -----------------------------------------------------
const { server, base } = await serveBenchPage({ root, modelDir: dir, title: 'qkv vs wllama: embeddings', script: '/qkv/bench/embed-page.mjs' });

// Sentences of single letters: each letter is one word-start piece, so a sentence of n letters
// is n + 2 tokens with [CLS] and [SEP].
let seed = 11;
const LETTERS = 'abcdefghijklmnopqrstuvwxyz';
const texts = Array.from({ length: nTexts }, () =>
  Array.from({ length: perText - 2 }, () => LETTERS[(seed = (seed * 1103515245 + 12345) % 2147483648) % 26]).join(' '));

const rows = [];
const browser = await launchBrowser();
try {
  for (const threads of threadList) {
    const row = { threads };
    const pages = {};
    try {
      for (const engine of ['qkv', 'wllama']) {
        const context = await browser.newContext();
        const page = await context.newPage();
        const errors = [];
        page.on('pageerror', (e) => errors.push(String(e)));
        pages[engine] = { context, page, errors, times: [] };
        await page.goto(base);
        await page.waitForFunction(() => window.benchReady === true, null, { timeout: 60000 });
        const cfg = { model: `/models/bert-${shape}.gguf`, threads, texts, batch, perText, single };
        await page.evaluate(([fn, c]) => window[fn](c), [engine === 'qkv' ? 'setupQkv' : 'setupWllama', cfg]);
      }
      // Passes alternate between the engines, so load on the machine falls on both alike.
      for (let r = 0; r < runs; r++)
        for (const engine of ['qkv', 'wllama']) pages[engine].times.push(await pages[engine].page.evaluate(() => window.pass()));
      for (const engine of ['qkv', 'wllama']) {
        const p = pages[engine];
        const sec = [...p.times].sort((a, b) => a - b)[Math.floor(p.times.length / 2)];
        row[engine] = { rate: texts.length / sec, tokens: await p.page.evaluate(() => window.tokens()) };
        console.error(`[bench-embed] ${shape} ${threads}t ${engine}: ${row[engine].rate.toFixed(2)} sentences/s ` +
          `(${row[engine].tokens} tokens each; passes ${p.times.map((t) => t.toFixed(2)).join(', ')} s)`);
      }
    } catch (e) {
      const errs = Object.values(pages).flatMap((p) => p.errors);
      row.error = String(e.message || e).split('\n')[0] + (errs.length ? ` (${errs[0]})` : '');
      console.error(`[bench-embed] ${shape} ${threads}t: error: ${row.error}`);
    } finally {
      for (const p of Object.values(pages)) await p.context.close();
    }
    rows.push(row);
  }
} finally {
  await browser.close();
  server.close();
}

const f = (r) => (r?.error ? 'error' : r ? r.rate.toFixed(2) : '-');
console.log(`\nEmbedding throughput, BERT-${shape} shape (random f32 weights, ${(statSync(file).size / 1048576).toFixed(0)} MiB), ` +
  `${nTexts} sentences of ${perText} tokens, batch ${batch}, median of ${runs} alternating passes after a warm-up, headless Chromium\n`);
console.log('| threads | qkv sentences/s | wllama sentences/s | ratio | tokens per sentence (qkv / wllama) |');
console.log('| --- | --- | --- | --- | --- |');
for (const r of rows) {
  const ratio = r.qkv?.rate && r.wllama?.rate ? (r.qkv.rate / r.wllama.rate).toFixed(2) + 'x' : '-';
  console.log(`| ${r.threads} | ${f(r.qkv)} | ${f(r.wllama)} | ${ratio} | ${r.qkv?.tokens ?? '-'} / ${r.wllama?.tokens ?? '-'} |`);
}
console.log('\nratio = qkv / wllama (above 1: qkv faster).');
for (const r of rows) if (r.error) console.log(`${r.threads}t: ${r.error}`);
