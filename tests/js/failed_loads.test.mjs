// Failed loads leave nothing behind in the WebAssembly engine (issue 33, item 12): a model whose
// construction fails inside C++ frees what it had made (its thread pool, its weights) before the
// error reaches JS. Before, the JS error was thrown from inside the C++ constructor, so nothing
// was freed: each failed load kept its pool's threads, and after 8 of them the pthreads build
// had no worker left, so loading (and disposing) a good model hung.
//
// The loads run in a child process killed after 120 s: a hang fails the test, it does not stall it.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { models, root } from './helpers.mjs';

const model = join(models, 'aidreams260K.bin');
const tok = join(models, 'aidreams-tok512.bin');
const skip = (!existsSync(join(root, 'dist', 'qkv-mt.wasm')) && 'the pthreads build (dist/qkv-mt.wasm) is not built') ||
  (!existsSync(model) && `${model} is missing`);

test('12 failed loads with threads, then a good model loads, generates, disposes and the process ends', { skip }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'qkv-failed-loads-'));
  try {
    // A llama2.c checkpoint cut inside its weights: the header passes, the load fails in C++
    // after the thread pool exists.
    const bytes = readFileSync(model);
    writeFileSync(join(dir, 'cut.bin'), bytes.subarray(0, Math.floor(bytes.length / 2)));
    const script = `
      import { loadModel } from ${JSON.stringify(join(root, 'src', 'js', 'node.js'))};
      const codes = [];
      for (let i = 0; i < 12; i++) {
        try { await loadModel(${JSON.stringify(join(dir, 'cut.bin'))}, { tokenizer: ${JSON.stringify(tok)}, threads: 2 }); codes.push('loaded'); }
        catch (e) { codes.push(e.code); }
      }
      const m = await loadModel(${JSON.stringify(model)}, { tokenizer: ${JSON.stringify(tok)}, threads: 2 });
      const info = m.info;
      let text = '';
      for await (const piece of m.generate('Once', { maxTokens: 8, temperature: 0 })) text += piece;
      m.dispose();
      console.log(JSON.stringify({ codes, threads: info.threads, text }));
    `;
    writeFileSync(join(dir, 'child.mjs'), script);
    const r = spawnSync(process.execPath, ['--no-liftoff', '--no-wasm-dynamic-tiering', join(dir, 'child.mjs')],
      { encoding: 'utf8', timeout: 120000 });
    assert.equal(r.signal, null, `the child hung (killed by ${r.signal}); stderr: ${r.stderr.slice(-2000)}`);
    assert.equal(r.status, 0, r.stderr.slice(-2000));
    const out = JSON.parse(r.stdout.trim().split('\n').pop());
    assert.deepEqual(out.codes, new Array(12).fill('bad_model'));
    assert.equal(out.threads, 2);
    assert.ok(out.text.length > 0, 'the good model generated text');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
