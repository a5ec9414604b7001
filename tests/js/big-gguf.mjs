// A generated Llama-shaped GGUF with seeded random f32 weights, for the GPU-resident load tests
// (tests/js/webgpu_big.test.mjs): the metadata and 32000-piece vocabulary of the shared
// llama-spm vocabulary file (Hugging Face's ids), its shape keys patched in place, and the
// tensors written here from the GGUF layout. The token embedding and the classifier (vocab x dim
// each) make most of the bytes; the embedding is only gathered and the layers are small, which
// keeps each decoded token cheap on SwiftShader.
import { closeSync, existsSync, openSync, readFileSync, writeSync } from 'node:fs';

const ALIGN = 32;

/** Reads the metadata section of a GGUF without tensors: {kv: Buffer, nKv, u32At: Map(key -> byte offset of its u32 value)}. */
export function readMeta(bytes) {
  let off = 8;
  const u32 = () => { const v = bytes.readUInt32LE(off); off += 4; return v; };
  const u64 = () => { const v = Number(bytes.readBigUInt64LE(off)); off += 8; return v; };
  const str = () => { const n = u64(); const s = bytes.toString('utf8', off, off + n); off += n; return s; };
  const SCALAR = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  const nTensors = u64(), nKv = u64();
  if (nTensors !== 0) throw new Error('expected a vocabulary-only GGUF');
  const start = off, u32At = new Map();
  for (let i = 0; i < nKv; i++) {
    const key = str(), t = u32();
    if (t === 4) u32At.set(key, off - start);
    if (t === 8) str();
    else if (t === 9) {
      const at = u32(), n = u64();
      if (at === 8) for (let j = 0; j < n; j++) str();
      else off += n * SCALAR[at];
    } else off += SCALAR[t];
  }
  return { kv: Buffer.from(bytes.subarray(start, off)), nKv, u32At };
}

/** Seeded uniform values in [-scale, scale) (xorshift32). */
function randomF32(n, seed, scale) {
  const out = new Float32Array(n);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    out[i] = (s / 4294967296 * 2 - 1) * scale;
  }
  return out;
}

/**
 * Writes the model to `path` (once: an existing file is kept) and returns its weights' bytes.
 * shape: {dim, hidden, layers, heads, kvHeads, context}.
 */
export function writeBigGguf(path, vocabFile, shape) {
  const { dim, hidden, layers, heads, kvHeads, context } = shape;
  const meta = readMeta(readFileSync(vocabFile));
  const set = (key, v) => {
    if (!meta.u32At.has(key)) throw new Error(`${vocabFile} has no u32 ${key}`);
    meta.kv.writeUInt32LE(v, meta.u32At.get(key));
  };
  set('llama.embedding_length', dim);
  set('llama.feed_forward_length', hidden);
  set('llama.block_count', layers);
  set('llama.attention.head_count', heads);
  set('llama.attention.head_count_kv', kvHeads);
  set('llama.context_length', context);
  set('llama.rope.dimension_count', dim / heads);
  set('general.file_type', 0);
  const vocab = meta.kv.readUInt32LE(meta.u32At.get('llama.vocab_size'));
  const kvDim = kvHeads * (dim / heads);
  // [name, dims (fastest first), values' scale]
  const tensors = [['token_embd.weight', [dim, vocab], 1], ['output_norm.weight', [dim], 0], ['output.weight', [dim, vocab], 1]];
  for (let l = 0; l < layers; l++) {
    tensors.push([`blk.${l}.attn_norm.weight`, [dim], 0], [`blk.${l}.attn_q.weight`, [dim, dim], 1],
      [`blk.${l}.attn_k.weight`, [dim, kvDim], 1], [`blk.${l}.attn_v.weight`, [dim, kvDim], 1],
      [`blk.${l}.attn_output.weight`, [dim, dim], 1], [`blk.${l}.ffn_norm.weight`, [dim], 0],
      [`blk.${l}.ffn_gate.weight`, [dim, hidden], 1], [`blk.${l}.ffn_up.weight`, [dim, hidden], 1],
      [`blk.${l}.ffn_down.weight`, [hidden, dim], 1]);
  }
  const infos = [];
  let at = 0;
  for (const [name, dims] of tensors) {
    const nm = Buffer.from(name), b = Buffer.alloc(8 + nm.length + 4 + 8 * dims.length + 4 + 8);
    let o = b.writeBigUInt64LE(BigInt(nm.length), 0);
    o += nm.copy(b, o);
    o = b.writeUInt32LE(dims.length, o);
    for (const d of dims) o = b.writeBigUInt64LE(BigInt(d), o);
    o = b.writeUInt32LE(0, o);  // F32
    b.writeBigUInt64LE(BigInt(at), o);
    infos.push(b);
    at += Math.ceil(dims.reduce((a, x) => a * x, 4) / ALIGN) * ALIGN;
  }
  const head = Buffer.alloc(24);
  head.write('GGUF', 0, 'latin1');
  head.writeUInt32LE(3, 4);
  head.writeBigUInt64LE(BigInt(tensors.length), 8);
  head.writeBigUInt64LE(BigInt(meta.nKv), 16);
  const header = Buffer.concat([head, meta.kv, ...infos]);
  if (!existsSync(path)) {
    const fd = openSync(path, 'w');
    try {
      writeSync(fd, header);
      writeSync(fd, Buffer.alloc(Math.ceil(header.length / ALIGN) * ALIGN - header.length));
      tensors.forEach(([, dims, scale], i) => {
        const n = dims.reduce((a, x) => a * x, 1);
        // Norms are 1; a matrix of `cols` inputs draws from +-1/sqrt(cols), the embedding from +-1.
        const values = scale === 0 ? new Float32Array(n).fill(1) : randomF32(n, 1234 + i, i === 0 ? 1 : 1 / Math.sqrt(dims[0]));
        const bytes = Buffer.from(values.buffer);
        writeSync(fd, bytes);
        writeSync(fd, Buffer.alloc(Math.ceil(bytes.length / ALIGN) * ALIGN - bytes.length));
      });
    } finally {
      closeSync(fd);
    }
  }
  return at;
}
