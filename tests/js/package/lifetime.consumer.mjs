// qkv leaves nothing running behind it: failed loads release their threads, and a program using
// the worker ends by itself. Each case is a program run in a child process; a child that does not
// end within its time limit is the failure.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AIDREAMS, TOK, child } from './common.mjs';

test('failed loads (empty file, text file) leave no thread behind: 24 of them, then the process ends by itself', () => {
  const r = child(`
import { writeFileSync } from 'node:fs';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadModel } from 'qkv';
const threads = () => Number(/Threads:\\s+(\\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))[1]);
const empty = join(tmpdir(), 'qkv-empty-' + process.pid + '.gguf');
const text = join(tmpdir(), 'qkv-text-' + process.pid + '.gguf');
writeFileSync(empty, '');
writeFileSync(text, 'This is a text file, not a model.\\n'.repeat(40));
const fail = async (path, t) => {
  try { await loadModel(path, { threads: t, tokenizer: ${JSON.stringify(TOK)} }); } catch (e) { return e.code; }
  throw new Error('the load of ' + path + ' did not fail');
};
const codes = new Set();
for (const t of [4, 1]) codes.add(await fail(text, t));  // both builds instantiated: the baseline
const base = threads();
for (let i = 0; i < 12; i++) for (const p of [empty, text]) codes.add(await fail(p, 4));
const m = await loadModel(${JSON.stringify(AIDREAMS)}, { tokenizer: ${JSON.stringify(TOK)}, threads: 4 });
await m.complete('I dream of', { maxTokens: 4 });
m.dispose();
console.log(JSON.stringify({ codes: [...codes], base, after: threads() }));
`, 90000);
  assert.equal(r.timedOut, false, `the process did not end by itself after 24 failed loads (a thread left behind):\n${r.stdout}\n${r.stderr.slice(-2000)}`);
  assert.equal(r.status, 0, r.stderr.slice(-3000));
  const { codes, base, after } = JSON.parse(r.stdout.trim().split('\n').at(-1));
  assert.deepEqual(codes.filter((c) => c !== 'bad_model'), [], `the loads failed with ${codes}`);
  // Each leaked load would keep 3 pool threads (threads: 4): 24 loads, 72 threads.
  assert.ok(after - base < 8, `threads grew from ${base} to ${after} over 24 failed loads and one good one`);
});

const WORKER = `
import { createWorker } from 'qkv/worker';
const worker = await createWorker();
const model = await worker.loadModel(${JSON.stringify(AIDREAMS)}, { tokenizer: ${JSON.stringify(TOK)} });
let out = '';
for await (const { text } of model.generate('I dream of', { maxTokens: 8 })) out += text;
await model.dispose();
console.log('generated ' + out.length);
`;

test('a program using createWorker ends by itself after model.dispose() (the README example)', () => {
  const r = child(WORKER, 60000);
  assert.equal(r.timedOut, false, `the process did not end after model.dispose():\n${r.stdout}\n${r.stderr.slice(-2000)}`);
  assert.equal(r.status, 0, r.stderr.slice(-3000));
  assert.match(r.stdout, /generated \d+/);
});

test('worker.terminate() ends the worker: the process exits, later calls fail with disposed', () => {
  const r = child(`${WORKER}
const pending = model.complete('I dream of', { maxTokens: 400, stopTokens: [] }).catch((e) => e.code);
await worker.terminate();
console.log('pending ' + await pending);
try { await worker.loadModel(${JSON.stringify(AIDREAMS)}, { tokenizer: ${JSON.stringify(TOK)} }); } catch (e) { console.log('after ' + e.code); }
setInterval(() => {}, 1000).unref();
`, 60000);
  assert.equal(r.timedOut, false, `the process did not end after terminate():\n${r.stdout}\n${r.stderr.slice(-2000)}`);
  assert.equal(r.status, 0, r.stderr.slice(-3000));
  assert.match(r.stdout, /pending disposed/);
  assert.match(r.stdout, /after disposed/);
});
