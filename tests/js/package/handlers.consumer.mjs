// qkv as a guest in someone else's Node process: loading a model installs no process-wide
// handlers, so the program's own errors and handlers behave as without qkv. Each case is a small
// program run in a child process (written next to this file, so 'qkv' is the installed package).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AIDREAMS, TOK, child } from './common.mjs';

const LOAD = (threads) => `
import { loadModel } from 'qkv';
const EVENTS = ['uncaughtException', 'unhandledRejection', 'exit', 'warning', 'SIGINT'];
const count = () => EVENTS.map((e) => process.listenerCount(e));
const before = count();
const m = await loadModel(${JSON.stringify(AIDREAMS)}, { tokenizer: ${JSON.stringify(TOK)}, threads: ${threads} });
await m.complete('I dream of', { maxTokens: 4, temperature: 0 });
console.log('listeners ' + JSON.stringify({ before, after: count() }));
`;

function listeners(stdout) {
  const line = stdout.split('\n').find((l) => l.startsWith('listeners '));
  assert.ok(line, `the child printed no listener counts:\n${stdout}`);
  return JSON.parse(line.slice('listeners '.length));
}

for (const threads of [1, 2]) {
  test(`threads ${threads}: loadModel adds no process listeners; the user's unhandledRejection handler runs`, () => {
    const r = child(`${LOAD(threads)}
process.on('unhandledRejection', (reason) => { console.log('user handler: ' + reason.message); process.exitCode = 42; });
Promise.reject(new Error('a bug in the user program'));
`);
    assert.equal(r.timedOut, false, 'the child did not end');
    const { before, after } = listeners(r.stdout);
    assert.deepEqual(after, before, 'loadModel changed process.listenerCount (uncaughtException, unhandledRejection, exit, warning, SIGINT)');
    assert.match(r.stdout, /user handler: a bug in the user program/);
    assert.equal(r.status, 42, `exit status ${r.status}; stderr:\n${r.stderr.slice(0, 2000)}`);
    assert.doesNotMatch(r.stderr, /GROWABLE_HEAP|function\s*\w*\(|ExitStatus/, 'Emscripten glue in the output');
  });

  test(`threads ${threads}: an uncaught error in user code ends the process as Node does (status 1, its own stack)`, () => {
    const r = child(`${LOAD(threads)}
setTimeout(() => { throw new Error('a bug in the user program'); }, 0);
`);
    assert.equal(r.timedOut, false, 'the child did not end');
    assert.equal(r.status, 1, `exit status ${r.status}; stderr:\n${r.stderr.slice(0, 2000)}`);
    assert.match(r.stderr, /Error: a bug in the user program/);
    assert.doesNotMatch(r.stderr, /GROWABLE_HEAP|ExitStatus/, 'Emscripten glue in the output');
    assert.ok(r.stderr.length < 4000, `${r.stderr.length} characters on stderr: more than Node's own report of one error`);
  });
}
