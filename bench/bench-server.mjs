// The local server of the browser benchmarks (bench-wllama.mjs, bench-embed.mjs): one page that
// loads `script`, /qkv/ = the repository, /wllama/ = wllama's esm folder, /models/ = modelDir,
// all with COOP/COEP so both engines get threads. Listens on 127.0.0.1 only.
import { createReadStream, existsSync, realpathSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { extname, join, normalize, sep } from 'node:path';

const MIME = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm',
               '.json': 'application/json' };

/** Starts the server; returns {server, base} (base: the page's URL). */
export async function serveBenchPage({ root, modelDir, title, script }) {
  const mounts = { '/qkv/': root, '/wllama/': realpathSync(join(root, 'node_modules', '@wllama', 'wllama', 'esm')), '/models/': modelDir };
  const page = `<!doctype html><meta charset="utf-8"><title>${title}</title><script type="module" src="${script}"></script>`;
  const server = createServer((req, res) => {
    const headers = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp',
                      'Cross-Origin-Resource-Policy': 'same-origin', 'Cache-Control': 'no-store' };
    const url = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    if (url === '/') { res.writeHead(200, { ...headers, 'Content-Type': 'text/html' }); res.end(page); return; }
    for (const [prefix, base] of Object.entries(mounts)) {
      if (!url.startsWith(prefix)) continue;
      const file = normalize(join(base, url.slice(prefix.length)));
      if (!file.startsWith(base + sep) || !existsSync(file) || !statSync(file).isFile()) break;
      res.writeHead(200, { ...headers, 'Content-Type': MIME[extname(file)] || 'application/octet-stream',
                           'Content-Length': statSync(file).size });
      createReadStream(file).pipe(res);
      return;
    }
    res.writeHead(404, headers);
    res.end('not found');
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return { server, base: `http://127.0.0.1:${server.address().port}/` };
}
