// Imports the package's browser entry, loads a model over HTTP, streams text, in the page and
// through the Worker wrapper; reports through window.__result (or window.__error).
// Query: ?model=URL&tokenizer=URL&maxTokens=N[&device=auto|webgpu|wasm]
import { loadModel } from '../../../src/js/browser.js';
import { createWorker } from '../../../src/js/worker-client.js';

const violations = [];
document.addEventListener('securitypolicyviolation', (e) => violations.push(`${e.violatedDirective}: ${e.blockedURI}`));
const q = new URLSearchParams(location.search);
const model = q.get('model'), tokenizer = q.get('tokenizer'), maxTokens = Number(q.get('maxTokens'));
const device = q.get('device') ?? undefined;
// disableGpu=1: behave as a browser without WebGPU (page and worker).
const noGpu = q.get('disableGpu') === '1';
if (noGpu) Object.defineProperty(Navigator.prototype, 'gpu', { get: () => undefined, configurable: true });
const warnings = [];
const opts = { temperature: 1, topP: 0.9, seed: 42, maxTokens, stopTokens: [1] };
const out = document.getElementById('out');

async function inPage() {
  const progress = [];
  const m = await loadModel(model, { tokenizer, device, onWarning: (w) => warnings.push(w), onProgress: (p) => progress.push(p) });
  const items = [];
  for await (const t of m.generate('I dream of', opts)) items.push(t.text);
  // Break out early: the session must stay usable.
  for await (const _ of m.generate('I dream of', { ...opts, seed: 7 })) break;
  const again = await m.complete('I dream of', opts);
  const info = m.info;
  const capture = device === 'webgpu' ? await captureAgainstWasm(m) : null;
  m.dispose();
  return { text: items.join(''), items: items.length, again, info, capture, progress: progress.at(-1), progressCalls: progress.length };
}

// Attention maps captured on this model's backend against the WASM engine's: the largest difference.
async function captureAgainstWasm(m) {
  const w = await loadModel(model, { tokenizer, device: 'wasm' });
  const ids = m.tokenize('I dream of a big dog');
  const sm = m.createSession(), sw = w.createSession();
  sm.captureAttention = true; sw.captureAttention = true;
  await sm.feed(ids);
  sw.feed(ids);
  let diff = 0, keys = 0;
  for (let l = 0; l < m.info.layers; l++) {
    for (let h = 0; h < m.info.heads; h++) {
      const a = sm.attention(l, h), b = sw.attention(l, h);
      keys = a.keys;
      for (let i = 0; i < b.probs.length; i++) diff = Math.max(diff, Math.abs(a.probs[i] - b.probs[i]));
    }
  }
  const backend = sm.backend;
  w.dispose();
  return { diff, keys, want: ids.length, backend };
}

async function inWorker() {
  const w = await createWorker(noGpu ? new URL('./no-gpu-worker.mjs', import.meta.url) : undefined);
  try {
    const workerWarnings = [];
    const m = await w.loadModel(new URL(model, location.href), {
      tokenizer: new URL(tokenizer, location.href), device, onWarning: (x) => workerWarnings.push(x),
    });
    const items = [];
    for await (const t of m.generate('I dream of', opts)) items.push(t.text);
    const info = m.info;
    await m.dispose();
    return { text: items.join(''), items: items.length, info, warnings: workerWarnings, modelWarnings: m.warnings };
  } finally {
    w.terminate();
  }
}

try {
  const page = await inPage();
  const worker = await inWorker();
  window.__result = { page, worker, crossOriginIsolated: self.crossOriginIsolated, violations, warnings };
  out.textContent = JSON.stringify(window.__result, null, 2);
} catch (e) {
  window.__error = `${e?.code ?? ''} ${e?.stack ?? e}`;
  out.textContent = 'error: ' + window.__error;
}
