// Runs in the page bench/bench-big.mjs serves: a GPU-resident load (weights: 'gpu') of a
// generated model from a URL, then a short generation; reports the figures to the driver.
import { loadModel } from '/qkv/src/js/browser.js';

window.runBig = async ({ model, prompt, tokens, cache }) => {
  const t0 = performance.now();
  const m = await loadModel(model, { device: 'webgpu', weights: 'gpu', cache: cache ? 'opfs' : false });
  const loadS = (performance.now() - t0) / 1000;
  console.log(`[big] loaded in ${loadS.toFixed(1)} s; heap ${(m.info.memory.heapBytes / 2 ** 20).toFixed(0)} MiB, GPU weights ${(m.info.memory.gpuWeightBytes / 2 ** 30).toFixed(2)} GiB`);
  return { loadS, ...(await window.generate(m, prompt, tokens)), ...(m.dispose(), {}) };
};

/** Prefill of `prompt`, then `tokens` greedy tokens: {prefillS, decodeTokS, ids, memory, device}. */
window.generate = async (m, prompt, tokens) => {
  const s = m.createSession();
  const ids = m.tokenize(prompt);
  let t = performance.now();
  await s.feed(ids);
  const prefillS = (performance.now() - t) / 1000;
  console.log(`[big] prefill of ${ids.length} tokens in ${prefillS.toFixed(1)} s`);
  const out = [];
  t = performance.now();
  for (let i = 0; i < tokens; i++) {
    const l = s.logits();
    let best = 0;
    for (let j = 1; j < l.length; j++) if (l[j] > l[best]) best = j;
    if (!Number.isFinite(l[best])) throw new Error(`non-finite logits at token ${i}`);
    out.push(best);
    if (i + 1 < tokens) await s.feed([best]);
    console.log(`[big] token ${i + 1}: ${best} at ${((performance.now() - t) / 1000).toFixed(1)} s`);
  }
  const decodeS = (performance.now() - t) / 1000;
  const info = m.info;
  s.dispose();
  return { promptTokens: ids.length, prefillS, decodeTokS: (tokens - 1) / decodeS, ids: out, memory: info.memory, device: { backend: info.backend, weights: info.device.weights, adapter: info.device.adapter } };
};
window.__ready = true;
