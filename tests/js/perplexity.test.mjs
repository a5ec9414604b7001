// `qkv perplexity` in the Node CLI (WASM, JS API) against the native CLI: same windows, same
// counts, the same perplexity to float rounding; bad invocations are clean errors.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { haveNative, models, nativeBin, runNative, runWasm } from './helpers.mjs';

const dir = mkdtempSync(join(tmpdir(), 'qkv-ppl-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const model = join(models, 'aidreams260K.bin'), tok = join(models, 'aidreams-tok512.bin');

// A text the model wrote itself (the WASM CLI's run.c-identical sampling, three seeds).
function selfText() {
  let text = '';
  for (const seed of ['1', '2', '3']) {
    const r = runWasm(['run', model, '-z', tok, '-n', '0', '-t', '1', '-s', seed, '--threads', '1']);
    assert.equal(r.status, 0, r.stderr);
    text += r.stdout.toString();
  }
  const path = join(dir, 'text.txt');
  writeFileSync(path, text);
  return path;
}

const parse = (out) => {
  const m = /^perplexity: ([0-9.]+) \(([0-9]+) tokens predicted, ([0-9]+) tokens in ([0-9]+) windows\)\n$/.exec(out);
  assert.ok(m, `unexpected output: ${out}`);
  return { ppl: Number(m[1]), predicted: Number(m[2]), tokens: Number(m[3]), windows: Number(m[4]) };
};

test('perplexity: the WASM CLI agrees with the native CLI', { skip: !haveNative && `no native CLI at ${nativeBin}` }, () => {
  const text = selfText();
  for (const ctx of ['128', '50']) {
    const args = ['perplexity', model, text, '-z', tok, '--ctx', ctx, '--threads', '1'];
    const w = runWasm(args), n = runNative(args);
    assert.equal(w.status, 0, w.stderr);
    assert.equal(n.status, 0, n.stderr);
    const a = parse(w.stdout.toString()), b = parse(n.stdout.toString());
    assert.deepEqual({ ...a, ppl: 0 }, { ...b, ppl: 0 });
    assert.equal(a.predicted, a.tokens - a.windows);
    assert.ok(Math.abs(a.ppl / b.ppl - 1) < 1e-3, `${a.ppl} vs ${b.ppl}`);
    assert.ok(a.ppl > 1 && a.ppl < 12, `perplexity ${a.ppl} on the model's own text`);
    assert.match(w.stderr, /^\[1\/[0-9]+\] [0-9]+ tokens, window ppl [0-9.]+, running ppl [0-9.]+$/m);
  }
});

test('perplexity: bad invocations are clean errors', () => {
  const empty = join(dir, 'empty.txt');
  writeFileSync(empty, '');
  for (const [args, re] of [
    [['perplexity', model], /usage: qkv perplexity/],
    [['perplexity', model, join(dir, 'missing.txt'), '-z', tok], /\[io\].*cannot open/],
    [['perplexity', model, empty, '-z', tok], /\[bad_argument\].*is empty/],
    [['perplexity', model, empty, '--ctx', '0'], /--ctx must be/],
    [['perplexity', model, empty, '--bogus', '1'], /unknown option --bogus/],
  ]) {
    const r = runWasm(args);
    assert.equal(r.status, 1, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, re);
    assert.doesNotMatch(r.stderr, /internal|at .*\.js:/);
  }
});
