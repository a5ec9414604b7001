// `qkv serve`: an OpenAI-compatible HTTP server (node:http) over createOpenAI. Requests queue on
// one KV cache; a client that disconnects aborts its generation; bodies and the queue are
// bounded; errors come back in OpenAI's error shape.
import { createServer } from 'node:http';
import { QkvError } from './errors.js';
import { createOpenAI } from './openai.js';

const STATUS = { bad_argument: 400, unsupported: 400, not_found: 404, method: 405, too_large: 413, busy: 429, aborted: 499 };

function sendJson(res, status, body) {
  if (res.headersSent) { res.end(); return; }
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res, status, code, message, param = null) {
  const type = status === 429 ? 'rate_limit_exceeded' : status >= 500 ? 'server_error' : 'invalid_request_error';
  sendJson(res, status, { error: { message, type, param, code } });
}

function readBody(req, limit) {
  return new Promise((resolve, reject) => {
    const parts = [];
    let size = 0, over = false;
    req.on('data', (b) => {
      size += b.length;
      if (size > limit) {
        // The rest is read and dropped, so that the client gets the 413 rather than a reset.
        if (!over) { over = true; parts.length = 0; reject(Object.assign(new Error(`the request body is over ${limit} bytes`), { code: 'too_large' })); }
        return;
      }
      parts.push(b);
    });
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));  // a no-op after a reject
    req.on('error', reject);
  });
}

/**
 * Serves `model` on http://host:port/v1. Options: port (default 8080; 0 = any free port), host
 * (default 127.0.0.1, loopback only), modelName (the id clients see), maxBodyBytes (default
 * 4 MiB), maxPending (requests queued or running at once, default 16; more get 429),
 * contextLength (the KV cache's length; default the model's), onLog ({method, path, status,
 * ms, aborted} after each request).
 * Resolves to {server, url, close()} once listening.
 */
export async function serve(model, options = {}) {
  const { port = 8080, host = '127.0.0.1', modelName = 'qkv', maxBodyBytes = 4 << 20, maxPending = 16, contextLength = 0, onLog } = options;
  if (onLog !== undefined && typeof onLog !== 'function') throw new QkvError('bad_argument', 'onLog must be a function');
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new QkvError('bad_argument', `port must be an integer in [0, 65535], got ${port}`);
  if (typeof host !== 'string' || !host) throw new QkvError('bad_argument', 'host must be a non-empty string');
  if (!Number.isInteger(maxBodyBytes) || maxBodyBytes < 1) throw new QkvError('bad_argument', `maxBodyBytes must be a positive integer, got ${maxBodyBytes}`);
  if (!Number.isInteger(maxPending) || maxPending < 1) throw new QkvError('bad_argument', `maxPending must be a positive integer, got ${maxPending}`);
  const client = createOpenAI(model, { modelName, contextLength });
  let pending = 0;
  const routes = {
    '/v1/chat/completions': (body, o) => client.chat.completions.create(body, o),
    '/v1/completions': (body, o) => client.completions.create(body, o),
    '/v1/embeddings': (body, o) => client.embeddings.create(body, o),
    '/v1/rerank': (body, o) => client.rerank.create(body, o),
  };

  async function handle(req, res, ac) {
    const url = new URL(req.url, 'http://localhost');
    const path = url.pathname.replace(/\/+$/, '');
    if (path === '/v1/models' || path.startsWith('/v1/models/')) {
      if (req.method !== 'GET') return sendError(res, 405, 'method_not_allowed', `${req.method} ${path} is not supported`);
      if (path === '/v1/models') return sendJson(res, 200, await client.models.list());
      try {
        return sendJson(res, 200, await client.models.retrieve(decodeURIComponent(path.slice('/v1/models/'.length))));
      } catch (e) {
        return sendError(res, 404, 'model_not_found', e.message);
      }
    }
    const route = routes[path];
    if (!route) return sendError(res, 404, 'not_found', `no route ${req.method} ${path}`);
    if (req.method !== 'POST') return sendError(res, 405, 'method_not_allowed', `${path} takes POST`);
    if (pending >= maxPending) return sendError(res, 429, 'too_many_requests', `${pending} requests are already queued; try again later`);
    pending++;
    try {
      let body;
      try {
        body = JSON.parse(await readBody(req, maxBodyBytes));
      } catch (e) {
        if (e instanceof QkvError || e.code === 'too_large') throw e;
        throw new QkvError('bad_argument', `the request body is not valid JSON (${e.message})`);
      }
      const result = await route(body, { signal: ac.signal });
      if (body?.stream) {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
        try {
          for await (const chunk of result) {
            if (ac.signal.aborted) break;
            res.write(`data: ${JSON.stringify(chunk)}\n\n`);
          }
          res.write('data: [DONE]\n\n');
        } catch (e) {
          // Headers are out: report the failure as a last event in OpenAI's error shape.
          if (!ac.signal.aborted) res.write(`data: ${JSON.stringify({ error: { message: e.message, type: 'server_error', param: null, code: e.code ?? 'internal' } })}\n\n`);
        }
        res.end();
      } else {
        sendJson(res, 200, result);
      }
    } catch (e) {
      const code = e?.code ?? 'internal';
      if (code === 'aborted' && ac.signal.aborted) { res.destroy(); return; }
      const status = STATUS[code] ?? (code === 'out_of_memory' ? 503 : 500);
      sendError(res, status, code, e?.message ?? String(e));
    } finally {
      pending--;
    }
  }

  const server = createServer((req, res) => {
    const t0 = Date.now();
    const ac = new AbortController();
    // The client went away before the response was complete: stop its generation.
    res.on('close', () => { if (!res.writableFinished) ac.abort(); });
    handle(req, res, ac).catch((e) => sendError(res, 500, 'internal', e?.message ?? String(e))).finally(() => {
      if (!onLog) return;
      try {
        onLog({ method: req.method, path: req.url, status: res.statusCode, ms: Date.now() - t0, aborted: ac.signal.aborted });
      } catch { /* a throwing logger must not break the server */ }
    });
  });
  server.headersTimeout = 30000;
  server.requestTimeout = 0;  // generations may take long; disconnects abort them
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => { server.off('error', reject); resolve(); });
  });
  const addr = server.address();
  const shown = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    server,
    url: `http://${shown}:${addr.port}/v1`,
    close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); }),
  };
}
