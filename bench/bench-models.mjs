// Random-weight models of the benchmark shapes (bench/bench-wllama.mjs, bench/bench-webgpu.mjs):
// a llama2.c checkpoint with a synthetic tokenizer, turned into GGUF of a stored type by qkv's
// own CLI (`qkv convert` for f32/f16/bf16, `qkv quantize` for the block types), cached in a folder.
import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, openSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';

// llama2.c's 110M shape, and a ~0.9B one (Llama-1B-like widths, full-head attention).
export const SHAPES = {
  '110m': { dim: 768, hidden: 2048, layers: 12, heads: 12, kvHeads: 12, vocab: 32000, seq: 1024 },
  '1b': { dim: 2048, hidden: 5632, layers: 16, heads: 32, kvHeads: 32, vocab: 32000, seq: 1024 },
};

export const LETTERS = 'abcdefghijklmnopqrstuvwxyz';

// llama2.c tokenizer.bin: <unk>, <s>, </s>, 256 byte pieces, the 26 letters, ' ', then pieces
// no text here can reach ('#' + number), up to the vocabulary size. A prompt of letters is one
// token per letter in both engines (BOS, the dummy-prefix space, then the letters).
export function writeTokenizer(path, vocab) {
  if (existsSync(path)) return;
  const parts = [];
  const i32 = (v) => { const b = Buffer.alloc(4); b.writeInt32LE(v); parts.push(b); };
  const piece = (s, score) => { const b = Buffer.from(s, 'utf8'); const h = Buffer.alloc(8); h.writeFloatLE(score, 0); h.writeInt32LE(b.length, 4); parts.push(h, b); };
  i32(16);
  piece('<unk>', 0); piece('\n<s>\n', 0); piece('\n</s>\n', 0);
  for (let b = 0; b < 256; b++) piece(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`, 0);
  for (const c of LETTERS) piece(c, -1);
  piece(' ', -1);
  for (let i = 3 + 256 + 27; i < vocab; i++) piece(`#${i}`, -1000);
  const fd = openSync(path + '.tmp', 'w');
  for (const p of parts) writeSync(fd, p);
  closeSync(fd);
  renameSync(path + '.tmp', path);
}

// llama2.c checkpoint (tied classifier, no freq_cis), uniform random weights in +-0.035, norms 1.
export function writeCheckpoint(path, s) {
  if (existsSync(path)) return;
  const kvd = (s.dim / s.heads) * s.kvHeads, L = s.layers;
  const runsOf = [
    [s.vocab * s.dim, 'r'], [L * s.dim, 1], [L * s.dim * s.dim, 'r'], [L * s.dim * kvd, 'r'], [L * s.dim * kvd, 'r'],
    [L * s.dim * s.dim, 'r'], [L * s.dim, 1], [L * s.hidden * s.dim, 'r'], [L * s.dim * s.hidden, 'r'],
    [L * s.hidden * s.dim, 'r'], [s.dim, 1],
  ];
  const fd = openSync(path + '.tmp', 'w');
  writeSync(fd, Buffer.from(new Int32Array([s.dim, s.hidden, s.layers, s.heads, s.kvHeads, s.vocab, s.seq]).buffer));
  let x = 2463534242;
  const chunk = new Float32Array(1 << 20);
  for (const [n, what] of runsOf) {
    for (let done = 0; done < n; done += chunk.length) {
      const k = Math.min(chunk.length, n - done);
      for (let i = 0; i < k; i++) {
        if (what === 1) { chunk[i] = 1; continue; }
        x ^= x << 13; x ^= x >>> 17; x ^= x << 5;
        chunk[i] = ((x >>> 0) / 4294967296 - 0.5) * 0.07;
      }
      writeSync(fd, Buffer.from(chunk.buffer, 0, k * 4));
    }
  }
  closeSync(fd);
  renameSync(path + '.tmp', path);
}

/**
 * The GGUF file of `shape` (named `name`) in `type`, written on first use into `dir` with the
 * native CLI `qkvBin`. Returns its path.
 */
export function benchModel({ dir, qkvBin, shape, name, type, log = () => {} }) {
  const bin = join(dir, `${name}.bin`), tok = join(dir, `tok${shape.vocab}.bin`), out = join(dir, `${name}-${type}.gguf`);
  if (existsSync(out)) return out;
  writeTokenizer(tok, shape.vocab);
  if (!existsSync(bin)) log(`writing ${bin} (random weights)`);
  writeCheckpoint(bin, shape);
  const plain = ['f32', 'f16', 'bf16'].includes(type);
  log(`${plain ? 'qkv convert' : 'qkv quantize'} -> ${out}`);
  const argv = plain ? ['convert', bin, '-z', tok, '-o', out + '.tmp', '--type', type]
    : ['quantize', bin, out + '.tmp', '--type', type, '-z', tok];
  const msg = execFileSync(qkvBin, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (msg) log(msg.split('\n').filter((l) => l && !l.startsWith('  ')).join('\n'));
  renameSync(out + '.tmp', out);
  return out;
}
