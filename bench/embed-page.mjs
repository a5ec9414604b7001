// Runs in the page bench/bench-embed.mjs serves: qkv's browser build or wllama (llama.cpp in
// WASM) embedding the same sentences with the same GGUF encoder and thread count. One engine per
// page: setup(cfg) loads it, pass() embeds every text once and returns the seconds it took, so
// the driver can alternate the two engines' passes (machine load then hits both alike).
import { loadModel } from '/qkv/src/js/browser.js';
import { Wllama } from '/wllama/index.js';

let engine = null;

window.setupQkv = async ({ model, threads, texts, batch }) => {
  const m = await loadModel(model, { threads });
  engine = {
    async pass() {
      const t = performance.now();
      const v = await m.embed(texts, { batchSize: batch });
      if (v.length !== texts.length) throw new Error(`qkv returned ${v.length} embeddings`);
      return (performance.now() - t) / 1000;
    },
    tokens: () => m.lastEmbedding.tokens / texts.length,
    info: () => ({ threads: m.info.threading.threads, mode: m.info.threading.mode }),
  };
  await engine.pass();  // warm-up
  return engine.info();
};

// wllama's createEmbedding with `batch` texts per call and as many parallel slots: llama.cpp's
// server decodes the slots' sequences together (wllama 3.8.1 computes every text of the call but
// hands back one embedding; one text per call is slower from 2 threads on, as measured with
// --single).
window.setupWllama = async ({ model, threads, texts, batch, perText, single }) => {
  const w = new Wllama({ default: '/wllama/wasm/wllama.wasm' }, { suppressNativeLog: true });
  const blob = await (await fetch(model)).blob();
  const ctx = batch * Math.max(64, perText * 2);
  await w.loadModel([blob], { n_threads: threads, n_ctx: ctx, n_batch: ctx, n_ubatch: ctx, n_parallel: batch,
                              kv_unified: true, embeddings: true, seed: 1 });
  const tokens = (await w.createEmbedding({ input: texts[0] })).usage.prompt_tokens;
  const perCall = single ? 1 : batch;
  engine = {
    async pass() {
      const t = performance.now();
      for (let i = 0; i < texts.length; i += perCall) {
        const res = await w.createEmbedding({ input: perCall === 1 ? texts[i] : texts.slice(i, i + perCall) });
        if (!res?.data?.length) throw new Error('wllama returned no embedding');
      }
      return (performance.now() - t) / 1000;
    },
    tokens: () => tokens,
    info: () => ({ threads }),
  };
  await engine.pass();  // warm-up
  return engine.info();
};

window.pass = () => engine.pass();
window.tokens = () => engine.tokens();
window.benchReady = true;
