// Runs in the benchmark page (bench/bench-wllama.mjs serves it): qkv's browser build and wllama
// (llama.cpp in WASM) on the same GGUF file, the same prompt, the same thread count.
import { loadModel } from '/qkv/src/js/browser.js';
import { Wllama } from '/wllama/index.js';

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

// Prefill: one feed of the whole prompt. Decode: greedy sample + feed of one token, `decode`
// times. The first run warms up and is not counted; the figures are medians of `runs`.
window.benchQkv = async ({ model, threads, prompt, decode, runs, simd }) => {
  let t = performance.now();
  const m = await loadModel(model, { threads, simd });
  const loadMs = performance.now() - t;
  try {
    const ids = m.tokenize(prompt);
    const s = m.createSession({ contextLength: ids.length + decode + 1 });
    const pre = [], dec = [];
    for (let r = 0; r <= runs; r++) {
      s.truncate(0);
      t = performance.now();
      s.feed(ids);
      const p = performance.now() - t;
      t = performance.now();
      for (let i = 0; i < decode; i++) s.feed([s.sample({ temperature: 0 })]);
      const d = performance.now() - t;
      if (r > 0) pre.push((ids.length / p) * 1000), dec.push((decode / d) * 1000);
    }
    s.dispose();
    return { promptTokens: ids.length, prefill: median(pre), decode: median(dec), threads: m.info.threading.threads,
             mode: m.info.threading.mode, simd: m.info.simd, loadMs };
  } finally {
    m.dispose();
  }
};

// wllama's own timings (llama.cpp's, measured inside the engine: they leave out the JS and
// worker round trips that qkv's figures include). No prompt cache, EOS ignored.
// The 256 byte pieces (ids 3-258 of bench-wllama's tokenizer) are banned: a random model can
// pick a lone UTF-8 lead byte, and wllama then fails to encode the reply as JSON ("invalid
// UTF-8 byte") and reports a garbled "Invalid typed array length". The bias costs llama.cpp's
// sampler 256 additions per token.
const BAN_BYTES = Object.fromEntries(Array.from({ length: 256 }, (_, i) => [String(3 + i), -1e4]));
window.benchWllama = async ({ model, threads, prompt, decode, runs }) => {
  // The context holds the prompt (one token per letter, plus BOS) and the decoded tokens.
  const nCtx = 64 * Math.ceil((prompt.length + decode + 8) / 64);
  const w = new Wllama({ default: '/wllama/wasm/wllama.wasm' }, { suppressNativeLog: true });
  let t = performance.now();
  const blobs = [];  // one file, or llama.cpp split files in order
  for (const url of model) blobs.push(await (await fetch(url)).blob());
  await w.loadModel(blobs, { n_threads: threads, n_ctx: Math.max(512, nCtx), n_batch: 512, seed: 1 });
  const loadMs = performance.now() - t;
  try {
    const pre = [], dec = [];
    let promptTokens = 0, predicted = 0;
    for (let r = 0; r <= runs; r++) {
      const res = await w.createCompletion({ prompt, max_tokens: decode, n_predict: decode, temperature: 0, temp: 0,
                                             cache_prompt: false, ignore_eos: true, logit_bias: BAN_BYTES });
      const tm = res.timings;
      if (!tm) throw new Error('wllama returned no timings');
      promptTokens = tm.prompt_n;
      predicted = tm.predicted_n;
      if (r > 0) pre.push(tm.prompt_per_second), dec.push(tm.predicted_per_second);
    }
    return { promptTokens, predicted, prefill: median(pre), decode: median(dec), threads, loadMs,
             version: Wllama.getLibllamaVersion?.() };
  } finally {
    await w.exit();
  }
};
window.benchReady = true;
