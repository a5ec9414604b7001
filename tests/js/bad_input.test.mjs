// Bad input through both command-line front ends: the Node CLI on the WASM engine
// (bin/qkv.mjs) and the native CLI (build/qkv, or $QKV_NATIVE_BIN). Every case must exit with
// status 1 (never a signal), print nothing on stdout, and print one
// "qkv: error [code]: message" line that names the problem -- the same line from both CLIs,
// except for io errors, whose OS wording differs.
//
// Run: node --test tests/js/   (QKV_NATIVE_BIN=/path/to/qkv to pick the native binary)
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const NATIVE = process.env.QKV_NATIVE_BIN ? resolve(process.env.QKV_NATIVE_BIN) : join(root, 'build', 'qkv');
const HAVE_NATIVE = existsSync(NATIVE);
const NATIVE_SKIP = HAVE_NATIVE ? false : `no native binary at ${NATIVE} (set QKV_NATIVE_BIN)`;
const WASM_CLI = join(root, 'bin', 'qkv.mjs');
const SHARED = join(root, '..', 'shared', 'models');
const AIDREAMS = join(SHARED, 'aidreams260K.bin');
const AIDREAMS_TOK = join(SHARED, 'aidreams-tok512.bin');
const LLAMA_TOK = join(SHARED, 'llama2-tokenizer.bin');
const HAVE_FIXTURES = [AIDREAMS, AIDREAMS_TOK, LLAMA_TOK].every((p) => existsSync(p));
const FIXTURE_SKIP = HAVE_FIXTURES ? false : `fixtures missing under ${SHARED}`;

// Scratch directory: synthetic models and corrupted copies live here, never in the repository.
const tmp = mkdtempSync(join(tmpdir(), 'qkv-bad-input-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

// ---------------------------------------------------------------------------------------------
// Synthetic llama2.c checkpoints and tokenizers
// ---------------------------------------------------------------------------------------------

const F = { dim: 0, hidden: 1, layers: 2, heads: 3, kvHeads: 4, vocab: 5, seqLen: 6 };
// dim 8, hidden 16, 1 layer, 2 heads (head size 4), 1 kv head, vocab 32, context 16.
const TINY = [8, 16, 1, 2, 1, 32, 16];

function weightFloats(h, freq = false) {
  const [dim, hid, L, heads, kvh, v, seq] = h;
  const V = Math.abs(v), hd = dim / heads, kvd = kvh * hd;
  let n = V * dim + L * dim + L * dim * dim + 2 * L * kvd * dim + L * dim * dim + L * dim + 3 * L * hid * dim + dim;
  if (freq) n += seq * (hd / 2) * 2;
  if (v < 0) n += V * dim;
  return n;
}

function checkpoint(h, { freq = false, seed = 1 } = {}) {
  const n = weightFloats(h, freq);
  const buf = Buffer.alloc(28 + 4 * n);
  h.forEach((v, i) => buf.writeInt32LE(v, 4 * i));
  let s = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;  // xorshift32
    buf.writeFloatLE((s / 4294967296 - 0.5) * 0.5, 28 + 4 * i);
  }
  return buf;
}

function withFields(bytes, fields) {
  const b = Buffer.from(bytes);
  for (const [name, v] of Object.entries(fields)) b.writeInt32LE(v, 4 * F[name]);
  return b;
}

function tinyPieces(n) {
  const s = ['<unk>', '\n<s>\n', '\n</s>\n', ' ', ...'abcdefghijklmnopqrstuvwxyz', 'ab', 'ba'];
  for (let i = 0; s.length < n; i++) s.push(`x${i}`);
  return s.slice(0, n).map((p, i) => ({ score: i < 3 ? 0 : -i, bytes: Buffer.from(p) }));
}

function tokenizer(pieces, maxTokenLength = 8) {
  const parts = [Buffer.alloc(4)];
  parts[0].writeInt32LE(maxTokenLength, 0);
  for (const p of pieces) {
    const rec = Buffer.alloc(8);
    rec.writeFloatLE(p.score, 0);
    rec.writeInt32LE(p.len ?? p.bytes.length, 4);
    parts.push(rec, p.bytes);
  }
  return Buffer.concat(parts);
}

let fileCounter = 0;
function file(name, bytes) {
  const p = join(tmp, `${String(fileCounter++).padStart(3, '0')}-${name}`);
  writeFileSync(p, bytes);
  return p;
}

const tinyBytes = checkpoint(TINY);
const tinyTokBytes = tokenizer(tinyPieces(32));
const MODEL = file('tiny.bin', tinyBytes);
const TOK = file('tiny-tok.bin', tinyTokBytes);
const model = (name, bytes) => file(name, bytes);
const header = (name, fields) => file(name, withFields(tinyBytes, fields));

// ---------------------------------------------------------------------------------------------
// Running the two CLIs
// ---------------------------------------------------------------------------------------------

function runCli(kind, argv) {
  const [cmd, args] = kind === 'native' ? [NATIVE, argv] : [process.execPath, [WASM_CLI, ...argv]];
  // cwd = the scratch directory, so the default "tokenizer.bin" is never found by accident.
  return spawnSync(cmd, args, { cwd: tmp, encoding: 'utf8', timeout: 30000, maxBuffer: 16 << 20 });
}

const firstLine = (s) => s.split('\n')[0];

function assertCleanError(r, code, patterns, kind) {
  const where = `${kind} CLI\n--- stderr ---\n${r.stderr}\n--- stdout ---\n${r.stdout}`;
  assert.equal(r.error, undefined, `spawn failed: ${r.error}`);
  assert.equal(r.signal, null, `killed by ${r.signal}; ${where}`);
  assert.equal(r.status, 1, `exit status ${r.status} instead of 1; ${where}`);
  assert.ok(r.stderr.startsWith(`qkv: error [${code}]: `), `stderr must start with "qkv: error [${code}]: "; ${where}`);
  const line = firstLine(r.stderr);
  for (const re of patterns) assert.match(line, re, `${kind} CLI message does not name the problem`);
  assert.doesNotMatch(r.stderr, /terminate called|Aborted|Segmentation|RuntimeError|\bat .*\.m?js:\d+/,
    `crash or stack trace on stderr; ${where}`);
  assert.equal(r.stdout, '', `nothing may be printed on stdout before the error; ${where}`);
}

// One CLI case: a subtest per CLI, then one comparing their first stderr lines.
function errorCase(name, argv, code, patterns, opts = {}) {
  test(name, { skip: opts.skip ?? false }, async (t) => {
    const runs = {};
    await t.test('wasm', () => {
      runs.wasm = runCli('wasm', ['run', ...argv]);
      assertCleanError(runs.wasm, code, patterns, 'wasm');
    });
    await t.test('native', { skip: NATIVE_SKIP }, () => {
      runs.native = runCli('native', ['run', ...argv]);
      assertCleanError(runs.native, code, patterns, 'native');
    });
    await t.test('same first line from both CLIs', { skip: NATIVE_SKIP }, () => {
      assert.equal(firstLine(runs.wasm.stderr), firstLine(runs.native.stderr));
      if (code === 'bad_argument') {
        assert.match(runs.wasm.stderr, /Usage:\s+qkv run MODEL/);
        assert.equal(runs.wasm.stderr, runs.native.stderr, 'usage text after a bad_argument error differs');
      }
    });
  });
}

function okCase(name, argv, opts = {}) {
  test(name, { skip: opts.skip ?? false }, async (t) => {
    for (const kind of ['wasm', 'native']) {
      await t.test(kind, { skip: kind === 'native' ? NATIVE_SKIP : false }, () => {
        const r = runCli(kind, ['run', ...argv]);
        assert.equal(r.signal, null, r.stderr);
        assert.equal(r.status, 0, r.stderr);
        assert.doesNotMatch(r.stderr, /qkv: error/);
        assert.ok(r.stdout.endsWith('\n'));
        if (opts.check) opts.check(r);
      });
    }
  });
}

const base = (...extra) => [MODEL, '-z', TOK, ...extra];

// ---------------------------------------------------------------------------------------------
// Baselines: the synthetic files are valid.
// ---------------------------------------------------------------------------------------------

okCase('baseline: tiny synthetic model runs', base('-n', '8', '-t', '0', '-i', 'ab ba'),
  { check: (r) => assert.ok(r.stdout.startsWith('ab ba')) });
okCase('baseline: freq_cis layout and separate classifier load',
  [file('freq.bin', checkpoint([8, 16, 1, 2, 1, -32, 16], { freq: true })), '-z', TOK, '-n', '4', '-t', '0']);
// Documented: out-of-range numbers are clamped as run.c does (-k < 0 -> off, -n < 0 -> whole
// context, -p outside [0, 1] -> 0.9, -t < 0 -> greedy).
okCase('clamped, not refused: -k -5 -n -3 -p 7 -t -1', base('-k', '-5', '-n', '-3', '-p', '7', '-t', '-1', '-i', 'ab'));

// ---------------------------------------------------------------------------------------------
// Missing and truncated checkpoints
// ---------------------------------------------------------------------------------------------

errorCase('model file does not exist', [join(tmp, 'nope.bin'), '-z', TOK], 'io', [/cannot open/, /nope\.bin/]);
errorCase('model path is a directory', [tmp, '-z', TOK], 'io', [new RegExp(tmp.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))]);
errorCase('empty model file', [model('empty.bin', Buffer.alloc(0)), '-z', TOK], 'bad_model', [/empty/]);
for (const n of [1, 10, 27]) {
  errorCase(`model cut at ${n} bytes (inside the header)`, [model(`cut${n}.bin`, tinyBytes.subarray(0, n)), '-z', TOK],
    'bad_model', [/truncated/, new RegExp(`${n} bytes`), /28-byte header/]);
}
for (const [label, n] of [['28 bytes (header only)', 28], ['the middle of the weights', tinyBytes.length >> 1],
  ['one byte short', tinyBytes.length - 1]]) {
  errorCase(`model cut at ${label}`, [model(`cut-${n}.bin`, tinyBytes.subarray(0, n)), '-z', TOK], 'bad_model',
    [/truncated/, new RegExp(`needs ${tinyBytes.length} bytes`), new RegExp(`the file has ${n}\\b`)]);
}
errorCase('model with trailing extra bytes', [model('trailing.bin', Buffer.concat([tinyBytes, Buffer.alloc(5)])), '-z', TOK],
  'bad_model', [/matches neither/, /corrupt/]);

// ---------------------------------------------------------------------------------------------
// Impossible header values
// ---------------------------------------------------------------------------------------------

const G = 2 ** 30;
const headerCases = [
  ['dim 0', { dim: 0 }, [/dim = 0/]],
  ['negative dim', { dim: -8 }, [/dim = -8/]],
  ['hidden_dim 0', { hidden: 0 }, [/hidden_dim = 0/]],
  ['negative n_layers', { layers: -1 }, [/n_layers = -1/]],
  ['n_heads 0', { heads: 0 }, [/n_heads = 0/]],
  ['n_kv_heads 0', { kvHeads: 0 }, [/n_kv_heads = 0/]],
  ['seq_len 0', { seqLen: 0 }, [/seq_len = 0/]],
  ['negative seq_len', { seqLen: -16 }, [/seq_len = -16/]],
  ['n_heads does not divide dim', { heads: 3 }, [/not divisible by n_heads = 3/]],
  ['n_kv_heads > n_heads', { kvHeads: 4 }, [/n_kv_heads = 4/, /n_heads = 2/]],
  ['n_kv_heads does not divide n_heads', { dim: 12, heads: 3, kvHeads: 2 }, [/n_heads = 3/, /n_kv_heads = 2/]],
  ['odd head size', { dim: 6 }, [/3/, /odd|even/]],
  ['vocab_size 0', { vocab: 0 }, [/vocab_size/]],
  ['vocab_size INT32_MIN', { vocab: -(2 ** 31) }, [/vocab_size/]],
  ['dim 2^30', { dim: G }, [/dim = 1073741824/]],
  ['n_layers 2^30', { layers: G }, [/n_layers = 1073741824/]],
  ['vocab_size 2^30', { vocab: G }, [/vocab_size = 1073741824/]],
  ['seq_len 2^30', { seqLen: G }, [/seq_len = 1073741824/]],
  ['every field INT32_MAX', Object.fromEntries(Object.keys(F).map((k) => [k, 2 ** 31 - 1])), [/2147483647/]],
];
for (const [name, fields, patterns] of headerCases) {
  errorCase(`header: ${name}`, [header(`h-${name.replace(/\W+/g, '_')}.bin`, fields), '-z', TOK], 'bad_model',
    [/invalid model header/, ...patterns]);
}

// ---------------------------------------------------------------------------------------------
// Sizes past the end of the file, formats, memory
// ---------------------------------------------------------------------------------------------

errorCase('header claims more layers than the file holds', [header('layers3.bin', { layers: 3 }), '-z', TOK],
  'bad_model', [/truncated/, /layers 3/, /needs \d+ bytes/]);
errorCase('header claims a larger vocabulary', [header('vocab4000.bin', { vocab: 4000 }), '-z', TOK], 'bad_model',
  [/truncated/, /vocab 4000/]);
errorCase('header claims a separate classifier the file lacks', [header('sepcls.bin', { vocab: -32 }), '-z', TOK],
  'bad_model', [/truncated/, /separate classifier/]);
errorCase('maximal in-range header on a tiny file (terabytes implied)',
  [header('maximal.bin', { dim: 65536, hidden: 262144, layers: 1024, heads: 64, kvHeads: 64, vocab: -(2 ** 22), seqLen: 2 ** 20 }), '-z', TOK],
  'bad_model', [/truncated/, /needs \d+ bytes/]);
{
  const gguf = Buffer.alloc(64);
  gguf.write('GGUF', 0, 'latin1');
  gguf.writeUInt32LE(3, 4);
  errorCase('GGUF file with no architecture', [model('model.gguf', gguf), '-z', TOK], 'bad_model', [/GGUF/, /general\.architecture/]);
  const v9 = Buffer.from(gguf);
  v9.writeUInt32LE(9, 4);
  errorCase('GGUF file of an unknown version', [model('v9.gguf', v9), '-z', TOK], 'unsupported', [/GGUF version 9/]);
}
errorCase('tokenizer file passed as the model', [TOK, '-z', TOK], 'bad_model', [/looks like a llama2\.c tokenizer/, /-z/]);
// 64 layers of dim 64 and a 2^20-position context: a 4 MiB file whose KV cache needs 32 GiB.
errorCase('KV cache far beyond memory', [model('kvhuge.bin', checkpoint([64, 8, 64, 1, 1, 8, 2 ** 20])), '-z', TOK],
  'out_of_memory', [/KV cache/, /GiB/, /smaller context/]);

// ---------------------------------------------------------------------------------------------
// Tokenizers
// ---------------------------------------------------------------------------------------------

errorCase('tokenizer does not exist', [MODEL, '-z', join(tmp, 'no-tok.bin')], 'io', [/cannot open/, /no-tok\.bin/]);
errorCase('empty tokenizer', [MODEL, '-z', file('tok-empty.bin', Buffer.alloc(0))], 'bad_tokenizer',
  [/tokenizer/, /truncated/]);
errorCase('tokenizer with a truncated header', [MODEL, '-z', file('tok-3.bin', tinyTokBytes.subarray(0, 3))],
  'bad_tokenizer', [/truncated/, /4-byte header/]);
errorCase('tokenizer with negative max_token_length', [MODEL, '-z', file('tok-mtl-neg.bin', tokenizer(tinyPieces(32), -1))],
  'bad_tokenizer', [/max_token_length = -1/]);
errorCase('tokenizer with huge max_token_length', [MODEL, '-z', file('tok-mtl-huge.bin', tokenizer(tinyPieces(32), 2 ** 30))],
  'bad_tokenizer', [/max_token_length = 1073741824/]);
{
  const p = tinyPieces(32);
  p[5].len = -1;
  errorCase('tokenizer piece with negative length', [MODEL, '-z', file('tok-len-neg.bin', tokenizer(p))],
    'bad_tokenizer', [/piece 5/, /length -1/]);
}
{
  const p = tinyPieces(32);
  p[9].bytes = Buffer.from('abcdefghijk');
  errorCase('tokenizer piece longer than max_token_length', [MODEL, '-z', file('tok-len-long.bin', tokenizer(p))],
    'bad_tokenizer', [/piece 9/, /length 11/, /max_token_length is 8/]);
}
errorCase('tokenizer piece running past EOF', [MODEL, '-z', file('tok-eof.bin', tinyTokBytes.subarray(0, tinyTokBytes.length - 1))],
  'bad_tokenizer', [/piece 31/, /past the end/]);
errorCase('tokenizer with more pieces than the model', [MODEL, '-z', file('tok-33.bin', tokenizer(tinyPieces(33)))],
  'bad_tokenizer', [/33 pieces/, /vocabulary has 32/]);
errorCase('tokenizer with fewer pieces than the model', [MODEL, '-z', file('tok-31.bin', tokenizer(tinyPieces(31)))],
  'bad_tokenizer', [/31 pieces/, /vocabulary has 32/]);
errorCase('real: 32000-piece tokenizer for a 512-token model', [AIDREAMS, '-z', LLAMA_TOK], 'bad_tokenizer',
  [/32000 pieces/, /vocabulary has 512/], { skip: FIXTURE_SKIP });
errorCase('real: 512-piece tokenizer for a 32-token model', [MODEL, '-z', AIDREAMS_TOK], 'bad_tokenizer',
  [/512 pieces/, /vocabulary has 32/], { skip: FIXTURE_SKIP });
errorCase('character the tokenizer cannot encode', base('-i', 'abZ'), 'bad_argument', [/cannot encode byte/]);

// ---------------------------------------------------------------------------------------------
// Prompts longer than the context
// ---------------------------------------------------------------------------------------------

const longPrompt = 'I dream of electric sheep, quiet machines and the long night of the stars. '.repeat(8).slice(0, 600);
errorCase('real: 600-character prompt for a 128-token context', [AIDREAMS, '-z', AIDREAMS_TOK, '-i', longPrompt],
  'bad_argument', [/prompt/, /longer than the context of 128/], { skip: FIXTURE_SKIP });
errorCase('prompt longer than --ctx', base('--ctx', '4', '-i', 'a b a b a b'), 'bad_argument', [/longer than the context of 4/]);

// ---------------------------------------------------------------------------------------------
// Absurd options
// ---------------------------------------------------------------------------------------------

const optionCases = [
  ['-t nan', ['-t', 'nan'], [/option -t needs a number, got 'nan'/]],
  ['-t abc', ['-t', 'abc'], [/option -t needs a number, got 'abc'/]],
  ['-t inf', ['-t', 'inf'], [/temperature/]],
  ['-t 1000', ['-t', '1000'], [/temperature/]],
  ['-p nan', ['-p', 'nan'], [/option -p needs a number/]],
  ['-n abc', ['-n', 'abc'], [/option -n needs an integer, got 'abc'/]],
  ['-n 1.5', ['-n', '1.5'], [/option -n needs an integer/]],
  ['-n beyond 64 bits', ['-n', '99999999999999999999'], [/option -n needs an integer/]],
  ['-k abc', ['-k', 'abc'], [/option -k needs an integer/]],
  ['-s abc', ['-s', 'abc'], [/option -s needs an integer/]],
  ['--min-p 2', ['--min-p', '2'], [/min_p/]],
  ['--repeat-penalty 0', ['--repeat-penalty', '0'], [/repetition_penalty/]],
  ['--repeat-penalty -1', ['--repeat-penalty', '-1'], [/repetition_penalty/]],
  ['--threads 0', ['--threads', '0'], [/--threads must be 1\.\.256, got 0/]],
  ['--threads 100000', ['--threads', '100000'], [/--threads must be 1\.\.256, got 100000/]],
  ['--threads -1', ['--threads', '-1'], [/--threads/]],
  ['--ctx 0', ['--ctx', '0'], [/--ctx must be 1\.\.1048576, got 0/]],
  ['--ctx -5', ['--ctx', '-5'], [/--ctx must be/]],
  ['--ctx beyond 2^20', ['--ctx', '99999999999'], [/--ctx must be/]],
  ['--ctx larger than the model\'s seq_len', ['--ctx', '17'], [/context 17 exceeds the model's trained length 16/]],
  ['unknown flag', ['--frobnicate', '1'], [/unknown option --frobnicate/]],
  ['flag without value', ['-n'], [/option -n needs a value/]],
  ['stray positional argument', ['extra.bin'], [/unexpected argument 'extra\.bin'/]],
];
for (const [name, extra, patterns] of optionCases) errorCase(`option: ${name}`, base(...extra), 'bad_argument', patterns);
errorCase('missing model path', [], 'bad_argument', [/missing MODEL path/]);
errorCase('missing model path (flags only)', ['-n', '5', '-t', '0'], 'bad_argument', [/missing MODEL path/]);
errorCase('--ctx larger than the real model\'s seq_len', [AIDREAMS, '-z', AIDREAMS_TOK, '--ctx', '129'], 'bad_argument',
  [/context 129 exceeds the model's trained length 128/], { skip: FIXTURE_SKIP });

// ---------------------------------------------------------------------------------------------
// Known divergences and engine bugs (TODO until fixed)
// ---------------------------------------------------------------------------------------------

// Both CLIs validate the model before they open the tokenizer.
errorCase('bad model and missing default tokenizer: the model error wins in both CLIs',
  [model('cut50.bin', tinyBytes.subarray(0, 50))], 'bad_model', [/truncated/]);

test('logits: prompt longer than the context gives the same error in both CLIs',
  { skip: FIXTURE_SKIP || NATIVE_SKIP },
  () => {
    const argv = ['logits', AIDREAMS, '-z', AIDREAMS_TOK, '-i', longPrompt, '-o', join(tmp, 'logits.f32')];
    const w = runCli('wasm', argv), n = runCli('native', argv);
    assertCleanError(w, 'bad_argument', [/context/], 'wasm');
    assertCleanError(n, 'bad_argument', [/context/], 'native');
    assert.equal(firstLine(w.stderr), firstLine(n.stderr));
  });

test('a tiny temperature (-t 1e-40) behaves like greedy decoding', { skip: FIXTURE_SKIP }, async (t) => {
    for (const kind of ['wasm', 'native']) {
      await t.test(kind, { skip: kind === 'native' ? NATIVE_SKIP : false }, () => {
        const args = ['run', AIDREAMS, '-z', AIDREAMS_TOK, '-n', '24', '-s', '5', '-i', 'I dream of'];
        const greedy = runCli(kind, [...args, '-t', '0']);
        const tiny = runCli(kind, [...args, '-t', '1e-40']);
        assert.equal(greedy.status, 0, greedy.stderr);
        assert.equal(tiny.status, 0, tiny.stderr);
        assert.equal(tiny.stdout, greedy.stdout);
      });
    }
  });
