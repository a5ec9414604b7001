// Runs in the page bench/bench-embed.mjs serves: qkv's browser build and wllama (llama.cpp in
// WASM) embedding the same sentences with the same GGUF encoder and thread count.
import { loadModel } from '/qkv/src/js/browser.js';
import { Wllama } from '/wllama/index.js';

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

// Sentences/s over all `texts`, `batch` texts per call; the first pass warms up, the figure is
// the median of `runs` passes. Returns the tokens per text too (checked equal across engines).
window.benchQkvEmbed = async ({ model, threads, texts, batch, runs }) => {
  const m = await loadModel(model, { threads });
  try {
    const rates = [];
    let tokens = 0;
    for (let r = 0; r <= runs; r++) {
      const t = performance.now();
      await m.embed(texts, { batchSize: batch });
      const s = (performance.now() - t) / 1000;
      tokens = m.lastEmbedding.tokens / texts.length;
      if (r > 0) rates.push(texts.length / s);
    }
    return { rate: median(rates), tokens, threads: m.info.threading.threads, mode: m.info.threading.mode };
  } finally {
    m.dispose();
  }
};

// wllama's createEmbedding with `batch` texts per call and as many parallel slots, so llama.cpp
// may decode the batch's sequences together (its server batches across slots).
window.benchWllamaEmbed = async ({ model, threads, texts, batch, runs, perText }) => {
  const w = new Wllama({ default: '/wllama/wasm/wllama.wasm' }, { suppressNativeLog: true });
  const blob = await (await fetch(model)).blob();
  const ctx = batch * Math.max(64, perText * 2);
  await w.loadModel([blob], { n_threads: threads, n_ctx: ctx, n_batch: ctx, n_ubatch: ctx, n_parallel: batch,
                              kv_unified: true, embeddings: true, seed: 1 });
  try {
    const rates = [];
    let tokens = 0;
    for (let r = 0; r <= runs; r++) {
      const t = performance.now();
      let n = 0;
      for (let i = 0; i < texts.length; i += batch) n += (await w.createEmbedding({ input: texts.slice(i, i + batch) })).usage.prompt_tokens;
      const s = (performance.now() - t) / 1000;
      tokens = n / texts.length;
      if (r > 0) rates.push(texts.length / s);
    }
    return { rate: median(rates), tokens, threads };
  } finally {
    await w.exit();
  }
};
window.benchReady = true;
