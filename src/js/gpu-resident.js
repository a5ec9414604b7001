// GPU-resident loads (loadModel(src, {device: 'webgpu', weights: 'gpu'})): models larger than the
// WebAssembly heap. The GGUF header (metadata, tokenizer) and the vectors (norms, biases, RoPE
// factors, f32 position/type tables) go to the heap as in any load; every matrix's bytes go from
// the source to its GPU buffers as they arrive, through one staging buffer of STAGING_BYTES,
// never whole in JS or in the heap. The heap therefore holds the header, the vectors and the
// sessions' token lists, whatever the matrices weigh.
//
//   1. open every file (a split model's parts together) and read each one's header: the engine
//      parses it (Module.ggufLayout) and says which tensors stay in the heap;
//   2. a planning model (placeholder vectors) gives each matrix's role and place in the files
//      (JsModel.gpuModel: {part, offset} instead of bytes), and refuses what the GPU cannot run
//      before anything large is read;
//   3. one pass over each file: vectors into their heap buffers, matrices into GPU buffers
//      (gpu-products.js#allocate: the same split by rows as an upload);
//   4. the engine loads the model again over the filled vectors (validating them), and
//      createGpuModel takes the streamed weights as they are.
import { QkvError, bareMessage, throwIfAborted, toQkvError } from './errors.js';
import { createGpuModel, gpuUnsupported } from './gpu-model.js';
import { createProducts } from './gpu-products.js';
import { abortable, allocHeapBuffer, closeChunks, isHfCheckpoint, modelParts, openSource, toBytes } from './source.js';
import { call } from './util.js';

/** Bytes of the staging buffer between the source and the GPU (and at most as much in flight in the driver). */
export const STAGING_BYTES = 8 * 1024 ** 2;
const FIRST_HEAD = 1 << 20;  // the header's first read; doubled until the whole header is in

/**
 * Copies byte runs into GPU buffers through one bounded staging buffer: runs gather in it, and
 * a full buffer is written (queue.writeBuffer, 4-byte aligned) and waited for before it is reused.
 */
function createStager(device, capacity) {
  const buf = new Uint8Array(capacity);
  const segs = [];  // {buffer, dst, src, len}: runs in `buf` bound for `buffer` at `dst`
  let used = 0, open = null;
  async function flush() {
    for (const s of segs) device.queue.writeBuffer(s.buffer, s.dst, buf, s.src, s.len);
    segs.length = 0;
    used = 0;
    await device.queue.onSubmittedWorkDone();  // bounds what the driver holds to one staging buffer
  }
  return {
    capacity,
    /** Appends `bytes` for `buffer` at `dst` (runs of one buffer arrive in order; `end`: its last bytes). */
    async write(buffer, dst, bytes, end) {
      let off = 0;
      while (off < bytes.length) {
        if (!open || open.buffer !== buffer || open.dst + open.len !== dst + off) {
          if (used === capacity) await flush();
          open = { buffer, dst: dst + off, src: used, len: 0 };
          segs.push(open);
        }
        const n = Math.min(bytes.length - off, capacity - used);
        buf.set(bytes.subarray(off, off + n), used);
        used += n;
        open.len += n;
        off += n;
        if (used === capacity) { await flush(); open = null; }
      }
      if (end && open && open.buffer === buffer) {
        const pad = (4 - (open.len % 4)) % 4;  // the buffer's tail, zero-padded to a word
        buf.fill(0, used, used + pad);
        used += pad;
        open.len += pad;
        open = null;
      }
    },
    flush,
  };
}

/** Where a matrix's bytes go: its GPU weight's parts, each a run of whole rows. */
function weightSink(w, stager) {
  let at = 0;  // bytes of the tensor written so far
  return async (bytes) => {
    let off = 0;
    for (const p of w.parts) {
      const start = p.firstRow * w.rowBytes, end = start + p.rows * w.rowBytes;
      if (at + off >= end || off >= bytes.length) continue;
      const n = Math.min(bytes.length - off, end - (at + off));
      await stager.write(p.buffer, at + off - start, bytes.subarray(off, off + n), at + off + n === end);
      off += n;
    }
    at += bytes.length;
  };
}

/** Reads chunks of a file until its header parses; returns the layout (Module.ggufLayout). */
async function readHeader(mod, f) {
  for (let want = FIRST_HEAD; ; want *= 2) {
    while (f.pendingBytes < want && !f.ended) {
      const r = await f.it.next();
      if (r.done) { f.ended = true; break; }
      const b = toBytes(r.value, f.what);
      f.pending.push(b);
      f.pendingBytes += b.byteLength;
    }
    const first = f.pending[0];
    if (first && first.byteLength >= 4 && String.fromCharCode(...first.subarray(0, 4)) !== 'GGUF') {
      throw new QkvError('unsupported', `weights: 'gpu' streams GGUF files, and ${f.what} is not one: load it without weights: 'gpu'`);
    }
    if (f.size !== null && f.pendingBytes > f.size) throw new QkvError('io', `${f.what} is longer than its announced size of ${f.size} bytes`);
    const head = allocHeapBuffer(mod, f.pendingBytes, `the header of ${f.what}`);
    try {
      let o = 0;
      for (const b of f.pending) { head.view().set(b, o); o += b.byteLength; }
      const size = f.ended ? f.pendingBytes : f.size ?? Number.MAX_SAFE_INTEGER;
      const layout = call(() => mod.ggufLayout(head, size));
      if (layout) return layout;
    } finally {
      head.delete();
    }
    if (f.ended) throw new QkvError('internal', `${f.what}: the header did not parse from the whole file`);
  }
}

/**
 * Loads a GGUF model with its matrices straight into GPU buffers. Returns {handle (JsModel),
 * gpu: {device, desc, model}, memory: {heapWeightBytes, stagingBytes}}. On any failure or abort
 * every GPU buffer made so far is destroyed and every heap buffer freed.
 * @param {object} mod the Embind module
 * @param {GPUDevice} device
 */
export async function loadGpuResident(mod, device, source, { threads, onProgress, signal, openPath, listDir, cache, kvType = 'f32', stagingBytes = STAGING_BYTES, gpuLayers = 'auto' }) {
  const what = 'the model';
  let files = modelParts(source);
  if (files.length === 1 && typeof files[0] === 'string' && listDir) files = (await listDir(files[0])) ?? files;
  if (isHfCheckpoint(files)) {
    throw new QkvError('unsupported', "weights: 'gpu' streams GGUF files; a Hugging Face checkpoint loads into the heap (leave weights out)");
  }
  const heap = [];  // every heap buffer made here (freed at the end: the model keeps what it needs)
  const weights = [];  // every GPU weight made here (destroyed on failure)
  const opened = [];
  let plan = null, handle = null;
  const products = createProducts(device);
  const staging = createStager(device, stagingBytes);
  try {
    // 1. Every file opened, its header read and parsed.
    for (let i = 0; i < files.length; i++) {
      const fwhat = files.length > 1 ? `${what} (file ${i + 1} of ${files.length})` : what;
      const { size, chunks } = await openSource(files[i], { what: fwhat, signal, openPath, cache });
      const f = { what: fwhat, size, chunks, it: abortable(chunks, signal, fwhat)[Symbol.asyncIterator](), pending: [], pendingBytes: 0, ended: false };
      opened.push(f);
      f.layout = await readHeader(mod, f);
      throwIfAborted(signal);
      // The header alone in the heap; the vectors' buffers made now, filled as the file streams.
      f.head = allocHeapBuffer(mod, Math.min(f.layout.dataOffset, f.pendingBytes), `the header of ${fwhat}`);
      heap.push(f.head);
      let o = 0;
      for (const b of f.pending) {
        const n = Math.min(b.byteLength, f.head.size() - o);
        if (n > 0) f.head.view().set(b.subarray(0, n), o);
        o += b.byteLength;
      }
      f.ranges = [];
      for (const t of f.layout.tensors) {
        if (!t.heap) continue;
        const buf = allocHeapBuffer(mod, t.bytes, `${t.name} of ${fwhat}`);
        heap.push(buf);
        // Planning placeholders: 1.0 passes the engine's checks of factors (replaced as the file streams).
        if (t.bytes % 4 === 0) new Float32Array(buf.view().buffer, buf.view().byteOffset, t.bytes / 4).fill(1);
        f.ranges.push({ offset: t.offset, bytes: t.bytes, buf });
      }
      f.ranges.sort((a, b) => a.offset - b.offset);
      call(() => f.head.setSparse(f.size ?? Number.MAX_SAFE_INTEGER));
      for (const r of f.ranges) call(() => f.head.addRange(r.offset, r.buf));
    }
    const link = () => {
      const first = opened[0].head;
      call(() => first.clearParts());
      for (const f of opened.slice(1)) call(() => first.addPart(f.head));
      return first;
    };

    // 2. The plan: every matrix's role and place, and whether the GPU path runs this model.
    plan = call(() => new mod.Model(link(), threads));
    const desc = call(() => plan.gpuModel());
    plan.delete();
    plan = null;
    const why = gpuUnsupported(desc);
    if (why) throw new QkvError('unsupported', `weights: 'gpu': this model cannot run on WebGPU (${why}); load it without weights: 'gpu'`);
    // Expert stacks are uploaded whole experts per buffer (gpu-moe.js), not by the row split streamed here.
    if (desc.experts > 0) throw new QkvError('unsupported', "weights: 'gpu' does not stream mixture-of-experts models yet; load it without weights: 'gpu'");
    // Partial offload: the first gpuLayers layers' matrices to GPU buffers ('auto': layer by
    // layer while the device takes them), the rest and the classifier into the heap for WASM.
    const L = desc.layers, auto = gpuLayers === 'auto';
    let n = auto ? L : gpuLayers, stop = null;
    if (n > L) throw new QkvError('bad_argument', `gpuLayers is ${n}, but the model has ${L} layers`);
    const matrices = desc.tensors.filter((t) => t.part !== undefined);
    const byLayer = (l) => matrices.filter((t) => t.layer === l);
    const sinks = opened.map(() => []);
    const toGpu = async (group) => {
      device.pushErrorScope('out-of-memory');
      const made = [];
      let thrown = null;
      try {
        for (const t of group) made.push(products.allocate({ type: t.type, rows: t.rows, cols: t.cols, label: `${t.layer}:${t.role}` }));
      } catch (e) { thrown = e; }
      const oom = await device.popErrorScope();
      if (!thrown && !oom) return { made };
      for (const w of made) w.destroy();
      return { err: thrown ? toQkvError(thrown) : new QkvError('out_of_memory', `WebGPU: ${oom.message}`) };
    };
    const placed = [];  // [tensor, weight]
    // The model-wide matrices first (the embeddings: every load gathers them on the GPU).
    const tied = !!desc.tiedClassifier;
    const head = matrices.filter((t) => t.layer < 0 && t.role !== 'classifier');
    const first = await toGpu(head);
    if (first.err) throw first.err;
    head.forEach((t, i) => placed.push([t, first.made[i]]));
    for (let l = 0; l < n; l++) {
      const group = byLayer(l), r = await toGpu(group);
      if (r.err && !auto) throw r.err;
      if (r.err) { n = l; stop = bareMessage(r.err); break; }
      group.forEach((t, i) => placed.push([t, r.made[i]]));
    }
    if (n === 0 && L > 0) {
      throw new QkvError('out_of_memory', `weights: 'gpu': not one layer fits this GPU (${stop}); load it without weights: 'gpu'`);
    }
    // The classifier: on the GPU with every layer, else in WASM (tied: the embeddings, which then
    // stream to both the GPU and the heap).
    const cls = matrices.filter((t) => t.role === 'classifier');
    if (n === L) {
      const r = await toGpu(cls);
      if (r.err && !auto) throw r.err;
      if (r.err) {
        n = L - 1; stop = `the classifier: ${bareMessage(r.err)}`;
        for (const [t, w] of placed.splice(0)) if (t.layer === n) w.destroy(); else placed.push([t, w]);
      } else cls.forEach((t, i) => placed.push([t, r.made[i]]));
    }
    const cpu = n < L ? matrices.filter((t) => t.layer >= n || t.role === 'classifier' || (tied && t.role === 'tok_embed')) : [];
    for (const [t, w] of placed) {
      weights.push(w);
      t.weight = w;
      sinks[t.part].push({ offset: t.offset, bytes: t.byteLength, write: weightSink(w, staging) });
    }
    const cpuBytes = cpu.reduce((a, t) => a + t.byteLength, 0);
    for (const t of cpu) {
      const f = opened[t.part];
      let buf;
      try {
        buf = allocHeapBuffer(mod, t.byteLength, `layer ${t.layer}'s ${t.role}`);
      } catch (e) {
        throw new QkvError('out_of_memory', `weights: 'gpu': layers ${n}..${L - 1} ${stop ? `do not fit this GPU (${stop})` : `run in WASM (gpuLayers: ${n})`}, ` +
          `and the WebAssembly heap cannot hold their ${(cpuBytes / 2 ** 20).toFixed(1)} MiB either: ${bareMessage(toQkvError(e))}`, { cause: e });
      }
      heap.push(buf);
      f.ranges.push({ offset: t.offset, bytes: t.byteLength, buf });
      call(() => f.head.addRange(t.offset, buf));
    }
    for (const s of sinks) s.sort((a, b) => a.offset - b.offset);

    // 3. One pass over each file.
    const total = opened.every((f) => f.size !== null) ? opened.reduce((n, f) => n + f.size, 0) : null;
    let loaded = 0;
    onProgress?.({ loaded, total });
    for (let i = 0; i < opened.length; i++) {
      const f = opened[i], dests = [...f.ranges.map((r) => ({ ...r, heap: true })), ...sinks[i]].sort((a, b) => a.offset - b.offset);
      let pos = 0, k = 0;
      const route = async (b) => {
        const end = pos + b.byteLength;
        if (f.size !== null && end > f.size) throw new QkvError('io', `${f.what} is longer than its announced size of ${f.size} bytes`);
        while (k < dests.length && dests[k].offset + dests[k].bytes <= pos) k++;
        for (let j = k; j < dests.length && dests[j].offset < end; j++) {
          const d = dests[j];
          const from = Math.max(pos, d.offset), to = Math.min(end, d.offset + d.bytes);
          if (from >= to) continue;
          const piece = b.subarray(from - pos, to - pos);
          if (d.heap) d.buf.view().set(piece, from - d.offset);  // a fresh view: the heap may have grown
          else await d.write(piece);
        }
        pos = end;
        loaded += b.byteLength;
        onProgress?.({ loaded, total });
      };
      for (const b of f.pending) await route(b);
      f.pending = null;
      while (!f.ended) {
        throwIfAborted(signal);
        const r = await f.it.next();
        if (r.done) break;
        await route(toBytes(r.value, f.what));
      }
      f.ended = true;
      if (f.size !== null && pos !== f.size) throw new QkvError('io', `${f.what} ended after ${pos} of ${f.size} bytes`);
      if (f.size === null) { f.size = pos; call(() => f.head.setSparse(pos)); }  // the engine checks every tensor against it
    }
    await staging.flush();
    throwIfAborted(signal);

    // 4. The model over the real vectors; the GPU model over the streamed weights.
    handle = call(() => new mod.Model(link(), threads));
    const real = call(() => handle.gpuModel());
    const byKey = new Map(desc.tensors.filter((t) => t.weight).map((t) => [`${t.layer}:${t.role}`, t]));
    for (const t of real.tensors) {
      const p = byKey.get(`${t.layer}:${t.role}`);
      if (p) t.weight = p.weight;
    }
    const model = await createGpuModel(device, real, { kvType, layers: n });
    delete real.tensors;  // heap views: stale once it grows
    let heapWeightBytes = 0;
    for (const f of opened) heapWeightBytes += f.ranges.reduce((n, r) => n + r.bytes, 0);
    return { handle, gpu: { device, desc: real, model }, memory: { heapWeightBytes, stagingBytes }, stop };
  } catch (e) {
    for (const w of weights) w.destroy();
    products.dispose();
    plan?.delete();
    handle?.delete();
    throw signal?.aborted ? new QkvError('aborted', `loading ${what} was aborted`) : toQkvError(e);
  } finally {
    for (const b of heap) b.delete();
    for (const f of opened) if (!f.ended) closeChunks(f.chunks);
  }
}
