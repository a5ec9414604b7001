// Where a model runs: device selection for loadModel({device}). 'webgpu' runs the whole model on
// the GPU (src/js/gpu-model.js); 'auto' times one decode step on each backend and keeps the
// faster; anything the GPU path cannot run, or a missing GPU, gives WASM with the reason.
import { QkvError } from './errors.js';
import { createGpuModel } from './gpu-model.js';
import { loadGpuResident } from './gpu-resident.js';
import { call } from './util.js';
import { hasShaderF16, requestQkvDevice } from './webgpu.js';

export const DEVICES = Object.freeze(['auto', 'webgpu', 'wasm']);
export const GPU_PRECISIONS = Object.freeze(['auto', 'f32', 'f16']);
/** Where the weights live: the WASM heap (then uploaded to the GPU if it runs there), or GPU memory only. */
export const WEIGHTS = Object.freeze(['heap', 'gpu']);

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const clock = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());

/**
 * One feed through a session's GPU part, recorded in its WASM session `h`: the logits (the whole
 * model on the GPU), or the hidden states entering the first CPU layer, which WASM runs on
 * through the remaining layers and the classifier (partial offload).
 */
export async function feedGpu(gpu, h, g, ids, allLogits = false, capture = false, sampling = null) {
  const out = await g.feed(ids, allLogits, capture, sampling);
  if (gpu.model.gpuLayers < gpu.desc.layers) call(() => h.feedHidden(ids, out, gpu.model.gpuLayers, allLogits));
  else call(() => h.feedLogits(ids, out, allLogits ? ids.length : 1));
}

/** info.device's split of the layers: {gpuLayers, cpuLayers}. */
export const layerSplit = (gpuLayers, layers) => ({ gpuLayers, cpuLayers: layers - gpuLayers });

/** RoPE tables of a WASM session handle, as createGpuModel's sessions take them. */
export function ropeTables(handle, desc) {
  if (!desc.positional.startsWith('rope')) return null;
  return {
    global: handle.ropeTable(false),
    local: desc.localRope.some(Boolean) ? handle.ropeTable(true) : null,
  };
}

/** A GPU session for a WASM session handle (same context, same RoPE tables); null for encoders. */
export function createGpuSession(gpu, handle) {
  if (!gpu.model.decoder) return null;
  return gpu.model.createSession(handle.context(), ropeTables(handle, gpu.desc));
}

/** Texts embedded on the GPU: as handle.embed (the same ids, pooling and normalisation in WASM), {data, dim, tokens}. */
export async function embedGpu(gpu, handle, texts, options) {
  const plan = handle.embedPrepare(texts, options);
  const data = new Float32Array(texts.length * plan.dim), tokens = [];
  for (let i = 0; i < plan.texts.length; i++) {
    const ids = Array.from(plan.texts[i]);
    const hidden = await gpu.model.encode(ids);
    data.set(handle.embedPool(hidden, ids.length, options), i * plan.dim);
    tokens.push(ids.length);
  }
  return { data, dim: plan.dim, tokens };
}

/** Milliseconds to embed one text of up to 32 tokens on each backend (median of a few). */
async function timeEncode(handle, gpu) {
  const texts = ['the quick brown fox jumps over the lazy dog and runs far away into the dark green wood'];
  const opts = { truncate: true };
  await embedGpu(gpu, handle, texts, opts);  // compiles and warms up
  const gpuTimes = [], wasmTimes = [];
  for (let i = 0; i < 3; i++) {
    let t0 = clock();
    await embedGpu(gpu, handle, texts, opts);
    gpuTimes.push(clock() - t0);
    t0 = clock();
    handle.embed(texts, opts);
    wasmTimes.push(clock() - t0);
  }
  return { what: 'one embedding', webgpuMs: +median(gpuTimes).toFixed(4), wasmMs: +median(wasmTimes).toFixed(4) };
}

/**
 * Milliseconds of one decode step at position `prompt` on each backend: the GPU's with its
 * logits read back, the WASM engine's on the model's threads (median of a few steps each).
 */
async function timeDecode(handle, gpu, info) {
  const prompt = Math.min(32, info.contextLength - 8);
  const ids = Array.from({ length: prompt + 6 }, (_, i) => 1 + ((i * 37) % Math.max(1, info.vocabSize - 1)));
  const h = handle.createSession(prompt + 6), hg = handle.createSession(prompt + 6);
  let g = null;
  try {
    g = createGpuSession(gpu, hg);
    await feedGpu(gpu, hg, g, ids.slice(0, prompt));
    const gpuTimes = [];
    for (let i = prompt; i < ids.length; i++) {
      const t0 = clock();
      await feedGpu(gpu, hg, g, [ids[i]]);  // with a partial offload, WASM's layers too
      if (i > prompt) gpuTimes.push(clock() - t0);  // the first step compiles and warms up
    }
    h.feed(ids.slice(0, prompt), false);
    const wasmTimes = [];
    for (let i = prompt; i < ids.length; i++) {
      const t0 = clock();
      h.feedOne(ids[i]);
      if (i > prompt) wasmTimes.push(clock() - t0);
    }
    return { position: prompt, webgpuMs: +median(gpuTimes).toFixed(4), wasmMs: +median(wasmTimes).toFixed(4) };
  } finally {
    g?.dispose();
    h.delete();
    hg.delete();
  }
}

/**
 * Decides where a model runs (options already validated by loadModel). Returns {kind,
 * requested, reason, adapter?, gpu?, measured?, warning?}. Never throws for a missing, failing or
 * insufficient GPU: that becomes kind 'wasm' with the reason (and a warning when WebGPU was asked
 * for explicitly).
 */
export async function chooseDevice(handle, info, options) {
  const requested = options.device ?? 'auto';  // validated by loadModel
  const L = info.layers;
  if (requested === 'wasm') return { kind: 'wasm', requested, reason: 'requested', ...layerSplit(0, L) };
  if (options.gpuLayers === 0) return { kind: 'wasm', requested, reason: 'gpuLayers: 0 (every layer in WASM)', ...layerSplit(0, L) };
  const wasm = (reason, code, extra = {}) => ({
    kind: 'wasm', requested, reason, ...layerSplit(0, L), ...extra,
    ...(requested === 'webgpu' ? { warning: { code, message: `WebGPU not used, the model runs in WASM: ${reason}` } } : {}),
  });
  let device, adapter;
  try {
    ({ device, adapterInfo: adapter } = await requestQkvDevice({ gpu: options.gpu }));
  } catch (e) {
    return wasm(e.message, 'webgpu_unavailable');
  }
  // f32 unless asked for f16 (a half-precision KV cache) on a device with shader-f16.
  const kvType = options.gpuPrecision === 'f16' && hasShaderF16(device) ? 'f16' : 'f32';
  const precisionWarning = options.gpuPrecision === 'f16' && kvType !== 'f16'
    ? { code: 'webgpu_f16_unavailable', message: 'this WebGPU device has no shader-f16: the KV cache is f32' }
    : undefined;
  let gpu, split = '';
  try {
    const desc = handle.gpuModel();
    const kvBytes = info.contextLength * desc.kvHeads * desc.headDim * (kvType === 'f16' ? 2 : 4);
    const limit = Math.min(device.limits.maxStorageBufferBindingSize, device.limits.maxBufferSize);
    if (kvBytes > limit) {
      throw new QkvError('unsupported', `a layer's KV cache for ${info.contextLength} positions (${kvBytes} bytes) exceeds this GPU's buffer limit (${limit} bytes)`);
    }
    // Every weight is in the heap, so the layers the GPU cannot take run in WASM ('auto', the default).
    const layers = desc.causal ? options.gpuLayers ?? 'auto' : L;
    gpu = { device, desc, model: await createGpuModel(device, desc, { kvType, layers }) };
    delete desc.tensors;  // views into the heap: stale once it grows
    const n = gpu.model.gpuLayers;
    if (n === 0) throw new QkvError('out_of_memory', `not one layer fits this GPU (${gpu.model.offloadStop})`);
    if (n < L) {
      split = layers === 'auto'
        ? `; layers 0..${n - 1} on WebGPU, ${n}..${L - 1} in WASM (layer ${n} did not fit: ${gpu.model.offloadStop})`
        : `; layers 0..${n - 1} on WebGPU, ${n}..${L - 1} in WASM (gpuLayers: ${n})`;
    }
    if (!gpu.model.decoder) {  // an encoder's passes take positions 0.. of the model's context
      const h = handle.createSession(0);
      try { gpu.model.setEncoderRope(ropeTables(h, desc)); } finally { h.delete(); }
    }
  } catch (e) {
    gpu?.model.dispose();
    device.destroy?.();
    return wasm(e.message, e?.code === 'unsupported' ? 'webgpu_unsupported' : 'webgpu_failed', { adapter });
  }
  const common = { requested, adapter, kvType, ...layerSplit(gpu.model.gpuLayers, L), ...(precisionWarning ? { warning: precisionWarning } : {}) };
  if (requested === 'webgpu') return { kind: 'webgpu', reason: `requested${split}`, gpu, ...common };

  try {
    const measured = gpu.model.decoder ? await timeDecode(handle, gpu, info) : await timeEncode(handle, gpu);
    const figures = gpu.model.decoder
      ? `one decode step at position ${measured.position}: WebGPU ${measured.webgpuMs} ms (logits read back) vs WASM ${measured.wasmMs} ms`
      : `${measured.what}: WebGPU ${measured.webgpuMs} ms vs WASM ${measured.wasmMs} ms`;
    if (measured.webgpuMs < measured.wasmMs) {
      return { kind: 'webgpu', reason: `auto: WebGPU is faster (${figures})${split}`, gpu, measured, ...common };
    }
    gpu.model.dispose();
    device.destroy?.();
    return { kind: 'wasm', requested, adapter, reason: `auto: WASM is faster (${figures})`, measured, ...layerSplit(0, L) };
  } catch (e) {
    gpu.model.dispose();
    device.destroy?.();
    return { kind: 'wasm', requested, adapter, reason: `auto: the WebGPU probe failed (${e.message})`, ...layerSplit(0, L) };
  }
}

/**
 * A GPU-resident load (src/js/gpu-resident.js) on a new device: {kind: 'webgpu', requested,
 * weights: 'gpu', reason, adapter, kvType, gpu, handle, memory}. `why`: the heap's error that
 * sent a model here under device 'auto' (null: weights: 'gpu' was asked for).
 */
export async function loadWeightsOnGpu(mod, source, options, env, why) {
  let device, adapter;
  try {
    ({ device, adapterInfo: adapter } = await requestQkvDevice({ gpu: options.gpu }));
  } catch (e) {
    if (why) throw new QkvError('out_of_memory', `${why}; nor can its weights go to GPU memory instead: ${e.message}`, { cause: e });
    throw new QkvError('unsupported', `weights: 'gpu' needs WebGPU: ${e.message}`, { cause: e });
  }
  try {
    const kvType = options.gpuPrecision === 'f16' && hasShaderF16(device) ? 'f16' : 'f32';
    const r = await loadGpuResident(mod, device, source, {
      threads: env.threads, onProgress: options.onProgress, signal: options.signal, openPath: env.openPath, listDir: env.listDir, cache: env.cache, kvType,
      gpuLayers: options.gpuLayers ?? 'auto',
    });
    if (!r.handle.hasTokenizer()) {
      r.gpu.model.dispose();
      r.handle.delete();
      throw new QkvError('unsupported', "weights: 'gpu' needs a GGUF model with its tokenizer");
    }
    const L = r.gpu.desc.layers, n = r.gpu.model.gpuLayers;
    const split = n === L ? '' : r.stop ? `; layers ${n}..${L - 1} in the heap, run in WASM (layer ${n} did not fit: ${r.stop})`
      : `; layers ${n}..${L - 1} in the heap, run in WASM (gpuLayers: ${n})`;
    return {
      kind: 'webgpu', requested: options.device ?? 'auto', weights: 'gpu', ...layerSplit(n, L),
      reason: (why ? `auto: the model does not fit the WebAssembly heap (${why}), so its weights went to GPU memory`
        : "weights: 'gpu': the weight matrices streamed to GPU memory") + split,
      adapter, kvType, gpu: r.gpu, handle: r.handle, memory: r.memory,
      ...(options.gpuPrecision === 'f16' && kvType !== 'f16'
        ? { warning: { code: 'webgpu_f16_unavailable', message: 'this WebGPU device has no shader-f16: the KV cache is f32' } } : {}),
    };
  } catch (e) {
    device.destroy?.();
    throw e;
  }
}
