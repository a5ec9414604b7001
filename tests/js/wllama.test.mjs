// Conformance with llama.cpp: random-weight GGUF models of every supported architecture and
// tokenizer (written by build/qkv_test_models) run in llama.cpp (@wllama/wllama, WASM, headless
// Chromium, CPU backend, f32 KV cache, flash attention off for the float models) and in qkv (the
// WASM build under Node). llama.cpp's CPU flash attention (its default) rounds inside the
// attention: on the qwen3moe and cohere2 models it chose other tokens than its own unfused path,
// qkv and a float64 forward pass (tests/js/float64_forward.py), at margins up to 0.74. For each model
// and each text of a varied set, both must count the same prompt tokens and continue it with
// the same greedy text; chat prompts rendered from the model's template must continue alike.
// llama.cpp's replies carry text, not ids, so tokens that are not whole UTF-8 text on their own
// (byte pieces) and special tokens (printed as nothing) are banned in both engines (logit bias),
// which keeps every reply valid UTF-8 and the comparison exact.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { after, before, test } from 'node:test';
import { chromiumPath, haveChromium, launchBrowser, openPage } from './browser.mjs';
import { models as sharedModels, root } from './helpers.mjs';
import { startServer } from './server.mjs';
import { loadModel } from '../../src/js/node.js';
import { qkvGreedy } from './greedy.mjs';

const maker = join(root, 'build', 'qkv_test_models');
const outDir = join(root, 'test-artifacts', 'wllama-models');
const GEN = 24;

const TEXTS = [
  'Once upon a time, the little robot dreamed of the stars.',
  'def main(argv):\n    for i in range(10):\n        print(f"value {i}")  # loop\n    return 0\n',
  '日本語のテキスト、你好，世界！',
  'emoji 🙂🚀 and café naïve über',
  '   leading spaces,\ttabs\t\tand\n\n\nnew lines   trailing  ',
  'digits 1234567 3.14159 2024-11-22 1,000,000 and ٣٤٥',
  "I'm sure they're here; we'll see, you've done it, she'd said DON'T and I'LL",
  'MiXeD CaSe HELLO hello_world x+=1; a<=b || c>>d',
  '<|im_start|>user\nhello<|im_end|> after',
  '<|user|>\n  Hi there<|end|>\n<|assistant|> ok',
];
const CHAT = [
  { role: 'system', content: 'You are a helpful robot.' },
  { role: 'user', content: 'Hello! What is 2 + 2?' },
  { role: 'assistant', content: 'It is 4.' },
  { role: 'user', content: 'Thanks. Tell me a story.' },
];

const skip = !haveChromium ? `no Chromium at ${chromiumPath}` : !existsSync(maker) ? `${maker} is not built (scripts/build.sh native)` : false;
let browser, server, names = [];

before(async () => {
  if (skip) return;
  mkdirSync(outDir, { recursive: true });
  const r = spawnSync(maker, [outDir, sharedModels], { encoding: 'utf8' });
  assert.equal(r.status, 0, `qkv_test_models failed: ${r.stderr}`);
  // The pre-tokenizer models have their own, lighter comparison (pretokenizers_wllama.test.mjs);
  // qkv- models carry qkv's own keys and tensors (attention kinds), which llama.cpp does not read.
  names = JSON.parse(r.stdout).filter((n) => !n.startsWith('pre-') && !n.startsWith('qkv-'));
  // QKV_WLLAMA_ONLY=a,b: only those models (for working on one architecture; CI runs them all
  // but any named wip-, whose divergences from llama.cpp would be open: docs/architectures.md).
  if (process.env.QKV_WLLAMA_ONLY) names = names.filter((n) => process.env.QKV_WLLAMA_ONLY.split(',').includes(n));
  else names = names.filter((n) => !n.startsWith('wip-'));
  browser = await launchBrowser();
  server = await startServer(dirname(root), { coopCoep: false });
});
after(async () => { await browser?.close(); await server?.close(); });

// Two float engines may order a near-tie differently: where qkv's best and second-best logits
// are closer than this (logits here span about +-3) and llama.cpp took qkv's second-best token
// there, the divergence is reported as a tie, not a failure. Prompt token counts must always
// agree. Ties must stay rare: at most MAX_TIE_RATE of the prompts (about 5% occur: a step's
// margin falls below TIE about once in 400 steps, and the engines then pick either).
const TIE = 0.005;
const MAX_TIE_RATE = 0.08;
// Models stored in another type than f32 (qkv quantize's output, named ARCH-TYPE): llama.cpp
// quantizes the activations its own way (Q8_K, one scale per 256, for K-quant weights; Q8_0 or
// Q8_1 with f16-rounded scales for the 32-blocks; the activations rounded to f16 or bf16 for
// those weights), qkv per 32 with float scales and f32 activations, so logits differ by
// quantization noise, not float rounding. The 8-bit activations turn a float difference of one
// ulp into a whole step where a value sits near a rounding boundary, and greedy decoding on these
// random models then parts early: two qkv builds that differ only in how they round the
// activations (half to even with f32 scales, against half away from zero with f16 scales, as
// llama.cpp) give the same 24 tokens on only 2-5 of 10 prompts per model, parting at margins up
// to 0.24 (Q4_0). A divergence below QTIE is that noise; what such a model must show is that
// llama.cpp decodes the blocks as qkv does: the texts agree over at least QMIN_AGREED greedy
// steps (a misread block layout agrees on none: every logit would differ).
const isQuantized = (name) => /-(q[0-9]_[0-9k]|f16|bf16)$/.test(name);
const isSuperBlock = (name) => /-q[0-9]_k$/.test(name);  // K-type weights
const relaxed = existsSync(join(root, 'dist', 'qkv-relaxed.wasm'));
const QTIE = 0.3;
const QMIN_AGREED = 40;

// (The timeout covers the 45 models on a loaded 2-core machine.)
test('llama.cpp conformance: token counts and greedy text of every architecture and tokenizer', { skip, timeout: 480000 }, async (t) => {
  const { page, errors } = await openPage(browser, `${server.url}${basename(root)}/tests/js/pages/wllama.html`);
  await page.waitForFunction(() => window.__ready === true, null, { timeout: 30000 });
  const summary = [], failures = [], ties = [], qties = [];
  let prompts = 0;
  for (const name of names) {
    const path = join(outDir, `${name}.gguf`);
    const model = await loadModel(path, { threads: 1 });
    try {
      const V = model.info.vocabSize;
      const banned = [];
      const equal = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
      for (let id = 0; id < V; id++) {
        const text = model.detokenize([id]);
        // Special tokens (llama.cpp prints them as nothing): their text is that one id only when
        // control tokens are parsed.
        const special = text !== '' && equal(model.tokenize(text, { bos: false, special: true }), [id]) &&
          !equal(model.tokenize(text, { bos: false }), [id]);
        if (text === '' || text.includes('\uFFFD') || text === '<unk>' || special) banned.push(id);
      }
      const bannedSet = new Set(banned);
      const requests = [], expected = [];
      for (const text of TEXTS) {
        const ids = model.tokenize(text, { special: true });
        const gen = qkvGreedy(model, ids, bannedSet, GEN);
        requests.push({ prompt: text, maxTokens: GEN, banned });
        expected.push({ what: JSON.stringify(text).slice(0, 40), promptTokens: ids.length, gen, ids });
      }
      if (!model.info.chatFormatGuessed) {
        // Both engines get the same template variable (the page sends it as llama.cpp's
        // chat_template_kwargs): without it llama.cpp renders enable_thinking as false, qkv leaves
        // it undefined, and the tools model's template (Qwen 3's switch) then differs by design.
        const prompt = model.applyChatTemplate(CHAT, { templateVars: { enable_thinking: true } });
        const ids = model.tokenize(prompt, { special: true });
        const gen = qkvGreedy(model, ids, bannedSet, GEN);
        requests.push({ messages: CHAT, maxTokens: GEN, banned });
        expected.push({ what: `chat (${model.info.chatFormat})`, promptTokens: ids.length, gen, prompt, ids });
      }
      const url = `/${relative(dirname(root), path)}`;
      const quantized = isQuantized(name);
      // Exact comparisons run llama.cpp's unfused attention; the quantized models keep its default,
      // under which their noise rule (QTIE, QMIN_AGREED) was measured.
      const load = quantized ? {} : { flash_attn: false };
      const { out } = await page.evaluate(([u, reqs, l]) => window.__wllama(u, reqs, false, l), [url, requests, load]);
      prompts += out.length;
      // qkv's texts against llama.cpp's replies, for one qkv build's greedy runs (gens).
      const judge = (gens, label) => {
        let same = 0, agreed = 0;
        out.forEach((r, i) => {
          const want = expected[i], gen = gens[i];
          const where = `${name}${label} ${want.what}`;
          if (r.error !== undefined) return failures.push(`${where}: llama.cpp failed: ${r.error}`);
          const choice = r.raw.choices[0];
          let got = choice.text ?? choice.message.content;
          // A chat prompt that ends inside an open reasoning block (DeepSeek-R1's '<think>\n'):
          // llama.cpp's chat reply (reasoning_format 'none') starts with that opening tag again.
          const open = want.prompt && /<think>\n?$/.exec(want.prompt);
          if (open && got.startsWith(open[0])) got = got.slice(open[0].length);
          const u = r.raw.usage;
          if (u.prompt_tokens !== want.promptTokens) return failures.push(`${where}: ${u.prompt_tokens} prompt tokens in llama.cpp, ${want.promptTokens} in qkv`);
          const { out: ids, gaps } = gen;
          const text = model.detokenize(ids);
          if (got === text && u.completion_tokens === ids.length) return agreed += ids.length, same++;
          // The first step whose token takes qkv's text off llama.cpp's.
          let k = 0;
          while (k < ids.length && got.startsWith(model.detokenize(ids.slice(0, k + 1)))) k++;
          agreed += k;
          const detail = `llama.cpp ${JSON.stringify(got)} (${u.completion_tokens} tokens), qkv ${JSON.stringify(text)} (${ids.length})`;
          if (quantized && k < ids.length && gaps[k] < QTIE) return qties.push(`${where}: step ${k}, margin ${gaps[k].toFixed(4)}`);
          const swapped = k < ids.length && got.startsWith(model.detokenize([...ids.slice(0, k), gen.seconds[k]]));
          if (k < ids.length && gaps[k] < TIE && swapped) return ties.push(`${where}: step ${k}, margin ${gaps[k].toFixed(5)}`);
          failures.push(`${where}: diverges at step ${k} (qkv margin ${k < gaps.length ? gaps[k].toFixed(4) : '-'}): ${detail}`);
        });
        return { same, agreed };
      };
      const { same, agreed } = judge(expected.map((e) => e.gen), '');
      summary.push(`${name} (${model.info.arch}, ${model.info.tokenizer}, vocab ${V}): ${same}/${out.length} identical` +
        (quantized ? `, ${agreed} greedy steps agreed` : ''));
      if (quantized && agreed < QMIN_AGREED) failures.push(`${name}: only ${agreed} greedy steps agree with llama.cpp`);
      if (isSuperBlock(name) && relaxed) {
        // The relaxed-SIMD build multiplies K-type weights against activations with one scale
        // per 256 (BlockQ8K, as llama.cpp's Q8_K), SIMD128 per 32: the same rules, held to the
        // same llama.cpp replies.
        const job = join(outDir, `${name}.relaxed-job.json`);
        writeFileSync(job, JSON.stringify({ model: path, prompts: expected.map((e) => e.ids), banned, n: GEN }));
        const r = spawnSync(process.execPath, ['--experimental-wasm-relaxed-simd', join(root, 'tests', 'js', 'greedy-child.mjs'), job],
          { encoding: 'utf8', timeout: 120000 });
        assert.equal(r.status, 0, r.stderr);
        const res = JSON.parse(r.stdout.trim().split('\n').pop());
        assert.equal(res.simd, 'wasm-relaxed');
        const rel = judge(res.gens, ' (relaxed SIMD)');
        summary.push(`${name} in the relaxed-SIMD build: ${rel.same}/${out.length} identical, ${rel.agreed} greedy steps agreed`);
        if (rel.agreed < QMIN_AGREED) failures.push(`${name} (relaxed SIMD): only ${rel.agreed} greedy steps agree with llama.cpp`);
      }
    } finally {
      model.dispose();
    }
  }
  t.diagnostic(summary.join('; '));
  if (qties.length) t.diagnostic(`quantized models, divergences at quantization-noise margins: ${qties.join('; ')}`);
  if (ties.length) t.diagnostic(`near-ties ordered differently (same prompt tokens, same text up to there): ${ties.join('; ')}`);
  assert.deepEqual(failures, [], 'llama.cpp and qkv disagree');
  assert.ok(ties.length <= MAX_TIE_RATE * prompts, `${ties.length} near-tie divergences in ${prompts} prompts: more than chance explains`);
  assert.deepEqual(errors.filter((e) => !/favicon/.test(e)), [], 'page errors');
  if (!process.env.QKV_WLLAMA_ONLY) assert.ok(names.length >= 10, `only ${names.length} models`);
});
