// WebGPU weight products and embedding-row gather over weights kept as stored in the GGUF.
//
// Interface (shared with the whole-model graph; extend only compatibly):
//
//   export const GPU_WEIGHT_TYPES = ['f32','f16','bf16','q8_0','q4_0','q4_1','q5_0','q5_1','q4_k','q5_k','q6_k'];
//   export function createProducts(device, options?) -> Products   // pipelines compiled lazily, per type and variant
//                                                      // options.maxBindingBytes: test hook to force splitting
//                                                      // options.prefillGrid: test hook, prefill tile 4 x prefillGrid (4, 8, 16)
//
//   Products.upload({type, rows, cols, bytes, label}) -> GpuWeight
//     // bytes: Uint8Array, the tensor exactly as stored in the GGUF (rows consecutive).
//     // GpuWeight: {type, rows, cols, bytes /*total*/, parts: [{buffer, firstRow, rows}], destroy()}
//     // Split by whole rows into buffers within device.limits.maxStorageBufferBindingSize and
//     // maxBufferSize (e.g. a 128k-row classifier); written with queue.writeBuffer, padded to 4 bytes
//     // (plus one word, so that unaligned 4-byte reads stay inside the buffer).
//     // No f32 copy of a weight on the GPU.
//   Products.allocate({type, rows, cols, label}) -> GpuWeight
//     // upload()'s buffers, unwritten: bytes of row r go to the part holding it at
//     // (r - firstRow) * rowBytes (a GPU-resident load writes them as they stream in).
//
//   Products.product({weight, x: {buffer, offset=0}, y: {buffer, offset=0}, maxTokens,
//                     accumulate=false, bias /*{buffer, offset}|undefined*/, glu /*{up: GpuWeight, act:'silu'|'gelu'}|undefined*/,
//                     step /*GPUBuffer*/, norm /*{weight: {buffer, offset}, eps, x: {buffer, offset}}|undefined*/}) -> ProductOp
//     // All activations f32. x: [tokens][cols], y: [tokens][rows], token-major; offsets in bytes,
//     // multiples of 256 (minStorageBufferOffsetAlignment). x, y and bias must be distinct buffers
//     // (WebGPU forbids a buffer bound read-only and read-write in one dispatch).
//     // y[t][r] = (accumulate ? y[t][r] : 0) + scale * ((bias ? bias[r] : 0) + sum_c W[r][c] * x[t][c])
//     //   (scale: a number, default 1; not with rope or cache: a scaled residual add in one product)
//     // with glu: y[t][r] = (accumulate ? y[t][r] : 0) + act(gate x + bias)[t][r] * (up x)[t][r]
//     //   (weight = gate; up of the same type and shape; the bias, if any, is the gate's, added
//     //   before the activation; 'gelu' = tanh approximation as in src/kernels)
//     // with norm (RMSNorm folded into decode): for n == 1 the product reads norm.x (the raw
//     //   activations) and multiplies RMSNorm(norm.x) * norm.weight, computed on the fly; for n > 1
//     //   it reads x as usual, which the caller fills with the norm (norm.wgsl) before it.
//     // with rope {table: {buffer, offset}, sin /*index of the sin table*/, mode: 'adjacent'|'halves',
//     //   headDim, rotDims} (RoPE folded into the epilogue; weight in one part, headDim even):
//     //   y's row is rotated per head as rope_kv.wgsl does, at position step.pos + t; table holds
//     //   cos (context, rotDims/2) from index 0 and sin from index `sin` (the CPU's tables)
//     // with qkNorm {weight: {buffer /*UNIFORM usage*/, offset}, eps, headDim} (decode only: maxTokens 1;
//     //   weight in one part, headDim a multiple of 4, at most 512): each head's headDim rows are
//     //   RMSNorm-ed over the head (after the bias, before RoPE) by the workgroup that computes them
//     //   (Qwen3's and Gemma 3's per-head Q/K norms), so no norm or RoPE dispatch follows
//     // yType 'f16' (with cache; needs the device's shader-f16): y is an f16 KV cache, each value
//     //   rounded to f16 as it is written (products.wgsl y_t)
//     // with cache: true, token t writes y's row step.pos + t (a KV-cache write; y must hold
//     //   every position the caller feeds); no accumulate or glu with rope or cache
//     // step: a uniform buffer owned by the caller; its first u32 (byte offset 0) is the number of tokens n
//     //   of the current step, its second (offset 4) the step's first position (rope, cache). The
//     //   caller writes it once per step; products only bind it.
//     // Pipelines and bind groups are created here, once, never per step.
//     // ProductOp.ready: a Promise resolved once its pipelines are compiled (encode() before that
//     //   throws); Products.product() itself is synchronous.
//   ProductOp.encode(pass /*GPUComputePassEncoder*/, nTokens); ProductOp.destroy() frees its parameters
//     // records the dispatch(es) into an open compute pass: matrix-vector kernel for n == 1,
//     // tiled matrix-matrix for n > 1 (nTokens <= maxTokens, and equal to step's n).
//
//   Products.gather({weight, ids: {buffer, offset}, y: {buffer, offset}, maxTokens, scale = 1, step}) -> GatherOp
//     // y[t][c] = scale * W[ids[t]][c]   (ids: u32 per token; any stored type) — embedding rows;
//     // ids >= rows leave y[t] unwritten.
//   GatherOp.encode(pass, nTokens); GatherOp.ready as ProductOp.ready
//   Products.ready(): Promise resolved when every op created so far is compiled.
//   Products.dispose()
//
// Numerics: f32 arithmetic throughout (no shader-f16), weights decoded exactly as
// dequantize_row_ref of src/kernels/quant.cpp. Activations stay f32: the WASM engine instead
// quantizes activations to 8 bits for the block types, so GPU and WASM results differ by that
// quantization (the GPU path is the closer one to the float64 product).
import { QkvError } from './errors.js';
import { writeBytes } from './webgpu.js';

export const GPU_WEIGHT_TYPES = ['f32', 'f16', 'bf16', 'q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'q4_k', 'q5_k', 'q6_k'];

// [values per block, bytes per block] of each stored type (ggml's layouts).
const LAYOUT = {
  f32: [1, 4], f16: [1, 2], bf16: [1, 2], q8_0: [32, 34], q4_0: [32, 18], q4_1: [32, 20],
  q5_0: [32, 22], q5_1: [32, 24], q4_k: [256, 144], q5_k: [256, 176], q6_k: [256, 210],
};

/** Bytes of one stored row of `cols` values of `type`. */
export function gpuRowBytes(type, cols) {
  const [block, bytes] = LAYOUT[type];
  return (cols / block) * bytes;
}

const BufferUsage = globalThis.GPUBufferUsage ?? { COPY_SRC: 0x4, COPY_DST: 0x8, UNIFORM: 0x40, STORAGE: 0x80 };
const ShaderStage = globalThis.GPUShaderStage ?? { COMPUTE: 0x4 };

const isNode = typeof process !== 'undefined' && !!process.versions?.node && typeof window === 'undefined';

async function loadShader(name) {
  const url = new URL(`../webgpu/${name}`, import.meta.url);
  if (isNode && url.protocol === 'file:') {
    const fs = await import(/* webpackIgnore: true */ 'node:fs/promises');
    return fs.readFile(url, 'utf8');
  }
  const res = await fetch(url);
  if (!res.ok) throw new QkvError('io', `Could not load shader ${url}: HTTP ${res.status}`);
  return res.text();
}

// Kernel shapes. Decode: WG threads over R rows.
const MV = { wg: 64, r: 4 };
const MAX_QK_HEAD = 512;  // matvec.wgsl QKNORM: a head's values in workgroup memory

/**
 * Prefill tiles (matmul.wgsl) that fit the device: a GR x GR thread grid, 4 GR rows x 4 GR
 * tokens; the largest that fits unless `grid` asks for one.
 */
function chooseMatmul(limits, glu, grid) {
  for (const gr of grid ? [grid] : [16, 8, 4]) {
    const tile = 4 * gr, bytes = 16 * 9 * tile * (glu ? 3 : 2);
    if (gr * gr <= limits.maxComputeInvocationsPerWorkgroup && gr * gr <= limits.maxComputeWorkgroupSizeX &&
        bytes <= limits.maxComputeWorkgroupStorageSize) return { wg: gr * gr, gr, tile };
  }
  throw new QkvError('unsupported', 'the device\'s workgroup limits are below WebGPU\'s defaults');
}
const GATHER_WG = 64;
const PARAMS_BYTES = 48;
const ACTS = { silu: 1, gelu: 2 };
const FLAG_ACCUM = 1, FLAG_BIAS = 2, FLAG_CACHE = 4;  // products.wgsl
const ROPE_MODES = { adjacent: 1, halves: 2 };

const isInt = (v) => Number.isInteger(v) && v >= 0;
const bad = (msg) => new QkvError('bad_argument', msg);

/**
 * The constants a product variant's WGSL starts with; Y16 (an f16 output: a KV cache written by
 * the epilogue) makes it `enable f16;` and y_t = f16 (products.wgsl), else y_t = f32.
 * Exported for tests: the text of a variant a device without shader-f16 cannot compile.
 */
export function productHeader(kind, consts) {
  const { Y16 = 0, ...rest } = consts;
  const lines = Object.entries(rest).map(([k, v]) => `const ${k} = ${v}u;`);
  if (kind !== 'gather') lines.unshift(Y16 ? 'enable f16;\nalias y_t = f16;' : 'alias y_t = f32;');
  return lines.join('\n');
}

const sources = new Map();  // file -> Promise<string>
function shader(name) {
  if (!sources.has(name)) {
    const p = loadShader(name);
    sources.set(name, p);
    p.catch(() => sources.delete(name));
  }
  return sources.get(name);
}

// Per device: the bind group layouts and the compiled pipelines, shared by every Products on it
// (a pipeline is compiled once per type and variant however many models or tests use it).
const devices = new WeakMap();
function deviceState(device) {
  if (devices.has(device)) return devices.get(device);
  const storage = (binding, type) => ({ binding, visibility: ShaderStage.COMPUTE, buffer: { type } });
  const productLayout = device.createBindGroupLayout({
    label: 'qkv products',
    entries: [storage(0, 'uniform'), storage(1, 'uniform'), storage(2, 'read-only-storage'), storage(3, 'read-only-storage'),
      storage(4, 'read-only-storage'), storage(5, 'storage'), storage(6, 'read-only-storage'), storage(7, 'read-only-storage'),
      storage(8, 'read-only-storage'), storage(9, 'read-only-storage'), storage(10, 'uniform')],
  });
  const gatherLayout = device.createBindGroupLayout({
    label: 'qkv gather',
    entries: [storage(0, 'uniform'), storage(1, 'uniform'), storage(2, 'read-only-storage'), storage(3, 'read-only-storage'),
      storage(4, 'read-only-storage'), storage(5, 'storage')],
  });
  const layouts = {
    product: device.createPipelineLayout({ bindGroupLayouts: [productLayout] }),
    gather: device.createPipelineLayout({ bindGroupLayouts: [gatherLayout] }),
  };
  const pipelines = new Map();
  // The variant's WGSL: constants, weights.wgsl, load_unit for the type, then the kernel files.
  function pipeline(kind, type, consts) {
    const key = `${kind}|${type}|${JSON.stringify(consts)}`;
    if (!pipelines.has(key)) {
      const files = kind === 'gather' ? ['weights.wgsl', 'gather.wgsl'] : ['weights.wgsl', 'products.wgsl', `${kind}.wgsl`];
      const p = (async () => {
        const texts = await Promise.all(files.map(shader));
        const head = productHeader(kind, consts);
        const loader = `fn load_unit(rb: u32, u: u32, cols: u32, up: bool) { load_${type}(rb, u, cols, up); }`;
        const code = [head, texts[0], loader, ...texts.slice(1)].join('\n');
        const module = device.createShaderModule({ code, label: key });
        try {
          return await device.createComputePipelineAsync({
            label: key, layout: kind === 'gather' ? layouts.gather : layouts.product,
            compute: { module, entryPoint: 'main' },
          });
        } catch (e) {
          const info = await module.getCompilationInfo?.().catch(() => null);
          const msgs = info?.messages?.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join('; ') ?? '';
          throw new QkvError('internal', `WebGPU pipeline ${key}: ${e?.message ?? e} ${msgs}`, { cause: e });
        }
      })();
      pipelines.set(key, p);
      p.catch(() => pipelines.delete(key));
    }
    return pipelines.get(key);
  }
  const state = { productLayout, gatherLayout, pipeline };
  devices.set(device, state);
  return state;
}

/**
 * Creates the product/gather builder on a device.
 * @param {GPUDevice} device
 * @param {{maxBindingBytes?: number, prefillGrid?: 4 | 8 | 16}} [options] test hooks:
 *   maxBindingBytes splits weights into buffers of at most this many bytes (default: the device's
 *   binding and buffer limits); prefillGrid picks the prefill thread grid (default: the largest
 *   that fits; SwiftShader compiles the small ones much faster).
 */
export function createProducts(device, options = {}) {
  const limits = device.limits;
  const maxBinding = Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize,
    options.maxBindingBytes ?? Infinity);
  const maxGroups = limits.maxComputeWorkgroupsPerDimension;
  if (options.prefillGrid !== undefined && ![4, 8, 16].includes(options.prefillGrid)) {
    throw bad('createProducts: prefillGrid must be 4, 8 or 16');
  }
  const pending = new Set();
  const owned = new Set();  // buffers created here (weights, params, dummies)
  let disposed = false;
  const { productLayout, gatherLayout, pipeline } = deviceState(device);

  function makeBuffer(size, usage, label) {
    const b = device.createBuffer({ size, usage, label });
    owned.add(b);
    return b;
  }
  const dummy = makeBuffer(16, BufferUsage.STORAGE, 'qkv products: no bias');
  const dummyUniform = makeBuffer(16, BufferUsage.UNIFORM, 'qkv products: no Q/K norm');

  function checkLive() {
    if (disposed) throw new QkvError('bad_argument', 'products: used after dispose()');
  }

  function upload({ type, rows, cols, bytes, label = type }) {
    const w = allocate({ type, rows, cols, label });
    if (!(bytes instanceof Uint8Array)) { w.destroy(); throw bad('upload: bytes must be a Uint8Array'); }
    if (bytes.length !== w.bytes) {
      w.destroy();
      throw bad(`upload: ${label}: ${bytes.length} bytes for ${rows} x ${cols} ${type} (want ${w.bytes})`);
    }
    for (const p of w.parts) {
      const size = p.rows * w.rowBytes;
      const aligned = size & ~3;
      const src = bytes.subarray(p.firstRow * w.rowBytes, p.firstRow * w.rowBytes + size);
      if (aligned) writeBytes(device, p.buffer, 0, src.subarray(0, aligned));
      if (size > aligned) {
        const tail = new Uint8Array(4);
        tail.set(src.subarray(aligned));
        device.queue.writeBuffer(p.buffer, aligned, tail);
      }
    }
    return w;
  }

  // The buffers of a weight, unwritten (upload() fills them; a GPU-resident load streams into
  // them, src/js/gpu-resident.js): whole rows per buffer, padded to 4 bytes plus one word.
  function allocate({ type, rows, cols, label = type }) {
    checkLive();
    if (!GPU_WEIGHT_TYPES.includes(type)) {
      throw new QkvError('unsupported', `upload: weight type '${type}' has no GPU kernel (${GPU_WEIGHT_TYPES.join(', ')})`);
    }
    if (!isInt(rows) || rows < 1 || !isInt(cols) || cols < 1) throw bad('upload: rows and cols must be integers >= 1');
    const [block] = LAYOUT[type];
    if (cols % block) throw bad(`upload: ${type} rows of ${cols} values do not split into blocks of ${block}`);
    const rowBytes = gpuRowBytes(type, cols);
    // Whole rows per buffer, leaving room for the 4-byte padding and the over-read word.
    const perPart = Math.floor((Math.floor(maxBinding / 4) * 4 - 8) / rowBytes);
    if (perPart < 1) {
      throw new QkvError('unsupported', `upload: ${label}: one row (${rowBytes} bytes) exceeds the device's buffer binding limit (${maxBinding})`);
    }
    const parts = [];
    for (let firstRow = 0; firstRow < rows; firstRow += perPart) {
      const n = Math.min(perPart, rows - firstRow);
      const aligned = (n * rowBytes) & ~3;
      const buffer = makeBuffer(aligned + 8, BufferUsage.STORAGE | BufferUsage.COPY_DST,
        parts.length || firstRow + n < rows ? `${label} rows ${firstRow}..${firstRow + n}` : label);
      parts.push({ buffer, firstRow, rows: n });
    }
    return {
      type, rows, cols, bytes: rows * rowBytes, rowBytes, parts,
      destroy() {
        for (const p of parts) { p.buffer.destroy(); owned.delete(p.buffer); }
        parts.length = 0;
      },
    };
  }

  function checkWeight(w, what) {
    if (!w || !GPU_WEIGHT_TYPES.includes(w.type) || !Array.isArray(w.parts) || !w.parts.length) {
      throw bad(`${what} must be a GpuWeight from upload()`);
    }
  }
  function checkRef(r, what) {
    if (!r || typeof r.buffer?.size !== 'number') throw bad(`${what} must be {buffer, offset}`);
    if (r.buffer.usage !== undefined && !(r.buffer.usage & BufferUsage.STORAGE)) throw bad(`${what}.buffer lacks STORAGE usage`);
    const offset = r.offset ?? 0;
    if (!isInt(offset) || offset % 256) throw bad(`${what}.offset must be a multiple of 256`);
    return { buffer: r.buffer, offset };
  }
  function checkStep(step, what) {
    if (!step || typeof step.size !== 'number' || step.size < 8) throw bad(`${what}: step must be a GPUBuffer of at least 8 bytes`);
    if (step.usage !== undefined && !(step.usage & BufferUsage.UNIFORM)) throw bad(`${what}: step lacks UNIFORM usage`);
  }
  function checkFits(r, bytes, what) {
    if (r.offset + bytes > r.buffer.size) throw bad(`${what}: ${bytes} bytes from offset ${r.offset} exceed the buffer (${r.buffer.size})`);
  }
  // Workgroup counts as (x, y) within maxComputeWorkgroupsPerDimension.
  function grid(groups) {
    if (groups <= maxGroups) return [groups, 1];
    const gy = Math.ceil(groups / maxGroups);
    if (gy > maxGroups) throw new QkvError('unsupported', `${groups} workgroups exceed the device's dispatch limits`);
    return [maxGroups, gy];
  }
  function paramsBuffer(words, label) {
    const b = makeBuffer(PARAMS_BYTES, BufferUsage.UNIFORM | BufferUsage.COPY_DST, label);
    device.queue.writeBuffer(b, 0, words);
    return b;
  }

  function track(op) {
    const p = op.ready;
    pending.add(p);
    p.then(() => pending.delete(p), () => pending.delete(p));
    return op;
  }

  function product(args) {
    checkLive();
    const { weight, maxTokens, accumulate = false, bias, glu, step, norm, rope, qkNorm, cache = false, scale = 1, yType = 'f32' } = args ?? {};
    if (yType !== 'f32' && yType !== 'f16') throw bad(`product: yType must be 'f32' or 'f16', not ${JSON.stringify(yType)}`);
    const y16 = yType === 'f16';
    if (y16 && !cache) throw bad("product: yType 'f16' is for a KV cache (cache: true)");
    if (y16 && !device.features?.has?.('shader-f16')) throw new QkvError('unsupported', "product: yType 'f16' needs the device's shader-f16");
    if (typeof scale !== 'number' || !Number.isFinite(scale)) throw bad('product: scale must be a finite number');
    if (scale !== 1 && (rope || cache || qkNorm)) throw bad('product: scale is not taken with rope, qkNorm or cache');
    checkWeight(weight, 'product: weight');
    if (!isInt(maxTokens) || maxTokens < 1) throw bad('product: maxTokens must be an integer >= 1');
    checkStep(step, 'product');
    const x = checkRef(args.x, 'product: x'), y = checkRef(args.y, 'product: y');
    checkFits(x, 4 * maxTokens * weight.cols, 'product: x');
    checkFits(y, (y16 ? 2 : 4) * (cache ? 1 : maxTokens) * weight.rows, 'product: y');
    let ropeTable = null, ropeMode = 0, hd = 2, rot = 0;
    if (rope) {
      ropeMode = ROPE_MODES[rope.mode];
      if (!ropeMode) throw bad(`product: rope.mode must be 'adjacent' or 'halves', not ${JSON.stringify(rope.mode)}`);
      ropeTable = checkRef(rope.table, 'product: rope.table');
      ({ headDim: hd, rotDims: rot } = rope);
      if (!isInt(hd) || hd < 2 || hd % 2 || weight.rows % hd) throw bad('product: rope.headDim must be even and divide the weight\'s rows');
      if (!isInt(rot) || rot % 2 || rot > hd || rot < 2) throw bad('product: rope.rotDims must be even, in 2..headDim');
      if (!isInt(rope.sin)) throw bad('product: rope.sin must be an index');
    }
    let qn = null;
    if (qkNorm) {
      const qh = qkNorm.headDim;
      if (!isInt(qh) || qh < 4 || qh % MV.r || qh > MAX_QK_HEAD || weight.rows % qh) {
        throw bad(`product: qkNorm.headDim must be a multiple of ${MV.r} up to ${MAX_QK_HEAD} dividing the weight's rows`);
      }
      if (rope && rope.headDim !== qh) throw bad('product: qkNorm.headDim and rope.headDim differ');
      if (maxTokens !== 1) throw bad('product: qkNorm is decode only (maxTokens 1)');
      if (typeof qkNorm.eps !== 'number' || !(qkNorm.eps >= 0)) throw bad('product: qkNorm.eps must be a number >= 0');
      const r = qkNorm.weight;
      if (!r || typeof r.buffer?.size !== 'number') throw bad('product: qkNorm.weight must be {buffer, offset}');
      if (r.buffer.usage !== undefined && !(r.buffer.usage & BufferUsage.UNIFORM)) throw bad('product: qkNorm.weight.buffer lacks UNIFORM usage');
      qn = { buffer: r.buffer, offset: r.offset ?? 0 };
      if (!isInt(qn.offset) || qn.offset % 256) throw bad('product: qkNorm.weight.offset must be a multiple of 256');
      checkFits(qn, 4 * qh, 'product: qkNorm.weight');
      if (!rope) hd = qh;
    }
    if ((rope || cache || qkNorm) && (accumulate || glu)) throw bad('product: rope, qkNorm and cache take no accumulate or glu');
    if ((rope || qkNorm) && weight.parts.length > 1) throw new QkvError('unsupported', 'product: rope and qkNorm need the weight in one buffer');
    const b = bias ? checkRef(bias, 'product: bias') : null;
    if (b) checkFits(b, 4 * weight.rows, 'product: bias');
    let nx = null, nw = null;
    if (norm) {
      nx = checkRef(norm.x, 'product: norm.x');
      nw = checkRef(norm.weight, 'product: norm.weight');
      checkFits(nx, 4 * weight.cols, 'product: norm.x');
      checkFits(nw, 4 * weight.cols, 'product: norm.weight');
      if (typeof norm.eps !== 'number' || !(norm.eps >= 0)) throw bad('product: norm.eps must be a number >= 0');
    }
    let act = 0, up = null;
    if (glu) {
      act = ACTS[glu.act];
      if (!act) throw bad(`product: glu.act must be 'silu' or 'gelu', not ${JSON.stringify(glu.act)}`);
      up = glu.up;
      checkWeight(up, 'product: glu.up');
      if (up.type !== weight.type || up.rows !== weight.rows || up.cols !== weight.cols || up.parts.length !== weight.parts.length) {
        throw new QkvError('unsupported', 'product: glu.up must have the gate weight\'s type and shape');
      }
    }
    const flags = (accumulate ? FLAG_ACCUM : 0) | (b ? FLAG_BIAS : 0) | (cache ? FLAG_CACHE : 0);
    const ropeConsts = { ROPE: ropeMode, HD: hd, ROT: rot, QN4: qn ? hd / 4 : 1, Y16: y16 ? 1 : 0 };
    // A Q/K-norm head is computed in passes of 8 rows where it divides (fewer passes over x).
    const mvR = qn && hd % 8 === 0 ? 8 : MV.r;
    const mvConsts = {
      WG: MV.wg, R: mvR, RED: MV.wg * (mvR * (act ? 2 : 1) + (norm ? 1 : 0)), ACT: act, NORM: norm ? 1 : 0, ...ropeConsts,
      QKNORM: qn ? 1 : 0, CHUNKS: qn ? hd / mvR : 1, HV: qn ? hd : 1,
    };
    const mm = chooseMatmul(limits, !!act, options.prefillGrid);
    const mmConsts = { WG: mm.wg, GR: mm.gr, TR: mm.tile, TT: mm.tile, US: act ? mm.tile * 9 : 1, ACT: act, ...ropeConsts };
    const units = Math.ceil(weight.cols / 32);
    const paramBuffers = [];
    const parts = weight.parts.map((part, i) => {
      const mvGrid = grid(qn ? part.rows / hd : Math.ceil(part.rows / MV.r));
      const mmGrid = grid(Math.ceil(part.rows / mm.tile));
      const words = (gx) => {
        const w = new Uint32Array([part.rows, weight.cols, part.firstRow, weight.rowBytes, units, weight.rows, gx, flags, 0, rope ? rope.sin : 0, 0, 0]);
        new Float32Array(w.buffer)[8] = norm ? norm.eps : 0;
        new Float32Array(w.buffer)[10] = scale;
        new Float32Array(w.buffer)[11] = qn ? qkNorm.eps : 0;
        return w;
      };
      const entries = (pb, xr) => [
        { binding: 0, resource: { buffer: pb } },
        { binding: 1, resource: { buffer: step } },
        { binding: 2, resource: { buffer: part.buffer } },
        { binding: 3, resource: { buffer: (up ?? weight).parts[i].buffer } },
        { binding: 4, resource: { buffer: xr.buffer, offset: xr.offset } },
        { binding: 5, resource: { buffer: y.buffer, offset: y.offset } },
        { binding: 6, resource: b ? { buffer: b.buffer, offset: b.offset } : { buffer: dummy } },
        { binding: 7, resource: { buffer: xr.buffer, offset: xr.offset } },
        { binding: 8, resource: nw ? { buffer: nw.buffer, offset: nw.offset } : { buffer: dummy } },
        { binding: 9, resource: ropeTable ? { buffer: ropeTable.buffer, offset: ropeTable.offset } : { buffer: dummy } },
        { binding: 10, resource: qn ? { buffer: qn.buffer, offset: qn.offset, size: 4 * hd } : { buffer: dummyUniform } },
      ];
      const mvParams = paramsBuffer(words(mvGrid[0]), 'qkv matvec params');
      const mmParams = paramsBuffer(words(mmGrid[0]), 'qkv matmul params');
      paramBuffers.push(mvParams, mmParams);
      return {
        mvGrid, mmGrid,
        mvGroup: device.createBindGroup({ layout: productLayout, entries: entries(mvParams, nx ?? x) }),
        mmGroup: maxTokens > 1 ? device.createBindGroup({ layout: productLayout, entries: entries(mmParams, x) }) : null,
      };
    });
    let mvPipe = null, mmPipe = null;
    const ready = Promise.all([
      pipeline('matvec', weight.type, mvConsts).then((p) => { mvPipe = p; }),
      maxTokens > 1 ? pipeline('matmul', weight.type, mmConsts).then((p) => { mmPipe = p; }) : null,
    ]).then(() => undefined);
    return track({
      ready,
      encode(pass, nTokens) {
        if (!isInt(nTokens) || nTokens < 1 || nTokens > maxTokens) throw bad(`product: nTokens must be in 1..${maxTokens}`);
        if (!mvPipe || (maxTokens > 1 && !mmPipe)) throw new QkvError('internal', 'product: encode() before ready resolved');
        for (const p of parts) {
          if (nTokens === 1) {
            pass.setPipeline(mvPipe);
            pass.setBindGroup(0, p.mvGroup);
            pass.dispatchWorkgroups(p.mvGrid[0], p.mvGrid[1]);
          } else {
            pass.setPipeline(mmPipe);
            pass.setBindGroup(0, p.mmGroup);
            pass.dispatchWorkgroups(p.mmGrid[0], p.mmGrid[1], Math.ceil(nTokens / mm.tile));
          }
        }
      },
      /** Frees this op's parameter buffers (an op rebuilt over a grown KV cache). */
      destroy() {
        for (const b of paramBuffers) { b.destroy(); owned.delete(b); }
        paramBuffers.length = 0;
      },
    });
  }

  function gather(args) {
    checkLive();
    const { weight, maxTokens, scale = 1, step } = args ?? {};
    checkWeight(weight, 'gather: weight');
    if (!isInt(maxTokens) || maxTokens < 1 || maxTokens > maxGroups) throw bad(`gather: maxTokens must be in 1..${maxGroups}`);
    if (typeof scale !== 'number' || !Number.isFinite(scale)) throw bad('gather: scale must be a finite number');
    checkStep(step, 'gather');
    const ids = checkRef(args.ids, 'gather: ids'), y = checkRef(args.y, 'gather: y');
    checkFits(ids, 4 * maxTokens, 'gather: ids');
    checkFits(y, 4 * maxTokens * weight.cols, 'gather: y');
    const units = Math.ceil(weight.cols / 32);
    const gx = Math.ceil(units / GATHER_WG);
    const groups = weight.parts.map((part) => {
      const words = new Uint32Array([part.rows, weight.cols, part.firstRow, weight.rowBytes, units, 0, 0, 0]);
      new Float32Array(words.buffer)[5] = scale;
      return device.createBindGroup({
        layout: gatherLayout,
        entries: [
          { binding: 0, resource: { buffer: paramsBuffer(words, 'qkv gather params') } },
          { binding: 1, resource: { buffer: step } },
          { binding: 2, resource: { buffer: part.buffer } },
          { binding: 3, resource: { buffer: part.buffer } },
          { binding: 4, resource: { buffer: ids.buffer, offset: ids.offset } },
          { binding: 5, resource: { buffer: y.buffer, offset: y.offset } },
        ],
      });
    });
    let pipe = null;
    const ready = pipeline('gather', weight.type, { WG: GATHER_WG }).then((p) => { pipe = p; });
    return track({
      ready,
      encode(pass, nTokens) {
        if (!isInt(nTokens) || nTokens < 1 || nTokens > maxTokens) throw bad(`gather: nTokens must be in 1..${maxTokens}`);
        if (!pipe) throw new QkvError('internal', 'gather: encode() before ready resolved');
        pass.setPipeline(pipe);
        for (const g of groups) {
          pass.setBindGroup(0, g);
          pass.dispatchWorkgroups(gx, nTokens);
        }
      },
    });
  }

  return {
    device,
    upload,
    allocate,
    product,
    gather,
    /** Resolves when every op created so far has its pipelines. */
    ready: () => Promise.all([...pending]).then(() => undefined),
    dispose() {
      if (disposed) return;
      disposed = true;
      for (const b of owned) b.destroy();
      owned.clear();
    },
  };
}
