// Reading a model from any source straight into a WASM-heap buffer (one copy), with progress,
// cancellation and early out-of-memory errors.
import { QkvError, throwIfAborted, toQkvError } from './errors.js';
import { openCachedUrl } from './model-cache.js';

/** wasm32 can address 4 GiB; leave room for the engine's own allocations. */
export const MAX_HEAP_BYTES = 4 * 1024 ** 3;
const HEADROOM = 64 * 1024 ** 2;

function mib(n) { return `${(n / 1024 ** 2).toFixed(1)} MiB`; }

/** Allocates a heap buffer of `size` bytes, failing early and precisely when it cannot fit. */
export function allocHeapBuffer(mod, size, what) {
  const used = mod.HEAPU8 ? mod.HEAPU8.byteLength : 0;
  if (size + used + HEADROOM > MAX_HEAP_BYTES) {
    throw new QkvError('out_of_memory', `${what} is ${mib(size)} but the WebAssembly heap (wasm32) can hold at most ` +
      `${mib(MAX_HEAP_BYTES)} and ${mib(used)} are already in use`);
  }
  try {
    return new mod.Buffer(size);
  } catch (e) {
    throw toQkvError(e);
  }
}

function isAsyncIterable(x) { return x != null && typeof x[Symbol.asyncIterator] === 'function'; }
function isIterable(x) { return x != null && typeof x !== 'string' && typeof x[Symbol.iterator] === 'function'; }

/**
 * Opens a source: {size (null when unknown), chunks: AsyncIterable|Iterable of byte chunks}.
 * `openPath(path, signal)` handles strings that are not URLs (Node only) and returns the same;
 * `cache` (a store of model-cache.js, or null) keeps http(s) downloads.
 */
export async function openSource(source, { what, signal, openPath, cache = null }) {
  throwIfAborted(signal);
  let size = null;
  let chunks;
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    const bytes = source instanceof ArrayBuffer ? new Uint8Array(source)
      : new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
    size = bytes.byteLength;
    chunks = [bytes];
  } else if (typeof Blob !== 'undefined' && source instanceof Blob) {
    size = source.size;
    chunks = source.stream();
  } else if (source instanceof URL || (typeof source === 'string' && /^(https?|blob|data|file):/i.test(source))) {
    const url = String(source);
    if (url.startsWith('file:') && openPath) {
      ({ size, chunks } = await openPath(new URL(url), signal));
    } else if (cache && /^https?:/i.test(url)) {
      ({ size, chunks } = await openCachedUrl(url, cache, { what, signal }));
    } else {
      let res;
      try {
        res = await fetch(url, { signal });
      } catch (e) {
        if (signal?.aborted) throw new QkvError('aborted', `loading ${what} was aborted`);
        throw new QkvError('io', `cannot fetch ${what} from ${url}: ${e.message}`, { cause: e });
      }
      if (!res.ok) throw new QkvError('io', `cannot fetch ${what} from ${url}: HTTP ${res.status} ${res.statusText}`);
      const len = res.headers.get('content-length');
      // A compressed response's length is not the body's: only trust it when not encoded.
      if (len !== null && !res.headers.get('content-encoding')) size = Number(len);
      chunks = res.body;
    }
  } else if (typeof source === 'string') {
    if (!openPath) {
      // In a browser every string is a URL, relative ones resolved against the page.
      const base = globalThis.location?.href;
      let url;
      try {
        url = new URL(source, base);
      } catch {
        throw new QkvError('bad_argument', `${what}: '${source}' is not a valid URL`);
      }
      return openSource(url, { what, signal, openPath, cache });
    }
    ({ size, chunks } = await openPath(source, signal));
  } else if (isAsyncIterable(source) || isIterable(source)) {
    chunks = source;
  } else {
    throw new QkvError('bad_argument', `cannot load ${what} from ${source === null ? 'null' : typeof source}: ` +
      'pass a URL, a path (Node), a Blob/File, an ArrayBuffer/Uint8Array, or an (async) iterable of Uint8Array chunks');
  }
  if (chunks && typeof chunks.getReader === 'function') chunks = readerIterable(chunks);
  return { size, chunks };
}

/** Copies a source (see openSource) into a new heap buffer. */
export async function readSource(mod, source, { what, onProgress, signal, openPath, cache }) {
  const { size, chunks } = await openSource(source, { what, signal, openPath, cache });
  if (size !== null) {
    try {
      return await fill(mod, size, chunks, { what, onProgress, signal });
    } catch (e) {
      closeChunks(chunks);  // e.g. refused before the first read: a file stream left open would report its errors to no one
      throw e;
    }
  }
  // Unknown length: gather, then copy once into the heap (the chunks are dropped right after).
  const parts = [];
  let loaded = 0;
  for await (const c of abortable(chunks, signal, what)) {
    throwIfAborted(signal);
    const b = toBytes(c, what);
    parts.push(b);
    loaded += b.byteLength;
    onProgress?.({ loaded, total: null });
  }
  return fill(mod, loaded, parts, { what, onProgress: null, signal });
}

/** Closes a source's chunks that were not read to their end (a Node stream, or an iterator). */
export function closeChunks(chunks) {
  try {
    if (typeof chunks?.destroy === 'function') {
      chunks.on?.('error', () => {});  // a Node stream still opening reports its errors after this
      chunks.destroy();
    }
    else Promise.resolve(chunks?.return?.()).catch(() => {});
  } catch { /* already closed */ }
}

// Reads a ReadableStream to its end. Only an early exit (abort, error) cancels it: releasing
// the lock of a finished fetch body makes Chromium report the request as aborted.
export async function* readerIterable(stream) {
  const reader = stream.getReader();
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) { finished = true; return; }
      yield value;
    }
  } finally {
    if (!finished) reader.cancel().catch(() => {});
  }
}

/**
 * Iterates `chunks` but rejects with 'aborted' as soon as the signal fires, even while the
 * source is stalled waiting for its next chunk; the source is then closed.
 */
export async function* abortable(chunks, signal, what) {
  if (!signal) { yield* chunks; return; }
  const it = chunks[Symbol.asyncIterator] ? chunks[Symbol.asyncIterator]() : chunks[Symbol.iterator]();
  let onAbort;
  const aborted = new Promise((_, reject) => {
    onAbort = () => reject(new QkvError('aborted', `loading ${what} was aborted`));
    signal.addEventListener('abort', onAbort, { once: true });
  });
  aborted.catch(() => {});
  let finished = false;
  try {
    for (;;) {
      throwIfAborted(signal);
      const r = await Promise.race([it.next(), aborted]);
      if (r.done) { finished = true; return; }
      yield r.value;
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    if (!finished) Promise.resolve(it.return?.()).catch(() => {});
  }
}

export function toBytes(c, what) {
  if (c instanceof Uint8Array) return c;
  if (c instanceof ArrayBuffer) return new Uint8Array(c);
  if (ArrayBuffer.isView(c)) return new Uint8Array(c.buffer, c.byteOffset, c.byteLength);
  throw new QkvError('bad_argument', `${what}: chunks must be Uint8Array or ArrayBuffer, got ${typeof c}`);
}

async function fill(mod, size, chunks, { what, onProgress, signal }) {
  if (!Number.isSafeInteger(size) || size < 0) throw new QkvError('bad_argument', `${what}: invalid size ${size}`);
  const buf = allocHeapBuffer(mod, size, what);
  let loaded = 0;
  try {
    onProgress?.({ loaded: 0, total: size });
    for await (const c of abortable(chunks, signal, what)) {
      throwIfAborted(signal);
      const b = toBytes(c, what);
      if (loaded + b.byteLength > size) {
        throw new QkvError('io', `${what} is longer than its announced size of ${size} bytes`);
      }
      buf.view().set(b, loaded);  // a fresh view each time: the heap may have grown
      loaded += b.byteLength;
      onProgress?.({ loaded, total: size });
    }
    throwIfAborted(signal);
    if (loaded !== size) throw new QkvError('io', `${what} ended after ${loaded} of ${size} bytes`);
    return buf;
  } catch (e) {
    buf.delete();
    if (signal?.aborted) throw new QkvError('aborted', `loading ${what} was aborted`);
    throw toQkvError(e);
  }
}

// llama.cpp's split files: NAME-00001-of-0000N.gguf, NAME-00002-of-0000N.gguf, ...
const SPLIT_NAME = /-(\d{5})-of-(\d{5})\.gguf$/;

/** Whether x can be one file of a split model in an array of them (a path, URL or Blob). */
export function isPartSource(x) {
  return typeof x === 'string' || x instanceof URL || (typeof Blob !== 'undefined' && x instanceof Blob);
}

/**
 * The files of a model source, in order: an array of paths, URLs or Blobs as given (the files
 * of a split GGUF model); a path or URL naming the first file of a split model
 * (NAME-00001-of-0000N.gguf) with its N - 1 siblings' names; else just the source. (An array of
 * byte chunks stays one source: pass split files given as bytes as Blobs.)
 */
export function modelParts(source) {
  if (Array.isArray(source) && source.length > 0 && source.every(isPartSource)) return source;
  if (Array.isArray(source) && source.length === 0) throw new QkvError('bad_argument', 'the model: an empty array of files');
  const name = typeof source === 'string' ? source : source instanceof URL ? source.href : null;
  const m = name === null ? null : SPLIT_NAME.exec(name);
  if (!m || Number(m[2]) <= 1) return [source];
  const no = Number(m[1]), count = Number(m[2]);
  const part = (k) => name.slice(0, m.index) + `-${String(k).padStart(5, '0')}-of-${m[2]}.gguf`;
  if (no !== 1) {
    throw new QkvError('bad_argument', `${name} is part ${no} of ${count} of a split model: pass the first, ${part(1)}`);
  }
  return Array.from({ length: count }, (_, i) => (source instanceof URL ? new URL(part(i + 1)) : part(i + 1)));
}

/**
 * Reads each file with `readOne(file)` (a heap buffer) and attaches the others to the first
 * (Buffer.addPart) for the engine to read as one split model; returns the first.
 */
export async function readParts(files, readOne) {
  let first = null;
  try {
    for (const f of files) {
      const buf = await readOne(f);
      if (!first) { first = buf; continue; }
      try {
        first.addPart(buf);
      } finally {
        buf.delete();
      }
    }
    return first;
  } catch (e) {
    first?.delete();
    throw e;
  }
}

// The files of a Hugging Face checkpoint, by name (a path's, URL's or File's last part; the
// pooling config keeps its folder).
const HF_FILE = /(^|\/)(config\.json|tokenizer\.json|tokenizer_config\.json|chat_template\.jinja|[^/]+\.safetensors|model\.safetensors\.index\.json)$/;

/** The name a part is known by: a path's or URL's last segment ("1_Pooling/config.json" keeps its folder), a File's name; null for bytes. */
export function partName(x) {
  let path = null;
  if (typeof x === 'string') path = x;
  else if (x instanceof URL) path = x.pathname;
  else if (typeof Blob !== 'undefined' && x instanceof Blob) path = x.webkitRelativePath || x.name || null;
  if (path === null) return null;
  const segs = path.split(/[\\/]/).filter(Boolean);
  const last = segs.pop() ?? '';
  return segs.length && segs[segs.length - 1] === '1_Pooling' ? `1_Pooling/${last}` : last;
}

/** Whether a file name (see partName) is one a Hugging Face checkpoint is read from. */
export function isHfFileName(name) { return HF_FILE.test(name); }

/** Whether these files are a Hugging Face checkpoint (config.json among them). */
export function isHfCheckpoint(parts) {
  return parts.length > 1 && parts.some((p) => partName(p) === 'config.json');
}

/**
 * Reads the files of a model (see modelParts) into heap buffers, as one split model when there
 * are several. Progress counts the bytes of all files; the total is known once the last starts.
 * A Hugging Face checkpoint (config.json, tokenizer.json, *.safetensors...: an array of them, or
 * in Node a directory, which `listDir` expands) is read with each file's name.
 */
export async function readModelSource(mod, source, { what, onProgress, signal, openPath, listDir, cache }) {
  let parts = modelParts(source);
  if (parts.length === 1 && typeof parts[0] === 'string' && listDir) parts = (await listDir(parts[0])) ?? parts;
  if (parts.length === 1) return readSource(mod, parts[0], { what, onProgress, signal, openPath, cache });
  const hf = isHfCheckpoint(parts);
  if (hf) {
    for (const p of parts) {
      if (partName(p) === null || !HF_FILE.test(partName(p))) {
        throw new QkvError('bad_argument', `${what}: ${partName(p) === null ? 'a Blob without a name' : `'${partName(p)}'`} is not a ` +
          'file of a Hugging Face checkpoint (config.json, tokenizer.json, tokenizer_config.json, *.safetensors, ' +
          'model.safetensors.index.json; Blobs must be Files, which have names)');
      }
    }
  }
  let before = 0, i = 0;
  return readParts(parts, async (part) => {
    const last = ++i === parts.length;
    const progress = onProgress && ((p) => onProgress({
      loaded: before + p.loaded, total: last && p.total !== null ? before + p.total : null,
    }));
    const buf = await readSource(mod, part, { what: `${what} (file ${i} of ${parts.length})`, onProgress: progress, signal, openPath, cache });
    if (hf) buf.setName(partName(part));
    before += buf.size();
    return buf;
  });
}
