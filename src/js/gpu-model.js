// The whole model on WebGPU: every weight uploaded once as stored (src/js/gpu-products.js), a
// session's activations and KV cache on the GPU, and one command buffer per step of up to
// MAX_CHUNK tokens (a decoded token is one step: one submit, one compute pass, one small
// writeBuffer of the `step` uniform, the logits read back). The model description comes from
// WASM (JsModel.gpuModel, bindings/qkv_bindings.cpp); the RoPE tables from the session's own
// Transformer (ropeTable), so every RoPE scaling qkv reads comes out the same.
//
// Per step:  gather(tok_embed) * embed_scale [+ token-type row 0] [+ pos_embed] [embedding LayerNorm] -> x
//   per layer: [norm(x) -> xb]; q, k, v = in W^T (+ b) (in: xb, or x without a pre-norm);
//   q/k RMSNorms per head or over the whole projection; RoPE on q, RoPE (or none: that layer
//   skips it) on k into the cache with v (rope_kv.wgsl); attention over the cache -> att
//   (attention_cached.wgsl; attention_full.wgsl where the probabilities are kept: captured
//   maps, encoders' bidirectional attention); x += rs * [post_norm](att Wo^T + b);
//   [x = norm(x): post-norm blocks]; [norm(x) -> xb]; hb = act(in Wg^T) * (in Wu^T) (GLU) or
//   act(in Wu^T + b); x += rs * [post_norm](hb Wd^T + b) [x = norm(x)]; mixture-of-experts
//   layers instead route in to their chosen experts and add the weighted sum (gpu-moe.js). Parallel blocks
//   (Command-R): the feed-forward reads the attention's input and its output is added first.
//   Decoders: final norm of the last row (or of every row), classifier, logit scale, soft-cap.
//   Encoders (encode()): final norm if any, the hidden states read back for pooling in WASM.
import { QkvError, bareMessage } from './errors.js';
import { MOE_MAX_EXPERTS, createMoeFfn, isExpertRole, loadMoeShaders, uploadExperts } from './gpu-moe.js';
import { GPU_WEIGHT_TYPES, createProducts } from './gpu-products.js';
import { TOPK_MAX, candidateLogits, createTopK, gpuCandidates } from './gpu-topk.js';
import { loadShader, writeBytes } from './webgpu.js';

const BufferUsage = globalThis.GPUBufferUsage ?? { MAP_READ: 0x1, COPY_SRC: 0x4, COPY_DST: 0x8, UNIFORM: 0x40, STORAGE: 0x80 };
const MapMode = globalThis.GPUMapMode ?? { READ: 0x1 };

/** Tokens per decoder step (prefill chunk); an encoder pass takes a whole text. */
export const MAX_CHUNK = 64;
// The step uniform: n (tokens), pos (first position), k (top-k candidates, gpu-topk.js), s
// (attention splits, attention_cached.wgsl), then the step's token ids at IDS_OFFSET
// (a storage-buffer offset must be a multiple of 256); written with one writeBuffer per step.
const IDS_OFFSET = 256;
const MAX_HEAD_DIM = 512;  // attention_cached.wgsl: 8 accumulator lanes x 64 threads
// Split-K decode attention (attention_cached.wgsl partial): a split per KEYS_PER_SPLIT keys, at most MAX_SPLITS.
const KEYS_PER_SPLIT = 64, MAX_SPLITS = 64;

const VECTOR_ROLES = new Set(['pos_embed', 'type_embed', 'embed_norm', 'embed_norm_b', 'final_norm', 'final_norm_b',
  'attn_norm', 'attn_norm_b', 'bq', 'bk', 'bv', 'bo', 'attn_post_norm', 'ffn_post_norm', 'q_norm', 'k_norm', 'ffn_norm',
  'ffn_norm_b', 'b_up', 'b_down']);

/**
 * Why this model cannot run on the GPU path, or null. Anything the kernels do not implement is
 * refused here, so the model runs in WASM instead of running wrong.
 * @param {object} d the description from JsModel.gpuModel()
 */
export function gpuUnsupported(d) {
  // Neither comes from a file qkv reads: only models built through the C++ API have them.
  if (d.positional === 'sinusoidal') return 'sinusoidal positions are not implemented on WebGPU';
  if (!['rope', 'rope-neox', 'learned', 'none'].includes(d.positional)) return `${d.positional} positions are not implemented on WebGPU`;
  const other = d.layerAttn.findIndex((a) => a !== 'softmax');
  if (other >= 0) return `layer ${other} uses ${d.layerAttn[other]} attention, which is not implemented on WebGPU`;
  if (d.causal && !d.hasClassifier) return `${d.arch} has no language-model head`;
  if (d.headDim > MAX_HEAD_DIM) return `head_dim ${d.headDim} exceeds the WebGPU attention kernel's ${MAX_HEAD_DIM}`;
  if (d.rotDims % 2 || d.rotDims > d.headDim) return `RoPE over ${d.rotDims} of ${d.headDim} dims is not implemented on WebGPU`;
  if (d.heads % d.kvHeads) return 'query heads must be a multiple of key/value heads';
  if (!['swiglu', 'geglu', 'gelu', 'relu'].includes(d.ffn)) return `the ${d.ffn} feed-forward is not implemented on WebGPU`;
  if (!Array.isArray(d.layerRope)) return 'this WASM build does not describe which layers take RoPE';
  if (d.experts > 0 && d.expertsUsed === undefined) return 'this WASM build does not describe mixture-of-experts layers';
  if (d.experts > MOE_MAX_EXPERTS) return `${d.experts} experts exceed the WebGPU router's ${MOE_MAX_EXPERTS}`;
  const roles = new Set(d.tensors.map((t) => `${t.layer}:${t.role}`));
  if (d.causal && !roles.has('-1:final_norm')) return 'models without a final norm are not implemented on WebGPU';
  const normWidth = { q_norm: d.qkNormWhole ? d.heads * d.headDim : d.headDim, k_norm: d.qkNormWhole ? d.kvHeads * d.headDim : d.headDim };
  for (const t of d.tensors) {
    if (!VECTOR_ROLES.has(t.role) && !GPU_WEIGHT_TYPES.includes(t.type)) return `${t.type} weights (${t.role}) are not implemented on WebGPU`;
    if (normWidth[t.role] && t.cols !== normWidth[t.role]) return `${t.role} has ${t.cols} values, not the ${normWidth[t.role]} the kernels read`;
  }
  return null;
}

/**
 * Uploads a model's weights and compiles its kernels.
 * @param {GPUDevice} device
 * @param {object} desc JsModel.gpuModel(): config and tensors (views into the WASM heap; read
 *   here at once, before anything can grow the heap)
 * @param {{kvType?: 'f32' | 'f16', layers?: number | 'auto'}} [options] kvType 'f16': the KV cache
 *   in half precision (needs the device's shader-f16; keys and values rounded to f16 as they are
 *   written, all arithmetic f32). layers: how many of the first layers run here (default all;
 *   fewer: the rest, the final norm and the classifier run in WASM); 'auto': as many as the
 *   device takes, layer by layer (an upload that fails for memory or limits ends the count)
 * @returns {Promise<GpuModel>}
 * @throws {QkvError} 'unsupported' (what is not implemented, or a buffer over the device's limits),
 *   'out_of_memory'
 */
export async function createGpuModel(device, desc, options = {}) {
  const why = gpuUnsupported(desc);
  if (why) throw new QkvError('unsupported', why);
  const kvF16 = options.kvType === 'f16';
  if (kvF16 && !device.features?.has?.('shader-f16')) throw new QkvError('unsupported', 'an f16 KV cache needs the device\'s shader-f16');
  const kvBytes = kvF16 ? 2 : 4;  // per cached value
  const d = desc;
  const products = createProducts(device);
  const own = [];
  const S = BufferUsage;
  const buffer = (size, usage, label) => {
    const b = device.createBuffer({ size: Math.max(16, Math.ceil(size / 4) * 4), usage, label });
    own.push(b);
    return b;
  };
  const weights = new Map();  // `${layer}:${role}` -> GpuWeight (matrices) | {buffer} (f32 vectors)
  let weightBytes = 0;
  const uploadOne = (t) => {
    const key = `${t.layer}:${t.role}`;
    if (isExpertRole(t.role)) {
      weights.set(key, uploadExperts(products, t, d.experts, Math.min(device.limits.maxStorageBufferBindingSize, device.limits.maxBufferSize)));
    } else if (t.weight) {  // already streamed to the GPU (a GPU-resident load: src/js/gpu-resident.js)
      const w = t.weight;
      weights.set(key, VECTOR_ROLES.has(t.role) ? { buffer: w.parts[0].buffer, destroy: () => w.destroy() } : w);
    } else if (VECTOR_ROLES.has(t.role)) {
      // The per-head Q/K norms are also read as uniforms (the fused decode epilogue, products.wgsl qnw).
      const usage = S.STORAGE | S.COPY_DST | (t.role === 'q_norm' || t.role === 'k_norm' ? S.UNIFORM : 0);
      const b = device.createBuffer({ size: Math.max(16, Math.ceil(t.bytes.byteLength / 4) * 4), usage, label: key });
      weights.set(key, { buffer: b, destroy: () => b.destroy() });
      writeBytes(device, b, 0, t.bytes);
    } else {
      weights.set(key, products.upload({ type: t.type, rows: t.rows, cols: t.cols, bytes: t.bytes, label: key }));
    }
    weightBytes += t.byteLength ?? t.bytes.byteLength;
  };
  // Partial offload: layers [0, gpuLayers) here, the rest (and the final norm and classifier)
  // in WASM. 'auto': as many layers as the device takes, each uploaded in its own error scopes.
  const TAIL = new Set(['final_norm', 'final_norm_b', 'classifier']);
  const groups = [[]];  // 0: model-wide; l + 1: layer l; layers + 1: the tail
  for (let l = 0; l <= d.layers; l++) groups.push([]);
  for (const t of d.tensors) groups[t.layer < 0 ? (TAIL.has(t.role) ? d.layers + 1 : 0) : t.layer + 1].push(t);
  const auto = options.layers === 'auto' && !!d.causal;
  let gpuLayers = auto || options.layers === 'auto' ? d.layers : options.layers ?? d.layers;
  let offloadStop = null;  // 'auto': why the layer after the last one here did not fit
  if (!d.causal && gpuLayers < d.layers) throw new QkvError('unsupported', `${d.arch} is an encoder: it runs whole on the GPU or in WASM`);
  const unload = (group) => {
    for (const t of group) {
      const key = `${t.layer}:${t.role}`, w = weights.get(key);
      if (!w) continue;
      weights.delete(key);
      weightBytes -= t.byteLength ?? t.bytes.byteLength;
      if (!t.weight) w.destroy?.();  // a streamed weight belongs to its loader until the model takes it
    }
  };
  // Every group in its own out-of-memory and validation scopes, pushed one inside the other so
  // that an error lands in its group's scope; all uploaded before the first await (the tensors
  // are views into the heap, stale once it grows).
  const order = [groups[0]];
  for (let l = 0; l < gpuLayers; l++) order.push(groups[l + 1]);
  if (gpuLayers === d.layers) order.push(groups[d.layers + 1]);
  const tried = [];
  for (const group of order) {
    device.pushErrorScope('out-of-memory');
    device.pushErrorScope('validation');
    const r = { group, thrown: null };
    tried.push(r);
    try {
      for (const t of group) uploadOne(t);
    } catch (e) {
      r.thrown = e;
      break;
    }
  }
  const popped = [];
  for (let i = tried.length - 1; i >= 0; i--) popped.unshift([device.popErrorScope(), device.popErrorScope()]);
  let failed = -1, error = null;
  for (let i = 0; i < tried.length && failed < 0; i++) {
    const [verr, oom] = await Promise.all(popped[i]);
    const { thrown } = tried[i];
    if (!thrown && !oom && !verr) continue;
    failed = i;
    error = thrown ? (thrown instanceof QkvError ? thrown : new QkvError('unsupported', `WebGPU upload failed: ${thrown?.message ?? thrown}`, { cause: thrown }))
      : new QkvError(oom ? 'out_of_memory' : 'unsupported', `WebGPU weight upload: ${(oom ?? verr).message}`);
  }
  await Promise.all(popped.flat());
  if (failed >= 0) {
    // 'auto': the layers from the one that failed on run in WASM (a failed tail: the last layer too).
    const tailFailed = gpuLayers === d.layers && failed === tried.length - 1;
    if (!auto || failed === 0) { dispose(); throw error; }
    for (const r of tried.slice(failed)) unload(r.group);
    gpuLayers = failed - 1;
    offloadStop = bareMessage(error);
    if (tailFailed) {
      unload(groups[d.layers]);
      gpuLayers = d.layers - 1;
      offloadStop = `the final norm and classifier: ${offloadStop}`;
    }
  }
  const hidden = gpuLayers < d.layers;  // the GPU part reads back hidden states, not logits
  if (!hidden && !weights.has('-1:classifier')) weights.set('-1:classifier', weights.get('-1:tok_embed'));

  // The KV-cache kernels share common.wgsl's helpers and its cache element type kv_t, prepended
  // as webgpu.js does (with an f16 cache: `enable f16;` first and kv_t = f16).
  const [normSrc, ropeSrc, attnSrc, fullSrc, eltSrc, commonSrc] = await Promise.all(
    ['norm.wgsl', 'rope_kv.wgsl', 'attention_cached.wgsl', 'attention_full.wgsl', 'elementwise.wgsl', 'common.wgsl'].map(loadShader));
  const common = kvF16 ? `enable f16;\n${commonSrc.replace('alias kv_t = f32;', 'alias kv_t = f16;')}` : commonSrc;
  const modules = {
    norm: device.createShaderModule({ code: normSrc, label: 'norm.wgsl' }),
    rope: device.createShaderModule({ code: `${common}\n${ropeSrc}`, label: 'rope_kv.wgsl' }),
    attn: device.createShaderModule({ code: `${common}\n${attnSrc}`, label: 'attention_cached.wgsl' }),
    full: device.createShaderModule({ code: `${common}\n${fullSrc}`, label: 'attention_full.wgsl' }),
    elt: device.createShaderModule({ code: eltSrc, label: 'elementwise.wgsl' }),
  };
  const pipelines = new Map();
  function pipeline(mod, entryPoint, constants) {
    const key = `${mod}|${entryPoint}|${JSON.stringify(constants)}`;
    if (!pipelines.has(key)) {
      pipelines.set(key, device.createComputePipeline({
        layout: 'auto', label: key, compute: { module: modules[mod], entryPoint, constants },
      }));
    }
    return pipelines.get(key);
  }
  const dummy = buffer(16, S.STORAGE, 'dummy');
  const moeShaders = d.experts > 0 ? await loadMoeShaders() : null;
  const moePipelines = new Map();

  function dispose() {
    for (const w of weights.values()) if (w.destroy) w.destroy();
    weights.clear();
    for (const b of own) b.destroy();
    own.length = 0;
    products.dispose?.();
  }

  const W = (layer, role) => weights.get(`${layer}:${role}`);
  const limit = Math.min(device.limits.maxStorageBufferBindingSize, device.limits.maxBufferSize);

  /**
   * The forward's buffers and recorded ops for steps of up to T tokens: a decoder session
   * (T = MAX_CHUNK, KV cache over `context` positions, grown by doubling) or an encoder pass
   * (T = context = the text's tokens, bidirectional attention over them).
   */
  function createForward(context, rope, T, encoder) {
    const { dim, hiddenDim: hid, heads, kvHeads, headDim: hd, vocabSize: V } = d;
    const layers = gpuLayers, qd = heads * hd, kvd = kvHeads * hd;
    if (context * kvd * kvBytes > limit) {
      throw new QkvError('unsupported', `a ${context}-token KV cache needs ${context * kvd * kvBytes} bytes per layer, ` +
        `more than this GPU's ${limit}-byte buffer limit`);
    }
    if (encoder && heads * T * T * 4 > limit) {
      throw new QkvError('unsupported', `attention over ${T} tokens needs ${heads * T * T * 4} bytes, more than this GPU's ${limit}-byte buffer limit`);
    }
    const mine = [];
    const make = (size, usage, label) => {
      const b = device.createBuffer({ size: Math.max(16, Math.ceil(size / 4) * 4), usage, label });
      mine.push(b);
      return b;
    };
    const st = S.STORAGE;
    const step = make(IDS_OFFSET + 4 * T, S.UNIFORM | S.STORAGE | S.COPY_DST, 'step');
    const stepOne = make(16, S.UNIFORM | S.COPY_DST, 'step-one');  // n = 1: the last-row classifier
    device.queue.writeBuffer(stepOne, 0, new Uint32Array([1, 0, 0, 0]));
    const x = make(T * dim * 4, st | S.COPY_SRC, 'x');
    const xb = make(T * Math.max(dim, qd) * 4, st, 'xb');
    const q = make(T * qd * 4, st, 'q'), k = make(T * kvd * 4, st, 'k'), v = make(T * kvd * 4, st, 'v');
    const att = make(T * qd * 4, st, 'att');
    const hb = make(T * hid * 4, st, 'hb');
    const tmp = make(T * dim * 4, st, 'tmp');
    const attnPart = encoder ? null : make(heads * MAX_SPLITS * (hd + 2) * 4, st, 'attn-splits');
    const logits = encoder || hidden ? null : make(T * V * 4, st | S.COPY_SRC, 'logits');
    const read = make(T * (encoder || hidden ? dim : V) * 4, S.MAP_READ | S.COPY_DST, 'read');
    const topk = encoder || hidden ? null : createTopK(device, { logits, vocab: V, step });
    const candRead = topk ? make(TOPK_MAX * 8, S.MAP_READ | S.COPY_DST, 'topk-read') : null;
    const scores = encoder ? make(heads * T * T * 4, st, 'scores') : null;
    const table = (arr, label) => {
      const b = make(arr.byteLength, st | S.COPY_DST, label);
      writeBytes(device, b, 0, new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength));
      return b;
    };
    // A RoPE table in one buffer: cos, then sin from index `sin` (256-byte aligned, so that
    // rope_kv.wgsl binds each half on its own and the fused products bind the whole).
    const ropeTable = (t, label) => {
      const sin = Math.ceil(t.cos.length / 64) * 64;
      const both = new Float32Array(sin + t.sin.length);
      both.set(t.cos);
      both.set(t.sin, sin);
      const buffer = table(both, label);
      return { buffer, sin, cos: { buffer, offset: 0, size: Math.max(4, t.cos.byteLength) }, sinRef: { buffer, offset: sin * 4 } };
    };
    const ropeOn = d.positional.startsWith('rope');
    const rope_ = ropeOn ? { global: ropeTable(rope.global, 'rope'), local: rope.local ? ropeTable(rope.local, 'rope-local') : null } : null;
    const tableOf = (l) => (d.localRope[l] && rope_.local ? rope_.local : rope_.global);
    // RoPE and the cache write folded into the q/k/v products' epilogue (products.wgsl ROPE,
    // FLAG_CACHE; an f16 cache is written as f16 there, y_t). Layers with per-head Q/K norms:
    // decode folds them into the same epilogue (matvec.wgsl QKNORM: the workgroup of a head
    // normalises it); prefill keeps norm.wgsl and rope_kv.wgsl (a prefill tile's rows are not
    // whole heads), and so does a norm over the whole projection (OLMo 2: it spans workgroups).
    const oneBuffer = (l) => d.headDim % 2 === 0 && ['wq', 'wk', 'wv'].every((r) => W(l, r).parts.length === 1);
    const hasQk = (l) => !!(W(l, 'q_norm') || W(l, 'k_norm'));
    const fuseRope = (l) => !hasQk(l) && oneBuffer(l);
    const fuseQkDecode = (l) => !encoder && hasQk(l) && !d.qkNormWhole && d.headDim % 4 === 0 && oneBuffer(l);
    const qkNormOf = (w) => (w ? { weight: at(w.buffer), eps: d.normEps, headDim: d.headDim } : undefined);
    const ropeSpec = (l) => (ropeOn && d.layerRope[l] && d.rotDims >= 2 ? {
      table: at(tableOf(l).buffer), sin: tableOf(l).sin, mode: d.positional === 'rope' ? 'adjacent' : 'halves',
      headDim: d.headDim, rotDims: d.rotDims,
    } : undefined);

    // Own kernels; bind groups made once (those over the KV cache again when it grows).
    const op = (mod, entry, constants, bindings, dispatch) => {
      const pipe = pipeline(mod, entry, constants);
      const group = device.createBindGroup({
        layout: pipe.getBindGroupLayout(0),
        entries: bindings.map((b, i) => (b ? { binding: i, resource: b.buffer ? b : { buffer: b } } : null)).filter(Boolean),
      });
      return { encode(pass, n) { pass.setPipeline(pipe); pass.setBindGroup(0, group); pass.dispatchWorkgroups(...dispatch(n)); } };
    };
    const normK = (layer) => ({ LAYER: layer === 'layernorm' ? 1 : 0, EPS: d.normEps });
    // y = norm(x) (LayerNorm or RMSNorm as the model's), row by row.
    const norm = (entry, w, b, xs, ys, dispatch = (t) => [t]) => op('norm', entry,
      { ...normK(d.norm), N: dim, HAS_B: b ? 1 : 0, RPT: 1 }, [step, w.buffer, b ? b.buffer : dummy, xs, ys], dispatch);
    // x = norm(x) in place over rows of n (rpt rows per token). Entries whose bindings an entry
    // point does not use must be left out (layout: 'auto').
    const normInplace = (kind, w, b, xs, n, rpt) => {
      const pipe = pipeline('norm', 'inplace', { ...normK(kind), N: n, HAS_B: b ? 1 : 0, RPT: rpt });
      const group = device.createBindGroup({
        layout: pipe.getBindGroupLayout(0),
        entries: [[0, step], [1, w.buffer], [2, b ? b.buffer : dummy], [3, xs]].map(([binding, buf]) => ({ binding, resource: { buffer: buf } })),
      });
      return { encode(pass, t) { pass.setPipeline(pipe); pass.setBindGroup(0, group); pass.dispatchWorkgroups(t * rpt); } };
    };
    const rs = d.residualScale ?? 1;
    const elt = (entry, consts, bindings, width) => op('elt', entry, consts, bindings, (n) => [Math.ceil(width / 64), n]);

    // Products: recorded once, bound to this forward's buffers.
    const P = (o) => products.product({ maxTokens: T, step, ...o });
    const at = (b) => ({ buffer: b, offset: 0 });
    const biasOf = (w) => (w ? at(w.buffer) : undefined);
    const embed = products.gather({ weight: W(-1, 'tok_embed'), ids: { buffer: step, offset: IDS_OFFSET }, y: at(x), maxTokens: T, scale: d.embedScale, step });
    const glu = d.ffn === 'swiglu' || d.ffn === 'geglu';
    // Decode folds a pre-norm (RMSNorm) into the products that read it (matvec.wgsl NORM): they
    // read x and normalise on the fly; prefill and LayerNorm models keep norm.wgsl.
    const fuseNorm = !encoder && d.norm !== 'layernorm';
    const normOf = (w, b) => (fuseNorm && w && !b ? { weight: at(w.buffer), eps: d.normEps, x: at(x) } : undefined);
    // x += residualScale * [post_norm](src W^T + b): into x directly (scaled in the product's
    // epilogue) where no post-norm intervenes.
    const residual = (w, bias, src, post) => {
      const direct = !post;
      const prod = P({ weight: w, x: at(src), y: at(direct ? x : tmp), accumulate: direct, bias: biasOf(bias), scale: direct ? rs : 1 });
      const after = post ? op('norm', 'add', { LAYER: 0, EPS: d.normEps, N: dim, HAS_B: 0, RPT: 1, SCALE: rs }, [step, post.buffer, dummy, x, tmp], (t) => [t])
        : null;
      return [prod, after].filter(Boolean);
    };
    const staticLayers = [];
    for (let l = 0; l < layers; l++) {
      const preAttn = !d.postNorm && W(l, 'attn_norm');
      const in1 = preAttn ? xb : x;
      const parallel = !!d.parallelFfn;
      const preFfn = !parallel && !d.postNorm && W(l, 'ffn_norm');
      const in2 = parallel ? in1 : preFfn ? xb : x;
      const n1 = preAttn ? normOf(W(l, 'attn_norm'), W(l, 'attn_norm_b')) : undefined;
      const moe = !!W(l, 'router');  // its ffn norm stays a dispatch: the router and experts read xb
      const n2 = parallel ? n1 : preFfn && !moe ? normOf(W(l, 'ffn_norm'), W(l, 'ffn_norm_b')) : undefined;
      const L = { l, preAttn, preFfn, parallel, fuse1: !!n1, fuse2: !!n2, fuseRope: fuseRope(l), fuseQk: fuseQkDecode(l), in1, n1 };
      // Decode of a Q/K-norm layer: q normalised and rotated in its product (k and v: kvDecode).
      L.qDecode = L.fuseQk ? [P({
        weight: W(l, 'wq'), x: at(in1), y: at(q), bias: biasOf(W(l, 'bq')), norm: n1, rope: ropeSpec(l), qkNorm: qkNormOf(W(l, 'q_norm')), maxTokens: 1,
      })] : null;
      // Fused: k and v go straight into the cache, their products built with it (buildCacheOps).
      L.qkv = L.fuseRope ? [P({ weight: W(l, 'wq'), x: at(in1), y: at(q), bias: biasOf(W(l, 'bq')), norm: n1, rope: ropeSpec(l) })] : [
        P({ weight: W(l, 'wq'), x: at(in1), y: at(q), bias: biasOf(W(l, 'bq')), norm: n1 }),
        P({ weight: W(l, 'wk'), x: at(in1), y: at(k), bias: biasOf(W(l, 'bk')), norm: n1 }),
        P({ weight: W(l, 'wv'), x: at(in1), y: at(v), bias: biasOf(W(l, 'bv')), norm: n1 }),
      ];
      // Q/K RMSNorms per head (Qwen3, Gemma 3) or over the whole projection (OLMo 2).
      const whole = !!d.qkNormWhole;
      L.qkNorms = [
        W(l, 'q_norm') ? normInplace('rmsnorm', W(l, 'q_norm'), null, q, whole ? qd : hd, whole ? 1 : heads) : null,
        W(l, 'k_norm') ? normInplace('rmsnorm', W(l, 'k_norm'), null, k, whole ? kvd : hd, whole ? 1 : kvHeads) : null,
      ].filter(Boolean);
      L.out = residual(W(l, 'wo'), W(l, 'bo'), att, W(l, 'attn_post_norm'));
      if (!moe) {
        L.up = glu
          ? [P({ weight: W(l, 'w_gate'), glu: { up: W(l, 'w_up'), act: d.ffn === 'swiglu' ? 'silu' : 'gelu' }, x: at(in2), y: at(hb), norm: n2 })]
          : [P({ weight: W(l, 'w_up'), x: at(in2), y: at(hb), bias: biasOf(W(l, 'b_up')), norm: n2 }),
            elt('act', { N: hid, ACT: d.ffn === 'gelu' ? 0 : 1 }, [step, hb], hid)];
        L.down = residual(W(l, 'w_down'), W(l, 'b_down'), hb, W(l, 'ffn_post_norm'));
      } else {
        // The experts' sum into tmp, then x += rs * [post_norm](tmp), as moe_ffn's caller does.
        L.up = [createMoeFfn({
          device, shaders: moeShaders, products, step, T, experts: d.experts, used: d.expertsUsed, normTopk: d.expertNormTopk,
          router: W(l, 'router'), gate: W(l, 'gate_exps'), up: W(l, 'up_exps'), down: W(l, 'down_exps'), input: in2, output: tmp, make, cache: moePipelines,
        })];
        const post = W(l, 'ffn_post_norm');
        L.down = [post ? op('norm', 'add', { LAYER: 0, EPS: d.normEps, N: dim, HAS_B: 0, RPT: 1, SCALE: rs }, [step, post.buffer, dummy, x, tmp], (t) => [t])
          : elt('axpy', { N: dim, SCALE: rs }, [step, x, tmp], dim)];
      }
      L.norm1 = preAttn ? norm('main', W(l, 'attn_norm'), W(l, 'attn_norm_b'), x, xb) : null;
      L.norm2 = preFfn ? norm('main', W(l, 'ffn_norm'), W(l, 'ffn_norm_b'), x, xb) : null;
      // Post-norm blocks (BERT): x = norm(x + sublayer(x)).
      L.post1 = d.postNorm && W(l, 'attn_norm') ? normInplace(d.norm, W(l, 'attn_norm'), W(l, 'attn_norm_b'), x, dim, 1) : null;
      L.post2 = d.postNorm && W(l, 'ffn_norm') ? normInplace(d.norm, W(l, 'ffn_norm'), W(l, 'ffn_norm_b'), x, dim, 1) : null;
      staticLayers.push(L);
    }
    const fw = W(-1, 'final_norm'), fb = W(-1, 'final_norm_b');
    const head = {
      addPos: d.positional === 'learned' ? elt('add_pos', { N: dim }, [step, x, W(-1, 'pos_embed').buffer], dim) : null,
      addType: W(-1, 'type_embed') ? elt('add_row', { N: dim }, [step, x, W(-1, 'type_embed').buffer], dim) : null,
      embedNorm: W(-1, 'embed_norm') ? normInplace('layernorm', W(-1, 'embed_norm'), W(-1, 'embed_norm_b'), x, dim, 1) : null,
    };
    const tail = hidden ? {} : encoder ? {
      finalAll: fw ? normInplace(d.norm, fw, fb, x, dim, 1) : null,
    } : {
      finalAll: norm('main', fw, fb, x, xb),
      finalLast: norm('last', fw, fb, x, xb, () => [1]),
      clsAll: P({ weight: W(-1, 'classifier'), x: at(xb), y: at(logits) }),
      clsLast: P({ weight: W(-1, 'classifier'), x: at(xb), y: at(logits), maxTokens: 1, step: stepOne }),
      clsDecode: normOf(fw, fb) ? P({ weight: W(-1, 'classifier'), x: at(xb), y: at(logits), maxTokens: 1, step: stepOne, norm: normOf(fw, fb) }) : null,
      logits: (d.logitScale ?? 1) !== 1 || d.logitSoftcap > 0
        ? op('elt', 'logits', { N: V, CAP: d.logitSoftcap, SCALE: d.logitScale ?? 1 }, [null, logits], (r) => [Math.ceil(V / 64), r]) : null,
    };

    // Attention and RoPE: bound to the KV cache (rebuilt when it grows); `probs` given: the
    // attention keeps its probabilities there (captured maps, encoders).
    let cap = 0, K = [], Vc = [], cacheOps = null, splits = 1;
    const splitOps = (l) => {
      const c = { HEADS: heads, KV_HEADS: kvHeads, HD: hd, WINDOW: d.layerWindow[l], SCALE: d.attnScale, SOFTCAP: d.attnSoftcap };
      return {
        attnPartial: op('attn', 'partial', c, [step, q, K[l], Vc[l], null, attnPart], () => [heads, splits]),
        attnReduce: op('attn', 'reduce_splits', c, [step, null, null, null, att, attnPart], () => [heads]),
      };
    };
    const ropeOp = (l) => {
      const t = rope_ ? tableOf(l) : null;
      return op('rope', 'main', {
        HEADS: heads, KV_HEADS: kvHeads, HD: hd, ROT: d.rotDims,
        MODE: !d.layerRope[l] ? 0 : d.positional === 'rope' ? 1 : d.positional === 'rope-neox' ? 2 : 0,
      }, [step, t ? t.cos : dummy, t ? t.sinRef : dummy, q, k, v, K[l], Vc[l]], (n) => [heads + kvHeads, n]);
    };
    // The fused path's k and v products, writing rows pos.. of the layer's cache.
    // decode: a Q/K-norm layer's decode products (k normalised in its epilogue).
    const kvProducts = (l, decode = false) => {
      const L = staticLayers[l];
      const one = { yType: kvF16 ? 'f16' : 'f32', ...(decode ? { maxTokens: 1 } : {}) };
      return [
        P({ weight: W(l, 'wk'), x: at(L.in1), y: at(K[l]), bias: biasOf(W(l, 'bk')), norm: L.n1, rope: ropeSpec(l), cache: true,
          qkNorm: decode ? qkNormOf(W(l, 'k_norm')) : undefined, ...one }),
        P({ weight: W(l, 'wv'), x: at(L.in1), y: at(Vc[l]), bias: biasOf(W(l, 'bv')), norm: L.n1, cache: true, ...one }),
      ];
    };
    const fullAttn = (l, probs) => op('full', 'main', {
      HEADS: heads, KV_HEADS: kvHeads, HD: hd, CAUSAL: encoder ? 0 : 1, WINDOW: encoder ? 0 : d.layerWindow[l], SCALE: d.attnScale, SOFTCAP: d.attnSoftcap,
    }, [step, q, K[l], Vc[l], att, probs], (n) => [heads, n]);
    function buildCacheOps() {
      for (const c of cacheOps ?? []) for (const o of [...c.kv, ...c.kvDecode]) o.destroy();
      cacheOps = [];
      for (let l = 0; l < layers; l++) {
        const fused = staticLayers[l].fuseRope;
        cacheOps.push({
          rope: fused ? null : ropeOp(l),
          kv: fused ? kvProducts(l) : [],
          kvDecode: staticLayers[l].fuseQk ? kvProducts(l, true) : [],
          attn: encoder ? fullAttn(l, scores) : op('attn', 'main', {
            HEADS: heads, KV_HEADS: kvHeads, HD: hd, WINDOW: d.layerWindow[l], SCALE: d.attnScale, SOFTCAP: d.attnSoftcap,
          }, [step, q, K[l], Vc[l], att], (n) => [heads, n]),
          ...(encoder ? {} : splitOps(l)),
        });
      }
    }

    // Capacity grows by doubling (as the CPU cache does), copying what is cached.
    // Returns whether it grew: the rebuilt products' pipelines are then awaited (products.ready()).
    function grow(n) {
      if (n <= cap) return false;
      const next = encoder ? n : Math.min(context, Math.max(n, 2 * cap, Math.min(context, 256)));
      const enc = device.createCommandEncoder({ label: 'kv-grow' });
      const nk = [], nv = [];
      for (let l = 0; l < layers; l++) {
        nk.push(make(next * kvd * kvBytes, st | S.COPY_DST | S.COPY_SRC, `k-cache${l}`));
        nv.push(make(next * kvd * kvBytes, st | S.COPY_DST | S.COPY_SRC, `v-cache${l}`));
        if (cap) {
          const bytes = Math.ceil((cap * kvd * kvBytes) / 4) * 4;  // within both (make() rounds up)
          enc.copyBufferToBuffer(K[l], 0, nk[l], 0, bytes);
          enc.copyBufferToBuffer(Vc[l], 0, nv[l], 0, bytes);
        }
      }
      device.queue.submit([enc.finish()]);
      for (const b of [...K, ...Vc]) { mine.splice(mine.indexOf(b), 1); b.destroy(); }
      K = nk; Vc = nv; cap = next;
      buildCacheOps();
      return true;
    }

    // rows: 0 (no logits), 1 (the last token's), n (every token's); attnOps: per-layer
    // attention replacing the cache ops' (a captured step).
    // The last step's dispatches: total and per layer (what fusion removes; the tests assert them).
    const counted = { total: 0, perLayer: [] };
    const counting = (pass) => ({
      setPipeline: (p) => pass.setPipeline(p),
      setBindGroup: (i, g) => pass.setBindGroup(i, g),
      dispatchWorkgroups: (...a) => { counted.total++; pass.dispatchWorkgroups(...a); },
    });
    function encodeStep(pass_, n, rows, attnOps) {
      const pass = counting(pass_);
      counted.total = 0; counted.perLayer = [];
      const fused = fuseNorm && n === 1;
      embed.encode(pass, n);
      head.addType?.encode(pass, n);
      head.addPos?.encode(pass, n);
      head.embedNorm?.encode(pass, n);
      for (let l = 0; l < layers; l++) {
        const L = staticLayers[l], c = cacheOps[l], before = counted.total;
        if (!(fused && L.fuse1)) L.norm1?.encode(pass, n);
        if (n === 1 && L.fuseQk) {
          for (const o of [...L.qDecode, ...c.kvDecode]) o.encode(pass, n);
        } else {
          for (const o of L.qkv) o.encode(pass, n);
          for (const o of c.kv) o.encode(pass, n);
          for (const o of L.qkNorms) o.encode(pass, n);
          c.rope?.encode(pass, n);
        }
        if (attnOps) attnOps[l].encode(pass, n);
        else if (n === 1 && splits > 1 && c.attnPartial) { c.attnPartial.encode(pass, n); c.attnReduce.encode(pass, n); }
        else c.attn.encode(pass, n);
        if (!L.parallel) {
          for (const o of L.out) o.encode(pass, n);
          L.post1?.encode(pass, n);
        }
        if (!(fused && L.fuse2)) L.norm2?.encode(pass, n);
        for (const o of L.up) o.encode(pass, n);
        for (const o of L.down) o.encode(pass, n);
        if (L.parallel) for (const o of L.out) o.encode(pass, n);
        L.post2?.encode(pass, n);
        counted.perLayer.push(counted.total - before);
      }
      if (encoder) { tail.finalAll?.encode(pass, n); return; }
      if (rows === 1 && fused && tail.clsDecode) tail.clsDecode.encode(pass, 1);
      else if (rows === 1) { tail.finalLast.encode(pass, n); tail.clsLast.encode(pass, 1); }
      if (rows > 1) { tail.finalAll.encode(pass, n); tail.clsAll.encode(pass, n); }
      if (rows) tail.logits?.encode(pass, rows);
    }

    const header = new Uint32Array((IDS_OFFSET + 4 * T) / 4);
    grow(encoder ? T : 1);
    const compiled = Promise.all([products.ready(), topk?.ready]);  // pipelines compile asynchronously
    return {
      T, step, x, logits, read, topk, candRead, encodeStep, grow, fullAttn, compiled, counted, counting,
      get cap() { return cap; },
      /** Writes the step uniform: n tokens from position pos; k top-k candidates to select (0: none). */
      writeStep(ids, pos, k = 0) {
        // Decode attention splits its keys past KEYS_PER_SPLIT of them (attention_cached.wgsl partial).
        splits = !encoder && ids.length === 1 ? Math.min(MAX_SPLITS, Math.ceil((pos + 1) / KEYS_PER_SPLIT)) : 1;
        header[0] = ids.length; header[1] = pos; header[2] = k; header[3] = splits;
        header.set(ids, IDS_OFFSET / 4);
        device.queue.writeBuffer(step, 0, header.buffer, 0, IDS_OFFSET + 4 * ids.length);
      },
      make,
      dispose() {
        topk?.dispose();
        for (const b of mine) b.destroy();
        mine.length = 0;
        K = []; Vc = [];
      },
    };
  }

  /**
   * A decoder session's state on the GPU: activations for MAX_CHUNK tokens, the KV cache (grown
   * by doubling up to `context` positions) and the recorded steps.
   * @param {number} context positions
   * @param {{global: {cos: Float32Array, sin: Float32Array}, local?: {cos, sin}}} rope tables for every position
   */
  function createSession(context, rope) {
    if (!d.causal) throw new QkvError('unsupported', `${d.arch} is an encoder: it gives embeddings (embed), not a session`);
    const { heads, vocabSize: V, dim } = d, layers = gpuLayers;
    const f = createForward(context, rope, MAX_CHUNK, false);
    let pos = 0, disposed = false, partial = false;
    // Row 0 of the logits buffer (the last step's last token), read back whole.
    async function readRow() {
      const enc = device.createCommandEncoder({ label: 'qkv-logits' });
      enc.copyBufferToBuffer(f.logits, 0, f.read, 0, V * 4);
      device.queue.submit([enc.finish()]);
      await f.read.mapAsync(MapMode.READ, 0, V * 4);
      const row = new Float32Array(f.read.getMappedRange(0, V * 4).slice(0));
      f.read.unmap();
      return row;
    }

    // A captured step: attention that writes its probabilities, (layers, heads, n, pos + n) read back.
    function captureOps(n, p) {
      const keys = p + n, per = heads * n * keys, stride = Math.ceil(per / 64) * 64;
      const probs = f.make(layers * stride * 4, S.STORAGE | S.COPY_SRC, 'attention-probs');
      const read = f.make(layers * stride * 4, S.MAP_READ | S.COPY_DST, 'attention-read');
      const ops = [];
      for (let l = 0; l < layers; l++) ops.push(f.fullAttn(l, { buffer: probs, offset: l * stride * 4, size: per * 4 }));
      return { ops, probs, read, keys, stride };
    }

    return {
      /** Tokens held in the GPU cache. */
      get position() { return pos; },
      /** Bytes of GPU memory the KV cache holds now. */
      get bytes() { return f.cap * d.kvHeads * d.headDim * kvBytes * 2 * layers; },
      /** Attention probabilities of the last captured feed: {queries, keys, probs (layers, heads, queries, keys)}. */
      captured: null,
      /**
       * Compute dispatches of the last step recorded (the last chunk of the last feed): total
       * (top-k selection included) and perLayer, one count per layer.
       */
      get dispatches() { return { total: f.counted.total, perLayer: [...f.counted.perLayer] }; },
      /** Whether the last feed's logits were rebuilt from the GPU's top candidates (see feed). */
      get partial() { return partial; },
      /** The last feed's logits of its last token, read back whole. */
      lastLogits() { return readRow().then((row) => { partial = false; return row; }); },
      /** Forgets positions from n on (they are overwritten by the next feed). */
      truncate(n) { pos = Math.min(pos, n); },
      /** Whether the attention maps of `n` tokens fed at `at` fit this GPU's buffers (else WASM records them). */
      captureFits(at, n) {
        if (hidden) return false;  // the maps of every layer: WASM records them
        const c = Math.min(n, f.T), keys = at + n, per = heads * c * keys, stride = Math.ceil(per / 64) * 64;
        return per * 4 <= limit && layers * stride * 4 <= device.limits.maxBufferSize && layers * heads * n * keys * 4 <= 1 << 30;
      },
      /**
       * Runs `ids` at positions position.. and returns the logits: (ids.length, vocab) with
       * allLogits, else the last token's (vocab). capture: keep the attention probabilities in
       * `captured` (throws 'unsupported' where they exceed the GPU's buffer limits). With
       * `sampling` (generation options) that let the sampler draw from the top candidates alone
       * (gpu-topk.js), only those are read back and the row holds -Infinity elsewhere (`partial`).
       */
      async feed(ids, allLogits = false, capture = false, sampling = null) {
        if (disposed) throw new QkvError('disposed', 'the GPU session was disposed');
        if (pos + ids.length > context) throw new QkvError('bad_argument', `feeding ${ids.length} tokens after ${pos} would pass the context of ${context}`);
        await f.compiled;
        const T = f.T, first = pos, keysAll = pos + ids.length;
        const out = new Float32Array(hidden ? ids.length * dim : (allLogits ? ids.length : 1) * V);
        if (capture && !this.captureFits(pos, ids.length)) throw new QkvError('unsupported', 'these attention maps exceed the GPU\'s buffer limits');
        const maps = capture ? new Float32Array(layers * heads * ids.length * keysAll) : null;
        this.captured = null;
        const Kc = allLogits || !f.topk ? 0 : gpuCandidates(sampling, V);
        partial = false;
        for (let i = 0; i < ids.length; i += T) {
          const n = Math.min(T, ids.length - i), last = i + n === ids.length;
          const rows = hidden ? 0 : allLogits ? n : last ? 1 : 0;
          if (f.grow(pos + n)) await products.ready();
          const cap_ = capture ? captureOps(n, pos) : null;
          const cand = rows === 1 && Kc > 0;
          f.writeStep(ids.slice(i, i + n), pos, cand ? Kc : 0);
          device.pushErrorScope('validation');
          const enc = device.createCommandEncoder({ label: 'qkv-step' });
          const pass = enc.beginComputePass({ label: 'qkv-step' });
          f.encodeStep(pass, n, rows, cap_?.ops);
          if (cand) f.topk.encode(f.counting(pass));
          pass.end();
          const [src, dst, bytes] = hidden ? [f.x, f.read, n * dim * 4] : cand ? [f.topk.out, f.candRead, Kc * 8] : [f.logits, f.read, rows * V * 4];
          const back = rows || hidden;
          if (back) enc.copyBufferToBuffer(src, 0, dst, 0, bytes);
          if (cap_) enc.copyBufferToBuffer(cap_.probs, 0, cap_.read, 0, cap_.read.size);
          device.queue.submit([enc.finish()]);
          pos += n;
          const [err] = await Promise.all([device.popErrorScope(), back ? dst.mapAsync(MapMode.READ, 0, bytes) : null,
            cap_ ? cap_.read.mapAsync(MapMode.READ) : null]);
          if (err) {
            if (back) dst.unmap();
            pos -= n;
            throw new QkvError('internal', `WebGPU forward: ${err.message}`);
          }
          if (hidden) {
            out.set(new Float32Array(f.read.getMappedRange(0, bytes)), i * dim);
            f.read.unmap();
          } else if (cand) {
            const pairs = new Uint32Array(f.candRead.getMappedRange(0, bytes).slice(0));
            f.candRead.unmap();
            const row = candidateLogits(pairs, V, sampling);
            out.set(row ?? await readRow());  // null: a token outside the candidates could matter
            partial = !!row && Kc < V;
          } else if (rows) {
            out.set(new Float32Array(f.read.getMappedRange(0, bytes)), allLogits ? i * V : 0);
            f.read.unmap();
          }
          if (cap_) {
            // This chunk's rows (h, t) of pos + n keys into the call's (l, h, query, key) record.
            const got = new Float32Array(cap_.read.getMappedRange());
            const Q = ids.length, keys = cap_.keys;
            for (let l = 0; l < layers; l++) {
              for (let h = 0; h < heads; h++) {
                for (let t = 0; t < n; t++) {
                  const src = l * cap_.stride + (h * n + t) * keys;
                  maps.set(got.subarray(src, src + keys), ((l * heads + h) * Q + i + t) * keysAll);
                }
              }
            }
            cap_.read.unmap();
            cap_.probs.destroy(); cap_.read.destroy();
          }
        }
        if (capture) this.captured = { queries: ids.length, keys: keysAll, first, probs: maps };
        return out;
      },
      dispose() {
        disposed = true;
        f.dispose();
      },
    };
  }

  let encoderPass = null;  // the encoder's forward, sized for the longest text so far
  /**
   * An encoder's final hidden states for one text: Float32Array(ids.length * dim).
   * @param {number[]} ids the text's token ids (at most the model's context)
   */
  async function encode(ids) {
    if (d.causal) throw new QkvError('unsupported', `${d.arch} is a decoder: it has sessions, not encode()`);
    const n = ids.length, T = Math.ceil(n / 64) * 64;
    if (!encoderPass || encoderPass.T < n) {
      encoderPass?.dispose();
      encoderPass = null;
      const size = Math.min(T, d.contextLength);
      encoderPass = createForward(size, encoderRope, size, true);
    }
    const f = encoderPass;
    await f.compiled;
    f.writeStep(ids, 0);
    device.pushErrorScope('validation');
    const enc = device.createCommandEncoder({ label: 'qkv-encode' });
    const pass = enc.beginComputePass({ label: 'qkv-encode' });
    f.encodeStep(pass, n, 0, null);
    pass.end();
    const bytes = n * d.dim * 4;
    enc.copyBufferToBuffer(f.x, 0, f.read, 0, bytes);
    device.queue.submit([enc.finish()]);
    const [err] = await Promise.all([device.popErrorScope(), f.read.mapAsync(MapMode.READ, 0, bytes)]);
    if (err) { f.read.unmap(); throw new QkvError('internal', `WebGPU encode: ${err.message}`); }
    const out = new Float32Array(f.read.getMappedRange(0, bytes).slice(0));
    f.read.unmap();
    return out;
  }
  let encoderRope = null;

  return {
    /** Bytes of weights uploaded. */
    weightBytes,
    /** The KV cache's element type. */
    kvType: kvF16 ? 'f16' : 'f32',
    products,
    /** Whether this is a decoder (sessions) or an encoder (encode). */
    decoder: !!d.causal,
    /**
     * Layers run here: all of them, or the first gpuLayers (partial offload: a session's feed
     * then returns the hidden states entering layer gpuLayers, (ids.length, dim), for WASM to finish).
     */
    gpuLayers,
    /** Why layer gpuLayers did not fit (layers: 'auto'), or null. */
    offloadStop,
    createSession,
    /** Sets the RoPE tables an encoder's passes take (positions 0.. of a text). */
    setEncoderRope(rope) { encoderRope = rope; },
    encode,
    dispose() { encoderPass?.dispose(); encoderPass = null; dispose(); },
  };
}
