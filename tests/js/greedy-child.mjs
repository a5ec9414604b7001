// Child process of tests/js/wllama.test.mjs: greedy continuations from qkv's relaxed-SIMD build
// (started with --experimental-wasm-relaxed-simd, which the test process runs without).
//   node --experimental-wasm-relaxed-simd tests/js/greedy-child.mjs JOB.json
// JOB: { model, prompts: [ids...], banned: [ids], n }. Prints { simd, gens: [{ out, gaps, seconds }] }.
import { readFileSync } from 'node:fs';
import { loadModel } from '../../src/js/node.js';
import { qkvGreedy } from './greedy.mjs';

const job = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const model = await loadModel(job.model, { threads: 1, simd: 'relaxed' });
try {
  const banned = new Set(job.banned);
  const gens = job.prompts.map((ids) => qkvGreedy(model, ids, banned, job.n));
  console.log(JSON.stringify({ simd: model.info.simd, gens }));
} finally {
  model.dispose();
}
