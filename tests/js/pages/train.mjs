// createTrainer from the package's browser entry: in this page (worker: false) and in the
// default dedicated Worker, the same options; reports losses, threading and a reloaded GGUF's
// shape through window.__result (or window.__error).
import { createTrainer, loadModel } from '../../../src/js/browser.js';

const s = ['the cat sat on the mat.', 'the dog ran to the park.', 'a bird sang in the tree.', 'we walked along the river.'];
let x = 7, text = '';
for (let i = 0; i < 400; i++) { x = (x * 1103515245 + 12345) >>> 0; text += s[(x >>> 16) % 4] + (i % 8 === 7 ? '\n\n' : ' '); }
const threads = Number(new URLSearchParams(location.search).get('threads') ?? 'NaN');
const opts = { text, shape: { dim: 32, layers: 2, heads: 4, kvHeads: 2, hiddenDim: 64 }, tokenizer: { vocab: 300 }, seq: 32, batch: 4,
  steps: 6, lr: 1e-2, seed: 5, ...(Number.isInteger(threads) ? { threads } : {}) };

async function run(worker) {
  const t = await createTrainer({ ...opts, worker });
  const losses = [];
  await t.run({ onStep: (r) => losses.push(r.loss) });
  const info = t.info;
  const m = await loadModel(await t.toGGUF());
  const dim = m.info.dim;
  m.dispose();
  await t.dispose();
  return { losses, worker: info.worker, threads: info.threads, dim };
}

try {
  const page = await run(false);
  const worker = await run('auto');
  window.__result = { page, worker, isolated: globalThis.crossOriginIsolated === true };
  document.getElementById('out').textContent = JSON.stringify(window.__result);
} catch (e) {
  window.__error = `${e?.code ?? ''} ${e?.message ?? e}`;
  document.getElementById('out').textContent = window.__error;
}
