// The model cache in Node: a directory (cache: {dir}, or cache: true for ~/.cache/qkv/models or
// $XDG_CACHE_HOME/qkv/models), laid out as the browsers' OPFS cache (model-cache.js): one folder
// per URL with meta.json and its segments. A segment is written under a temporary name and
// renamed when whole, so a cut download leaves only whole segments.
import { createReadStream } from 'node:fs';
import { mkdir, open, readFile, readdir, rename, rm, stat, statfs, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { QkvError } from './errors.js';
import { cacheOption } from './model-cache.js';

/** The directory `cache: true` uses. */
export function defaultCacheDir() {
  return join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'qkv', 'models');
}

function segName(k) { return `seg-${String(k).padStart(5, '0')}`; }

/** A store (see model-cache.js) in `root`. */
export async function dirStore(root, segmentBytes) {
  try {
    await mkdir(root, { recursive: true });
  } catch (e) {
    throw new QkvError('io', `cannot create the model cache directory ${root}: ${e.message}`, { cause: e });
  }
  const missing = (e) => e?.code === 'ENOENT';
  return {
    backend: 'dir',
    dir: root,
    segmentBytes,
    async readMeta(id) {
      try { return await readFile(join(root, id, 'meta.json'), 'utf8'); } catch (e) { if (missing(e)) return null; throw e; }
    },
    async writeMeta(id, meta) {
      await mkdir(join(root, id), { recursive: true });
      const tmp = join(root, id, 'meta.json.part');
      await writeFile(tmp, JSON.stringify(meta));
      await rename(tmp, join(root, id, 'meta.json'));
    },
    async segmentSize(id, k) {
      try { return (await stat(join(root, id, segName(k)))).size; } catch (e) { if (missing(e)) return null; throw e; }
    },
    async readSegment(id, k) {
      const path = join(root, id, segName(k));
      try { await stat(path); } catch (e) { if (missing(e)) return null; throw e; }
      return createReadStream(path, { highWaterMark: 1 << 22 });
    },
    async openSegment(id, k) {
      await mkdir(join(root, id), { recursive: true });
      const path = join(root, id, segName(k)), tmp = `${path}.part`;
      const fh = await open(tmp, 'w');
      let closed = false;
      return {
        async write(b) {
          for (let off = 0; off < b.byteLength;) off += (await fh.write(b, off, b.byteLength - off)).bytesWritten;
        },
        async close() { closed = true; await fh.close(); await rename(tmp, path); },
        async abort() { if (!closed) await fh.close().catch(() => {}); await rm(tmp, { force: true }); },
      };
    },
    async removeSegment(id, k) { await rm(join(root, id, segName(k)), { force: true }); },
    async remove(id) { await rm(join(root, id), { recursive: true, force: true }); },
    async ids() {
      try { return (await readdir(root, { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name); } catch (e) { if (missing(e)) return []; throw e; }
    },
    async space() {
      const s = await statfs(root);
      return { available: s.bavail * s.bsize };
    },
  };
}

/** The store for a checked option (cacheOption) in Node. */
export async function nodeStore(opt) {
  if (!opt) return null;
  if (opt.backend !== 'auto') throw new QkvError('unsupported', `cache: '${opt.backend}' is a browser's storage; in Node pass cache: true or {dir}`);
  return dirStore(opt.dir ?? defaultCacheDir(), opt.segmentBytes);
}

/** The stores the management calls look at in Node (options.cache as loadModel's; default: the default directory). */
export async function nodeStores(options) {
  const opt = cacheOption(options?.cache ?? true, 'options.cache');
  return opt ? [await nodeStore(opt)] : [];
}
