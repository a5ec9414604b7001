// Images in chat (LLaVA-style: a llama text model + an mmproj with the 'mlp' projector), on the
// random-weight pair that `qkv_test_models --vlm` writes: qkv (WASM under Node) against llama.cpp's
// mtmd (@wllama/wllama in headless Chromium, CPU, f32 KV cache, unfused attention). The same image
// (a PNG for llama.cpp, its RGBA for qkv) and messages must give the same prompt token count (text
// + image tokens) and the same greedy reply; a divergence is accepted only at a near-tie (qkv's two
// best logits closer than TIE, llama.cpp taking qkv's second), which the test reports. Byte pieces
// and special tokens are banned in both engines so that replies are whole text (as
// tests/js/wllama.test.mjs). Also: the errors (an image without an mmproj, an mmproj of another
// width) and the OpenAI-shaped API with image_url parts, streaming too.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { deflateSync } from 'node:zlib';
import { after, before, test } from 'node:test';
import { chromiumPath, haveChromium, launchBrowser, openPage } from './browser.mjs';
import { models as sharedModels, root } from './helpers.mjs';
import { startServer } from './server.mjs';
import { loadModel } from '../../src/js/node.js';
import { createOpenAI } from '../../src/js/openai.js';
import { createWorker } from '../../src/js/worker-client.js';
import { imagePrompt } from '../../src/js/chat-images.js';
import { qkvGreedy } from './greedy.mjs';

const maker = join(root, 'build', 'qkv_test_models');
const outDir = join(root, 'test-artifacts', 'vlm-models');
const text = join(outDir, 'llava-text.gguf'), mmproj = join(outDir, 'llava-mmproj.gguf');
const GEN = 24;
const TIE = 0.005;  // as tests/js/wllama.test.mjs: logits here span about +-3
const noMaker = !existsSync(maker) ? `${maker} is not built (scripts/build.sh native)` : false;

// A deterministic RGBA picture (opaque: PNG keeps it exactly, and llama.cpp reads RGB).
function picture(w, h, seed) {
  const data = new Uint8Array(w * h * 4);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const i = (y * w + x) * 4;
      data[i] = (x * 37 + y * 11 + seed * 53) % 256;
      data[i + 1] = (x * x + 3 * y * seed) % 256;
      data[i + 2] = ((x ^ y) * 29 + seed) % 256;
      data[i + 3] = 255;
    }
  }
  return { data, width: w, height: h };
}

// RGBA -> PNG bytes (colour type 6, no filter): what llama.cpp's decoder reads back exactly.
const CRC = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function png({ data, width, height }) {
  const chunk = (type, body) => {
    const t = Buffer.concat([Buffer.from(type, 'latin1'), body]);
    let c = 0xffffffff;
    for (const b of t) c = CRC[(c ^ b) & 0xff] ^ (c >>> 8);
    const len = Buffer.alloc(4), crc = Buffer.alloc(4);
    len.writeUInt32BE(body.length);
    crc.writeUInt32BE((c ^ 0xffffffff) >>> 0);
    return Buffer.concat([len, t, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 6, 0, 0, 0], 8);
  const raw = Buffer.alloc(height * (width * 4 + 1));
  for (let y = 0; y < height; y++) raw.set(data.subarray(y * width * 4, (y + 1) * width * 4), y * (width * 4 + 1) + 1);
  return Buffer.concat([Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]), chunk('IHDR', ihdr), chunk('IDAT', deflateSync(raw)), chunk('IEND', Buffer.alloc(0))]);
}

before(() => {
  if (noMaker) return;
  mkdirSync(outDir, { recursive: true });
  const r = spawnSync(maker, ['--vlm', outDir, sharedModels], { encoding: 'utf8' });
  assert.equal(r.status, 0, `qkv_test_models --vlm failed: ${r.stderr}`);
});

// Ids no reply may hold: byte pieces, empty and special tokens (llama.cpp prints those as nothing).
function bannedIds(model) {
  const banned = [];
  const equal = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
  for (let id = 0; id < model.info.vocabSize; id++) {
    const t = model.detokenize([id]);
    const special = t !== '' && equal(model.tokenize(t, { bos: false, special: true }), [id]) && !equal(model.tokenize(t, { bos: false }), [id]);
    if (t === '' || t.includes('\uFFFD') || t === '<unk>' || special) banned.push(id);
  }
  return banned;
}

// Greedy ids after a prompt with image rows, with each step's margin (greedy.mjs's step loop).
const greedyRows = (model, ids, rows, banned, n) => qkvGreedy(model, ids, banned, n, (s) => s._h.prefillRows(ids, rows));

const CONVERSATIONS = [
  (a) => [{ role: 'user', content: [{ type: 'image', image: a }, { type: 'text', text: 'What is in this picture?' }] }],
  (a) => [{ role: 'system', content: 'You describe images.' },
    { role: 'user', content: [{ type: 'text', text: 'Look:' }, { type: 'image', image: a }, { type: 'text', text: 'and tell me a story.' }] }],
  (a, b) => [{ role: 'user', content: [{ type: 'text', text: 'Two pictures.' }, { type: 'image', image: a }, { type: 'image', image: b }] }],
];

// The tower without class token. With CLIP's class token (llava-mmproj-cls.gguf) llama.cpp's graph
// in this wllama build orders and gathers the rows otherwise than LLaVA's definition, which qkv
// follows (docs/vision.md, "Images in chat"): that pair is checked in qkv only, below.
const MMPROJS = ['llava-mmproj.gguf'];

test('images in chat: llama.cpp (mtmd) and qkv give the same image tokens and greedy text', {
  skip: noMaker || (!haveChromium && `no Chromium at ${chromiumPath}`), timeout: 240000,
}, async (t) => {
  const browser = await launchBrowser();
  const server = await startServer(dirname(root), { coopCoep: false });
  const failures = [], ties = [], summary = [];
  let total = 0;
  try {
    const { page, errors } = await openPage(browser, `${server.url}${basename(root)}/tests/js/pages/wllama.html`);
    await page.waitForFunction(() => window.__ready === true, null, { timeout: 30000 });
    for (const name of MMPROJS) {
      const mmPath = join(outDir, name);
      const model = await loadModel(text, { threads: 1, mmproj: mmPath });
      try {
        const mm = model.info.mmproj;
        assert.equal(mm.projector, 'mlp');
        assert.equal(mm.imageTokens, (16 / 4) ** 2);
        assert.equal(mm.dim, model.info.dim);
        const banned = bannedIds(model), bannedSet = new Set(banned);
        const pics = [picture(16, 16, 1), picture(16, 16, 2)];
        const requests = [], expected = [];
        for (const conv of CONVERSATIONS) {
          const messages = conv(...pics);
          const images = [];
          for (const m of messages) if (Array.isArray(m.content)) for (const p of m.content) if (p.type === 'image') images.push({ part: p, where: 'test' });
          const prompt = model.applyChatTemplate(messages);
          const { ids, rows } = await imagePrompt(model, prompt, images, true);
          const gen = greedyRows(model, ids, rows, bannedSet, GEN);
          // The public chat path must give the same reply as the step API.
          const bias = Object.fromEntries(banned.map((id) => [id, -100]));
          let said = '';
          for await (const piece of model.chat(messages, { temperature: 0, maxTokens: GEN, logitBias: bias })) said += piece.text;
          assert.equal(said, model.detokenize(gen.out), 'chat() and the greedy steps differ');
          assert.equal(model.session.lastGeneration.promptTokens, ids.length);
          const wire = messages.map((m) => (Array.isArray(m.content)
            ? { ...m, content: m.content.map((p) => (p.type === 'image' ? { type: 'image', png: png(p.image).toString('base64') } : p)) }
            : m));
          requests.push({ messages: wire, maxTokens: GEN, banned });
          expected.push({ ids, gen });
        }
        const url = (p) => `/${relative(dirname(root), p)}`;
        const { out } = await page.evaluate(([a, b, r]) => window.__wllamaVlm(a, b, r), [url(text), url(mmPath), requests]);
        total += out.length;
        out.forEach((r, i) => {
          const { ids, gen } = expected[i];
          const where = `${name} conversation ${i}`;
          if (r.error !== undefined) return failures.push(`${where}: llama.cpp failed: ${r.error}`);
          const got = r.raw.choices[0].message.content, u = r.raw.usage;
          if (u.prompt_tokens !== ids.length) return failures.push(`${where}: ${u.prompt_tokens} prompt tokens in llama.cpp, ${ids.length} in qkv`);
          const mine = model.detokenize(gen.out);
          if (got === mine) return summary.push(`${where}: ${ids.length} prompt tokens, ${gen.out.length} tokens identical`);
          let k = 0;
          while (k < gen.out.length && got.startsWith(model.detokenize(gen.out.slice(0, k + 1)))) k++;
          const swapped = k < gen.out.length && got.startsWith(model.detokenize([...gen.out.slice(0, k), gen.seconds[k]]));
          if (k < gen.out.length && gen.gaps[k] < TIE && swapped) return ties.push(`${where}: step ${k}, margin ${gen.gaps[k].toFixed(5)}`);
          failures.push(`${where}: diverges at step ${k} (qkv margin ${k < gen.gaps.length ? gen.gaps[k].toFixed(4) : '-'}): llama.cpp ${JSON.stringify(got)}, qkv ${JSON.stringify(mine)}`);
        });
      } finally {
        model.dispose();
      }
    }
    t.diagnostic(summary.join('; '));
    if (ties.length) t.diagnostic(`near-ties ordered differently: ${ties.join('; ')}`);
    assert.deepEqual(failures, [], 'llama.cpp and qkv disagree');
    assert.ok(ties.length <= 1, `${ties.length} near-ties in ${total} conversations`);
    assert.deepEqual(errors.filter((e) => !/favicon/.test(e)), [], 'page errors');
  } finally {
    await browser.close();
    await server.close();
  }
});

test('images in chat: errors name the problem', { skip: noMaker }, async () => {
  const pic = picture(16, 16, 3);
  const msg = [{ role: 'user', content: [{ type: 'image', image: pic }, { type: 'text', text: 'hi' }] }];
  const plain = await loadModel(text, { threads: 1 });
  try {
    assert.equal(plain.info.mmproj, null);
    await assert.rejects(async () => { for await (const _ of plain.chat(msg, { maxTokens: 2 })) { /* nothing */ } },
      (e) => e.code === 'bad_argument' && /without an mmproj/.test(e.message));
  } finally {
    plain.dispose();
  }
  await assert.rejects(loadModel(text, { threads: 1, mmproj: join(outDir, 'llava-mmproj-narrow.gguf') }),
    (e) => e.code === 'bad_model' && /48/.test(e.message) && /64/.test(e.message));
  await assert.rejects(loadModel(text, { threads: 1, mmproj: text }), (e) => e.code === 'bad_model' && /not an mmproj/.test(e.message));
  const model = await loadModel(text, { threads: 1, mmproj });
  try {
    const run = async (m) => { for await (const _ of model.chat(m, { maxTokens: 2 })) { /* nothing */ } };
    await assert.rejects(run([{ role: 'user', content: [{ type: 'image', image: { data: new Uint8Array(10), width: 4, height: 4 } }] }]),
      (e) => e.code === 'bad_argument' && /64/.test(e.message));
    await assert.rejects(run([{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }]),
      (e) => e.code === 'bad_argument' && /data: URLs/.test(e.message));
    await assert.rejects(run([{ role: 'user', content: [{ type: 'audio', audio: {} }] }]), (e) => e.code === 'unsupported');
    await assert.rejects(run([{ role: 'user', content: [{ type: 'image', image: pic }, { type: 'text', text: 'x <__media__>' }] }]),
      (e) => e.code === 'bad_argument' && /marker/.test(e.message));
    // A PNG data URL decodes (the engine's decoder in Node) to the very pixels of the raw part.
    const dataUrl = `data:image/png;base64,${png(pic).toString('base64')}`;
    const reply = async (part) => {
      let s = '';
      for await (const p of model.chat([{ role: 'user', content: [part, { type: 'text', text: 'hi' }] }], { temperature: 0, maxTokens: 6 })) s += p.text;
      return s;
    };
    assert.equal(await reply({ type: 'image_url', image_url: { url: dataUrl } }), await reply({ type: 'image', image: pic }));
    await assert.rejects(run([{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0K' } }] }]),
      (e) => e.code === 'bad_argument' && /PNG/.test(e.message));
  } finally {
    model.dispose();
  }
});

test('images in chat: a class token is no image token', { skip: noMaker }, async () => {
  const model = await loadModel(text, { threads: 1, mmproj: join(outDir, 'llava-mmproj-cls.gguf') });
  try {
    assert.equal(model.info.mmproj.imageTokens, 16);
    assert.equal(model.info.mmproj.visionLayers, 2);
    const messages = [{ role: 'user', content: [{ type: 'image', image: picture(16, 16, 5) }, { type: 'text', text: 'Hi' }] }];
    const images = [{ part: messages[0].content[0], where: 'test' }];
    const { ids, rows } = await imagePrompt(model, model.applyChatTemplate(messages), images, true);
    assert.equal(ids.filter((id) => id === -1).length, 16);
    assert.equal(rows.length, 16 * model.info.dim);
    for await (const _ of model.chat(messages, { temperature: 0, maxTokens: 2 })) { /* runs */ }
    assert.equal(model.session.lastGeneration.promptTokens, ids.length);
  } finally {
    model.dispose();
  }
});

test('images in chat: the OpenAI-shaped API takes image parts, streaming too', { skip: noMaker }, async () => {
  const model = await loadModel(text, { threads: 1, mmproj });
  try {
    const pic = picture(20, 12, 4);  // not square: padded to a square first
    const messages = [{ role: 'user', content: [{ type: 'text', text: 'Describe:' }, { type: 'image', image: pic }] }];
    let direct = '';
    for await (const p of model.chat(messages, { temperature: 0, maxTokens: 8 })) direct += p.text;
    const client = createOpenAI(model);
    const r = await client.chat.completions.create({ messages, temperature: 0, max_tokens: 8 });
    assert.equal(r.choices[0].message.content, direct);
    assert.equal(r.usage.prompt_tokens, model.session.lastGeneration.promptTokens);
    assert.ok(r.usage.prompt_tokens > 16, 'the image tokens count as prompt tokens');
    let streamed = '';
    const s = await client.chat.completions.create({ messages, temperature: 0, max_tokens: 8, stream: true });
    for await (const c of s) streamed += c.choices[0]?.delta?.content ?? '';
    assert.equal(streamed, direct);
  } finally {
    model.dispose();
  }
});

test('images in chat: through the Worker wrapper, the same reply', { skip: noMaker }, async () => {
  const messages = [{ role: 'user', content: [{ type: 'image', image: picture(16, 16, 6) }, { type: 'text', text: 'And this?' }] }];
  const reply = async (m) => {
    let out = '';
    for await (const p of m.chat(messages, { temperature: 0, maxTokens: 8 })) out += p.text;
    return out;
  };
  const model = await loadModel(text, { threads: 1, mmproj });
  const w = await createWorker();
  try {
    const remote = await w.loadModel(text, { threads: 1, mmproj });
    assert.deepEqual(remote.info.mmproj, model.info.mmproj);
    assert.equal(await reply(remote), await reply(model));
  } finally {
    model.dispose();
    await w.terminate();
  }
});
