// A tiny static file server (node:http only) for browser tests and the web demo.
//
//   import { startServer } from './server.mjs';
//   const srv = await startServer(root, { coopCoep: true, csp: null });
//   ... srv.url ...  (e.g. http://127.0.0.1:41234/)
//   await srv.close();
//
// Command line: node tests/js/server.mjs ROOT [--port N] [--no-isolation] [--csp POLICY]
//
// It binds 127.0.0.1 only, serves files under ROOT (never outside it), sends
// Cross-Origin-Resource-Policy: same-origin on every response and, unless told
// otherwise, the COOP/COEP headers that make a page cross-origin isolated
// (needed for SharedArrayBuffer, i.e. threaded WASM).
import { createServer } from 'node:http';
import { createReadStream } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import { extname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

export const MIME_TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.htm': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.wasm': 'application/wasm',
  '.json': 'application/json; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.map': 'application/json; charset=utf-8',
  '.bin': 'application/octet-stream',
  '.gguf': 'application/octet-stream',
};

/** True if `child` is `parent` or lies inside it (both absolute, normalized). */
function isInside(parent, child) {
  const rel = relative(parent, child);
  return rel === '' || (!isAbsolute(rel) && !rel.split(sep).includes('..'));
}

/**
 * Starts serving `root`. Options:
 *   coopCoep (default true): send COOP same-origin + COEP require-corp.
 *   csp (default null): a Content-Security-Policy header value.
 *   port (default 0 = ephemeral), host (default '127.0.0.1').
 *   log (default false): log each request to stderr.
 * Resolves to { url, port, server, close() } where url ends with '/'.
 */
export async function startServer(root, opts = {}) {
  const { coopCoep = true, csp = null, port = 0, host = '127.0.0.1', log = false } = opts;
  const base = await realpath(resolve(root));

  const commonHeaders = { 'Cross-Origin-Resource-Policy': 'same-origin', 'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff' };
  if (coopCoep) {
    commonHeaders['Cross-Origin-Opener-Policy'] = 'same-origin';
    commonHeaders['Cross-Origin-Embedder-Policy'] = 'require-corp';
  }
  if (csp) commonHeaders['Content-Security-Policy'] = csp;

  function fail(res, code, msg) {
    res.writeHead(code, { ...commonHeaders, 'Content-Type': 'text/plain; charset=utf-8' });
    res.end(msg + '\n');
  }

  async function handle(req, res) {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('Allow', 'GET, HEAD');
      return fail(res, 405, 'method not allowed');
    }
    let pathname;
    try {
      pathname = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    } catch {
      return fail(res, 400, 'bad request');
    }
    if (pathname.includes('\0')) return fail(res, 400, 'bad request');
    let file = resolve(base, '.' + pathname);
    if (!isInside(base, file)) return fail(res, 403, 'forbidden');
    let st;
    try {
      st = await stat(file);
      if (st.isDirectory()) {
        if (!pathname.endsWith('/')) {
          res.writeHead(301, { ...commonHeaders, Location: pathname + '/' });
          return res.end();
        }
        file = join(file, 'index.html');
        st = await stat(file);
      }
      // Symlinks must not lead outside root either.
      file = await realpath(file);
      if (!isInside(base, file)) return fail(res, 403, 'forbidden');
    } catch {
      if (pathname === '/favicon.ico') {  // browsers ask for it unprompted; a 404 is a console error
        res.writeHead(204, commonHeaders);
        return res.end();
      }
      return fail(res, 404, 'not found');
    }
    if (!st.isFile()) return fail(res, 404, 'not found');
    const type = MIME_TYPES[extname(file).toLowerCase()] || 'application/octet-stream';
    res.writeHead(200, { ...commonHeaders, 'Content-Type': type, 'Content-Length': st.size });
    if (req.method === 'HEAD') return res.end();
    const stream = createReadStream(file);
    stream.on('error', () => res.destroy());
    stream.pipe(res);
  }

  const server = createServer((req, res) => {
    if (log) res.on('finish', () => process.stderr.write(`${res.statusCode} ${req.method} ${req.url}\n`));
    handle(req, res).catch((e) => {
      if (!res.headersSent) fail(res, 500, 'internal error');
      else res.destroy(e);
    });
  });
  const sockets = new Set();
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });

  await new Promise((ok, ko) => {
    server.once('error', ko);
    server.listen(port, host, () => { server.off('error', ko); ok(); });
  });
  const actualPort = server.address().port;
  const url = `http://${host}:${actualPort}/`;
  let closed = null;
  return {
    url,
    port: actualPort,
    server,
    close() {
      if (!closed) {
        closed = new Promise((ok) => server.close(() => ok()));
        server.closeIdleConnections?.();
        for (const s of sockets) s.destroy();
      }
      return closed;
    },
  };
}

// --- command line ---------------------------------------------------------------
function usage() {
  process.stderr.write('usage: node tests/js/server.mjs ROOT [--port N] [--no-isolation] [--csp POLICY] [--log]\n');
  process.exit(2);
}

async function main(argv) {
  let root = null, port = 0, coopCoep = true, csp = null, log = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--port') { port = Number(argv[++i]); if (!Number.isInteger(port) || port < 0 || port > 65535) usage(); }
    else if (a === '--no-isolation') coopCoep = false;
    else if (a === '--csp') { csp = argv[++i]; if (csp === undefined) usage(); }
    else if (a === '--log') log = true;
    else if (a === '-h' || a === '--help') usage();
    else if (a.startsWith('-') || root !== null) usage();
    else root = a;
  }
  if (root === null) usage();
  const srv = await startServer(root, { port, coopCoep, csp, log });
  process.stdout.write(srv.url + '\n');
  const stop = () => { srv.close().then(() => process.exit(0)); };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).catch((e) => {
    process.stderr.write(`server: ${e.message}\n`);
    process.exit(1);
  });
}
