// A GPU-resident load in the page (weights: 'gpu'), against the load through the heap: the
// prefill's logits and the heap's size, reported through window.__result (or window.__error).
// Used by tests/js/browser_big.test.mjs; ?model= the GGUF's URL, ?prompt= the prompt.
import { loadModel } from '/src/js/browser.js';

const out = document.getElementById('out');
const params = new URLSearchParams(location.search);
const url = params.get('model'), prompt = params.get('prompt');

async function logitsOf(options) {
  const m = await loadModel(url, { threads: 1, simd: 'baseline', ...options });
  const s = m.createSession();
  await s.feed(m.tokenize(prompt));
  const logits = s.logits();
  const info = m.info;
  s.dispose();
  m.dispose();
  return { logits, backend: info.backend, weights: info.device.weights ?? 'heap', memory: info.memory };
}

try {
  // The GPU-resident load first: a heap never shrinks, so its size then is this load's peak.
  const gpu = await logitsOf({ device: 'webgpu', weights: 'gpu' });
  const heap = await logitsOf({ device: 'webgpu' });
  let diff = 0;
  for (let i = 0; i < heap.logits.length; i++) diff = Math.max(diff, Math.abs(gpu.logits[i] - heap.logits[i]));
  window.__result = {
    diff, vocab: gpu.logits.length, gpu: { ...gpu, logits: undefined }, heap: { ...heap, logits: undefined },
  };
  out.textContent = JSON.stringify(window.__result, null, 2);
} catch (e) {
  window.__error = `${e?.code ?? ''} ${e?.stack ?? e}`;
  out.textContent = `error: ${window.__error}`;
}
