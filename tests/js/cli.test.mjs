// Both CLIs (build/qkv and bin/qkv.mjs) on issue 33's cases: errors that name the file's format,
// `--chat -n` counting the reply, --version, info/tokenize (the same bytes from both), the help's
// quantize types, unknown flags, and the re-quantize guard (also in the JS quantize()).
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { QkvError, loadModel, quantize } from '../../src/js/node.js';
import { haveNative, root, runNative, runWasm } from './helpers.mjs';

const KJV = join(root, 'models', 'kjv-2m.gguf');
const VERSION = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version;
const tmp = mkdtempSync(join(tmpdir(), 'qkv-cli-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

const clis = [['node', runWasm], ...(haveNative ? [['native', runNative]] : [])];

function file(name, bytes) {
  const p = join(tmp, name);
  writeFileSync(p, bytes);
  return p;
}

test('load errors say what the file looks like and what was expected (both CLIs, JS API)', async () => {
  const text = file('notes.gguf', 'These are my notes, not a model.\nSecond line.\n');
  const empty = file('empty.gguf', '');
  const kjv = readFileSync(KJV);
  const cut = file('cut.gguf', kjv.subarray(0, 3000));
  for (const [name, run] of clis) {
    let r = run(['run', text, '-n', '4']);
    assert.equal(r.status, 1, name);
    assert.match(r.stderr, /\[bad_model\]: the file looks like a text file, not a model \(expected GGUF or a llama2\.c checkpoint\)/, name);
    assert.doesNotMatch(r.stderr, /dim =|n_heads/, name);
    r = run(['run', empty]);
    assert.match(r.stderr, /\[bad_model\]: the model file is empty/, name);
    r = run(['run', cut]);
    assert.match(r.stderr, /\[bad_model\]: GGUF: .*truncated/, name);
    assert.doesNotMatch(r.stderr, /llama2\.c/, name);
  }
  for (const [path, want] of [[text, /looks like a text file/], [empty, /is empty/], [cut, /GGUF: .*truncated/]]) {
    await assert.rejects(loadModel(path, { threads: 1 }), (e) => {
      assert.equal(e.code, 'bad_model');
      assert.match(e.message, want);
      assert.doesNotMatch(e.message, /llama2\.c checkpoint \(\.bin\)/);  // the old hint, appended to every bad_model
      return true;
    });
  }
});

test('--chat: -n counts the reply, a missing template is warned about (both CLIs)', () => {
  for (const [name, run] of clis) {
    const r = run(['run', KJV, '--chat', 'Hello there', '-n', '8', '-t', '0', '--threads', '1']);
    assert.equal(r.status, 0, `${name}: ${r.stderr}`);
    const reply = r.stdout.toString().trim();
    assert.ok(reply.length > 0, `${name}: empty reply; stderr: ${r.stderr}`);
    const st = /prefill: (\d+) tokens.*decode: (\d+) tokens/.exec(r.stderr);
    assert.ok(st, r.stderr);
    assert.ok(Number(st[1]) > 8, `${name}: the rendered prompt is longer than -n`);
    assert.ok(Number(st[2]) >= 1 && Number(st[2]) <= 8, `${name}: ${st[2]} reply tokens for -n 8`);
    assert.match(r.stderr, /qkv: this model has no chat template qkv recognizes; using ChatML/, name);
    // Plain run keeps run.c's count, and says why nothing came.
    const p = run(['run', KJV, '-i', 'In the beginning God created the heaven', '-n', '3', '--threads', '1']);
    assert.equal(p.status, 0, name);
    assert.match(p.stderr, /nothing was generated: -n 3 counts the prompt's \d+ tokens too/, name);
  }
});

test('--version, help, unknown flags (both CLIs)', () => {
  for (const [name, run] of clis) {
    const v = run(['--version']);
    assert.equal(v.status, 0, name);
    assert.match(v.stdout.toString(), new RegExp(`^qkv ${VERSION.replace(/\./g, '\\.')} \\(`), name);
    const h = run(['--help']);
    assert.equal(h.status, 0, name);
    const types = /TYPE: ([a-z0-9_|]+)/.exec(h.stdout.toString());
    assert.ok(types, `${name}: no TYPE list in the help`);
    assert.deepEqual(types[1].split('|').sort(), ['bf16', 'f16', 'f32', 'q4_0', 'q4_1', 'q4_k', 'q5_0', 'q5_1', 'q5_k', 'q8_0']);
    for (const cmd of ['info', 'tokenize', '--version', '--allow-requantize']) assert.ok(h.stdout.toString().includes(cmd), `${name}: ${cmd}`);
    let r = run(['run', KJV, '--frob']);
    assert.equal(r.status, 1, name);
    assert.match(r.stderr, /\[bad_argument\]: unknown option --frob\n/, name);
    assert.doesNotMatch(r.stderr, /needs a value/, name);
    r = run(['run', KJV, '--thread', '2']);
    assert.match(r.stderr, /unknown option --thread \(did you mean --threads\?\)/, name);
    const txt = file('p.txt', 'In the beginning God created the heaven and the earth.\n');
    r = run(['perplexity', KJV, txt, '--frob']);
    assert.match(r.stderr, /\[bad_argument\]: unknown option --frob\n/, `${name} perplexity`);
    r = run(['tokenise', KJV, 'x']);
    assert.equal(r.status, 1, name);
    assert.match(r.stderr, /^qkv: unknown command 'tokenise' \(did you mean tokenize\?\)/, name);
    r = run(['embed', KJV, '--no-normalise', 'hello']);
    assert.match(r.stderr, /unknown option --no-normalise \(did you mean --no-normalize\?\)/, `${name} embed`);
    r = run(['quantize', KJV, join(tmp, 'x.gguf'), '--type', 'q8_0', '--allow-requantise']);
    assert.match(r.stderr, /unknown option --allow-requantise \(did you mean --allow-requantize\?\)/, `${name} quantize`);
  }
});

test('info and tokenize: the same bytes from both CLIs, ids of the model\'s tokenizer', { skip: !haveNative && 'no native build' }, async () => {
  for (const args of [['info', KJV], ['tokenize', KJV, 'In the beginning "God" created']]) {
    const n = runNative(args), w = runWasm(args);
    assert.equal(n.status, 0, n.stderr);
    assert.equal(w.status, 0, w.stderr);
    assert.equal(w.stdout.toString(), n.stdout.toString(), args[0]);
  }
  const info = JSON.parse(runNative(['info', KJV]).stdout.toString());
  const m = await loadModel(KJV, { threads: 1 });
  try {
    for (const k of ['arch', 'dim', 'layers', 'heads', 'kvHeads', 'vocabSize', 'contextLength', 'chatFormat']) assert.equal(info[k], m.info[k], k);
    const lines = runNative(['tokenize', KJV, 'In the beginning "God" created']).stdout.toString().trim().split('\n');
    assert.deepEqual(lines.map((l) => Number(l.split('\t')[0])), m.tokenize('In the beginning "God" created'));
    for (const l of lines) JSON.parse(l.split('\t')[1]);  // each piece a JSON string
  } finally {
    m.dispose();
  }
  const r = runNative(['tokenize', KJV]);
  assert.match(r.stderr, /missing TEXT/);
});

test('re-quantizing a quantized model is refused unless allowed (both CLIs, JS quantize)', async () => {
  const q8 = join(tmp, 'kjv-q8.gguf');
  let r = runWasm(['quantize', KJV, q8, '--type', 'q8_0']);
  assert.equal(r.status, 0, r.stderr);
  for (const [name, run] of clis) {
    const out = join(tmp, `again-${name}.gguf`);
    r = run(['quantize', q8, out, '--type', 'q4_0']);
    assert.equal(r.status, 1, name);
    assert.match(r.stderr, /\[bad_argument\]: the input is already quantized \(\d+ Q8_0 matrices\).*--allow-requantize/, name);
    r = run(['quantize', q8, out, '--type', 'q4_0', '--allow-requantize']);
    assert.equal(r.status, 0, `${name}: ${r.stderr}`);
  }
  await assert.rejects(quantize(q8, { type: 'q4_0' }), (e) => e.code === 'bad_argument' && /already quantized/.test(e.message));
  const ok = await quantize(q8, { type: 'q4_0', allowRequantize: true });
  assert.ok(ok.outBytes > 0);
  await assert.rejects(quantize(q8, { type: 'q4_0', allowRequantize: 'yes' }), (e) => e.code === 'bad_argument');
});

test('unsupported errors carry no appended "not supported yet"', () => {
  const e = new QkvError('unsupported', 'GGUF version 1 is not supported (only 2 and 3); re-convert the model');
  assert.equal(e.message, 'GGUF version 1 is not supported (only 2 and 3); re-convert the model');
});
