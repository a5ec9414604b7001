// Where attention runs: device selection for loadModel({device}) and the WebGPU feed that drives
// the engine's step API (src/model/transformer.h) layer by layer, with the KV cache on the GPU.
import { createAttention, createKvCache, hasShaderF16, requestQkvDevice } from './webgpu.js';

export const DEVICES = Object.freeze(['auto', 'webgpu', 'wasm']);
export const GPU_PRECISIONS = Object.freeze(['auto', 'f32', 'f16']);

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const clock = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());

export function shapeOf(info, context, kvType) {
  return {
    layers: info.layers, heads: info.heads, kvHeads: info.kvHeads, headDim: info.headDim, context,
    f16: kvType === 'f16',
  };
}

/**
 * Milliseconds of one decode-step attention for one layer on the GPU, transfers included
 * (keys/values/query up, output back), at `nKv` cached keys: median of a few runs.
 */
async function timeGpuLayer(gpu, info, nKv, kvType) {
  const cache = createKvCache(gpu.device, gpu.attention, shapeOf(info, nKv, kvType));
  try {
    const qd = info.heads * info.headDim, kvd = info.kvHeads * info.headDim;
    const k = new Float32Array(nKv * kvd).map((_, i) => Math.sin(0.37 * i));
    // Fill the cache (keys/values only), then time single-row decode steps.
    cache.write(0, k, k, 0, nKv - 1);
    const q = new Float32Array(qd).fill(0.1), one = k.subarray((nKv - 1) * kvd);
    const times = [];
    for (let r = 0; r < 7; r++) {
      const t0 = clock();
      await cache.layer(0, { q, k: one, v: one, rows: 1, pos: nKv - 1 }, () => {});
      if (r >= 2) times.push(clock() - t0);  // the first runs compile pipelines and warm caches
    }
    return median(times);
  } finally {
    cache.dispose();
  }
}

/**
 * Decides where attention runs for a model (options already validated by loadModel). Returns {kind, requested, reason, adapter?, gpu?,
 * measured?, warning?}. Never throws for a missing or failing GPU: that becomes kind 'wasm' with
 * the reason (and a warning when WebGPU was asked for explicitly).
 */
export async function chooseDevice(handle, info, options) {
  const requested = options.device ?? 'auto';  // validated by loadModel
  if (requested === 'wasm') return { kind: 'wasm', requested, reason: 'requested' };
  const wasm = (reason, code) => ({
    kind: 'wasm', requested, reason,
    ...(requested === 'webgpu' ? { warning: { code, message: `WebGPU not used, attention runs in WASM: ${reason}` } } : {}),
  });
  let gpu;
  try {
    const { device, adapterInfo } = await requestQkvDevice({ gpu: options.gpu });
    gpu = { device, adapter: adapterInfo, attention: createAttention(device) };
  } catch (e) {
    return wasm(e.message, 'webgpu_unavailable');
  }
  // KV element type: f16 where the device can (half the memory and bandwidth), unless f32 is asked
  // for (bit-for-bit the WASM kernel's inputs).
  const precision = options.gpuPrecision ?? 'auto';
  const canF16 = hasShaderF16(gpu.device) && (info.kvHeads * info.headDim) % 2 === 0;
  const kvType = precision === 'f32' || !canF16 ? 'f32' : 'f16';
  const precisionWarning = precision === 'f16' && !canF16
    ? { code: 'webgpu_f16_unavailable', message: 'this WebGPU device has no shader-f16: the KV cache is f32' }
    : undefined;
  const kvBytes = info.contextLength * info.kvHeads * info.headDim * (kvType === 'f16' ? 2 : 4);
  const limit = Math.min(gpu.device.limits.maxStorageBufferBindingSize, gpu.device.limits.maxBufferSize);
  if (kvBytes > limit) {
    gpu.device.destroy?.();
    return wasm(`a layer's KV cache (${kvBytes} bytes) exceeds this GPU's buffer limit (${limit} bytes)`, 'webgpu_limits');
  }
  const common = { requested, adapter: gpu.adapter, kvType, ...(precisionWarning ? { warning: precisionWarning } : {}) };
  if (requested === 'webgpu') return { kind: 'webgpu', reason: 'requested', gpu, ...common };

  // auto: compare one layer's decode attention at the average position of a full context
  // (half the context length, at least 64 keys), WebGPU (transfers included) vs the WASM kernel.
  try {
    const nKv = Math.max(64, Math.min(info.contextLength, 8192) >> 1);
    const gpuMs = await timeGpuLayer(gpu, info, nKv, kvType);
    const wasmMs = handle.benchAttention(nKv, 1, 5);
    const measured = { keys: nKv, webgpuMs: +gpuMs.toFixed(4), wasmMs: +wasmMs.toFixed(4) };
    const figures = `one layer's decode attention over ${nKv} keys: WebGPU ${measured.webgpuMs} ms ` +
      `(with transfers) vs WASM ${measured.wasmMs} ms`;
    if (gpuMs < wasmMs) {
      return { kind: 'webgpu', reason: `auto: WebGPU is faster (${figures})`, gpu, measured, ...common };
    }
    gpu.device.destroy?.();
    const { kvType: _, ...wasmCommon } = common;
    return { kind: 'wasm', reason: `auto: WASM is faster (${figures})`, measured, ...wasmCommon };
  } catch (e) {
    gpu.device.destroy?.();
    return { kind: 'wasm', requested, reason: `auto: the WebGPU probe failed (${e.message})` };
  }
}

/**
 * Feeds tokens through a session whose attention runs on the GPU: the engine computes each
 * layer's q/k/v in WASM, the GPU cache takes k/v and returns the attention output.
 * @param {object} h the Embind session (external attention on)
 * @param {ReturnType<typeof createKvCache>} cache
 */
export async function gpuFeed(h, cache, ids, allLogits, { layers, capture, alive }) {
  const chunks = h.feedBegin(ids, allLogits);
  for (let c = 0; c < chunks; c++) {
    const rows = h.stepChunk(c), pos = h.stepPos();
    for (let l = 0; l < layers; l++) {
      h.stepQkv(l);
      const window = h.stepWindow(l);
      await cache.layer(l, { q: h.stepQ(), k: h.stepK(), v: h.stepV(), rows, pos, window, wantProbs: capture }, (out, probs) => {
        alive();  // the session may have been disposed while the GPU worked
        // Fresh views: the heap may have grown while this layer was on the GPU.
        h.stepOut().set(out);
        if (probs) h.stepProbs().set(probs);
      });
      alive();
      h.stepLayerEnd(l);
    }
    h.stepChunkEnd();
  }
  h.feedEnd();
}
