// The model cache for URL loads (loadModel(url, {cache: ...})): a download is kept in segments
// (SEGMENT_BYTES each, one file in OPFS or one Cache API entry per segment) beside a small
// manifest (meta.json: the URL, its size and validators, how many segments are complete). Each
// segment is committed whole (OPFS and Cache API writes become visible only when closed), so a
// download cut by an error, an abort or a page reload keeps its complete segments and resumes
// after them with `Range: bytes=N-` and `If-Range`; a server that answers 200 instead restarts
// it. Bytes go to the cache and to the consumer (the heap, or the GPU staging buffer) in one
// pass: nothing here holds more than one network chunk.
import { QkvError, throwIfAborted } from './errors.js';
import { modelParts, readerIterable, toBytes } from './source.js';

/** Bytes per segment: what an interrupted download can lose at most. */
export const SEGMENT_BYTES = 32 * 1024 ** 2;
const NAME = 'qkv-models';  // the OPFS folder and the Cache API cache
const KEY_ORIGIN = 'https://qkv-model-cache.invalid/';  // Cache API keys (never fetched)
export const CACHE_BACKENDS = ['opfs', 'cache-api'];
const CACHE_KEYS = ['backend', 'dir', 'segmentBytes'];

function mib(n) { return `${(n / 1024 ** 2).toFixed(1)} MiB`; }

/** The entry's name: FNV-1a (64 bits) of the URL, in hex. */
export function entryId(url) {
  let h = 0xcbf29ce484222325n;
  for (const c of new TextEncoder().encode(url)) h = ((h ^ BigInt(c)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return h.toString(16).padStart(16, '0');
}

function segName(k) { return `seg-${String(k).padStart(5, '0')}`; }

/** A manifest read back, or null when it is not one (then the entry is dropped). */
export function parseMeta(text, url) {
  let m;
  try { m = JSON.parse(text); } catch { return null; }
  const int = (x) => Number.isSafeInteger(x) && x >= 0;
  if (!m || m.v !== 1 || typeof m.url !== 'string' || (url !== undefined && m.url !== url) || !int(m.size) ||
      !int(m.segmentBytes) || m.segmentBytes === 0 || !int(m.segments) || m.segments > Math.ceil(m.size / m.segmentBytes)) return null;
  m.complete = m.segments === Math.ceil(m.size / m.segmentBytes);
  return m;
}

function isQuotaError(e) {
  return e?.name === 'QuotaExceededError' || e?.code === 'ENOSPC' || e?.code === 'EDQUOT';
}

/** The typed error for a cache that cannot hold `needed` bytes. */
export function quotaError(what, needed, space, cause) {
  const free = space ? `only ${mib(space.available)} ${space.quota !== undefined ? `is left (quota ${mib(space.quota)}, ${mib(space.usage)} used)` : 'is free'}` : 'the storage is full';
  const e = new QkvError('quota', `caching ${what} needs ${mib(needed)} but ${free}`, cause ? { cause } : undefined);
  e.needed = needed;
  e.available = space ? space.available : 0;
  return e;
}

async function browserSpace() {
  if (typeof navigator === 'undefined' || typeof navigator.storage?.estimate !== 'function') return null;
  const { quota, usage } = await navigator.storage.estimate();
  if (!Number.isFinite(quota) || !Number.isFinite(usage)) return null;
  return { available: Math.max(0, quota - usage), quota, usage };
}

/** OPFS: NAME/<id>/meta.json and NAME/<id>/seg-NNNNN. */
async function opfsStore() {
  const root = await navigator.storage.getDirectory();
  const top = await root.getDirectoryHandle(NAME, { create: true });
  const missing = (e) => e?.name === 'NotFoundError' || e?.name === 'TypeMismatchError';
  const dir = async (id, create = false) => {
    try { return await top.getDirectoryHandle(id, { create }); } catch (e) { if (missing(e)) return null; throw e; }
  };
  const file = async (id, name) => {
    const d = await dir(id);
    try { return d && await (await d.getFileHandle(name)).getFile(); } catch (e) { if (missing(e)) return null; throw e; }
  };
  return {
    backend: 'opfs',
    async readMeta(id) { const f = await file(id, 'meta.json'); return f ? f.text() : null; },
    async writeMeta(id, meta) {
      const w = await (await (await dir(id, true)).getFileHandle('meta.json', { create: true })).createWritable();
      await w.write(JSON.stringify(meta));
      await w.close();
    },
    async segmentSize(id, k) { const f = await file(id, segName(k)); return f ? f.size : null; },
    async readSegment(id, k) { const f = await file(id, segName(k)); return f ? f.stream() : null; },
    async openSegment(id, k) {
      const d = await dir(id, true), name = segName(k);
      const w = await (await d.getFileHandle(name, { create: true })).createWritable();
      return {
        write: (b) => w.write(b),
        close: () => w.close(),
        async abort() { await w.abort().catch(() => {}); await d.removeEntry(name).catch(() => {}); },
      };
    },
    async removeSegment(id, k) { await (await dir(id))?.removeEntry(segName(k)).catch(() => {}); },
    async remove(id) { await top.removeEntry(id, { recursive: true }).catch((e) => { if (!missing(e)) throw e; }); },
    async ids() {
      const out = [];
      for await (const [name, h] of top.entries()) if (h.kind === 'directory') out.push(name);
      return out;
    },
    space: browserSpace,
  };
}

/** Cache API: one cache, NAME, with KEY_ORIGIN<id>/meta.json and KEY_ORIGIN<id>/seg-NNNNN. */
async function cacheApiStore() {
  const cache = await caches.open(NAME);
  const key = (id, name) => `${KEY_ORIGIN}${id}/${name}`;
  return {
    backend: 'cache-api',
    async readMeta(id) { const r = await cache.match(key(id, 'meta.json')); return r ? r.text() : null; },
    async writeMeta(id, meta) {
      await cache.put(key(id, 'meta.json'), new Response(JSON.stringify(meta), { headers: { 'Content-Type': 'application/json' } }));
    },
    async segmentSize() { return undefined; },  // only known by reading it (checked then)
    async readSegment(id, k) { const r = await cache.match(key(id, segName(k))); return r ? r.body : null; },
    async openSegment(id, k) {
      const ts = new TransformStream();
      const w = ts.writable.getWriter();
      const put = cache.put(key(id, segName(k)), new Response(ts.readable));
      const failed = put.then(() => new Promise(() => {}));  // put settles only with the body's end, or fails early
      failed.catch(() => {});
      return {
        async write(b) { await Promise.race([w.ready.then(() => w.write(b)), failed]); },
        async close() { await w.close(); await put; },
        async abort() { await w.abort().catch(() => {}); await put.catch(() => {}); await cache.delete(key(id, segName(k))); },
      };
    },
    async removeSegment(id, k) { await cache.delete(key(id, segName(k))); },
    async remove(id) {
      for (const r of await cache.keys()) if (r.url.startsWith(`${KEY_ORIGIN}${id}/`)) await cache.delete(r);
    },
    async ids() {
      const out = new Set();
      for (const r of await cache.keys()) if (r.url.startsWith(KEY_ORIGIN)) out.add(r.url.slice(KEY_ORIGIN.length).split('/')[0]);
      return [...out];
    },
    space: browserSpace,
  };
}

const haveOpfs = () => typeof navigator !== 'undefined' && typeof navigator.storage?.getDirectory === 'function';
const haveCacheApi = () => typeof caches !== 'undefined' && typeof caches.open === 'function';

/** Checks a `cache` option; returns {backend: 'auto'|'opfs'|'cache-api'|null, dir, segmentBytes} or null for no cache. */
export function cacheOption(cache, what = 'cache') {
  if (cache === undefined || cache === false) return null;
  if (cache === true) return { backend: 'auto', dir: undefined, segmentBytes: SEGMENT_BYTES };
  if (typeof cache === 'string') {
    if (!CACHE_BACKENDS.includes(cache)) {
      throw new QkvError('bad_argument', `${what} must be true, false, 'opfs', 'cache-api' or {backend, dir, segmentBytes}, got '${cache}'`);
    }
    return { backend: cache, dir: undefined, segmentBytes: SEGMENT_BYTES };
  }
  if (cache === null || typeof cache !== 'object' || Array.isArray(cache)) {
    throw new QkvError('bad_argument', `${what} must be true, false, 'opfs', 'cache-api' or {backend, dir, segmentBytes}, got ${cache === null ? 'null' : typeof cache}`);
  }
  for (const k of Object.keys(cache)) {
    if (!CACHE_KEYS.includes(k)) throw new QkvError('bad_argument', `${what}: unknown key '${k}'; the keys are ${CACHE_KEYS.join(', ')}`);
  }
  const { backend = 'auto', dir, segmentBytes = SEGMENT_BYTES } = cache;
  if (backend !== 'auto' && !CACHE_BACKENDS.includes(backend)) {
    throw new QkvError('bad_argument', `${what}.backend must be 'auto', 'opfs' or 'cache-api', got ${JSON.stringify(backend)}`);
  }
  if (dir !== undefined && (typeof dir !== 'string' || dir === '')) throw new QkvError('bad_argument', `${what}.dir must be a non-empty path`);
  if (!Number.isSafeInteger(segmentBytes) || segmentBytes < 4096) {
    throw new QkvError('bad_argument', `${what}.segmentBytes must be an integer of at least 4096, got ${segmentBytes}`);
  }
  return { backend, dir, segmentBytes };
}

/**
 * The browser's store for a checked option (cacheOption): OPFS where the browser has it, else the
 * Cache API; null where it has neither (insecure contexts) and the option was just `true`.
 */
export async function browserStore(opt) {
  if (!opt) return null;
  if (opt.dir !== undefined) throw new QkvError('bad_argument', 'cache.dir is for Node: browsers cache in OPFS or the Cache API');
  const want = opt.backend;
  if ((want === 'auto' || want === 'opfs') && haveOpfs()) {
    try {
      return { ...(await opfsStore()), segmentBytes: opt.segmentBytes };
    } catch (e) {
      if (want === 'opfs') throw new QkvError('unsupported', `cache: 'opfs': the origin private file system is not available here (${e.message})`, { cause: e });
    }
  }
  if ((want === 'auto' || want === 'cache-api') && haveCacheApi()) return { ...(await cacheApiStore()), segmentBytes: opt.segmentBytes };
  if (want === 'auto') return null;
  throw new QkvError('unsupported', `cache: '${want}' is not available here (it needs a secure context: https or localhost)`);
}

/** The browser's stores for the management calls: the one named, or every one the browser has. */
export async function browserStores(options) {
  const opt = cacheOption(options?.cache ?? true, 'options.cache');
  if (opt?.backend !== 'auto') return opt ? [await browserStore(opt)] : [];
  const out = [];
  if (haveOpfs()) out.push(await opfsStore().catch(() => null));
  if (haveCacheApi()) out.push(await cacheApiStore());
  return out.filter(Boolean);
}

function lengthOf(res) {
  const len = res.headers.get('content-length');
  return len !== null && !res.headers.get('content-encoding') ? Number(len) : null;
}

function validators(res) {
  return { etag: res.headers.get('etag'), lastModified: res.headers.get('last-modified') };
}

/** Whether a response is of the same file as the manifest (its validators, and its length when `size` is given). */
function sameFile(meta, res, size) {
  const v = validators(res);
  if (size !== null && size !== meta.size) return false;
  if (meta.etag) return v.etag === meta.etag;
  if (meta.lastModified) return v.lastModified === meta.lastModified;
  return false;
}

/** If-Range needs a strong validator: a strong ETag, else the date. */
function ifRange(meta) {
  if (meta.etag && !meta.etag.startsWith('W/')) return meta.etag;
  return meta.lastModified || null;
}

async function get(url, what, signal, headers = {}) {
  try {
    return await fetch(url, { signal, headers, cache: 'no-store' });  // this cache replaces the HTTP cache's second copy
  } catch (e) {
    if (signal?.aborted) throw new QkvError('aborted', `loading ${what} was aborted`);
    throw new QkvError('io', `cannot fetch ${what} from ${url}: ${e.message}`, { cause: e });
  }
}

function httpError(what, url, res) {
  res.body?.cancel().catch(() => {});
  return new QkvError('io', `cannot fetch ${what} from ${url}: HTTP ${res.status} ${res.statusText}`);
}

async function readMeta(store, id, url) {
  const text = await store.readMeta(id).catch(() => null);
  if (text === null) return null;
  const meta = parseMeta(text, url);
  if (!meta) await store.remove(id);  // not a manifest of this URL: drop what is there
  return meta;
}

/** The first of the manifest's segments that is missing or not its size (sizes the store knows cheaply), else their count. */
async function firstBadSegment(store, id, meta) {
  for (let k = 0; k < meta.segments; k++) {
    const n = await store.segmentSize(id, k);
    if (n === undefined) continue;
    if (n !== Math.min(meta.segmentBytes, meta.size - k * meta.segmentBytes)) return k;
  }
  return meta.segments;
}

async function checkSpace(store, what, needed) {
  const space = await store.space().catch(() => null);
  if (space && needed > space.available) throw quotaError(what, needed, space);
}

/**
 * Opens `url` through `store`: {size, chunks} as source.js#openSource. A complete entry is
 * served from the store (after a conditional request, when the entry has a validator: 304 keeps
 * it, 200 replaces it; no answer at all keeps it); an incomplete one resumes after its whole
 * segments (one without a strong validator restarts); none downloads.
 */
export async function openCachedUrl(url, store, { what, signal }) {
  const id = entryId(url);
  let meta = await readMeta(store, id, url);
  if (meta) {
    const good = await firstBadSegment(store, id, meta);
    if (good < meta.segments) await truncate(store, id, meta, good);
  }
  if (meta?.complete) {
    if (meta.etag || meta.lastModified) {
      const headers = meta.etag ? { 'If-None-Match': meta.etag } : { 'If-Modified-Since': meta.lastModified };
      const res = await get(url, what, signal, headers).catch((e) => { if (e.code === 'aborted') throw e; return null; });
      if (res?.status === 200 && !sameFile(meta, res, lengthOf(res))) {  // changed on the server
        await store.remove(id);
        return fresh(url, store, id, res, { what, signal });
      }
      res?.body?.cancel().catch(() => {});
    }
    return { size: meta.size, chunks: entryChunks(url, store, id, meta, null, { what, signal }) };
  }
  if (meta && meta.segments > 0 && ifRange(meta)) {
    // Resumed where the cached segments end: the Range request goes out when the reading gets
    // there (entryChunks), so no connection idles while the cached part is read.
    await checkSpace(store, what, meta.size - meta.segments * meta.segmentBytes);
    return { size: meta.size, chunks: entryChunks(url, store, id, meta, null, { what, signal }) };
  }
  if (meta) await store.remove(id);  // nothing to resume from
  const res = await get(url, what, signal);
  if (!res.ok) throw httpError(what, url, res);
  return fresh(url, store, id, res, { what, signal });
}

async function fresh(url, store, id, res, { what, signal }) {
  const size = lengthOf(res);
  if (size === null) return { size: null, chunks: readerIterable(res.body) };  // no length to cache against: read it uncached
  const segmentBytes = store.segmentBytes ?? SEGMENT_BYTES;
  try {
    await checkSpace(store, what, size);
  } catch (e) {
    res.body?.cancel().catch(() => {});
    throw e;
  }
  const meta = { v: 1, url, size, ...validators(res), segmentBytes, segments: 0, complete: size === 0, updated: Date.now() };
  await store.writeMeta(id, meta);
  return { size, chunks: entryChunks(url, store, id, meta, { res, at: 0 }, { what, signal }) };
}

/** Drops segments from `k` on (the manifest first, so a crash in between leaves no claim on them). */
async function truncate(store, id, meta, k) {
  const had = meta.segments;
  meta.segments = k;
  meta.complete = false;
  await store.writeMeta(id, meta);
  for (let j = k; j < had; j++) await store.removeSegment(id, j);
}

function iterate(stream) { return typeof stream.getReader === 'function' ? readerIterable(stream) : stream; }

/**
 * The file's bytes: the manifest's segments from the store, then the network from the first
 * missing one (`net`: a response already open at byte `at`), written to the store as they pass.
 */
async function* entryChunks(url, store, id, meta, net, { what, signal }) {
  const seg = meta.segmentBytes, count = Math.ceil(meta.size / seg);
  const segLen = (k) => Math.min(seg, meta.size - k * seg);
  let pos = 0;  // bytes given out
  let k = 0;
  for (; k < meta.segments; k++) {
    const stream = await store.readSegment(id, k).catch(() => null);
    if (!stream) break;
    let got = 0;
    try {
      for await (const c of iterate(stream)) {
        const b = toBytes(c, what);
        const n = Math.min(b.byteLength, segLen(k) - got);
        const start = k * seg + got;
        if (start + n > pos) { yield b.subarray(Math.max(0, pos - start), n); pos = start + n; }
        got += b.byteLength;
        if (got > segLen(k)) break;
      }
    } catch (e) {
      if (signal?.aborted) throw new QkvError('aborted', `loading ${what} was aborted`);
      got = -1;  // unreadable: fetched again
    }
    if (got !== segLen(k)) break;  // short, long or unreadable: fetched again from here
  }
  if (k < meta.segments) await truncate(store, id, meta, k);
  if (k === count) return;
  throwIfAborted(signal);
  const from = k * seg;
  if (!net || net.at !== from) {
    net?.res.body?.cancel().catch(() => {});
    const h = ifRange(meta);
    const res = await get(url, what, signal, from > 0 && h ? { Range: `bytes=${from}-`, 'If-Range': h } : {});
    const range = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(res.headers.get('content-range') ?? '');
    if (res.status === 206 && range && Number(range[1]) === from && Number(range[3]) === meta.size && sameFile(meta, res, null)) net = { res, at: from };
    else if (res.status === 200 && (from === 0 || sameFile(meta, res, lengthOf(res)))) net = { res, at: 0 };
    else if (res.status === 200) {
      res.body?.cancel().catch(() => {});
      await store.remove(id);
      throw new QkvError('io', `${what} changed on the server (${url}) while it was read from the cache: load it again`);
    } else throw httpError(what, url, res);
  }
  let at = net.at, writer = null, fill = 0;
  try {
    for await (const c of readNetwork(net.res.body, what, url, () => at)) {
      let b = toBytes(c, what);
      if (at + b.byteLength <= from) { at += b.byteLength; continue; }  // a restart's bytes already in the store
      if (at < from) { b = b.subarray(from - at); at = from; }
      if (at + b.byteLength > meta.size) throw new QkvError('io', `${what} is longer than its announced size of ${meta.size} bytes`);
      for (let off = 0; off < b.byteLength;) {
        writer ??= await store.openSegment(id, k);
        const n = Math.min(b.byteLength - off, segLen(k) - fill);
        await writer.write(b.subarray(off, off + n));
        fill += n;
        off += n;
        if (fill === segLen(k)) {
          const w = writer;
          writer = null;
          await w.close();
          meta.segments = ++k;
          meta.complete = k === count;
          meta.updated = Date.now();
          fill = 0;
          await store.writeMeta(id, meta);
        }
      }
      if (at + b.byteLength > pos) { yield b.subarray(Math.max(0, pos - at)); pos = at + b.byteLength; }
      at += b.byteLength;
    }
    if (at !== meta.size) throw new QkvError('io', `${what} ended after ${at} of ${meta.size} bytes`);
  } catch (e) {
    if (isQuotaError(e) || isQuotaError(e?.cause)) {
      throw quotaError(what, meta.size - k * seg, await store.space().catch(() => null), e);
    }
    throw e;
  } finally {
    await writer?.abort().catch(() => {});  // a segment cut short is never kept: the manifest counts whole ones
  }
}

/** A response body's chunks; a failed read is an 'io' error that says the download resumes. */
async function* readNetwork(body, what, url, at) {
  const it = readerIterable(body)[Symbol.asyncIterator]();
  for (;;) {
    let r;
    try {
      r = await it.next();
    } catch (e) {
      if (e?.name === 'AbortError') throw e;
      throw new QkvError('io', `reading ${what} from ${url} failed after ${at()} bytes (${e.message}); ` +
        'the complete part is cached: loading it again resumes', { cause: e });
    }
    if (r.done) return;
    yield r.value;
  }
}

/** What the management calls say of an entry. */
function describeEntry(store, meta) {
  return {
    url: meta.url, backend: store.backend, size: meta.size, cachedBytes: Math.min(meta.size, meta.segments * meta.segmentBytes),
    complete: meta.complete, etag: meta.etag ?? null, lastModified: meta.lastModified ?? null, updated: meta.updated ?? null,
  };
}

/** Every entry of the stores ({url, backend, size, cachedBytes, complete, ...}). */
export async function listEntries(stores) {
  const out = [];
  for (const s of stores) {
    for (const id of await s.ids()) {
      const meta = parseMeta(await s.readMeta(id).catch(() => null) ?? '');
      if (meta) out.push(describeEntry(s, meta));
    }
  }
  return out;
}

/** Absolute URLs of a model's files (split models' parts included). */
export function cachedUrls(source) {
  const base = globalThis.location?.href;
  return modelParts(source).map((p) => {
    try {
      return new URL(String(p), base).href;
    } catch {
      throw new QkvError('bad_argument', `deleteCachedModel: '${p}' is not a URL`);
    }
  });
}

/** Deletes the entries of `urls`; resolves to how many existed. */
export async function deleteEntries(stores, urls) {
  let n = 0;
  for (const s of stores) {
    for (const url of urls) {
      const id = entryId(url);
      if ((await s.readMeta(id).catch(() => null)) !== null) n++;
      await s.remove(id);
    }
  }
  return n;
}

/** Deletes every entry; resolves to {entries, bytes} removed. */
export async function clearEntries(stores) {
  let entries = 0, bytes = 0;
  for (const s of stores) {
    for (const id of await s.ids()) {
      const meta = parseMeta(await s.readMeta(id).catch(() => null) ?? '');
      entries++;
      if (meta) bytes += Math.min(meta.size, meta.segments * meta.segmentBytes);
      await s.remove(id);
    }
  }
  return { entries, bytes };
}
