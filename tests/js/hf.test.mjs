// Hugging Face checkpoints through loadModel/quantize: the random models of
// `build/qkv_test_models --hf` as GGUF and as the checkpoint they convert from (config.json,
// tokenizer.json, safetensors; sharded for llama) give the same token ids, logits and greedy
// text, loaded as a directory, as an array of paths, or as Files; misnamed files are refused.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { loadModel, quantize, QkvError } from '../../src/js/node.js';
import { root } from './helpers.mjs';

const maker = join(root, 'build', 'qkv_test_models');
const dir = join(root, 'test-artifacts', 'hf-models');
const skip = !existsSync(maker) && `${maker} is not built (scripts/build.sh native)`;
const OPTS = { threads: 1 };

before(() => {
  if (skip) return;
  mkdirSync(dir, { recursive: true });
  const r = spawnSync(maker, ['--hf', dir], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
});

async function sameModel(gguf, hf) {
  const a = await loadModel(gguf, OPTS), b = await loadModel(hf, OPTS);
  try {
    const text = 'Hello world, the quick brown fox 123.';
    const ids = a.tokenize(text);
    assert.deepEqual(b.tokenize(text), ids);
    assert.equal(b.info.vocabSize, a.info.vocabSize);
    a.session.feed(ids);
    b.session.feed(ids);
    assert.deepEqual(b.session.logits(), a.session.logits(), 'bit-identical logits');
    a.session.reset();
    b.session.reset();
    const opts = { maxTokens: 12, temperature: 0 };
    assert.equal(await b.complete(text, opts), await a.complete(text, opts));
  } finally {
    a.dispose();
    b.dispose();
  }
}

test('a checkpoint directory loads as its GGUF conversion (llama sharded BF16, qwen3 F16, gemma2 F32)', { skip }, async () => {
  for (const arch of ['llama', 'qwen3', 'gemma2']) await sameModel(join(dir, `${arch}.gguf`), join(dir, `${arch}-hf`));
});

test('the checkpoint as an array of paths, and as Files, in any order', { skip }, async () => {
  const hf = join(dir, 'llama-hf');
  const names = readdirSync(hf).filter((n) => n !== '1_Pooling').reverse();
  await sameModel(join(dir, 'llama.gguf'), names.map((n) => join(hf, n)));
  const files = names.map((n) => new File([readFileSync(join(hf, n))], n));
  await sameModel(join(dir, 'llama.gguf'), files);
});

test('a BERT checkpoint embeds as its GGUF conversion', { skip }, async () => {
  const a = await loadModel(join(dir, 'bert.gguf'), OPTS), b = await loadModel(join(dir, 'bert-hf'), OPTS);
  try {
    const texts = ['hello there', 'the quick brown fox'];
    assert.deepEqual(await b.embed(texts), await a.embed(texts));
  } finally {
    a.dispose();
    b.dispose();
  }
});

test('quantize() writes a GGUF from a checkpoint directory', { skip }, async () => {
  const q = await quantize(join(dir, 'qwen3-hf'), { type: 'q8_0' });
  const r = await quantize(join(dir, 'qwen3.gguf'), { type: 'q8_0' });
  assert.equal(q.fromHuggingFace, true);
  assert.equal(r.fromHuggingFace, false);
  const files = readdirSync(join(dir, 'qwen3-hf')).filter((n) => n !== '1_Pooling');
  assert.equal(q.inBytes, files.reduce((n, f) => n + readFileSync(join(dir, 'qwen3-hf', f)).byteLength, 0), 'every file counted');
  const a = await loadModel(q.bytes, OPTS), b = await loadModel(r.bytes, OPTS);
  try {
    const ids = b.tokenize('Hello world');
    a.session.feed(ids);
    b.session.feed(ids);
    assert.deepEqual(a.session.logits(), b.session.logits());
  } finally {
    a.dispose();
    b.dispose();
  }
});

test('bad checkpoints are refused by name', { skip }, async () => {
  const hf = join(dir, 'qwen3-hf');
  const config = new Blob([readFileSync(join(hf, 'config.json'))]);  // no name
  await assert.rejects(loadModel([new File([readFileSync(join(hf, 'config.json'))], 'config.json'), config], OPTS),
    (e) => e instanceof QkvError && e.code === 'bad_argument' && /Blob without a name/.test(e.message));
  await assert.rejects(loadModel([join(hf, 'config.json'), join(hf, 'tokenizer.json')], OPTS),
    (e) => e instanceof QkvError && e.code === 'io' && /model\.safetensors/.test(e.message));
  await assert.rejects(loadModel([join(hf, 'config.json'), join(hf, 'model.safetensors')], OPTS),
    (e) => e instanceof QkvError && e.code === 'bad_tokenizer' && /tokenizer\.json is missing/.test(e.message));
  await assert.rejects(loadModel(join(root, 'docs'), OPTS),
    (e) => e instanceof QkvError && e.code === 'io' && /without config\.json/.test(e.message));
});
