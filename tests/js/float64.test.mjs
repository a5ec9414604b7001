// qkv's decoder against an independent float64 forward pass (tests/js/float64_forward.py, plain
// Python written from the architectures' definitions): the random-weight GGUF test models (llama
// with linear RoPE scaling and with Llama 3.1's RoPE factors, qwen2, qwen3 plain and with YaRN, gemma, gemma2, gemma3,
// phi3 plain and with LongRoPE's long and short factors, gpt2, qwen3moe's experts, cohere2's
// windowed and global parallel blocks) run a short and a long prompt (past the Gemma windows of 8) through qkv's WASM build, and every logit of the
// last position must be within TOL of the float64 one. Measured: at most 1.7e-5 (logits span
// about +-10), so TOL leaves 6x. This decides the cases where qkv and llama.cpp part: whichever
// engine is further from float64 is the one off.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { models as sharedModels, root } from './helpers.mjs';
import { loadModel } from '../../src/js/node.js';

const maker = join(root, 'build', 'qkv_test_models');
const outDir = join(root, 'test-artifacts', 'float64-models');
const script = join(root, 'tests', 'js', 'float64_forward.py');
const TOL = 1e-4;
const MODELS = ['llama-spm', 'llama-bpe', 'qwen2', 'qwen3', 'qwen3-yarn', 'gemma', 'gemma2', 'gemma3', 'phi3', 'phi3-longrope', 'phi3-longrope-short', 'gpt2', 'qwen3moe', 'cohere2'];
const TEXTS = ['Once upon a time', 'Once upon a time, the little robot dreamed of the stars, and then of the sea and the moon.'];
const python = spawnSync('python3', ['--version']).status === 0;
const skip = !existsSync(maker) ? `${maker} is not built (scripts/build.sh native)` : !python ? 'python3 is missing' : false;

before(() => {
  if (skip) return;
  mkdirSync(outDir, { recursive: true });
  const r = spawnSync(maker, [outDir, sharedModels], { encoding: 'utf8' });
  assert.equal(r.status, 0, `qkv_test_models failed: ${r.stderr}`);
});

for (const name of MODELS) {
  test(`${name}: logits within ${TOL} of a float64 forward pass`, { skip }, async (t) => {
    const path = join(outDir, `${name}.gguf`);
    const model = await loadModel(path, { threads: 1 });
    try {
      for (const text of TEXTS) {
        const ids = model.tokenize(text);
        const s = model.createSession();
        s.feed(ids);
        const got = s.logits();
        s.dispose();
        const idsFile = join(outDir, `${name}.ids.json`);
        writeFileSync(idsFile, JSON.stringify({ ids }));
        const r = spawnSync('python3', [script, path, idsFile], { encoding: 'utf8', maxBuffer: 1 << 26 });
        assert.equal(r.status, 0, `float64_forward.py failed: ${r.stderr}`);
        const want = JSON.parse(r.stdout).logits;
        assert.equal(got.length, want.length);
        let worst = 0;
        for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]));
        t.diagnostic(`${ids.length} tokens: max |qkv - float64| = ${worst.toExponential(2)}`);
        assert.ok(worst <= TOL, `${name}, ${ids.length} tokens: logits differ from float64 by up to ${worst}`);
      }
    } finally {
      model.dispose();
    }
  });
}
