// Where a model runs: device selection for loadModel({device}). 'webgpu' runs the whole model on
// the GPU (src/js/gpu-model.js); 'auto' times one decode step on each backend and keeps the
// faster; anything the GPU path cannot run, or a missing GPU, gives WASM with the reason.
import { QkvError } from './errors.js';
import { createGpuModel } from './gpu-model.js';
import { loadGpuResident } from './gpu-resident.js';
import { hasShaderF16, requestQkvDevice } from './webgpu.js';

export const DEVICES = Object.freeze(['auto', 'webgpu', 'wasm']);
export const GPU_PRECISIONS = Object.freeze(['auto', 'f32', 'f16']);
/** Where the weights live: the WASM heap (then uploaded to the GPU if it runs there), or GPU memory only. */
export const WEIGHTS = Object.freeze(['heap', 'gpu']);

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const clock = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());

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
  const h = handle.createSession(prompt + 6);
  let g = null;
  try {
    g = createGpuSession(gpu, h);
    await g.feed(ids.slice(0, prompt));
    const gpuTimes = [];
    for (let i = prompt; i < ids.length; i++) {
      const t0 = clock();
      await g.feed([ids[i]]);
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
  if (requested === 'wasm') return { kind: 'wasm', requested, reason: 'requested' };
  const wasm = (reason, code, extra = {}) => ({
    kind: 'wasm', requested, reason, ...extra,
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
  let gpu;
  try {
    const desc = handle.gpuModel();
    const kvBytes = info.contextLength * desc.kvHeads * desc.headDim * (kvType === 'f16' ? 2 : 4);
    const limit = Math.min(device.limits.maxStorageBufferBindingSize, device.limits.maxBufferSize);
    if (kvBytes > limit) {
      throw new QkvError('unsupported', `a layer's KV cache for ${info.contextLength} positions (${kvBytes} bytes) exceeds this GPU's buffer limit (${limit} bytes)`);
    }
    gpu = { device, desc, model: await createGpuModel(device, desc, { kvType }) };
    delete desc.tensors;  // views into the heap: stale once it grows
    if (!gpu.model.decoder) {  // an encoder's passes take positions 0.. of the model's context
      const h = handle.createSession(0);
      try { gpu.model.setEncoderRope(ropeTables(h, desc)); } finally { h.delete(); }
    }
  } catch (e) {
    device.destroy?.();
    return wasm(e.message, e?.code === 'unsupported' ? 'webgpu_unsupported' : 'webgpu_failed', { adapter });
  }
  const common = { requested, adapter, kvType, ...(precisionWarning ? { warning: precisionWarning } : {}) };
  if (requested === 'webgpu') return { kind: 'webgpu', reason: 'requested', gpu, ...common };

  try {
    const measured = gpu.model.decoder ? await timeDecode(handle, gpu, info) : await timeEncode(handle, gpu);
    const figures = gpu.model.decoder
      ? `one decode step at position ${measured.position}: WebGPU ${measured.webgpuMs} ms (logits read back) vs WASM ${measured.wasmMs} ms`
      : `${measured.what}: WebGPU ${measured.webgpuMs} ms vs WASM ${measured.wasmMs} ms`;
    if (measured.webgpuMs < measured.wasmMs) {
      return { kind: 'webgpu', reason: `auto: WebGPU is faster (${figures})`, gpu, measured, ...common };
    }
    gpu.model.dispose();
    device.destroy?.();
    return { kind: 'wasm', requested, adapter, reason: `auto: WASM is faster (${figures})`, measured };
  } catch (e) {
    gpu.model.dispose();
    device.destroy?.();
    return { kind: 'wasm', requested, adapter, reason: `auto: the WebGPU probe failed (${e.message})` };
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
    });
    if (!r.handle.hasTokenizer()) {
      r.gpu.model.dispose();
      r.handle.delete();
      throw new QkvError('unsupported', "weights: 'gpu' needs a GGUF model with its tokenizer");
    }
    return {
      kind: 'webgpu', requested: options.device ?? 'auto', weights: 'gpu',
      reason: why ? `auto: the model does not fit the WebAssembly heap (${why}), so its weights went to GPU memory`
        : "weights: 'gpu': the weight matrices streamed to GPU memory",
      adapter, kvType, gpu: r.gpu, handle: r.handle, memory: r.memory,
      ...(options.gpuPrecision === 'f16' && kvType !== 'f16'
        ? { warning: { code: 'webgpu_f16_unavailable', message: 'this WebGPU device has no shader-f16: the KV cache is f32' } } : {}),
    };
  } catch (e) {
    device.destroy?.();
    throw e;
  }
}
