// The installed package resolves and exports the API (run inside the consumer project).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, sep } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as qkv from 'qkv';
import { AIDREAMS, REFERENCES, TOK, expectedText } from './common.mjs';

const here = fileURLToPath(new URL('.', import.meta.url));

test("'qkv' resolves to the installed package's Node entry, not the repository", () => {
  const resolved = fileURLToPath(import.meta.resolve('qkv'));
  assert.equal(resolved, join(here, 'node_modules', 'qkv', 'src', 'js', 'node.js'));
  assert.ok(resolved.includes(`${sep}node_modules${sep}qkv${sep}`));
});

test('the package exports loadModel, QkvError, ErrorCodes, Model, Session', () => {
  assert.equal(typeof qkv.loadModel, 'function');
  assert.equal(typeof qkv.QkvError, 'function');
  assert.equal(typeof qkv.Model, 'function');
  assert.equal(typeof qkv.Session, 'function');
  assert.deepEqual([...qkv.ErrorCodes].sort(), ['aborted', 'bad_argument', 'bad_model', 'bad_tokenizer', 'busy', 'disposed',
    'internal', 'io', 'out_of_memory', 'quota', 'unsupported', 'webgpu_failed']);
  assert.ok(Object.isFrozen(qkv.ErrorCodes));
  const e = new qkv.QkvError('io', 'x');
  assert.ok(e instanceof Error);
  assert.equal(e.code, 'io');
  assert.equal(e.name, 'QkvError');
});

test("'qkv/package.json' is exported and names the package", () => {
  const require = createRequire(import.meta.url);
  const pkg = require('qkv/package.json');
  assert.equal(pkg.name, 'qkv');
  assert.equal(pkg.type, 'module');
});

test('a CommonJS consumer can load the package with import()', () => {
  const file = join(here, 'cjs-consumer.cjs');
  writeFileSync(file, `import('qkv').then(async ({ loadModel }) => {
    const m = await loadModel(${JSON.stringify(AIDREAMS)}, { tokenizer: ${JSON.stringify(TOK)}, threads: 1 });
    process.stdout.write(JSON.stringify({ arch: m.info.arch, text: await m.complete('I dream of', { temperature: 0, maxTokens: 5 }) }));
    m.dispose();
  }).catch((e) => { console.error(e); process.exit(1); });\n`);
  const r = spawnSync(process.execPath, [file], { cwd: here, encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.equal(out.arch, 'llama');
  assert.ok(out.text.length > 0 && expectedText(REFERENCES[0]).startsWith(out.text), `greedy text ${JSON.stringify(out.text)}`);
});

test('a model loads and generates through the installed package with default options', async () => {
  const m = await qkv.loadModel(AIDREAMS, { tokenizer: TOK });
  try {
    assert.ok(m instanceof qkv.Model);
    assert.ok(m.session instanceof qkv.Session);
    assert.equal(m.info.backend, 'wasm');
    assert.equal(typeof await m.complete('I dream of', { maxTokens: 10, seed: 1 }), 'string');
  } finally {
    m.dispose();
  }
});
