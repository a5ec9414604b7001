// qkv vs wllama (llama.cpp compiled to WASM) in the same headless Chromium, and qkv's native CLI,
// same run, same GGUF files. A benchmark (prints figures), not a test: `bash scripts/bench-wllama.sh`.
//
//   node bench/bench-wllama.mjs [--shapes 110m,1b] [--types f32,q8_0,q4_0,q4_k] [--threads 1,2]
//                               (types: f32, f16, q8_0, q4_0, q4_k; default all but f16)
//                               [--runs 3] [--prompt 256,1024] [--decode 64] [--dir build/bench-wllama]
//                               [--simd relaxed,baseline]  (qkv's builds: relaxed SIMD, SIMD128; default both)
//                               [--native yes]  (also build/qkv run, the native CLI; "no" leaves it out)
//                               [--rounds 1]  (each engine measured in R rounds, engines alternating
//                               within a round, the first engine rotating from round to round; the
//                               tables give the median and the min-max spread over the rounds)
//
// Models: random weights of llama2.c's 110M shape (dim 768, 12 layers, 12 heads, hidden 2048,
// vocab 32000) and, with --shapes 110m,1b, a ~0.9B shape (dim 2048, 16 layers, 32 heads, hidden
// 5632; no f32 there: 3.5 GB does not fit a wasm32 heap with room to run; f16 is 1.8 GB).
// Each is written as a llama2.c checkpoint with a synthetic 32000-piece tokenizer, then turned
// into GGUF by qkv's own CLI (`qkv convert` for f32/f16, `qkv quantize` for the rest) and cached
// in --dir.
// The page is served with COOP/COEP, so both engines get threads. Per model, prompt length and
// thread count: prefill tok/s of a --prompt token prompt and decode tok/s over --decode tokens,
// medians of --runs runs after a warm-up; qkv's through its JS API, wllama's from llama.cpp's
// timings, native's from `qkv run`'s own line (one process per run: prefill is one forward of
// the prompt, decode includes sampling, as in the page).
// Files over 512 MiB reach wllama as llama.cpp split files (bench/gguf-split.mjs; it cannot
// take them as one buffer); qkv reads the single file. Same tensors, same bytes.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchBrowser } from '../tests/js/browser.mjs';
import { LETTERS, SHAPES, benchModel } from './bench-models.mjs';
import { serveBenchPage } from './bench-server.mjs';
import { splitGguf } from './gguf-split.mjs';

const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : def;
};
for (let i = 0; i < args.length; i += 2) {
  if (!['--shapes', '--types', '--threads', '--runs', '--prompt', '--decode', '--dir', '--simd', '--rounds', '--native'].includes(args[i])) {
    console.error(`bench-wllama: unknown option ${args[i]} (see the header of bench/bench-wllama.mjs)`);
    process.exit(2);
  }
}
const shapes = opt('shapes', '110m').split(',');
const types = opt('types', 'f32,q8_0,q4_0,q4_k').split(',');
const threadList = opt('threads', '1,2').split(',').map(Number);
const simdList = opt('simd', 'relaxed,baseline').split(',');
for (const v of simdList) if (!['relaxed', 'baseline'].includes(v)) { console.error(`bench-wllama: --simd takes relaxed and/or baseline, got ${v}`); process.exit(2); }
const rounds = Number(opt('rounds', '1'));
if (!Number.isInteger(rounds) || rounds < 1 || rounds > 50) { console.error('bench-wllama: --rounds takes an integer from 1 to 50'); process.exit(2); }
const runs = Number(opt('runs', '3')), decode = Number(opt('decode', '64'));
const promptLens = opt('prompt', '256,1024').split(',').map(Number);
for (const p of promptLens) if (!Number.isInteger(p) || p < 8 || p > 4096) { console.error('bench-wllama: --prompt takes token counts from 8 to 4096'); process.exit(2); }
const native = opt('native', 'yes');
if (!['yes', 'no'].includes(native)) { console.error(`bench-wllama: --native takes yes or no, got ${native}`); process.exit(2); }
const dir = resolve(opt('dir', join(root, 'build', 'bench-wllama')));
for (const s of shapes) if (!SHAPES[s]) { console.error(`bench-wllama: unknown shape ${s} (110m, 1b)`); process.exit(2); }
for (const t of types) if (!['f32', 'f16', 'q8_0', 'q4_0', 'q4_k'].includes(t)) { console.error(`bench-wllama: unknown type ${t}`); process.exit(2); }
const qkvBin = join(root, 'build', 'qkv');
if (!existsSync(qkvBin) || !existsSync(join(root, 'dist', 'qkv-mt.wasm'))) {
  console.error('bench-wllama: build first (bash scripts/build.sh)');
  process.exit(1);
}
mkdirSync(dir, { recursive: true });

// ---- model files (bench/bench-models.mjs) ---------------------------------------------
// The shapes' trained length (1024) grows to hold the longest prompt and the decoded tokens; such
// a model is cached under its own name (110m-ctx2048).
const seqFor = (shape) => {
  let seq = SHAPES[shape].seq;
  while (seq < Math.max(...promptLens) + decode + 8) seq *= 2;
  return seq;
};
const ggufFor = (shape, type) => {
  const seq = seqFor(shape), name = seq === SHAPES[shape].seq ? shape : `${shape}-ctx${seq}`;
  return benchModel({ dir, qkvBin, shape: { ...SHAPES[shape], seq }, name, type, log: (m) => console.error(`[bench-wllama] ${m}`) });
};

// ---- server (bench/bench-server.mjs) -----------------------------------------------------
const { server, base } = await serveBenchPage({ root, modelDir: dir, title: 'qkv vs wllama', script: '/qkv/bench/wllama-page.mjs' });

// ---- run -------------------------------------------------------------------------------
// An engine's rounds as one result: the median prefill and decode, and their [min, max].
function summarize(list) {
  const ok = list.filter((r) => !r.error);
  if (ok.length === 0) return list[0];
  const med = (v) => { const a = [...v].sort((x, y) => x - y); return a.length % 2 ? a[a.length >> 1] : (a[a.length / 2 - 1] + a[a.length / 2]) / 2; };
  const pre = ok.map((r) => r.prefill), dec = ok.map((r) => r.decode);
  return { ...ok[0], prefill: med(pre), decode: med(dec), prefillSpread: [Math.min(...pre), Math.max(...pre)],
           decodeSpread: [Math.min(...dec), Math.max(...dec)], rounds: ok.length };
}
// A prompt of about n tokens (BOS + one piece per letter with the synthetic tokenizer).
const promptOf = (n) => {
  let seed = 7;
  return Array.from({ length: n - 2 }, () => LETTERS[(seed = (seed * 1103515245 + 12345) % 2147483648) % 26]).join('');
};
// The native CLI, one process per run after one warm-up process; greedy, as the page.
function benchNative({ file, threads, prompt, decode, runs }) {
  const pre = [], dec = [];
  let promptTokens = 0;
  for (let r = 0; r <= runs; r++) {
    const res = spawnSync(qkvBin, ['run', file, '-i', prompt, '-t', '0', '-n', String(prompt.length + 2 + decode),
                                   '--ctx', String(prompt.length + 4 + decode), '--threads', String(threads)],
                          { encoding: 'utf8', maxBuffer: 1 << 26 });
    const m = /prefill: (\d+) tokens, ([\d.]+) tok\/s \| decode: (\d+) tokens, ([\d.]+) tok\/s \| \d+ threads, (\S+)/.exec(res.stderr || '');
    if (res.status !== 0 || !m) throw new Error(`qkv run failed (${res.status}): ${(res.stderr || String(res.error)).trim().split('\n').pop()}`);
    promptTokens = Number(m[1]);
    if (r > 0) pre.push(Number(m[2])), dec.push(Number(m[4]));
    if (Number(m[3]) < decode / 2) throw new Error(`qkv run stopped after ${m[3]} of ${decode} tokens`);
  }
  const med = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
  return { promptTokens, prefill: med(pre), decode: med(dec), threads };
}
const engines = [...(native === 'yes' ? ['native'] : []), ...simdList.map((v) => `qkv-${v}`), 'wllama'];
function report(shape, type, threads, promptLen, engine, r) {
  console.error(`[bench-wllama] ${shape} ${type} ${promptLen}p ${threads}t ${engine}: ` +
    (r.error ? `error: ${r.error}` : `prefill ${r.prefill.toFixed(1)} tok/s (${r.promptTokens} tokens), decode ${r.decode.toFixed(1)} tok/s${r.simd ? ` [${r.simd}]` : ''}`));
}
const rows = [];
const browser = await launchBrowser();
try {
  for (const shape of shapes) {
    for (const type of types) {
      if (shape === '1b' && type === 'f32') continue;
      const file = ggufFor(shape, type);
      const size = statSync(file).size;
      for (const promptLen of promptLens) for (const threads of threadList) {
        const prompt = promptOf(promptLen);
        const row = { shape, type, size, threads, promptLen };
        const samples = {};  // engine -> one result per round
        for (let round = 0; round < rounds; round++) for (let e = 0; e < engines.length; e++) {
          const engine = engines[(e + round) % engines.length];
          if (engine === 'native') {
            try {
              row[engine] = benchNative({ file, threads, prompt, decode, runs });
            } catch (err) {
              row[engine] = { error: String(err.message || err) };
            }
            report(shape, type, threads, promptLen, engine, row[engine]);
            (samples[engine] ??= []).push(row[engine]);
            continue;
          }
          // A fresh page per measurement: each engine starts from an empty heap.
          const context = await browser.newContext();
          const page = await context.newPage();
          const errors = [];
          page.on('pageerror', (e) => errors.push(String(e)));
          try {
            await page.goto(base);
            await page.waitForFunction(() => window.benchReady === true, null, { timeout: 60000 });
            // wllama takes files over 512 MiB as llama.cpp split files (its documented limit).
            const files = engine === 'wllama' && size > 512 * 1048576 ? splitGguf(file) : [file];
            if (files.length > 1) row.wllamaSplit = files.length;
            const urls = files.map((f) => `/models/${f.slice(dir.length + 1)}`);
            const cfg = { model: engine === 'wllama' ? urls : urls[0], threads, prompt, decode, runs,
                          simd: engine.startsWith('qkv-') ? engine.slice(4) : undefined };
            row[engine] = await page.evaluate(([fn, c]) => window[fn](c), [engine === 'wllama' ? 'benchWllama' : 'benchQkv', cfg]);
          } catch (e) {
            row[engine] = { error: String(e.message || e).split('\n')[0] + (errors.length ? ` (${errors[0]})` : '') };
          } finally {
            await context.close();
          }
          report(shape, type, threads, promptLen, engine, row[engine]);
          (samples[engine] ??= []).push(row[engine]);
        }
        for (const [engine, list] of Object.entries(samples)) row[engine] = summarize(list);
        rows.push(row);
      }
    }
  }
} finally {
  await browser.close();
  server.close();
}

const f = (v) => (v === undefined ? '-' : v.toFixed(1));
const ratio = (a, b) => (a && b ? (a / b).toFixed(2) + 'x' : '-');
const mb = (n) => (n / 1048576).toFixed(0) + ' MiB';
const name = (e) => (e === 'native' ? 'native' : e === 'wllama' ? 'wllama' : `qkv ${e.slice(4)}`);
const wasm = simdList.map((v) => `qkv-${v}`);
// Ratio columns: each qkv WASM build against wllama and against native, and native against wllama.
const pairs = [...wasm.map((e) => [e, 'wllama']), ...(native === 'yes' ? [...wasm.map((e) => [e, 'native']), ['native', 'wllama']] : [])];
console.log(`\nqkv vs wllama ${rows.find((r) => r.wllama?.version)?.wllama.version ?? ''} in headless Chromium` +
  `${native === 'yes' ? ', and qkv native (build/qkv run)' : ''} (${decode} decoded tokens, median of ${runs} runs after a warm-up` +
  `${rounds > 1 ? `; ${rounds} rounds, engines alternating, median (min-max) over the rounds` : ''})`);
for (const k of ['prefill', 'decode']) {
  console.log(`\n${k} tok/s\n`);
  console.log(`| model | type | file | prompt | threads | ${engines.map(name).join(' | ')} | ${pairs.map(([a, b]) => `${name(a)} / ${name(b)}`).join(' | ')} |`);
  console.log(`|${' --- |'.repeat(5 + engines.length + pairs.length)}`);
  for (const r of rows) {
    const val = (x) => (!x ? '-' : x.error ? 'error' : f(x[k]) + (rounds > 1 && x[`${k}Spread`] ? ` (${f(x[`${k}Spread`][0])}-${f(x[`${k}Spread`][1])})` : ''));
    console.log(`| ${r.shape} | ${r.type} | ${mb(r.size)}${r.wllamaSplit ? ` (wllama: ${r.wllamaSplit} split files)` : ''} | ${r.promptLen} | ${r.threads} | ` +
      `${engines.map((e) => val(r[e])).join(' | ')} | ${pairs.map(([a, b]) => ratio(r[a]?.[k], r[b]?.[k])).join(' | ')} |`);
  }
}
console.log('\nA / B above 1: A faster. Prefill and decode per engine as described in bench/bench-wllama.mjs.');
// Block-type prefill against qkv's own f32 prefill, same shape, prompt, threads and build (issue 35's target: >= 1.5x).
for (const r of rows) {
  const f32 = rows.find((o) => o.shape === r.shape && o.threads === r.threads && o.promptLen === r.promptLen && o.type === 'f32');
  if (!f32 || r === f32) continue;
  const cells = engines.filter((e) => e !== 'wllama').map((e) => `${name(e)} ${ratio(r[e]?.prefill, f32[e]?.prefill)}`);
  console.log(`prefill ${r.shape} ${r.type} / f32, ${r.promptLen}-token prompt, ${r.threads}t: ${cells.join(', ')}`);
}
for (const r of rows) for (const e of engines) if (r[e]?.error) console.log(`${r.shape} ${r.type} ${r.promptLen}p ${r.threads}t ${e}: ${r[e].error}`);
