// llama.cpp compiled to WASM (@wllama/wllama) as the reference engine for
// tests/js/wllama.test.mjs: window.__wllama(modelUrl, requests) loads a GGUF on the CPU backend
// (f32 KV cache, one thread) and runs greedy completions, returning llama.cpp's token ids.
import { Wllama } from '../../../node_modules/@wllama/wllama/esm/index.js';

const wasm = new URL('../../../node_modules/@wllama/wllama/esm/wasm/wllama.wasm', import.meta.url).href;

/**
 * load: further llama.cpp context options (flash_attn, n_batch, ...).
 * requests: [{prompt (string or ids), messages (chat instead of prompt), maxTokens, banned (ids),
 * grammar (GBNF, optional)}].
 * Returns per request {tokens, promptTokens, text} or {error}.
 */
window.__wllama = async (modelUrl, requests, verbose = false, load = {}) => {
  const w = new Wllama({ default: wasm }, { suppressNativeLog: !verbose });
  w.setCompat(null);
  const blob = await (await fetch(modelUrl)).blob();
  await w.loadModel([blob], { n_ctx: 512, n_threads: 1, n_gpu_layers: 0, cache_type_k: 'f32', cache_type_v: 'f32', ...load });
  const out = [];
  try {
    for (const r of requests) {
      const common = {
        max_tokens: r.maxTokens, temperature: 0, return_tokens: true, cache_prompt: false,
        logit_bias: r.banned.map((id) => [id, false]),
        ...(r.grammar ? { grammar: r.grammar } : {}),
      };
      try {
        const res = r.messages
          // enable_thinking: the template variable the test also gives qkv (applyChatTemplate).
          ? await w.createChatCompletion({ ...common, messages: r.messages, reasoning_format: 'none', chat_template_kwargs: { enable_thinking: true } })
          : await w.createCompletion({ ...common, prompt: r.prompt });
        out.push({ raw: JSON.parse(JSON.stringify(res)) });
      } catch (e) {
        out.push({ error: String(e && e.message || e) });
      }
    }
  } finally {
    await w.exit();
  }
  return { out, bos: null };
};
/**
 * Images in chat through llama.cpp's mtmd: the text model and its mmproj, requests
 * [{messages, maxTokens, banned}] whose image parts are {type: 'image', png: base64 PNG bytes}.
 * Returns per request {raw} (the chat completion) or {error}.
 */
window.__wllamaVlm = async (textUrl, mmprojUrl, requests, verbose = false, load = {}) => {
  const w = new Wllama({ default: wasm }, { suppressNativeLog: !verbose });
  w.setCompat(null);
  const blobs = await Promise.all([textUrl, mmprojUrl].map(async (u) => (await fetch(u)).blob()));
  await w.loadModel(blobs, { n_ctx: 512, n_threads: 1, n_gpu_layers: 0, cache_type_k: 'f32', cache_type_v: 'f32', flash_attn: false, ...load });
  const bytes = (b64) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)).buffer;
  const out = [];
  try {
    for (const r of requests) {
      const messages = r.messages.map((m) => (Array.isArray(m.content)
        ? { ...m, content: m.content.map((p) => (p.type === 'image' ? { type: 'image', data: bytes(p.png) } : p)) }
        : m));
      try {
        const res = await w.createChatCompletion({
          messages, max_tokens: r.maxTokens, temperature: 0, return_tokens: true, cache_prompt: false,
          logit_bias: r.banned.map((id) => [id, false]), reasoning_format: 'none',
        });
        out.push({ raw: JSON.parse(JSON.stringify(res)) });
      } catch (e) {
        out.push({ error: String(e && e.message || e) });
      }
    }
  } finally {
    await w.exit();
  }
  return { out, imageInput: null };
};
window.__ready = true;
document.getElementById('out').textContent = 'ready';
