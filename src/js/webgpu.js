// WebGPU device acquisition, shader loading, and a standalone runner of the WGSL attention
// kernels of src/webgpu/attention_*.wgsl with the CPU contract of src/kernels/attention.h (each
// run() uploads its inputs and reads the result back; tests and tools). The engine's GPU path
// is the whole model: src/js/gpu-model.js.
import { QkvError } from './errors.js';

/**
 * queue.writeBuffer of a byte view that may live in a SharedArrayBuffer (the multi-threaded
 * build's heap): Dawn's Node binding refuses those, so they go through a bounded copy.
 * `bytes.byteLength` and `dst` are multiples of 4, as writeBuffer requires.
 */
export function writeBytes(device, buffer, dst, bytes) {
  const shared = typeof SharedArrayBuffer !== 'undefined' && bytes.buffer instanceof SharedArrayBuffer;
  if (!shared) {
    device.queue.writeBuffer(buffer, dst, bytes.buffer, bytes.byteOffset, bytes.byteLength);
    return;
  }
  const CHUNK = 4 << 20;
  const copy = new Uint8Array(Math.min(CHUNK, bytes.byteLength));
  for (let o = 0; o < bytes.byteLength; o += CHUNK) {
    const n = Math.min(CHUNK, bytes.byteLength - o);
    copy.set(new Uint8Array(bytes.buffer, bytes.byteOffset + o, n));
    device.queue.writeBuffer(buffer, dst + o, copy.buffer, 0, n);  // writeBuffer copies before it returns
  }
}

// The WebGPU enum namespaces; numeric fallbacks for hosts (Node without `webgpu` globals) that lack them.
const BufferUsage = globalThis.GPUBufferUsage ?? { MAP_READ: 0x1, COPY_SRC: 0x4, COPY_DST: 0x8, UNIFORM: 0x40, STORAGE: 0x80 };
const MapMode = globalThis.GPUMapMode ?? { READ: 0x1 };

const isNode = typeof process !== 'undefined' && !!process.versions?.node && typeof window === 'undefined';

/** Loads a shader source from src/webgpu/ (fetch in browsers, fs in Node). */
export async function loadShader(name) {
  const url = new URL(`../webgpu/${name}`, import.meta.url);
  if (isNode && url.protocol === 'file:') {
    const fs = await import(/* webpackIgnore: true */ 'node:fs/promises');
    return fs.readFile(url, 'utf8');
  }
  const res = await fetch(url);
  if (!res.ok) throw new QkvError('io', `Could not load shader ${url}: HTTP ${res.status}`);
  return res.text();
}

const keepAlive = new Map();  // device -> {gpu, adapter}

/**
 * Requests a WebGPU device with the adapter's compute limits.
 * @param {{gpu?: GPU, powerPreference?: GPUPowerPreference}} [options] gpu defaults to navigator.gpu
 *   (pass `create([])` from the `webgpu` npm package in Node).
 * @returns {Promise<{device: GPUDevice, adapterInfo: {vendor: string, architecture: string,
 *   device: string, description: string}}>}
 * @throws {QkvError} code 'unsupported' when there is no WebGPU or no adapter.
 */
export async function requestQkvDevice(options = {}) {
  const gpu = options.gpu ?? globalThis.navigator?.gpu;
  if (!gpu) {
    throw new QkvError('unsupported', isNode
      ? "WebGPU is not available in Node by itself: pass {gpu} from the 'webgpu' package"
      : 'WebGPU is not available in this browser (no navigator.gpu): use one with WebGPU enabled');
  }
  let adapter = null;
  try {
    adapter = await gpu.requestAdapter({ powerPreference: options.powerPreference ?? 'high-performance' });
  } catch (e) {
    throw new QkvError('unsupported', `WebGPU requestAdapter() failed: ${e?.message ?? e}`, { cause: e });
  }
  if (!adapter) {
    // The driver hint differs: a browser user checks the browser's GPU page; in Node, Dawn needs a Vulkan driver.
    throw new QkvError('unsupported', 'WebGPU is present but no GPU adapter is available (' + (isNode
      ? 'missing driver: set VK_ICD_FILENAMES to a Vulkan driver such as SwiftShader)'
      : 'the GPU is blocklisted or its driver is missing; the browser\'s GPU page, e.g. chrome://gpu, says which)'));
  }
  const want = ['maxComputeWorkgroupStorageSize', 'maxComputeInvocationsPerWorkgroup',
    'maxComputeWorkgroupSizeX', 'maxStorageBufferBindingSize', 'maxBufferSize',
    'maxComputeWorkgroupsPerDimension'];
  const requiredLimits = {};
  for (const name of want) if (adapter.limits[name] !== undefined) requiredLimits[name] = adapter.limits[name];
  // shader-f16 (half-precision KV caches) where the adapter has it.
  const requiredFeatures = adapter.features?.has?.('shader-f16') ? ['shader-f16'] : [];
  let device;
  try {
    device = await adapter.requestDevice({ requiredLimits, requiredFeatures });
  } catch (e) {
    throw new QkvError('unsupported', `WebGPU requestDevice() failed: ${e?.message ?? e}`, { cause: e });
  }
  const info = adapter.info ?? {};
  const adapterInfo = {
    vendor: info.vendor ?? '', architecture: info.architecture ?? '',
    device: info.device ?? '', description: info.description ?? '',
  };
  // Dawn's Node bindings tear the device down if the GPU/adapter objects are garbage-collected,
  // so keep them reachable for as long as the device is.
  keepAlive.set(device, { gpu, adapter });
  device.lost?.then(() => keepAlive.delete(device));
  return { device, adapterInfo };
}

/** Can this device store keys/values in f16 (WGSL `enable f16`)? */
export const hasShaderF16 = (device) => !!device.features?.has?.('shader-f16');

/**
 * IEEE half-precision bits of each float (round to nearest, ties to even; overflow to infinity),
 * as the GPU would store them: dst[i] = f16(src[i]).
 * @param {Float32Array} src @param {Uint16Array} dst (at least src.length)
 */
export function toHalf(src, dst) {
  const u = new Uint32Array(src.buffer, src.byteOffset, src.length);
  for (let i = 0; i < u.length; i++) {
    const b = u[i], sign = (b >>> 16) & 0x8000, e = (b >>> 23) & 0xff, m = b & 0x7fffff;
    let h;
    if (e === 0xff) {
      h = 0x7c00 | (m ? 0x200 : 0);  // infinity, or a quiet NaN
    } else {
      const exp = e - 112;  // rebias 127 -> 15
      if (exp >= 0x1f) {
        h = 0x7c00;
      } else if (exp <= 0) {  // subnormal half (or zero)
        if (exp < -10) {
          h = 0;
        } else {
          const mm = m | 0x800000, shift = 14 - exp;
          h = mm >>> shift;
          const rem = mm & ((1 << shift) - 1), half = 1 << (shift - 1);
          if (rem > half || (rem === half && (h & 1))) h++;
        }
      } else {
        h = (exp << 10) | (m >>> 13);
        const rem = m & 0x1fff;
        if (rem > 0x1000 || (rem === 0x1000 && (h & 1))) h++;  // may carry into the exponent: right
      }
    }
    dst[i] = sign | h;
  }
  return dst;
}

// Params uniform (common.wgsl): 12 x 4 bytes, padded to 64.
const PARAMS_BYTES = 64;
function writeParams(a, extra = {}) {
  const buf = new ArrayBuffer(PARAMS_BYTES), u = new Uint32Array(buf), f = new Float32Array(buf);
  u[0] = a.nQ; u[1] = a.nKv; u[2] = a.nHeads; u[3] = a.nKvHeads;
  u[4] = a.headDim; u[5] = a.qPos0; u[6] = a.causal ? 1 : 0; u[7] = a.window;
  f[8] = a.scale; u[9] = extra.nSplits ?? 0; u[10] = extra.kvBegin ?? 0; u[11] = extra.kvEnd ?? 0;
  return buf;
}

const MAX_ACC = 32;  // attention_prefill.wgsl: accumulator lanes per thread

/**
 * Prefill tile sizes that fit the device: WG threads, BQ queries, BK keys per tile.
 * Largest BQ first (each staged key tile serves more queries), then the largest BK that fits.
 */
export function choosePrefillTiles(headDim, limits) {
  const wg = Math.min(64, limits.maxComputeInvocationsPerWorkgroup, limits.maxComputeWorkgroupSizeX);
  const storage = limits.maxComputeWorkgroupStorageSize;
  for (const bq of [16, 8, 4, 2, 1]) {
    if (wg % bq) continue;
    if (Math.ceil(headDim / (wg / bq)) > MAX_ACC) continue;
    for (const bk of [64, 32, 16, 8, 4]) {
      const bytes = 4 * (bq * headDim + 2 * bk * headDim + bq * bk);
      if (bytes <= storage) return { wg, bq, bk, bytes };
    }
  }
  throw new QkvError('unsupported', `head_dim ${headDim} does not fit this device's workgroup limits`);
}

/** Largest power of two <= n. */
const pow2floor = (n) => 2 ** Math.floor(Math.log2(n));

/**
 * Creates the attention runner on a device. Pipelines are compiled on first use per
 * (kernel, head_dim, tiles) and cached.
 * @param {GPUDevice} device
 */
export function createAttention(device) {
  const limits = device.limits;
  const redWg = Math.min(64, pow2floor(limits.maxComputeInvocationsPerWorkgroup),
    pow2floor(limits.maxComputeWorkgroupSizeX));
  const sources = new Map();  // file -> Promise<string> (common.wgsl prepended)
  const pipelines = new Map();  // key -> Promise<GPUComputePipeline>
  let disposed = false;

  // The f16 variant: `enable f16;` first, and k/v declared as array<f16> through kv_t.
  function source(file, f16) {
    const key = `${file}|${f16}`;
    if (!sources.has(key)) {
      sources.set(key, Promise.all([loadShader('common.wgsl'), loadShader(file)]).then(([c, s]) => (f16
        ? `enable f16;\n${c.replace('alias kv_t = f32;', 'alias kv_t = f16;')}\n${s}`
        : `${c}\n${s}`)));
    }
    return sources.get(key);
  }

  function pipeline(file, constants, f16 = false) {
    const key = `${file}|${JSON.stringify(constants)}|${f16 ? 'f16' : 'f32'}`;
    if (!pipelines.has(key)) {
      pipelines.set(key, (async () => {
        const code = await source(file, f16);
        const module = device.createShaderModule({ code, label: file });
        try {
          return await device.createComputePipelineAsync({
            layout: 'auto', label: key, compute: { module, entryPoint: 'main', constants },
          });
        } catch (e) {
          throw new QkvError('internal', `WebGPU pipeline ${key}: ${e?.message ?? e}`, { cause: e });
        }
      })());
      pipelines.get(key).catch(() => pipelines.delete(key));
    }
    return pipelines.get(key);
  }

  const withDefaults = (args) => ({
    scale: 1 / Math.sqrt(args.headDim), qPos0: 0, causal: true, window: 0, wantProbs: false, mode: 'auto',
    ...args,
  });

  function validate(a) {
    const ints = ['nQ', 'nKv', 'nHeads', 'nKvHeads', 'headDim', 'qPos0', 'window'];
    for (const n of ints) {
      if (!Number.isInteger(a[n]) || a[n] < 0) throw new QkvError('bad_argument', `attention: ${n} must be an integer >= 0`);
    }
    if (a.nQ < 1 || a.nHeads < 1 || a.nKvHeads < 1 || a.headDim < 1) {
      throw new QkvError('bad_argument', 'attention: nQ, nHeads, nKvHeads and headDim must be >= 1');
    }
    if (a.nHeads % a.nKvHeads) throw new QkvError('bad_argument', 'attention: nHeads must be a multiple of nKvHeads');
    const need = (name, arr, n) => {
      if (!(arr instanceof Float32Array) || arr.length < n) {
        throw new QkvError('bad_argument', `attention: ${name} must be a Float32Array of at least ${n} values`);
      }
    };
    need('q', a.q, a.nQ * a.nHeads * a.headDim);
    need('k', a.k, a.nKv * a.nKvHeads * a.headDim);
    need('v', a.v, a.nKv * a.nKvHeads * a.headDim);
    if (a.keyValid && a.keyValid.length < a.nKv) throw new QkvError('bad_argument', `attention: keyValid needs ${a.nKv} entries`);
  }

  /**
   * Plans one attention call: kernel choice, split sizes and compiled pipelines.
   * @internal
   */
  async function plan(a) {
    const { nQ, nKv, nHeads, headDim: hd } = a;
    const f16 = !!a.kvF16;
    if (f16 && !hasShaderF16(device)) throw new QkvError('unsupported', 'this WebGPU device has no shader-f16');
    const mode = a.mode === 'auto' ? (nQ === 1 && nKv >= 256 ? 'decode' : 'prefill') : a.mode;
    if (mode !== 'prefill' && mode !== 'decode') throw new QkvError('bad_argument', `attention: unknown mode ${a.mode}`);
    // Key range any query can see (decode splits only this range).
    const kvBegin = a.window > 0 ? Math.max(0, a.qPos0 - a.window + 1) : 0;
    const kvEnd = a.causal ? Math.min(nKv, a.qPos0 + nQ) : nKv;
    const range = Math.max(0, kvEnd - kvBegin);
    // Chunk so that a long cache gives ~32 chunks per (head, query), 64..1024 keys each.
    const chunk = Math.min(1024, Math.max(64, 2 ** Math.ceil(Math.log2(Math.max(1, Math.ceil(range / 32))))));
    const nSplits = Math.max(1, Math.ceil(range / chunk));
    const maxGroups = limits.maxComputeWorkgroupsPerDimension;
    const tiles = mode === 'prefill' ? choosePrefillTiles(hd, limits) : null;
    if ((tiles && Math.ceil(nQ / tiles.bq) > maxGroups) || nQ > maxGroups || nSplits > maxGroups || nHeads > maxGroups) {
      throw new QkvError('unsupported', 'attention: too many queries or keys for one dispatch');
    }
    const [mainPipe, reducePipe, probsPipe] = await Promise.all([
      mode === 'prefill'
        ? pipeline('attention_prefill.wgsl', { WG: tiles.wg, BQ: tiles.bq, BK: tiles.bk, HD: hd }, f16)
        : pipeline('attention_decode.wgsl', { WG: redWg, CHUNK: chunk, HD: hd }, f16),
      mode === 'decode' ? pipeline('attention_decode_reduce.wgsl', { WG: redWg, HD: hd }) : null,
      a.wantProbs ? pipeline('attention_probs.wgsl', { WG: redWg, HD: hd }, f16) : null,
    ]);
    return {
      a, mode, tiles, nSplits, mainPipe, reducePipe, probsPipe,
      params: new Uint32Array(writeParams(a, { nSplits, kvBegin, kvEnd })),
      partialBytes: mode === 'decode' ? nQ * nHeads * nSplits * (2 + hd) * 4 : 0,
    };
  }

  const bind = (pipe, list) => device.createBindGroup({
    layout: pipe.getBindGroupLayout(0),
    entries: list.map((buffer, binding) => ({ binding, resource: { buffer } })),
  });

  /**
   * Records a planned call into a compute pass. `b`: {params, q, k, v, valid, out, partial?, probs?}.
   * @internal
   */
  function encode(pass, p, b) {
    const { nQ, nHeads } = p.a;
    if (p.mode === 'prefill') {
      pass.setPipeline(p.mainPipe);
      pass.setBindGroup(0, bind(p.mainPipe, [b.params, b.q, b.k, b.v, b.valid, b.out]));
      pass.dispatchWorkgroups(Math.ceil(nQ / p.tiles.bq), nHeads, 1);
    } else {
      pass.setPipeline(p.mainPipe);
      pass.setBindGroup(0, bind(p.mainPipe, [b.params, b.q, b.k, b.v, b.valid, b.partial]));
      pass.dispatchWorkgroups(p.nSplits, nHeads, nQ);
      pass.setPipeline(p.reducePipe);
      pass.setBindGroup(0, bind(p.reducePipe, [b.params, b.partial, b.out]));
      pass.dispatchWorkgroups(nHeads, nQ, 1);
    }
    if (p.probsPipe) {
      pass.setPipeline(p.probsPipe);
      pass.setBindGroup(0, bind(p.probsPipe, [b.params, b.q, b.k, b.valid, b.probs]));
      pass.dispatchWorkgroups(nQ, nHeads, 1);
    }
  }

  /**
   * Runs attention with the CPU contract of src/kernels/attention.h.
   * @param {object} args
   * @param {number} args.nQ @param {number} args.nKv @param {number} args.nHeads @param {number} args.nKvHeads
   * @param {number} args.headDim
   * @param {Float32Array} args.q (nQ, nHeads*headDim) @param {Float32Array} args.k (nKv, nKvHeads*headDim)
   * @param {Float32Array} args.v same layout as k
   * @param {number} [args.scale] default 1/sqrt(headDim) @param {number} [args.qPos0] default 0
   * @param {boolean} [args.causal] default true @param {number} [args.window] default 0 (off)
   * @param {ArrayLike<number>} [args.keyValid] (nKv,), 0 = padding
   * @param {boolean} [args.wantProbs] also return probs (nHeads, nQ, nKv)
   * @param {'auto'|'prefill'|'decode'} [args.mode] kernel choice; 'auto' uses split-K decode for nQ == 1
   *   over a long cache
   * @param {boolean} [args.kvF16] store k/v as f16 on the GPU (needs shader-f16)
   * @returns {Promise<{out: Float32Array, probs?: Float32Array, mode: string}>}
   */
  async function run(args) {
    if (disposed) throw new QkvError('disposed', 'attention runner was disposed');
    const a = withDefaults(args);
    validate(a);
    const { nQ, nKv, nHeads, nKvHeads, headDim: hd } = a;
    const outLen = nQ * nHeads * hd;
    if (nKv === 0) {
      return { out: new Float32Array(outLen), ...(a.wantProbs ? { probs: new Float32Array(0) } : {}), mode: 'empty' };
    }
    const p = await plan(a);
    const kvData = (x) => (a.kvF16 ? toHalf(x, new Uint16Array(x.length)) : x);
    const buffers = [];
    const S = BufferUsage;
    const make = (size, usage, label) => {
      const b = device.createBuffer({ size: Math.max(16, Math.ceil(size / 4) * 4), usage, label });
      buffers.push(b);
      return b;
    };
    const upload = (data, usage, label) => {
      const b = make(data.byteLength, usage | S.COPY_DST, label);
      writeBytes(device, b, 0, data);
      return b;
    };
    try {
      device.pushErrorScope('validation');
      device.pushErrorScope('out-of-memory');
      const kvLen = nKv * nKvHeads * hd;
      const valid = new Uint32Array(nKv);
      if (a.keyValid) for (let j = 0; j < nKv; j++) valid[j] = a.keyValid[j] ? 1 : 0;
      else valid.fill(1);
      const probsLen = a.wantProbs ? nHeads * nQ * nKv : 0;
      const b = {
        params: upload(p.params, S.UNIFORM, 'params'),
        q: upload(a.q.subarray(0, outLen), S.STORAGE, 'q'),
        k: upload(kvData(a.k.subarray(0, kvLen)), S.STORAGE, 'k'),
        v: upload(kvData(a.v.subarray(0, kvLen)), S.STORAGE, 'v'),
        valid: upload(valid, S.STORAGE, 'key_valid'),
        out: make(outLen * 4, S.STORAGE | S.COPY_SRC, 'out'),
        partial: p.partialBytes ? make(p.partialBytes, S.STORAGE, 'partial') : null,
        probs: probsLen ? make(probsLen * 4, S.STORAGE | S.COPY_SRC, 'probs') : null,
      };
      const outRead = make(outLen * 4, S.MAP_READ | S.COPY_DST, 'out-read');
      const probsRead = probsLen ? make(probsLen * 4, S.MAP_READ | S.COPY_DST, 'probs-read') : null;
      const enc = device.createCommandEncoder({ label: 'attention' });
      const pass = enc.beginComputePass();
      encode(pass, p, b);
      pass.end();
      enc.copyBufferToBuffer(b.out, 0, outRead, 0, outLen * 4);
      if (probsLen) enc.copyBufferToBuffer(b.probs, 0, probsRead, 0, probsLen * 4);
      device.queue.submit([enc.finish()]);
      // Both popped before any await, so a concurrent run() cannot interleave its scopes.
      const [oom, verr] = await Promise.all([device.popErrorScope(), device.popErrorScope()]);
      if (oom) throw new QkvError('out_of_memory', `WebGPU attention: ${oom.message}`);
      if (verr) throw new QkvError('internal', `WebGPU attention: ${verr.message}`);

      await Promise.all([outRead.mapAsync(MapMode.READ), probsRead?.mapAsync(MapMode.READ)]);
      const out = new Float32Array(outRead.getMappedRange(0, outLen * 4).slice(0));
      const res = { out, mode: p.mode };
      if (probsLen) res.probs = new Float32Array(probsRead.getMappedRange(0, probsLen * 4).slice(0));
      return res;
    } finally {
      for (const buf of buffers) buf.destroy();
    }
  }

  return {
    run,
    /** @internal */ plan: (args) => plan(withDefaults(args)),
    /** @internal */ encode,
    /** Tile sizes the prefill kernel would use for a head dim on this device. */
    prefillTiles: (headDim) => choosePrefillTiles(headDim, limits),
    dispose() { disposed = true; pipelines.clear(); sources.clear(); },
  };
}
