// Helpers for tests/js/browser_cache.test.mjs, on window.qkvCache: loads through the model cache
// (logits of a prompt, or the error's code, message and sizes), the management calls, and ways
// to damage or limit the stores (OPFS, Cache API) the way a browser can.
import { clearModelCache, deleteCachedModel, listCachedModels, loadModel } from '/src/js/browser.js';
import { entryId } from '/src/js/model-cache.js';

const NAME = 'qkv-models';
const KEY_ORIGIN = 'https://qkv-model-cache.invalid/';
const seg = (k) => `seg-${String(k).padStart(5, '0')}`;

async function opfsDir(url) {
  const top = await (await navigator.storage.getDirectory()).getDirectoryHandle(NAME, { create: true });
  return top.getDirectoryHandle(entryId(new URL(url, location.href).href));
}

const stubs = [];  // [object, name, original] to put back (unstub)
function stub(obj, name, fn) { stubs.push([obj, name, obj[name]]); obj[name] = fn; }

window.qkvCache = {
  async logits(url, options) {
    try {
      const m = await loadModel(url, { threads: 1, simd: 'baseline', ...options });
      const s = m.createSession();
      await s.feed(m.tokenize('Once upon a time'));
      const logits = Array.from(s.logits());
      const backend = m.info.backend;
      m.dispose();
      return { logits, backend };
    } catch (e) {
      return { error: { code: e.code, message: e.message, needed: e.needed, available: e.available } };
    }
  },
  list: (options) => listCachedModels(options),
  remove: (url, options) => deleteCachedModel(url, options),
  clear: (options) => clearModelCache(options),
  /** navigator.storage.estimate() answering a small quota. */
  stubEstimate(quota, usage) { stub(navigator.storage, 'estimate', async () => ({ quota, usage })); },
  /** Undoes the stubs. */
  unstub() { for (const [obj, name, orig] of stubs.splice(0).reverse()) obj[name] = orig; },
  /** Every segment write after the first `segments` fails as a full disk does. */
  stubQuotaAfter(segments) {
    const full = () => new DOMException('the quota is exceeded', 'QuotaExceededError');
    const write = FileSystemWritableFileStream.prototype.write;
    stub(FileSystemWritableFileStream.prototype, 'write', function (b) {
      return this.__seg >= segments ? Promise.reject(full()) : write.call(this, b);
    });
    const getFileHandle = FileSystemDirectoryHandle.prototype.getFileHandle;
    stub(FileSystemDirectoryHandle.prototype, 'getFileHandle', async function (name, o) {
      const h = await getFileHandle.call(this, name, o);
      if (name.startsWith('seg-')) {
        const cw = h.createWritable;
        const k = Number(name.slice(4));
        h.createWritable = async function (x) { const w = await cw.call(this, x); w.__seg = k; return w; };
      }
      return h;
    });
    const put = Cache.prototype.put;
    stub(Cache.prototype, 'put', function (req, res) {
      const key = String(req.url ?? req);
      const k = /seg-(\d+)$/.exec(key);
      if (k && Number(k[1]) >= segments) { res.body?.cancel(); return Promise.reject(full()); }
      return put.call(this, req, res);
    });
  },
  /** The names in the OPFS folder of `url`'s entry. */
  async opfsFiles(url) {
    const out = [];
    for await (const name of (await opfsDir(url)).keys()) out.push(name);
    return out.sort();
  },
  /** The Cache API keys of `url`'s entry (their last part). */
  async cacheKeys(url) {
    const prefix = `${KEY_ORIGIN}${entryId(new URL(url, location.href).href)}/`;
    const keys = await (await caches.open(NAME)).keys();
    return keys.map((r) => r.url).filter((u) => u.startsWith(prefix)).map((u) => u.slice(prefix.length)).sort();
  },
  /** Cuts segment k of `url`'s entry to `bytes` bytes (a file cut short on disk). */
  async truncate(backend, url, k, bytes) {
    if (backend === 'opfs') {
      const w = await (await (await opfsDir(url)).getFileHandle(seg(k))).createWritable({ keepExistingData: true });
      await w.truncate(bytes);
      await w.close();
    } else {
      const cache = await caches.open(NAME);
      const key = `${KEY_ORIGIN}${entryId(new URL(url, location.href).href)}/${seg(k)}`;
      const b = new Uint8Array(await (await cache.match(key)).arrayBuffer());
      await cache.put(key, new Response(b.slice(0, bytes)));
    }
  },
  /** Overwrites the manifest of `url`'s entry with bytes that are not one. */
  async garbleMeta(backend, url) {
    if (backend === 'opfs') {
      const w = await (await (await opfsDir(url)).getFileHandle('meta.json')).createWritable();
      await w.write('{"v":1,"url":');
      await w.close();
    } else {
      const key = `${KEY_ORIGIN}${entryId(new URL(url, location.href).href)}/meta.json`;
      await (await caches.open(NAME)).put(key, new Response('not json'));
    }
  },
};
document.getElementById('out').textContent = 'ready';
window.__ready = true;
