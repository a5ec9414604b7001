// The whole model on WebGPU: every weight uploaded once as stored (src/js/gpu-products.js), a
// session's activations and KV cache on the GPU, and one command buffer per step of up to
// MAX_CHUNK tokens (a decoded token is one step: one submit, one compute pass, one small
// writeBuffer of the `step` uniform, the logits read back). The model description comes from
// WASM (JsModel.gpuModel, bindings/qkv_bindings.cpp); the RoPE tables from the session's own
// Transformer (ropeTable), so every RoPE scaling qkv reads comes out the same.
//
// Per step:  gather(tok_embed) [+ pos_embed] -> x
//   per layer: norm(x) -> xb; q, k, v = xb W^T (+ b); per-head q/k norms; RoPE on q, RoPE on k
//   into the cache with v (rope_kv.wgsl); attention over the cache -> att; x += att Wo^T (+ b)
//   (or x += post_norm(att Wo^T)); norm(x) -> xb; hb = act(xb Wg^T) * (xb Wu^T) (GLU) or
//   act(xb Wu^T + b); x += hb Wd^T (+ b) (or through its post-norm)
//   final norm of the last row (or of every row) and the classifier -> logits [soft-cap].
import { QkvError } from './errors.js';
import { GPU_WEIGHT_TYPES, createProducts } from './gpu-products.js';
import { TOPK_MAX, candidateLogits, createTopK, gpuCandidates } from './gpu-topk.js';
import { loadShader } from './webgpu.js';

const BufferUsage = globalThis.GPUBufferUsage ?? { MAP_READ: 0x1, COPY_SRC: 0x4, COPY_DST: 0x8, UNIFORM: 0x40, STORAGE: 0x80 };
const MapMode = globalThis.GPUMapMode ?? { READ: 0x1 };

/** Tokens per step (prefill chunk). */
export const MAX_CHUNK = 64;
// The step uniform: n (tokens), pos (first position), k (top-k candidates, gpu-topk.js), s
// (attention splits, attention_split.wgsl), then the step's token ids at IDS_OFFSET
// (a storage-buffer offset must be a multiple of 256); written with one writeBuffer per step.
const IDS_OFFSET = 256;
const STEP_BYTES = IDS_OFFSET + 4 * MAX_CHUNK;
const MAX_HEAD_DIM = 512;  // attention_cached.wgsl: 8 accumulator lanes x 64 threads
// Split-K decode attention (attention_split.wgsl): a split per KEYS_PER_SPLIT keys, at most MAX_SPLITS.
const KEYS_PER_SPLIT = 64, MAX_SPLITS = 64;

const VECTOR_ROLES = new Set(['pos_embed', 'final_norm', 'final_norm_b', 'attn_norm', 'attn_norm_b', 'bq', 'bk', 'bv', 'bo',
  'attn_post_norm', 'ffn_post_norm', 'q_norm', 'k_norm', 'ffn_norm', 'ffn_norm_b', 'b_up', 'b_down']);

/**
 * Why this model cannot run on the GPU path, or null. Anything the kernels do not implement is
 * refused here, so the model runs in WASM instead of running wrong.
 * @param {object} d the description from JsModel.gpuModel()
 */
export function gpuUnsupported(d) {
  if (!d.causal || d.postNorm || d.tokenTypes > 0 || d.embedNorm) {
    return `${d.arch} is an encoder (bidirectional attention, post-norm, token types): encoders run in WASM`;
  }
  if (!['rope', 'rope-neox', 'learned', 'none'].includes(d.positional)) return `${d.positional} positions are not implemented on WebGPU`;
  if (d.layerAttn.some((a) => a !== 'softmax')) return 'linear-attention layers are not implemented on WebGPU';
  if (!d.hasClassifier) return `${d.arch} has no language-model head`;
  if (d.headDim > MAX_HEAD_DIM) return `head_dim ${d.headDim} exceeds the WebGPU attention kernel's ${MAX_HEAD_DIM}`;
  if (d.rotDims % 2 || d.rotDims > d.headDim) return `RoPE over ${d.rotDims} of ${d.headDim} dims is not implemented on WebGPU`;
  if (d.heads % d.kvHeads) return 'query heads must be a multiple of key/value heads';
  if (!['swiglu', 'geglu', 'gelu', 'relu'].includes(d.ffn)) return `the ${d.ffn} feed-forward is not implemented on WebGPU`;
  // Options of the newer architecture rows (Granite, OLMo 2, SmolLM3, Command-R, ...) the kernels lack.
  if ((d.residualScale ?? 1) !== 1) return 'residual scaling (Granite, MiniCPM) is not implemented on WebGPU';
  if ((d.logitScale ?? 1) !== 1) return 'logit scaling (Granite, MiniCPM, Command-R) is not implemented on WebGPU';
  if (d.qkNormWhole) return 'Q/K norms over the whole projection (OLMo 2) are not implemented on WebGPU';
  if (d.parallelFfn) return 'parallel attention and feed-forward blocks (Command-R) are not implemented on WebGPU';
  if (d.layersWithoutRope > 0) return 'layers without RoPE (SmolLM3) are not implemented on WebGPU';
  const roles = new Set(d.tensors.map((t) => `${t.layer}:${t.role}`));
  if (!roles.has('-1:final_norm')) return 'models without a final norm are not implemented on WebGPU';
  for (let l = 0; l < d.layers; l++) {
    if (!roles.has(`${l}:attn_norm`) || !roles.has(`${l}:ffn_norm`)) return 'layers without pre-norms (OLMo 2) are not implemented on WebGPU';
  }
  for (const t of d.tensors) {
    if (!VECTOR_ROLES.has(t.role) && !GPU_WEIGHT_TYPES.includes(t.type)) return `${t.type} weights (${t.role}) are not implemented on WebGPU`;
  }
  return null;
}

/**
 * Uploads a model's weights and compiles its kernels.
 * @param {GPUDevice} device
 * @param {object} desc JsModel.gpuModel(): config and tensors (views into the WASM heap; read
 *   here at once, before anything can grow the heap)
 * @returns {Promise<GpuModel>}
 * @throws {QkvError} 'unsupported' (what is not implemented, or a buffer over the device's limits),
 *   'out_of_memory'
 */
export async function createGpuModel(device, desc) {
  const why = gpuUnsupported(desc);
  if (why) throw new QkvError('unsupported', why);
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
  device.pushErrorScope('out-of-memory');
  device.pushErrorScope('validation');
  try {
    for (const t of d.tensors) {
      const key = `${t.layer}:${t.role}`;
      if (VECTOR_ROLES.has(t.role)) {
        const b = buffer(t.bytes.byteLength, S.STORAGE | S.COPY_DST, key);
        device.queue.writeBuffer(b, 0, t.bytes.buffer, t.bytes.byteOffset, t.bytes.byteLength);
        weights.set(key, { buffer: b });
      } else {
        weights.set(key, products.upload({ type: t.type, rows: t.rows, cols: t.cols, bytes: t.bytes, label: key }));
      }
      weightBytes += t.bytes.byteLength;
    }
  } catch (e) {
    await device.popErrorScope();
    await device.popErrorScope();
    dispose();
    throw e instanceof QkvError ? e : new QkvError('unsupported', `WebGPU upload failed: ${e?.message ?? e}`, { cause: e });
  }
  const [verr, oom] = [await device.popErrorScope(), await device.popErrorScope()];
  if (oom || verr) {
    dispose();
    throw new QkvError(oom ? 'out_of_memory' : 'unsupported', `WebGPU weight upload: ${(oom ?? verr).message}`);
  }
  if (!weights.has('-1:classifier')) weights.set('-1:classifier', weights.get('-1:tok_embed'));

  const [normSrc, ropeSrc, attnSrc, eltSrc, splitSrc] = await Promise.all(
    ['norm.wgsl', 'rope_kv.wgsl', 'attention_cached.wgsl', 'elementwise.wgsl', 'attention_split.wgsl'].map(loadShader));
  const modules = {
    norm: device.createShaderModule({ code: normSrc, label: 'norm.wgsl' }),
    rope: device.createShaderModule({ code: ropeSrc, label: 'rope_kv.wgsl' }),
    attn: device.createShaderModule({ code: attnSrc, label: 'attention_cached.wgsl' }),
    elt: device.createShaderModule({ code: eltSrc, label: 'elementwise.wgsl' }),
    split: device.createShaderModule({ code: splitSrc, label: 'attention_split.wgsl' }),
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

  function dispose() {
    for (const w of weights.values()) if (w.destroy) w.destroy();
    weights.clear();
    for (const b of own) b.destroy();
    own.length = 0;
    products.dispose?.();
  }

  const W = (layer, role) => weights.get(`${layer}:${role}`);

  /**
   * A session's state on the GPU: activations for MAX_CHUNK tokens, the KV cache (grown by
   * doubling up to `context` positions) and the recorded steps.
   * @param {number} context positions
   * @param {{global: {cos: Float32Array, sin: Float32Array}, local?: {cos, sin}}} rope tables for every position
   */
  function createSession(context, rope) {
    const { dim, hiddenDim: hid, heads, kvHeads, headDim: hd, vocabSize: V, layers } = d;
    const qd = heads * hd, kvd = kvHeads * hd, T = MAX_CHUNK;
    const limit = Math.min(device.limits.maxStorageBufferBindingSize, device.limits.maxBufferSize);
    if (context * kvd * 4 > limit) {
      throw new QkvError('unsupported', `a ${context}-token KV cache needs ${context * kvd * 4} bytes per layer, ` +
        `more than this GPU's ${limit}-byte buffer limit`);
    }
    const mine = [];
    const make = (size, usage, label) => {
      const b = device.createBuffer({ size: Math.max(16, Math.ceil(size / 4) * 4), usage, label });
      mine.push(b);
      return b;
    };
    const st = S.STORAGE;
    const step = make(STEP_BYTES, S.UNIFORM | S.STORAGE | S.COPY_DST, 'step');
    const stepOne = make(16, S.UNIFORM | S.COPY_DST, 'step-one');  // n = 1: the last-row classifier
    device.queue.writeBuffer(stepOne, 0, new Uint32Array([1, 0, 0, 0]));
    const x = make(T * dim * 4, st, 'x');
    const xb = make(T * Math.max(dim, qd) * 4, st, 'xb');
    const q = make(T * qd * 4, st, 'q'), k = make(T * kvd * 4, st, 'k'), v = make(T * kvd * 4, st, 'v');
    const att = make(T * qd * 4, st, 'att');
    const hb = make(T * hid * 4, st, 'hb');
    const attnPart = make(heads * MAX_SPLITS * (hd + 2) * 4, st, 'attn-splits');
    const tmp = make(T * dim * 4, st, 'tmp');
    const logits = make(T * V * 4, st | S.COPY_SRC, 'logits');
    const read = make(T * V * 4, S.MAP_READ | S.COPY_DST, 'logits-read');
    const topk = createTopK(device, { logits, vocab: V, step });
    const candRead = topk ? make(TOPK_MAX * 8, S.MAP_READ | S.COPY_DST, 'topk-read') : null;
    const table = (arr, label) => {
      const b = make(arr.byteLength, st | S.COPY_DST, label);
      device.queue.writeBuffer(b, 0, arr.buffer, arr.byteOffset, arr.byteLength);
      return b;
    };
    const rope_ = d.positional.startsWith('rope') ? {
      cos: table(rope.global.cos, 'rope-cos'), sin: table(rope.global.sin, 'rope-sin'),
      cosLocal: rope.local ? table(rope.local.cos, 'rope-cos-local') : null,
      sinLocal: rope.local ? table(rope.local.sin, 'rope-sin-local') : null,
    } : { cos: dummy, sin: dummy };

    // Products: recorded once, bound to this session's buffers.
    const P = (o) => products.product({ maxTokens: T, step, ...o });
    const at = (b) => ({ buffer: b, offset: 0 });
    const biasOf = (w) => (w ? at(w.buffer) : undefined);
    const embed = products.gather({ weight: W(-1, 'tok_embed'), ids: { buffer: step, offset: IDS_OFFSET }, y: at(x), maxTokens: T, scale: d.embedScale, step });
    const glu = d.ffn === 'swiglu' || d.ffn === 'geglu';
    // Decode folds RMSNorm into the products that read it (matvec.wgsl NORM); prefill keeps norm.wgsl.
    const fuseNorm = d.norm !== 'layernorm';
    const normOf = (w) => (fuseNorm ? { weight: at(w.buffer), eps: d.normEps, x: at(x) } : undefined);
    const layerProducts = [];
    for (let l = 0; l < layers; l++) {
      const post1 = !!W(l, 'attn_post_norm'), post2 = !!W(l, 'ffn_post_norm');
      const n1 = normOf(W(l, 'attn_norm')), n2 = normOf(W(l, 'ffn_norm'));
      layerProducts.push({
        q: P({ weight: W(l, 'wq'), x: at(xb), y: at(q), bias: biasOf(W(l, 'bq')), norm: n1 }),
        k: P({ weight: W(l, 'wk'), x: at(xb), y: at(k), bias: biasOf(W(l, 'bk')), norm: n1 }),
        v: P({ weight: W(l, 'wv'), x: at(xb), y: at(v), bias: biasOf(W(l, 'bv')), norm: n1 }),
        o: P({ weight: W(l, 'wo'), x: at(att), y: at(post1 ? tmp : x), accumulate: !post1, bias: biasOf(W(l, 'bo')) }),
        up: glu
          ? P({ weight: W(l, 'w_gate'), glu: { up: W(l, 'w_up'), act: d.ffn === 'swiglu' ? 'silu' : 'gelu' }, x: at(xb), y: at(hb), norm: n2 })
          : P({ weight: W(l, 'w_up'), x: at(xb), y: at(hb), bias: biasOf(W(l, 'b_up')), norm: n2 }),
        down: P({ weight: W(l, 'w_down'), x: at(hb), y: at(post2 ? tmp : x), accumulate: !post2, bias: biasOf(W(l, 'b_down')) }),
      });
    }
    const clsAll = P({ weight: W(-1, 'classifier'), x: at(xb), y: at(logits) });
    const clsLast = P({ weight: W(-1, 'classifier'), x: at(xb), y: at(logits), maxTokens: 1, step: stepOne });
    const clsDecode = fuseNorm ? P({ weight: W(-1, 'classifier'), x: at(xb), y: at(logits), maxTokens: 1, step: stepOne, norm: normOf(W(-1, 'final_norm')) }) : null;

    // Own kernels: bind groups over the KV cache, rebuilt when it grows.
    const op = (mod, entry, constants, bindings, dispatch) => {
      const pipe = pipeline(mod, entry, constants);
      const group = device.createBindGroup({
        layout: pipe.getBindGroupLayout(0),
        entries: bindings.map((b, i) => (b ? { binding: i, resource: { buffer: b } } : null)).filter(Boolean),
      });
      return { encode(pass, n) { pass.setPipeline(pipe); pass.setBindGroup(0, group); pass.dispatchWorkgroups(...dispatch(n)); } };
    };
    const normK = { LAYER: d.norm === 'layernorm' ? 1 : 0, EPS: d.normEps };
    const norm = (entry, w, b, xs, ys, n = dim, rpt = 1, dispatch = (t) => [t * rpt]) => op('norm', entry,
      { ...normK, N: n, HAS_B: b ? 1 : 0, RPT: rpt }, [step, w.buffer, b ? b.buffer : dummy, xs, ys], dispatch);
    // Entries whose bindings are unused by an entry point must be left out (layout: 'auto').
    const normInplace = (w, xs, n, rpt) => {
      const pipe = pipeline('norm', 'inplace', { ...normK, N: n, HAS_B: 0, RPT: rpt });
      const group = device.createBindGroup({
        layout: pipe.getBindGroupLayout(0),
        entries: [[0, step], [1, w.buffer], [2, dummy], [3, xs]].map(([binding, b]) => ({ binding, resource: { buffer: b } })),
      });
      return { encode(pass, t) { pass.setPipeline(pipe); pass.setBindGroup(0, group); pass.dispatchWorkgroups(t * rpt); } };
    };

    let cap = 0, K = [], Vc = [], ops = null, splits = 1;
    const splitOps = (l) => {
      const c = { HEADS: heads, KV_HEADS: kvHeads, HD: hd, WINDOW: d.layerWindow[l], SCALE: d.attnScale, SOFTCAP: d.attnSoftcap };
      return {
        attnPartial: op('split', 'partial', c, [step, q, K[l], Vc[l], attnPart], () => [heads, splits]),
        attnReduce: op('split', 'reduce_splits', c, [step, null, null, null, attnPart, att], () => [heads]),
      };
    };
    function buildOps() {
      const L = [];
      for (let l = 0; l < layers; l++) {
        const local = d.localRope[l] && rope_.cosLocal;
        L.push({
          norm1: norm('main', W(l, 'attn_norm'), W(l, 'attn_norm_b'), x, xb),
          qNorm: W(l, 'q_norm') ? normInplace(W(l, 'q_norm'), q, hd, heads) : null,
          kNorm: W(l, 'k_norm') ? normInplace(W(l, 'k_norm'), k, hd, kvHeads) : null,
          rope: op('rope', 'main', {
            HEADS: heads, KV_HEADS: kvHeads, HD: hd, ROT: d.rotDims,
            MODE: d.positional === 'rope' ? 1 : d.positional === 'rope-neox' ? 2 : 0,
          }, [step, local ? rope_.cosLocal : rope_.cos, local ? rope_.sinLocal : rope_.sin, q, k, v, K[l], Vc[l]], (n) => [heads + kvHeads, n]),
          attn: op('attn', 'main', {
            HEADS: heads, KV_HEADS: kvHeads, HD: hd, WINDOW: d.layerWindow[l], SCALE: d.attnScale, SOFTCAP: d.attnSoftcap,
          }, [step, q, K[l], Vc[l], att], (n) => [heads, n]),
          ...splitOps(l),
          post1: W(l, 'attn_post_norm') ? norm('add', W(l, 'attn_post_norm'), null, x, tmp) : null,
          norm2: norm('main', W(l, 'ffn_norm'), W(l, 'ffn_norm_b'), x, xb),
          act: glu ? null : op('elt', 'act', { N: hid, ACT: d.ffn === 'gelu' ? 0 : 1 }, [step, hb], (n) => [Math.ceil(hid / 64), n]),
          post2: W(l, 'ffn_post_norm') ? norm('add', W(l, 'ffn_post_norm'), null, x, tmp) : null,
        });
      }
      const fw = W(-1, 'final_norm'), fb = W(-1, 'final_norm_b');
      ops = {
        layers: L,
        addPos: d.positional === 'learned' ? op('elt', 'add_pos', { N: dim }, [step, x, W(-1, 'pos_embed').buffer], (n) => [Math.ceil(dim / 64), n]) : null,
        finalAll: norm('main', fw, fb, x, xb),
        finalLast: norm('last', fw, fb, x, xb, dim, 1, () => [1]),
        softcap: d.logitSoftcap > 0 ? op('elt', 'softcap', { N: V, CAP: d.logitSoftcap }, [null, logits], (rows) => [Math.ceil(V / 64), rows]) : null,
      };
    }

    // Capacity grows by doubling (as the CPU cache does), copying what is cached.
    function grow(n) {
      if (n <= cap) return;
      const next = Math.min(context, Math.max(n, 2 * cap, Math.min(context, 256)));
      const enc = device.createCommandEncoder({ label: 'kv-grow' });
      const nk = [], nv = [];
      for (let l = 0; l < layers; l++) {
        nk.push(make(next * kvd * 4, st | S.COPY_DST | S.COPY_SRC, `k-cache${l}`));
        nv.push(make(next * kvd * 4, st | S.COPY_DST | S.COPY_SRC, `v-cache${l}`));
        if (cap) {
          enc.copyBufferToBuffer(K[l], 0, nk[l], 0, cap * kvd * 4);
          enc.copyBufferToBuffer(Vc[l], 0, nv[l], 0, cap * kvd * 4);
        }
      }
      device.queue.submit([enc.finish()]);
      for (const b of [...K, ...Vc]) { mine.splice(mine.indexOf(b), 1); b.destroy(); }
      K = nk; Vc = nv; cap = next;
      buildOps();
    }

    function encodeStep(pass, n, rows) {
      const fused = fuseNorm && n === 1;
      embed.encode(pass, n);
      ops.addPos?.encode(pass, n);
      for (let l = 0; l < layers; l++) {
        const o = ops.layers[l], p = layerProducts[l];
        if (!fused) o.norm1.encode(pass, n);
        p.q.encode(pass, n); p.k.encode(pass, n); p.v.encode(pass, n);
        o.qNorm?.encode(pass, n); o.kNorm?.encode(pass, n);
        o.rope.encode(pass, n);
        if (n === 1 && splits > 1) { o.attnPartial.encode(pass, n); o.attnReduce.encode(pass, n); } else o.attn.encode(pass, n);
        p.o.encode(pass, n);
        o.post1?.encode(pass, n);
        if (!fused) o.norm2.encode(pass, n);
        p.up.encode(pass, n);
        o.act?.encode(pass, n);
        p.down.encode(pass, n);
        o.post2?.encode(pass, n);
      }
      if (rows === 1 && fused) clsDecode.encode(pass, 1);
      else if (rows === 1) { ops.finalLast.encode(pass, n); clsLast.encode(pass, 1); }
      if (rows > 1) { ops.finalAll.encode(pass, n); clsAll.encode(pass, n); }
      if (rows) ops.softcap?.encode(pass, rows);
    }

    let pos = 0, disposed = false, partial = false;
    const compiled = Promise.all([products.ready(), topk?.ready]);  // pipelines compile asynchronously
    // Row 0 of the logits buffer (the last step's last token), read back whole.
    async function readRow() {
      const enc = device.createCommandEncoder({ label: 'qkv-logits' });
      enc.copyBufferToBuffer(logits, 0, read, 0, V * 4);
      device.queue.submit([enc.finish()]);
      await read.mapAsync(MapMode.READ, 0, V * 4);
      const row = new Float32Array(read.getMappedRange(0, V * 4).slice(0));
      read.unmap();
      return row;
    }
    const header = new Uint32Array(STEP_BYTES / 4);
    grow(1);
    return {
      /** Tokens held in the GPU cache. */
      get position() { return pos; },
      /** Bytes of GPU memory the KV cache holds now. */
      get bytes() { return cap * kvd * 4 * 2 * layers; },
      /** Whether the last feed's logits were rebuilt from the GPU's top candidates (see feed). */
      get partial() { return partial; },
      /** The last feed's logits of its last token, read back whole. */
      lastLogits() { return readRow().then((row) => { partial = false; return row; }); },
      /** Forgets positions from n on (they are overwritten by the next feed). */
      truncate(n) { pos = Math.min(pos, n); },
      /**
       * Runs `ids` at positions position.. and returns the logits: (ids.length, vocab) with
       * allLogits, else the last token's (vocab). With `sampling` (generation options) that let
       * the sampler draw from the top candidates alone (gpu-topk.js), only those are read back
       * and the row holds -Infinity elsewhere (`partial`).
       */
      async feed(ids, allLogits = false, sampling = null) {
        if (disposed) throw new QkvError('disposed', 'the GPU session was disposed');
        if (pos + ids.length > context) throw new QkvError('bad_argument', `feeding ${ids.length} tokens after ${pos} would pass the context of ${context}`);
        await compiled;
        const out = new Float32Array((allLogits ? ids.length : 1) * V);
        const K = allLogits || !topk ? 0 : gpuCandidates(sampling, V);
        partial = false;
        for (let i = 0; i < ids.length; i += T) {
          const n = Math.min(T, ids.length - i), last = i + n === ids.length;
          const rows = allLogits ? n : last ? 1 : 0;
          grow(pos + n);
          const cand = rows === 1 && K > 0;
          splits = n === 1 ? Math.min(MAX_SPLITS, Math.ceil((pos + 1) / KEYS_PER_SPLIT)) : 1;
          header[0] = n; header[1] = pos; header[2] = cand ? K : 0; header[3] = splits;
          for (let j = 0; j < n; j++) header[IDS_OFFSET / 4 + j] = ids[i + j];
          device.queue.writeBuffer(step, 0, header.buffer, 0, IDS_OFFSET + 4 * n);
          device.pushErrorScope('validation');
          const enc = device.createCommandEncoder({ label: 'qkv-step' });
          const pass = enc.beginComputePass({ label: 'qkv-step' });
          encodeStep(pass, n, rows);
          if (cand) topk.encode(pass);
          pass.end();
          const [src, dst, bytes] = cand ? [topk.out, candRead, K * 8] : [logits, read, rows * V * 4];
          if (rows) enc.copyBufferToBuffer(src, 0, dst, 0, bytes);
          device.queue.submit([enc.finish()]);
          pos += n;
          const [err] = await Promise.all([device.popErrorScope(), rows ? dst.mapAsync(MapMode.READ, 0, bytes) : null]);
          if (err) {
            if (rows) dst.unmap();
            pos -= n;
            throw new QkvError('internal', `WebGPU forward: ${err.message}`);
          }
          if (cand) {
            const pairs = new Uint32Array(candRead.getMappedRange(0, bytes).slice(0));
            candRead.unmap();
            const row = candidateLogits(pairs, V, sampling);
            out.set(row ?? await readRow());  // null: a token outside the candidates could matter
            partial = !!row && K < V;
          } else if (rows) {
            out.set(new Float32Array(read.getMappedRange(0, bytes)), allLogits ? i * V : 0);
            read.unmap();
          }
        }
        return out;
      },
      dispose() {
        disposed = true;
        topk?.dispose();
        for (const b of mine) b.destroy();
        mine.length = 0;
        K = []; Vc = [];
      },
    };
  }

  return {
    /** Bytes of weights uploaded. */
    weightBytes,
    products,
    createSession,
    dispose,
  };
}
