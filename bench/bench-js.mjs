// JS-API benchmark (not a test): decode tokens/s through loadModel()/generate() with 1 thread
// (single-thread build) and N threads (pthreads build) on a random-weight llama2.c model of the
// 110M shape, the JS overhead per generated token, and the size of each .wasm build.
// Usage: node bench/bench-js.mjs [--quick] [--tokens N]
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { loadModel } from '../src/js/node.js';
import { distDir, hardwareThreads } from '../src/js/wasm-node.mjs';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const nTok = Number(args[args.indexOf('--tokens') + 1]) || (quick ? 32 : 64);
const shape = quick
  ? { dim: 288, hidden: 768, layers: 6, heads: 6, kvHeads: 6, vocab: 32000, seq: 256, name: '15M shape' }
  : { dim: 768, hidden: 2048, layers: 12, heads: 12, kvHeads: 12, vocab: 32000, seq: 1024, name: '110M shape' };

/** A llama2.c legacy checkpoint with N(0, 0.02)-ish random weights (norm weights 1). */
function makeCheckpoint(s) {
  const kv = (s.dim / s.heads) * s.kvHeads, L = s.layers, d = s.dim, h = s.hidden;
  const sizes = [['emb', s.vocab * d], ['rms_att', L * d, 1], ['wq', L * d * d], ['wk', L * d * kv], ['wv', L * d * kv],
    ['wo', L * d * d], ['rms_ffn', L * d, 1], ['w1', L * h * d], ['w2', L * d * h], ['w3', L * h * d], ['rms_final', d, 1]];
  const total = sizes.reduce((a, x) => a + x[1], 0);
  const bytes = new Uint8Array(28 + 4 * total);
  new Int32Array(bytes.buffer, 0, 7).set([d, h, L, s.heads, s.kvHeads, s.vocab, s.seq]);
  const f = new Float32Array(bytes.buffer, 28, total);
  let off = 0, x = 0x9e3779b9 | 0;
  for (const [, n, one] of sizes) {
    if (one) f.fill(1, off, off + n);
    else for (let i = off; i < off + n; i++) { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; f[i] = (x / 2147483648) * 0.035; }
    off += n;
  }
  return bytes;
}

/** A tokenizer.bin for `vocab` pieces: <unk>, <s>, </s>, 256 byte pieces, then letters. */
function makeTokenizer(vocab) {
  const enc = new TextEncoder(), parts = [];
  const head = new Int32Array([16]);
  parts.push(new Uint8Array(head.buffer));
  for (let i = 0; i < vocab; i++) {
    let p = i === 0 ? '<unk>' : i === 1 ? '<s>' : i === 2 ? '</s>' : i < 259 ? `<0x${(i - 3).toString(16).toUpperCase().padStart(2, '0')}>` : `t${i}`;
    const b = enc.encode(p), rec = new Uint8Array(8 + b.length), dv = new DataView(rec.buffer);
    dv.setFloat32(0, -i, true); dv.setInt32(4, b.length, true); rec.set(b, 8);
    parts.push(rec);
  }
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0; for (const p of parts) { out.set(p, o); o += p.length; }
  return out;
}

const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];

console.log(`qkv JS benchmark, node ${process.version}, ${hardwareThreads()} hardware threads`);
for (const f of ['qkv.wasm', 'qkv-mt.wasm']) {
  try { console.log(`  ${f.padEnd(12)} ${(statSync(join(distDir, f)).size / 1024).toFixed(0)} KiB`); } catch { console.log(`  ${f} missing`); }
}
const model = makeCheckpoint(shape), tok = makeTokenizer(shape.vocab);
console.log(`model: random llama2.c ${shape.name}, ${(model.length / 2 ** 20).toFixed(1)} MiB; ${nTok} decode tokens, greedy\n`);
const results = {};
for (const threads of [1, hardwareThreads()]) {
  const m = await loadModel(model, { tokenizer: tok, threads });
  const s = m.createSession();
  const prompt = 't300 t301 t302 t303';
  // Engine only: the raw Embind calls generate() makes, with no iterator, decoding or checks.
  const runs = [], api = [];
  for (let r = 0; r < 3; r++) {
    s.reset();
    const ids = m.tokenize(prompt);
    s.prefill(ids);
    const h = s._h, sampler = new m._mod.Sampler(shape.vocab, { temperature: 0 });
    let t0 = performance.now();
    for (let i = 0; i < nTok; i++) h.feedOne(h.sample(sampler));
    runs.push((performance.now() - t0) / nTok);
    sampler.delete();
    s.reset();
    let n = 0;
    t0 = performance.now();
    for await (const t of s.generate(prompt, { temperature: 0, maxTokens: nTok, stopTokens: [] })) n += t.token >= 0 ? 1 : 0;
    api.push((performance.now() - t0 - s.lastGeneration.prefillMs) / n);
  }
  const eng = median(runs), full = median(api);
  results[threads] = eng;
  console.log(`threads ${threads} (${m.info.threading.mode}): decode ${(1000 / full).toFixed(1)} tok/s through generate(), ` +
    `${(1000 / eng).toFixed(1)} tok/s engine only; JS overhead ${(((full - eng) / eng) * 100).toFixed(1)}% of engine time per token`);
  m.dispose();
}
const ts = Object.keys(results).map(Number);
if (ts.length > 1) console.log(`\nspeed-up ${ts[1]} threads vs 1: ${(results[1] / results[ts[1]]).toFixed(2)}x`);
process.exit(0);
