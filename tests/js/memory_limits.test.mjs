// Loading a model larger than wasm32 can hold fails early, with out_of_memory and the sizes,
// before any byte is copied (a server announces 5 GB and sends nothing).
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadModel, QkvError } from '../../src/js/node.js';
import { models } from './helpers.mjs';

test('a 5 GB model is refused with out_of_memory naming the sizes', async () => {
  let bodyBytesSent = 0;
  const srv = createServer((req, res) => {
    res.writeHead(200, { 'Content-Length': String(5 * 1024 ** 3), 'Content-Type': 'application/octet-stream' });
    res.write(new Uint8Array(1024)); bodyBytesSent += 1024;  // then stall: the client must not wait for more
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  try {
    const url = `http://127.0.0.1:${srv.address().port}/huge.bin`;
    const t0 = Date.now();
    await assert.rejects(loadModel(url, { tokenizer: join(models, 'aidreams-tok512.bin'), threads: 1 }), (e) => {
      assert.ok(e instanceof QkvError);
      assert.equal(e.code, 'out_of_memory');
      assert.match(e.message, /5120\.0 MiB/);
      assert.match(e.message, /4096\.0 MiB/);
      return true;
    });
    assert.ok(Date.now() - t0 < 5000, 'took too long: the size must be checked before reading');
    assert.equal(bodyBytesSent, 1024);
  } finally {
    srv.closeAllConnections();
    srv.close();
  }
});
