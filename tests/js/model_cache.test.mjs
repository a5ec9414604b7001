// The model cache in Node (loadModel's `cache: {dir}`): the same segments and manifest as the
// browsers' stores (tests/js/browser_cache.test.mjs), over a local server that records requests,
// answers Range and conditional requests and can cut a body (tests/js/range-server.mjs). Every
// load's logits are checked against an uncached load of the same file.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { clearModelCache, deleteCachedModel, listCachedModels, loadModel } from '../../src/js/node.js';
import { entryId } from '../../src/js/model-cache.js';
import { writeBigGguf } from './big-gguf.mjs';
import { root, shared } from './helpers.mjs';
import { startRangeServer } from './range-server.mjs';

const SEG = 1 << 20;

test('model cache in Node: a directory that keeps, serves, resumes and repairs downloads', { timeout: 300000 }, async (t) => {
  const art = join(root, 'test-artifacts', 'model-cache');
  mkdirSync(art, { recursive: true });
  const file = join(art, 'tiny.gguf');
  writeBigGguf(file, join(shared, 'vocab', 'ggml-vocab-llama-spm.gguf'), { dim: 32, hidden: 64, layers: 1, heads: 4, kvHeads: 2, context: 64 });
  const bytes = readFileSync(file);
  const size = bytes.length;
  const srv = await startRangeServer({ '/m.gguf': bytes });
  const dir = mkdtempSync(join(tmpdir(), 'qkv-cache-'));
  const url = `${srv.url}m.gguf`;
  const cache = { dir, segmentBytes: SEG };
  const entryDir = join(dir, entryId(url));
  const since = (n) => srv.log.slice(n).map(({ range, status, sent }) => ({ range, status, sent }));
  const logits = async (opts) => {
    const m = await loadModel(url, { threads: 1, ...opts });
    try {
      const s = m.createSession();
      await s.feed(m.tokenize('Once upon a time'));
      return Array.from(s.logits());
    } finally {
      m.dispose();
    }
  };
  const failure = (opts) => logits(opts).then(() => assert.fail('the load should fail'), (e) => e);
  try {
    const ref = await logits({});
    await t.test('first load downloads once, the second sends a conditional request only', async () => {
      let n = srv.log.length;
      assert.deepEqual(await logits({ cache }), ref);
      assert.deepEqual(since(n), [{ range: null, status: 200, sent: size }]);
      const [e] = await listCachedModels({ cache: { dir } });
      assert.deepEqual([e.url, e.backend, e.size, e.cachedBytes, e.complete, e.etag], [url, 'dir', size, size, true, '"v1"']);
      n = srv.log.length;
      assert.deepEqual(await logits({ cache }), ref);
      assert.deepEqual(since(n), [{ range: null, status: 304, sent: 0 }]);
    });
    await t.test('a cut download keeps whole segments and resumes with Range', async () => {
      assert.equal(await deleteCachedModel(url, { cache: { dir } }), 1);
      srv.set('/m.gguf', { cutAfter: 3.5 * SEG });
      const e = await failure({ cache });
      assert.equal(e.code, 'io');
      assert.match(e.message, /loading it again resumes/);
      assert.deepEqual(readdirSync(entryDir).sort(), ['meta.json', 'seg-00000', 'seg-00001', 'seg-00002']);
      const n = srv.log.length;
      assert.deepEqual(await logits({ cache }), ref);
      assert.deepEqual(since(n), [{ range: `bytes=${3 * SEG}-`, status: 206, sent: size - 3 * SEG }]);
    });
    await t.test('a server that ignores Range restarts; a changed file (new ETag) is downloaded again', async () => {
      await deleteCachedModel(url, { cache: { dir } });
      srv.set('/m.gguf', { cutAfter: 1.5 * SEG });
      assert.equal((await failure({ cache })).code, 'io');
      srv.set('/m.gguf', { ranges: false });
      let n = srv.log.length;
      assert.deepEqual(await logits({ cache }), ref);
      assert.deepEqual(since(n), [{ range: `bytes=${SEG}-`, status: 200, sent: size }]);
      srv.set('/m.gguf', { ranges: true, etag: '"v2"' });
      n = srv.log.length;
      assert.deepEqual(await logits({ cache }), ref);
      assert.deepEqual(since(n), [{ range: null, status: 200, sent: size }]);
      assert.equal((await listCachedModels({ cache: { dir } }))[0].etag, '"v2"');
    });
    await t.test('short or missing segments and a garbled manifest are detected and fetched again', async () => {
      truncateSync(join(entryDir, 'seg-00005'), 100);
      let n = srv.log.length;
      assert.deepEqual(await logits({ cache }), ref);
      assert.deepEqual(since(n), [{ range: `bytes=${5 * SEG}-`, status: 206, sent: size - 5 * SEG }]);
      rmSync(join(entryDir, 'seg-00002'));
      n = srv.log.length;
      assert.deepEqual(await logits({ cache }), ref);
      assert.deepEqual(since(n), [{ range: `bytes=${2 * SEG}-`, status: 206, sent: size - 2 * SEG }]);
      writeFileSync(join(entryDir, 'meta.json'), '{"v":1,');
      n = srv.log.length;
      assert.deepEqual(await logits({ cache }), ref);
      assert.deepEqual(since(n), [{ range: null, status: 200, sent: size }]);
    });
    await t.test('bad cache options are typed errors; clearModelCache reports what it removed', async () => {
      for (const bad of ['indexeddb', 3, { segmentBytes: 10 }, { dirr: dir }]) {
        const e = await failure({ cache: bad });
        assert.equal(e.code, 'bad_argument', String(bad));
      }
      assert.equal((await failure({ cache: 'opfs' })).code, 'unsupported');
      assert.deepEqual(await clearModelCache({ cache: { dir } }), { entries: 1, bytes: size });
      assert.deepEqual(await listCachedModels({ cache: { dir } }), []);
    });
  } finally {
    await srv.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
