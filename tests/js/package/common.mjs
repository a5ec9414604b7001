// Shared by the consumer tests: these files are copied into a temporary project that installed
// the packed qkv tarball, so they import 'qkv' by its package name, never the repository's sources.
// The fixtures stay where they are; the outer test passes their absolute paths in the environment.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ErrorCodes, QkvError } from 'qkv';

export const MODELS = process.env.QKV_TEST_MODELS;
export const REFERENCE = process.env.QKV_TEST_REFERENCE;
assert.ok(MODELS && REFERENCE, 'QKV_TEST_MODELS and QKV_TEST_REFERENCE must name the fixture folders');

export const AIDREAMS = join(MODELS, 'aidreams260K.bin');
export const STORIES = join(MODELS, 'stories260K.bin');
export const TOK = join(MODELS, 'aidreams-tok512.bin');
export const LLAMA_TOK = join(MODELS, 'llama2-tokenizer.bin');

/**
 * The three llama2.c reference runs. `n` counts positions including the prompt's tokens (BOS
 * included), as run.c does, so the API's maxTokens is n - promptTokens + 1.
 */
export const REFERENCES = [
  { file: 'aidreams260K.greedy.i-dream-of.n60.txt', model: AIDREAMS, prompt: 'I dream of', n: 60, sampling: { temperature: 0 } },
  { file: 'aidreams260K.t1-p0.9-s42.i-dream-of.n60.txt', model: AIDREAMS, prompt: 'I dream of', n: 60, sampling: { temperature: 1, topP: 0.9, seed: 42 } },
  { file: 'stories260K.greedy.aidreams-tok512.n64.txt', model: STORIES, prompt: '', n: 64, sampling: { temperature: 0 } },
];

/** The reference stdout minus the echoed prompt and the final newline: what generate() must produce. */
export function expectedText(ref) {
  const out = readFileSync(join(REFERENCE, ref.file), 'utf8');
  assert.ok(out.startsWith(ref.prompt), `${ref.file} does not start with its prompt`);
  assert.ok(out.endsWith('\n'), `${ref.file} does not end with a newline`);
  return out.slice(ref.prompt.length, -1);
}

/** generate() options reproducing a reference run on `model`. */
export function referenceOptions(model, ref) {
  const promptTokens = model.tokenize(ref.prompt).length;
  return { ...ref.sampling, maxTokens: ref.n - promptTokens + 1, stopTokens: [1] };
}

/** Index of the largest value. */
export function argmax(a) {
  let best = 0;
  for (let i = 1; i < a.length; i++) if (a[i] > a[best]) best = i;
  return best;
}

function checkError(e, code, keyword) {
  assert.ok(e instanceof QkvError, `expected a QkvError, got ${e?.constructor?.name}: ${e?.message ?? e}`);
  assert.ok(e instanceof Error, 'QkvError must be an Error');
  assert.equal(e.name, 'QkvError');
  assert.ok(ErrorCodes.includes(e.code), `code ${e.code} is not one of ErrorCodes`);
  assert.equal(e.code, code, `expected code '${code}', got '${e.code}': ${e.message}`);
  if (keyword) assert.match(e.message, keyword, `the message should mention ${keyword}: ${e.message}`);
  return true;
}

/** Asserts that fn() throws synchronously a QkvError with this code (and a message matching keyword). */
export function throwsQkv(fn, code, keyword) {
  assert.throws(fn, (e) => checkError(e, code, keyword));
}

/** Asserts that the promise (or the promise fn() returns) rejects with a QkvError with this code. */
export async function rejectsQkv(p, code, keyword) {
  await assert.rejects(typeof p === 'function' ? p : Promise.resolve(p), (e) => checkError(e, code, keyword));
}

/** Collects a generate() stream. */
export async function collect(iterable) {
  const items = [];
  for await (const t of iterable) items.push(t);
  return items;
}

let n = 0;
/** Runs `code` as an ES module in a fresh Node process: {status, signal, stdout, stderr, timedOut}. */
export function child(code, timeout = 60000) {
  const file = join(process.cwd(), `child-${process.pid}-${n++}.mjs`);
  writeFileSync(file, code);
  try {
    const env = { ...process.env };
    delete env.NODE_TEST_CONTEXT;
    const r = spawnSync(process.execPath, [file], { env, encoding: 'utf8', timeout, maxBuffer: 1 << 26 });
    return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr, timedOut: r.error?.code === 'ETIMEDOUT' };
  } finally {
    rmSync(file, { force: true });
  }
}
