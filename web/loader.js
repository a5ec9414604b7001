// Model bytes for the page: downloads by URL with progress and cancellation, kept in the
// Cache API (cache 'qkv-models-v1') so a reload does not download them again.
import { QkvError } from './qkv/src/js/worker-client.js';

export const CACHE_NAME = 'qkv-models-v1';

/** The Cache API exists only in secure contexts (https, localhost, 127.0.0.1). */
export function cacheAvailable() {
  return typeof caches !== 'undefined' && globalThis.isSecureContext !== false;
}

async function openCache() {
  if (!cacheAvailable()) return null;
  try {
    return await caches.open(CACHE_NAME);
  } catch {
    return null;  // storage disabled (private mode, policy): work without a cache
  }
}

function aborted(what) { return new QkvError('aborted', `loading ${what} was cancelled`); }

/**
 * Returns {blob, cached} for an absolute URL: from the cache if there, else downloaded (with
 * onProgress({loaded, total})) and then stored. `signal` cancels the download.
 */
export async function fetchCached(url, { signal, onProgress, what = 'the model' } = {}) {
  const cache = await openCache();
  if (cache) {
    const hit = await cache.match(url).catch(() => undefined);
    if (hit) {
      const blob = await hit.blob();
      onProgress?.({ loaded: blob.size, total: blob.size });
      return { blob, cached: true };
    }
  }
  if (signal?.aborted) throw aborted(what);
  let res;
  try {
    res = await fetch(url, { signal, mode: 'cors', credentials: 'omit' });
  } catch (e) {
    if (signal?.aborted) throw aborted(what);
    throw new QkvError('io', `cannot download ${what} from ${url} (${e.message}): check the URL, that you are ` +
      'online, and that its server allows cross-origin requests (CORS)');
  }
  if (!res.ok) throw new QkvError('io', `cannot download ${what} from ${url}: HTTP ${res.status} ${res.statusText}`);
  const len = res.headers.get('content-length');
  const total = len !== null && !res.headers.get('content-encoding') ? Number(len) : null;
  const parts = [];
  let loaded = 0;
  onProgress?.({ loaded, total });
  const reader = res.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      parts.push(value);
      loaded += value.byteLength;
      onProgress?.({ loaded, total });
    }
  } catch (e) {
    if (signal?.aborted) throw aborted(what);
    throw new QkvError('io', `downloading ${what} from ${url} failed after ${loaded} bytes: ${e.message}`);
  }
  const blob = new Blob(parts, { type: 'application/octet-stream' });
  let stored = false;
  if (cache) {
    try {
      await cache.put(url, new Response(blob, {
        headers: { 'Content-Type': 'application/octet-stream', 'Content-Length': String(blob.size), 'X-Qkv-Stored': new Date().toISOString() },
      }));
      stored = true;
    } catch (e) {
      // Quota exceeded or storage off: the model still loads, it is just not kept.
      console.warn(`qkv: could not keep ${url} in the model cache: ${e.message}`);
    }
  }
  return { blob, cached: false, stored };
}

/** {available, entries, bytes} of the model cache. */
export async function cacheSummary() {
  const cache = await openCache();
  if (!cache) return { available: false, entries: 0, bytes: 0 };
  let bytes = 0;
  const keys = await cache.keys();
  for (const req of keys) {
    const res = await cache.match(req);
    const n = Number(res?.headers.get('content-length'));
    if (Number.isFinite(n)) bytes += n;
  }
  return { available: true, entries: keys.length, bytes };
}

export async function clearCache() {
  if (!cacheAvailable()) return false;
  return caches.delete(CACHE_NAME);
}
