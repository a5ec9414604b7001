// The JS tokenize path does linear work on megabyte inputs of its worst shapes (issue 33 item
// 13): a digit run through the qwen2 and Llama 3 pre-tokenizers, and chat markers parsed as
// special tokens. The WASM tokenizer counts its steps (handle.tokenizeWork); four times the text
// must cost at most 4.5 times the work (a quadratic scan costs 16 times). No timers.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { models as sharedModels, root } from './helpers.mjs';
import { loadModel } from '../../src/js/node.js';

const maker = join(root, 'build', 'qkv_test_models');
const outDir = join(root, 'test-artifacts', 'tokenize-linear');
const skip = !existsSync(maker) ? `${maker} is not built (scripts/build.sh native)` : false;

test('tokenize: linear work on megabyte digit runs and special markers', { skip, timeout: 120000 }, async () => {
  mkdirSync(outDir, { recursive: true });
  const r = spawnSync(maker, [outDir, sharedModels], { encoding: 'utf8' });
  assert.equal(r.status, 0, `qkv_test_models failed: ${r.stderr}`);
  const cases = [
    { model: 'qwen2', unit: '1', special: false },
    { model: 'llama-bpe', unit: '1', special: false },
    { model: 'qwen2', unit: 'x<|im_end|>', special: true },
    { model: 'llama-bpe', unit: '\u{1F642}', special: false },
  ];
  for (const c of cases) {
    const model = await loadModel(join(outDir, `${c.model}.gguf`), { threads: 1 });
    try {
      const text = (bytes) => c.unit.repeat(Math.ceil(bytes / c.unit.length));
      const small = model._h.tokenizeWork(text(256 << 10), false, c.special);
      const big = model._h.tokenizeWork(text(1 << 20), false, c.special);
      assert.ok(small > 0);
      assert.ok(big / small <= 4.5, `${c.model} '${c.unit}': 4x the text took ${(big / small).toFixed(2)}x the work`);
      // The public path gives the ids that work was counted on.
      const ids = model.tokenize(text(1 << 20), { bos: false, special: c.special });
      assert.ok(ids.length > 0);
      if (c.special) assert.ok(ids.filter((id) => model.detokenize([id]) === '').length >= (1 << 20) / c.unit.length - 1,
        'every marker is one special token');
    } finally {
      model.dispose();
    }
  }
});
