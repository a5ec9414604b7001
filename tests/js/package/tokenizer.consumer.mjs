// Tokenizer round trips (byte fallback), invalid UTF-8 and streaming of byte tokens.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { loadModel } from 'qkv';
import { AIDREAMS, STORIES, TOK } from './common.mjs';

let aidreams, stories;
before(async () => {
  aidreams = await loadModel(AIDREAMS, { tokenizer: TOK, threads: 1 });
  stories = await loadModel(STORIES, { tokenizer: TOK, threads: 1 });
});
after(() => { aidreams?.dispose(); stories?.dispose(); });

const BYTE0 = 3;  // llama2.c tokenizers: <0x00> is id 3, <0xFF> id 258

const TEXTS = {
  ascii: 'I dream of electric sheep, 42 times!',
  'leading and double spaces': '  two  spaces ',
  'newlines and tabs': 'line one\nline\ttwo\n',
  accents: 'café naïve résumé Ångström',
  CJK: '日本語の夢と中文梦想',
  emoji: 'I dream of 😀🐑 and 👩‍💻',
  'mixed scripts': 'Ωmega ψ — “quotes” ß 한국어 🎉',
  'a single character': 'x',
};

for (const [name, text] of Object.entries(TEXTS)) {
  test(`detokenize(tokenize(x)) === x: ${name}`, () => {
    for (const m of [aidreams, stories]) {
      const ids = m.tokenize(text);
      assert.ok(Array.isArray(ids));
      assert.equal(ids[0], 1, 'BOS first');
      for (const id of ids) assert.ok(Number.isInteger(id) && id >= 0 && id < m.info.vocabSize);
      assert.equal(m.detokenize(ids), text, 'no dummy-prefix space, no lost bytes');
      assert.equal(m.detokenize(Int32Array.from(ids)), text, 'typed arrays work too');
      // {bos: false} only drops the BOS.
      assert.deepEqual(m.tokenize(text, { bos: false }), ids.slice(1));
    }
  });
}

test('characters outside the 512 pieces fall back to byte tokens', () => {
  const ids = aidreams.tokenize('😀', { bos: false });
  const bytes = [...new TextEncoder().encode('😀')];
  assert.deepEqual(ids.slice(-4), bytes.map((b) => b + BYTE0));
});

test('the empty string is BOS alone and decodes to the empty string', () => {
  assert.deepEqual(aidreams.tokenize(''), [1]);
  assert.deepEqual(aidreams.tokenize('', { bos: false }), []);
  assert.equal(aidreams.detokenize([1]), '');
  assert.equal(aidreams.detokenize([]), '');
  assert.equal(aidreams.detokenize([1, 2]), '', 'BOS and EOS are skipped');
});

test('invalid UTF-8 from byte tokens decodes to U+FFFD, never throws', () => {
  const cases = [
    [[0xff + BYTE0], '\uFFFD'],
    [[0x80 + BYTE0], '\uFFFD'],                          // a lone continuation byte
    [[0xe6 + BYTE0, 0x97 + BYTE0], '\uFFFD'],             // a truncated 3-byte sequence
    [[0xc0 + BYTE0, 0xaf + BYTE0], '\uFFFD\uFFFD'],       // an overlong encoding
    [[0xed + BYTE0, 0xa0 + BYTE0, 0x80 + BYTE0], '\uFFFD\uFFFD\uFFFD'],  // a UTF-16 surrogate in UTF-8
  ];
  for (const [ids, want] of cases) {
    for (const withBos of [false, true]) {
      const got = aidreams.detokenize(withBos ? [1, ...ids] : ids);
      assert.equal(got, want, `${ids} -> ${JSON.stringify(got)}`);
      assert.ok(got.isWellFormed());
    }
  }
  const a = aidreams.tokenize('ab');
  assert.equal(aidreams.detokenize([...a, 0xff + BYTE0, ...aidreams.tokenize('cd', { bos: false })]), 'ab\uFFFD cd');
});

test('generation that emits byte tokens never throws and yields well-formed strings (temperature 1.5, 5 seeds x 200 tokens)', async () => {
  let items = 0, empty = 0, replacement = 0;
  for (const seed of [1, 2, 3, 4, 5]) {
    const opts = { temperature: 1.5, topP: 1, maxTokens: 200, seed, stopTokens: [] };
    const s = stories.createSession();
    let text = '';
    for await (const t of s.generate('', opts)) {
      assert.equal(typeof t.text, 'string');
      assert.ok(t.text.isWellFormed(), `lone surrogate in ${JSON.stringify(t.text)} (seed ${seed})`);
      text += t.text;
      items++;
      if (t.text === '') empty++;
      if (t.text.includes('\uFFFD')) replacement++;
    }
    assert.equal(s.lastGeneration.generatedTokens, 200);
    assert.ok(text.isWellFormed());
    assert.equal(await stories.createSession().complete('', opts), text, `seed ${seed}: complete() and the stream agree`);
    s.dispose();
  }
  assert.ok(items >= 1000);
  // Byte tokens did come up: some items held back a partial character or carried U+FFFD.
  assert.ok(empty + replacement > 0, 'no byte tokens were sampled; the test does not exercise the decoder');
});

test('streamed text equals detokenize() of the streamed tokens: partial characters are held back, not replaced', async () => {
  let held = 0;
  for (const seed of [11, 12, 13, 14, 15, 16]) {
    const tokens = [];
    let text = '';
    for await (const t of stories.generate('', { temperature: 1.5, topP: 1, maxTokens: 150, seed, stopTokens: [1, 2] })) {
      if (t.token >= 0) tokens.push(t.token);
      if (t.text === '') held++;
      text += t.text;
    }
    assert.equal(text, stories.detokenize([1, ...tokens]), `seed ${seed}`);
  }
  assert.ok(held > 0, 'no partial character came up; the test does not exercise the hold-back');
  // The bytes of one emoji: each alone is invalid, together they are the character.
  const ids = aidreams.tokenize('😀', { bos: false }).slice(-4);
  assert.deepEqual(ids.map((id) => aidreams.detokenize([id])), ['\uFFFD', '\uFFFD', '\uFFFD', '\uFFFD']);
  assert.equal(aidreams.detokenize(ids), '😀');
});

test('lone UTF-16 surrogates in the input become U+FFFD; the characters around them survive', async () => {
  // JS strings may hold unpaired surrogates; TextEncoder (and String.prototype.toWellFormed) turn
  // them into U+FFFD. The tokenizer must not merge them with the next character.
  for (const [text, want] of [['a\uD83Db', 'a\uFFFDb'], ['\uD800', '\uFFFD'], ['x\uDC00y', 'x\uFFFDy']]) {
    assert.equal(aidreams.detokenize(aidreams.tokenize(text)), want, `tokenize(${JSON.stringify(text)})`);
  }
  assert.deepEqual(aidreams.tokenize('a\uD83Db'), aidreams.tokenize('a\uFFFDb'));
  const s = aidreams.createSession();
  await s.complete('a\uD83Db', { temperature: 0, maxTokens: 1 });
  assert.deepEqual(s.tokens.slice(0, s.lastGeneration.promptTokens), aidreams.tokenize('a\uFFFDb'), 'generate() tokenizes the prompt the same way');
});
