// The qkv command installed with the package (node_modules/.bin/qkv and npx).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadModel } from 'qkv';
import { AIDREAMS, REFERENCE, STORIES, TOK } from './common.mjs';

const here = fileURLToPath(new URL('.', import.meta.url));
const BIN = join(here, 'node_modules', '.bin', 'qkv');

function run(cmd, args) {
  const r = spawnSync(cmd, args, { cwd: here, timeout: 60000, maxBuffer: 1 << 24 });
  return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr?.toString() ?? String(r.error) };
}

const GREEDY = ['run', AIDREAMS, '-z', TOK, '-t', '0', '-n', '60', '-i', 'I dream of'];

test('npx qkv run reproduces the greedy reference byte for byte', () => {
  const r = run('npx', ['--no', '--', 'qkv', ...GREEDY]);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(r.stdout, readFileSync(join(REFERENCE, 'aidreams260K.greedy.i-dream-of.n60.txt')));
});

test('node_modules/.bin/qkv run reproduces all three references byte for byte', () => {
  const cases = [
    ['aidreams260K.greedy.i-dream-of.n60.txt', GREEDY.slice(1)],
    ['aidreams260K.t1-p0.9-s42.i-dream-of.n60.txt', [AIDREAMS, '-z', TOK, '-t', '1.0', '-p', '0.9', '-s', '42', '-n', '60', '-i', 'I dream of']],
    ['stories260K.greedy.aidreams-tok512.n64.txt', [STORIES, '-z', TOK, '-t', '0', '-n', '64']],
  ];
  for (const [ref, args] of cases) {
    const r = run(BIN, ['run', ...args]);
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(r.stdout, readFileSync(join(REFERENCE, ref)), ref);
    assert.match(r.stderr, /tok\/s/);
  }
});

test('qkv info prints JSON with arch llama', () => {
  const r = run(BIN, ['info', AIDREAMS, '-z', TOK]);
  assert.equal(r.status, 0, r.stderr);
  const info = JSON.parse(r.stdout.toString());
  assert.equal(info.arch, 'llama');
  assert.equal(info.vocabSize, 512);
  assert.equal(info.contextLength, 128);
  assert.equal(info.layers, 4);
});

test('qkv tokenize prints one line per token, the same ids as the API', async () => {
  const r = run(BIN, ['tokenize', AIDREAMS, '-z', TOK, 'I dream of']);
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.toString().split('\n');
  assert.equal(lines.pop(), '', 'output ends with a newline');
  const m = await loadModel(AIDREAMS, { tokenizer: TOK, threads: 1 });
  try {
    const ids = m.tokenize('I dream of');
    assert.equal(lines.length, ids.length);
    // Each line is the id and the vocabulary's piece (JSON): BOS shows as its piece, text tokens
    // as the text they decode to (SentencePiece's '▁' is the space).
    assert.equal(ids[0], m.info.bosId ?? 1);
    lines.forEach((line, i) => {
      const [id, piece] = line.split('\t');
      assert.equal(Number(id), ids[i], line);
      if (i > 0) assert.equal(JSON.parse(piece).replaceAll('\u2581', ' '), m.detokenize([ids[i]]), line);
      else assert.match(JSON.parse(piece), /<s>/, line);
    });
    assert.equal(lines.slice(1).map((l) => JSON.parse(l.split('\t')[1]).replaceAll('\u2581', ' ')).join(''), ' I dream of');
  } finally {
    m.dispose();
  }
});

test('qkv errors: exit status 1, nothing on stdout, a coded message on stderr', () => {
  for (const [args, code] of [
    [['run', join(here, 'missing.bin'), '-z', TOK], 'io'],
    [['run', TOK, '-z', TOK], 'bad_model'],
    [['info', AIDREAMS, '-z', STORIES], 'bad_tokenizer'],
    [['run', AIDREAMS, '-z', TOK, '-t', 'hot'], 'bad_argument'],
  ]) {
    const r = run(BIN, args);
    assert.equal(r.status, 1, `${args.join(' ')}: ${r.stderr}`);
    assert.equal(r.stdout.length, 0);
    assert.match(r.stderr, new RegExp(`^qkv: error \\[${code}\\]: `, 'm'));
  }
  const h = run(BIN, ['--help']);
  assert.equal(h.status, 0);
  assert.match(h.stdout.toString(), /qkv run MODEL/);
});
