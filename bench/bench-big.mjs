// Models larger than the WebAssembly heap on the GPU (weights: 'gpu'): a benchmark that prints
// figures, not a test. Writes generated Q4_K GGUFs of ~3B and 7-8B shapes (random weights, to a
// temporary folder, after checking the free disk), then per shape and place (Node through Dawn,
// headless Chromium) loads the model with weights: 'gpu' (Node: from the path; Chromium: from a
// local URL), generates a few tokens and reports load time, prefill and decode tokens/s, the
// peak heap and the GPU memory (info.memory). The files are deleted at the end unless --keep.
//
//   node bench/bench-big.mjs [--shapes 3b,8b] [--where node,chromium] [--tokens 4] [--prompt 'Once upon a time']
//                            [--dir DIR] [--keep] [--cache]
//
// Shapes (Q4_K matrices, 4.5 bits per weight; f32 norms):
//   3b  Llama-3.2-3B's layers (dim 3072, hidden 8192, 28 layers, 24 heads, 8 KV heads), vocabulary of 32000: 1.6 GiB
//   7b  deepseek-llm-7b (dim 4096, hidden 11008, 30 layers, 32 heads), vocabulary of 102400; f16
//       classifier (llama-quantize --leave-output-tensor): 4.2 GiB
//   8b  Llama-3-8B's layers (dim 4096, hidden 14336, 32 layers, 32 heads, 8 KV heads), vocabulary of 102400: 4.1 GiB
// Vocabularies: ../shared/vocab (llama-spm, deepseek-llm). --cache: in Chromium, load a second time
// with cache: 'opfs' after a first load that fills the cache (twice the disk).
// Without a GPU, Node runs on SwiftShader (VK_ICD_FILENAMES) and Chromium with its SwiftShader
// flags: CPU emulation, so the figures say the code runs, not how fast a GPU is. QKV_BENCH_REAL_GPU=1:
// the machine's GPU (Dawn on Vulkan in Node; Chromium without the SwiftShader flags), as bench-webgpu.mjs.
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, statfsSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readMeta } from '../tests/js/big-gguf.mjs';

const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
const here = fileURLToPath(import.meta.url);
const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : def;
};
const ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';
const realGpu = !!process.env.QKV_BENCH_REAL_GPU;
const vocabDir = join(root, '..', 'shared', 'vocab');

export const SHAPES = {
  '3b': { dim: 3072, hidden: 8192, layers: 28, heads: 24, kvHeads: 8, vocab: 'llama-spm', output: 'q4_k' },
  '7b': { dim: 4096, hidden: 11008, layers: 30, heads: 32, kvHeads: 32, vocab: 'deepseek-llm', output: 'f16' },
  '8b': { dim: 4096, hidden: 14336, layers: 32, heads: 32, kvHeads: 8, vocab: 'deepseek-llm', output: 'q4_k' },
};
const TYPES = { f32: { id: 0, block: 1, bytes: 4 }, f16: { id: 1, block: 1, bytes: 2 }, q4_k: { id: 12, block: 256, bytes: 144 } };
const ALIGN = 32;
const GiB = 1024 ** 3;

/** The tensors of a shape: [name, dims (fastest first), type]. */
function tensorsOf(s, vocab) {
  const kvDim = s.kvHeads * (s.dim / s.heads);
  const t = [['token_embd.weight', [s.dim, vocab], 'q4_k'], ['output_norm.weight', [s.dim], 'f32'], ['output.weight', [s.dim, vocab], s.output]];
  for (let l = 0; l < s.layers; l++) {
    t.push([`blk.${l}.attn_norm.weight`, [s.dim], 'f32'], [`blk.${l}.attn_q.weight`, [s.dim, s.dim], 'q4_k'],
      [`blk.${l}.attn_k.weight`, [s.dim, kvDim], 'q4_k'], [`blk.${l}.attn_v.weight`, [s.dim, kvDim], 'q4_k'],
      [`blk.${l}.attn_output.weight`, [s.dim, s.dim], 'q4_k'], [`blk.${l}.ffn_norm.weight`, [s.dim], 'f32'],
      [`blk.${l}.ffn_gate.weight`, [s.dim, s.hidden], 'q4_k'], [`blk.${l}.ffn_up.weight`, [s.dim, s.hidden], 'q4_k'],
      [`blk.${l}.ffn_down.weight`, [s.hidden, s.dim], 'q4_k']);
  }
  return t;
}
const bytesOf = (dims, type) => dims.reduce((a, x) => a * x, 1) / TYPES[type].block * TYPES[type].bytes;
const pad = (n) => Math.ceil(n / ALIGN) * ALIGN;

/** Seeded bytes (xorshift32). */
function randomBytes(n, seed) {
  const out = new Uint8Array(n), w = new Uint32Array(out.buffer, 0, n >> 2);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < w.length; i++) { s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0; w[i] = s; }
  return out;
}

/** A pool of random Q4_K blocks whose scales (d, dmin: f16) keep a row's dot products near unit size. */
function q4kPool(blocks, cols) {
  const pool = randomBytes(blocks * 144, 4321);
  const dv = new DataView(pool.buffer);
  // q in [0, 15], 6-bit scales up to 63: d = dmin = 1 / (63 * 2 * sqrt(cols)) keeps weights within a few 1/sqrt(cols).
  const f = 1 / (63 * 2 * Math.sqrt(cols));
  const h = f16(f);
  for (let b = 0; b < blocks; b++) { dv.setUint16(b * 144, h, true); dv.setUint16(b * 144 + 2, h, true); }
  return pool;
}
/** A positive normal float16's bits (x in [2^-14, 65504)). */
function f16(x) {
  const e = Math.floor(Math.log2(x));
  return ((e + 15) << 10) | Math.round((x / 2 ** e - 1) * 1024);
}

/** Writes the shape's GGUF to `path`; returns its size. */
export function writeModel(path, s) {
  const meta = readMeta(readFileSync(join(vocabDir, `ggml-vocab-${s.vocab}.gguf`)));
  const set = (key, v) => meta.kv.writeUInt32LE(v, meta.u32At.get(key));
  set('llama.embedding_length', s.dim);
  set('llama.feed_forward_length', s.hidden);
  set('llama.block_count', s.layers);
  set('llama.attention.head_count', s.heads);
  set('llama.attention.head_count_kv', s.kvHeads);
  set('llama.context_length', 4096);
  set('llama.rope.dimension_count', s.dim / s.heads);
  set('general.file_type', 15);  // Q4_K_M
  const vocab = meta.kv.readUInt32LE(meta.u32At.get('llama.vocab_size'));
  const tensors = tensorsOf(s, vocab);
  const infos = [];
  let at = 0;
  for (const [name, dims, type] of tensors) {
    const nm = Buffer.from(name), b = Buffer.alloc(8 + nm.length + 4 + 8 * dims.length + 4 + 8);
    let o = b.writeBigUInt64LE(BigInt(nm.length), 0);
    o += nm.copy(b, o);
    o = b.writeUInt32LE(dims.length, o);
    for (const d of dims) o = b.writeBigUInt64LE(BigInt(d), o);
    o = b.writeUInt32LE(TYPES[type].id, o);
    b.writeBigUInt64LE(BigInt(at), o);
    infos.push(b);
    at += pad(bytesOf(dims, type));
  }
  const head = Buffer.alloc(24);
  head.write('GGUF', 0, 'latin1');
  head.writeUInt32LE(3, 4);
  head.writeBigUInt64LE(BigInt(tensors.length), 8);
  head.writeBigUInt64LE(BigInt(meta.nKv), 16);
  const header = Buffer.concat([head, meta.kv, ...infos]);
  const size = pad(header.length) + at;
  const free = statfsSync(resolve(path, '..'));
  if (free.bavail * free.bsize < size + GiB) {
    throw new Error(`${(size / GiB).toFixed(2)} GiB to write but ${(free.bavail * free.bsize / GiB).toFixed(2)} GiB free on ${resolve(path, '..')} (1 GiB kept spare)`);
  }
  if (existsSync(path) && statSync(path).size === size) return size;
  const pool = Buffer.from(q4kPool((64 << 20) / 144 | 0, s.dim).buffer);
  const fd = openSync(path, 'w');
  try {
    writeSync(fd, header);
    writeSync(fd, Buffer.alloc(pad(header.length) - header.length));
    let k = 0;
    for (const [, dims, type] of tensors) {
      let n = bytesOf(dims, type);
      if (type === 'f32') writeSync(fd, Buffer.from(new Float32Array(n / 4).fill(1).buffer));
      else if (type === 'f16') {
        const scale = 1 / Math.sqrt(dims[0]), CH = 1 << 22;
        const table = new Uint16Array(65536);  // two random bytes -> a value of +-[0.01, 1] x scale
        for (let x = 0; x < 65536; x++) table[x] = f16(((x & 255) / 255 * 0.99 + 0.01) * scale) | (x & 0x8000);
        for (let done = 0, seed = 99; done < n / 2; done += CH) {
          const r = new Uint16Array(randomBytes(Math.min(CH, n / 2 - done) * 2, seed++).buffer);
          for (let i = 0; i < r.length; i++) r[i] = table[r[i]];
          writeSync(fd, Buffer.from(r.buffer));
        }
      } else {
        // Runs of the pool from a different place per tensor: fast to write, not two tensors alike.
        let off = ((k++ * 7919) % (pool.length / 144)) * 144;
        while (n > 0) {
          const m = Math.min(n, pool.length - off);
          writeSync(fd, pool, off, m);
          n -= m;
          off = 0;
        }
      }
      writeSync(fd, Buffer.alloc(pad(bytesOf(dims, type)) - bytesOf(dims, type)));
    }
  } finally {
    closeSync(fd);
  }
  return size;
}

// ---- Node (a child process: Dawn picks its Vulkan driver when it loads) ----------------------
async function nodeChild(file, prompt, tokens) {
  const { create, globals } = await import('webgpu');
  Object.assign(globalThis, globals);
  const gpu = create([]);
  const { loadModel } = await import('../src/js/node.js');
  const t0 = performance.now();
  const m = await loadModel(file, { device: 'webgpu', weights: 'gpu', gpu, threads: 1 });  // Dawn's writeBuffer refuses the pthreads build's shared heap
  const loadS = (performance.now() - t0) / 1000;
  console.error(`[big] loaded in ${loadS.toFixed(1)} s; heap ${(m.info.memory.heapBytes / 2 ** 20).toFixed(0)} MiB, GPU weights ${(m.info.memory.gpuWeightBytes / 2 ** 30).toFixed(2)} GiB`);
  const s = m.createSession();
  const ids = m.tokenize(prompt);
  let t = performance.now();
  await s.feed(ids);
  const prefillS = (performance.now() - t) / 1000;
  console.error(`[big] prefill of ${ids.length} tokens in ${prefillS.toFixed(1)} s`);
  const out = [];
  t = performance.now();
  for (let i = 0; i < tokens; i++) {
    const l = s.logits();
    let best = 0;
    for (let j = 1; j < l.length; j++) if (l[j] > l[best]) best = j;
    if (!Number.isFinite(l[best])) throw new Error(`non-finite logits at token ${i}`);
    out.push(best);
    if (i + 1 < tokens) await s.feed([best]);
    console.error(`[big] token ${i + 1}: ${best} at ${((performance.now() - t) / 1000).toFixed(1)} s`);
  }
  const decodeS = (performance.now() - t) / 1000;
  const info = m.info;
  const r = { loadS, promptTokens: ids.length, prefillS, decodeTokS: (tokens - 1) / decodeS, ids: out, memory: info.memory,
    device: { backend: info.backend, weights: info.device.weights, adapter: info.device.adapter }, rssPeak: process.resourceUsage().maxRSS * 1024 };
  s.dispose();
  m.dispose();
  console.log(JSON.stringify(r));
}

function runNode(file, prompt, tokens) {
  const env = realGpu ? process.env : {
    ...process.env, VK_ICD_FILENAMES: ICD, LD_LIBRARY_PATH: [process.env.LD_LIBRARY_PATH, '/usr/lib/chromium'].filter(Boolean).join(':'),
  };
  const r = spawnSync(process.execPath, [here, '--child', file, '--prompt', prompt, '--tokens', String(tokens)],
    { env, encoding: 'utf8', maxBuffer: 1 << 26, stdio: ['ignore', 'pipe', 'inherit'] });  // progress on stderr as it comes
  const line = r.stdout.split('\n').find((l) => l.startsWith('{'));
  if (r.status !== 0 || !line) throw new Error(`the Node run failed (status ${r.status}; its errors are above)`);
  return JSON.parse(line);
}

// ---- headless Chromium --------------------------------------------------------------------------
async function runChromium(dir, name, prompt, tokens, cache) {
  const { serveBenchPage } = await import('./bench-server.mjs');
  const { chromiumArgs, chromiumPath } = await import('../tests/js/browser.mjs');
  const { chromium } = await import('playwright-core');
  const swiftshader = (a) => /swiftshader/.test(a);
  const browser = await chromium.launch({
    executablePath: chromiumPath, headless: true, chromiumSandbox: false, ignoreDefaultArgs: ['--headless'],
    args: realGpu ? chromiumArgs.filter((a) => !swiftshader(a)) : chromiumArgs,
  });
  const { server, base } = await serveBenchPage({ root, modelDir: dir, title: 'qkv bench-big', script: '/qkv/bench/big-page.mjs' });
  try {
    const page = await browser.newPage();
    page.on('console', (m) => { if (m.type() === 'error' || m.text().startsWith('[big]')) console.error(`[page] ${m.text()}`); });
    await page.goto(base);
    await page.waitForFunction(() => window.__ready === true);
    const run = (c) => page.evaluate((cfg) => window.runBig(cfg), { model: `/models/${name}`, prompt, tokens, cache: c });
    const r = await run(cache);
    if (cache) r.cached = await run(true);  // the second load reads OPFS
    return r;
  } finally {
    await browser.close();
    server.close();
  }
}

function print(shape, where, size, r) {
  const g = (n) => `${(n / GiB).toFixed(2)} GiB`, mb = (n) => `${(n / 1024 ** 2).toFixed(0)} MiB`;
  const mem = r.memory;
  console.log(`| ${shape} | ${where} | ${g(size)} | ${r.loadS.toFixed(1)} s${r.cached ? ` (from OPFS: ${r.cached.loadS.toFixed(1)} s)` : ''} | ` +
    `${(r.promptTokens / r.prefillS).toFixed(2)} | ${r.decodeTokS.toFixed(3)} | ${mb(mem.heapBytes)} | ${g(mem.gpuWeightBytes)} | ` +
    `${mb(mem.gpuKvCacheBytes)} | ${mb(mem.stagingBytes)} |${r.rssPeak ? ` ${g(r.rssPeak)}` : ''}`);
}

async function main() {
  if (args[0] === '--child') return nodeChild(args[1], opt('prompt', 'Once upon a time'), Number(opt('tokens', '4')));
  const shapes = opt('shapes', '3b,8b').split(','), where = opt('where', 'node,chromium').split(',');
  const tokens = Math.max(2, Number(opt('tokens', '4'))), prompt = opt('prompt', 'Once upon a time');
  for (const s of shapes) if (!SHAPES[s]) { console.error(`bench-big: unknown shape ${s} (${Object.keys(SHAPES).join(', ')})`); process.exit(2); }
  const dir = opt('dir', null) ? resolve(opt('dir')) : mkdtempSync(join(tmpdir(), 'qkv-bench-big-'));
  mkdirSync(dir, { recursive: true });
  console.log(`bench-big: ${realGpu ? 'the machine\'s GPU' : 'SwiftShader (CPU emulation: these figures say the path runs, not GPU speed)'}; ` +
    `${tokens} tokens after "${prompt}"; files in ${dir}`);
  console.log('| shape | where | file | load | prefill tok/s | decode tok/s | heap (peak) | GPU weights | GPU KV cache | staging | Node RSS peak |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|');
  try {
    for (const shape of shapes) {
      const name = `bench-${shape}-q4_k.gguf`, file = join(dir, name);
      const t = performance.now();
      const size = writeModel(file, SHAPES[shape]);
      console.error(`[bench-big] ${name}: ${(size / GiB).toFixed(2)} GiB written in ${((performance.now() - t) / 1000).toFixed(1)} s`);
      for (const w of where) {
        try {
          const r = w === 'node' ? runNode(file, prompt, tokens) : await runChromium(dir, name, prompt, tokens, args.includes('--cache'));
          print(shape, w, size, r);
          console.error(`[bench-big] ${shape} ${w}: tokens ${r.ids.join(' ')}; adapter ${JSON.stringify(r.device.adapter)}`);
        } catch (e) {
          console.log(`| ${shape} | ${w} | failed: ${String(e.message).split('\n')[0]} |`);
          console.error(e);
        }
      }
      if (!args.includes('--keep')) rmSync(file, { force: true });
    }
  } finally {
    if (!args.includes('--keep') && !opt('dir', null)) rmSync(dir, { recursive: true, force: true });
  }
}

await main();
