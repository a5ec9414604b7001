// An HTTP server for model-cache tests: serves byte arrays at paths with ETag/Last-Modified,
// conditional requests (304), Range requests (206, with If-Range) unless told not to, and can
// cut a response mid-body; it records every request for the tests to check. Other paths go to
// `fallback(req, res)` (e.g. the static server of server.mjs, for pages).
import { createServer } from 'node:http';

/**
 * files: {path: Uint8Array}. Resolves to {url, files, log, set(path, opts), close()}: `log` lists
 * {path, range, status, sent}; set() changes a file's behaviour: {ranges: false} ignores Range,
 * {cutAfter: n} ends the next response's body after n bytes (then no longer), {etag} changes it.
 */
export async function startRangeServer(files, { fallback = null } = {}) {
  const state = new Map(Object.entries(files).map(([p, bytes]) => [p, { bytes, ranges: true, cutAfter: null, etag: '"v1"' }]));
  const log = [];
  const lastModified = new Date(Date.UTC(2026, 0, 1)).toUTCString();
  const server = createServer((req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    const f = state.get(path);
    if (!f) {
      if (fallback) return fallback(req, res);
      res.writeHead(404);
      return res.end();
    }
    const base = { ETag: f.etag, 'Last-Modified': lastModified, 'Accept-Ranges': f.ranges ? 'bytes' : 'none', 'Cache-Control': 'no-store' };
    const entry = { path, range: req.headers.range ?? null, ifNoneMatch: req.headers['if-none-match'] ?? null, status: 0, sent: 0 };
    log.push(entry);
    if (req.headers['if-none-match'] === f.etag) {
      entry.status = 304;
      res.writeHead(304, base);
      return res.end();
    }
    let start = 0, status = 200;
    const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    const ifRange = req.headers['if-range'];
    if (m && f.ranges && (!ifRange || ifRange === f.etag || ifRange === lastModified) && Number(m[1]) < f.bytes.length) {
      start = Number(m[1]);
      status = 206;
      base['Content-Range'] = `bytes ${start}-${f.bytes.length - 1}/${f.bytes.length}`;
    }
    entry.status = status;
    res.writeHead(status, { ...base, 'Content-Type': 'application/octet-stream', 'Content-Length': f.bytes.length - start });
    if (req.method === 'HEAD') return res.end();
    const body = f.bytes.subarray(start);
    if (f.cutAfter !== null) {
      const n = f.cutAfter;
      f.cutAfter = null;
      entry.sent = n;
      res.write(body.subarray(0, n), () => res.socket.end());  // FIN after the bytes (a reset could drop some unread)
      return;
    }
    entry.sent = body.length;
    res.end(body);
  });
  const sockets = new Set();
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return {
    url: `http://127.0.0.1:${server.address().port}/`,
    log,
    set(path, opts) { Object.assign(state.get(path), opts); },
    close() {
      for (const s of sockets) s.destroy();
      return new Promise((ok) => server.close(() => ok()));
    },
  };
}
