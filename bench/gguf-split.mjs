// Writes a GGUF file as llama.cpp's split files (what its gguf-split tool produces, written
// here from the format): NAME-00001-of-0000N.gguf ..., each at most about `maxBytes` of tensor
// data. The first carries all of the original metadata, every one carries split.no,
// split.count and split.tensors.count, and each lists only its own tensors. bench-wllama.mjs
// gives wllama split files for models it cannot take as one buffer (its documented advice is
// files of at most 512 MB); qkv reads the same weights from the single file.
import { closeSync, existsSync, openSync, readSync, renameSync, statSync, writeSync } from 'node:fs';

const GGUF_MAGIC = 0x46554747;

/** Returns the shard paths (cached: rewritten only when missing or older than `path`). */
export function splitGguf(path, maxBytes = 512 * 1024 * 1024) {
  const fd = openSync(path, 'r');
  try {
    const size = statSync(path).size;
    const headLen = Math.min(size, 64 * 1024 * 1024);
    const head = Buffer.alloc(headLen);
    readSync(fd, head, 0, headLen, 0);
    let off = 0;
    const need = (n) => { if (off + n > headLen) throw new Error(`${path}: GGUF header longer than ${headLen} bytes or truncated`); };
    const u32 = () => { need(4); const v = head.readUInt32LE(off); off += 4; return v; };
    const u64 = () => { need(8); const v = Number(head.readBigUInt64LE(off)); off += 8; return v; };
    const str = () => { const n = u64(); need(n); const s = head.toString('utf8', off, off + n); off += n; return s; };
    const SCALAR = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
    const skipValue = (t) => {
      if (t === 8) { str(); return; }
      if (t === 9) {
        const at = u32(), n = u64();
        if (at === 8) for (let i = 0; i < n; i++) str();
        else { if (!(at in SCALAR)) throw new Error(`${path}: bad array type ${at}`); need(n * SCALAR[at]); off += n * SCALAR[at]; }
        return;
      }
      if (!(t in SCALAR)) throw new Error(`${path}: bad metadata type ${t}`);
      need(SCALAR[t]);
      off += SCALAR[t];
    };
    if (u32() !== GGUF_MAGIC) throw new Error(`${path}: not a GGUF file`);
    const version = u32();
    if (version < 2) throw new Error(`${path}: GGUF version ${version} is not supported`);
    const nTensors = u64(), nKv = u64();
    const kvStart = off;
    let align = 32;
    for (let i = 0; i < nKv; i++) {
      const key = str(), t = u32();
      if (key === 'general.alignment' && t === 4) { align = head.readUInt32LE(off); }
      skipValue(t);
    }
    const kvBytes = head.subarray(kvStart, off);
    const tensors = [];
    for (let i = 0; i < nTensors; i++) {
      const name = str(), nd = u32(), dims = [];
      for (let d = 0; d < nd; d++) dims.push(u64());
      tensors.push({ name, dims, type: u32(), offset: u64() });
    }
    const dataStart = Math.ceil(off / align) * align, dataLen = size - dataStart;
    const byOffset = [...tensors].sort((a, b) => a.offset - b.offset);
    byOffset.forEach((t, i) => { t.size = (i + 1 < byOffset.length ? byOffset[i + 1].offset : dataLen) - t.offset; });

    // Tensors in file order, into shards of at most maxBytes each (at least one tensor each).
    const shards = [[]];
    let used = 0;
    for (const t of tensors) {
      if (used > 0 && used + t.size > maxBytes) { shards.push([]); used = 0; }
      shards[shards.length - 1].push(t);
      used += Math.ceil(t.size / align) * align;
    }
    const n = shards.length, base = path.replace(/\.gguf$/, '');
    const pad5 = (k) => String(k).padStart(5, '0');
    const names = shards.map((_, k) => `${base}-${pad5(k + 1)}-of-${pad5(n)}.gguf`);
    const mtime = statSync(path).mtimeMs;
    if (names.every((p) => existsSync(p) && statSync(p).mtimeMs >= mtime)) return names;

    const kv = (key, type, writeValue) => {
      const k = Buffer.from(key, 'utf8'), b = Buffer.alloc(8 + k.length + 4 + 4);
      b.writeBigUInt64LE(BigInt(k.length), 0);
      k.copy(b, 8);
      b.writeUInt32LE(type, 8 + k.length);
      const w = writeValue(b, 12 + k.length);
      return b.subarray(0, w);
    };
    shards.forEach((list, k) => {
      const parts = [];
      const hdr = Buffer.alloc(24);
      hdr.writeUInt32LE(GGUF_MAGIC, 0);
      hdr.writeUInt32LE(3, 4);
      hdr.writeBigUInt64LE(BigInt(list.length), 8);
      const extra = [
        kv('split.no', 2, (b, o) => b.writeUInt16LE(k, o)),
        kv('split.count', 2, (b, o) => b.writeUInt16LE(n, o)),
        kv('split.tensors.count', 5, (b, o) => b.writeInt32LE(nTensors, o)),
      ];
      if (k > 0 && align !== 32) extra.push(kv('general.alignment', 4, (b, o) => b.writeUInt32LE(align, o)));
      hdr.writeBigUInt64LE(BigInt((k === 0 ? nKv : 0) + extra.length), 16);
      parts.push(hdr);
      if (k === 0) parts.push(kvBytes);
      parts.push(...extra);
      let rel = 0;
      for (const t of list) {
        const nm = Buffer.from(t.name, 'utf8'), b = Buffer.alloc(8 + nm.length + 4 + 8 * t.dims.length + 4 + 8);
        let o = 0;
        b.writeBigUInt64LE(BigInt(nm.length), o); o += 8;
        nm.copy(b, o); o += nm.length;
        b.writeUInt32LE(t.dims.length, o); o += 4;
        for (const d of t.dims) { b.writeBigUInt64LE(BigInt(d), o); o += 8; }
        b.writeUInt32LE(t.type, o); o += 4;
        b.writeBigUInt64LE(BigInt(rel), o);
        parts.push(b);
        rel += Math.ceil(t.size / align) * align;
      }
      const meta = Buffer.concat(parts);
      const out = openSync(names[k] + '.tmp', 'w');
      try {
        writeSync(out, meta);
        writeSync(out, Buffer.alloc(Math.ceil(meta.length / align) * align - meta.length));
        const chunk = Buffer.alloc(16 * 1024 * 1024);
        for (const t of list) {
          for (let done = 0; done < t.size;) {
            const len = Math.min(chunk.length, t.size - done);
            readSync(fd, chunk, 0, len, dataStart + t.offset + done);
            writeSync(out, chunk, 0, len);
            done += len;
          }
          const padded = Math.ceil(t.size / align) * align;
          if (padded > t.size) writeSync(out, Buffer.alloc(padded - t.size));
        }
      } finally {
        closeSync(out);
      }
      renameSync(names[k] + '.tmp', names[k]);
    });
    return names;
  } finally {
    closeSync(fd);
  }
}
