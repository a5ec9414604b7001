// llama.cpp compiled to WASM (@wllama/wllama) as the reference for encoder models
// (tests/js/embed_wllama.test.mjs) and the peer of bench/bench-embed.mjs.
// window.__wllamaEmbed(modelUrl, inputs, opts) loads a GGUF with embeddings on (CPU backend) and
// returns llama.cpp's L2-normalised embedding and prompt-token count for each input (a text or an
// array of token ids, taken as they are).
// window.__wllamaRerank(modelUrl, query, documents) loads a reranker (pooling rank) and returns,
// per document in order, llama.cpp's score (createRerank with that document alone) and its
// pair's token count, then the order createRerank gives for all documents at once.
// window.__wllamaEmbedBench(modelUrl, texts, {threads, batch, reps}) times createEmbedding on
// `batch` texts at a time and returns the seconds of each repetition.
import { Wllama } from '../../../node_modules/@wllama/wllama/esm/index.js';

const base = new URL('../../../node_modules/@wllama/wllama/esm/wasm/', import.meta.url).href;

async function load(modelUrl, { threads = 1, pooling, verbose = false, ctx = 512, batch = 512 } = {}) {
  const single = `${base}wllama.wasm`;
  const w = new Wllama({ default: single }, { suppressNativeLog: !verbose });
  w.setCompat(null);
  const blob = await (await fetch(modelUrl)).blob();
  await w.loadModel([blob], {
    n_ctx: ctx, n_batch: batch, n_ubatch: batch, n_threads: threads, n_gpu_layers: 0, embeddings: true,
    ...(pooling ? { pooling_type: pooling } : {}),
  });
  return w;
}

window.__wllamaEmbed = async (modelUrl, inputs, opts = {}) => {
  const w = await load(modelUrl, opts);
  const out = [];
  try {
    for (const input of inputs) {
      try {
        const res = await w.createEmbedding({ input });
        out.push({ embedding: res.data[0].embedding, tokens: res.usage.prompt_tokens });
      } catch (e) {
        out.push({ error: String(e && e.message || e) });
      }
    }
  } finally {
    await w.exit();
  }
  return out;
};

window.__wllamaRerank = async (modelUrl, query, documents) => {
  const w = await load(modelUrl, { pooling: 'rank' });
  try {
    const each = [];
    for (const doc of documents) {
      try {
        const r = await w.createRerank({ query, documents: [doc] });
        each.push({ score: r.results[0].relevance_score, tokens: r.usage.prompt_tokens });
      } catch (e) {
        each.push({ error: String(e && e.message || e) });
      }
    }
    const all = await w.createRerank({ query, documents, top_n: documents.length });
    return { each, order: all.results.map((r) => r.index), allScores: all.results.map((r) => r.relevance_score) };
  } finally {
    await w.exit();
  }
};

window.__wllamaEmbedBench = async (modelUrl, texts, { threads = 1, batch = 32, reps = 3 } = {}) => {
  const w = await load(modelUrl, { threads, ctx: 2048, batch: 2048 });
  const times = [];
  try {
    await w.createEmbedding({ input: texts.slice(0, batch) });  // warm-up
    for (let r = 0; r < reps; r++) {
      const t0 = performance.now();
      for (let i = 0; i < texts.length; i += batch) await w.createEmbedding({ input: texts.slice(i, i + batch) });
      times.push((performance.now() - t0) / 1000);
    }
  } finally {
    await w.exit();
  }
  return times;
};
window.__ready = true;
document.getElementById('out').textContent = 'ready';
