// Reading back only the best candidates of a decode step (src/webgpu/topk.wgsl) when the sampler
// looks at nothing else, so a token costs K (id, logit) pairs of readback instead of the vocabulary.
//
// The CPU sampler stays the reference and draws from the full-vocabulary row rebuilt here (the
// candidates at their ids, -Infinity elsewhere). That row gives exactly the full row's draw:
//   - greedy (temperature 0): the sampler's argmax is the first id of the largest logit, which is
//     candidate 0 (logit descending, id ascending);
//   - top-k at temperature T > 0: the sampler weights tokens by exp(l / T - max) without
//     normalizing over the vocabulary (src/sampler/sampler.cpp), keeps the k best by (weight,
//     id) and draws among them, so only those k logits matter. They are the first k candidates
//     when every token outside the K > k candidates weighs strictly less than candidate k - 1
//     (or nothing: exp underflows to 0). candidateLogits checks that with a margin that survives
//     exp's rounding, and returns null otherwise: the caller reads the full row back.
// Penalties, logit bias, grammars, log-probabilities and top-p/min-p without top-k see every
// logit: those steps read the whole row, as before.
import { QkvError } from './errors.js';
import { loadShader } from './webgpu.js';

/** The most candidates the GPU selects per step. */
export const TOPK_MAX = 256;
// Candidates read beyond the sampler's k: the margin that makes the check above pass.
const EXTRA = 16;
const WG = 256;
const MAX_VOCAB = WG * WG * 8;  // chunks of WG * 8 logits, at most WG of them

const BufferUsage = globalThis.GPUBufferUsage ?? { COPY_SRC: 0x4, COPY_DST: 0x8, UNIFORM: 0x40, STORAGE: 0x80 };
const ShaderStage = globalThis.GPUShaderStage ?? { COMPUTE: 0x4 };

/**
 * How many candidates a step needs for these (validated) sampling options: 0 when the sampler
 * needs every logit, else K <= min(vocab, TOPK_MAX).
 * @param {object|null|undefined} o generation options (temperature, topK, penalties, ...)
 * @param {number} vocab
 */
export function gpuCandidates(o, vocab) {
  if (!o || vocab > MAX_VOCAB) return 0;
  if (o.grammar !== undefined || o.jsonSchema !== undefined || o.logprobs !== undefined) return 0;
  if ((o.presencePenalty ?? 0) !== 0 || (o.frequencyPenalty ?? 0) !== 0) return 0;
  if (o.logitBias && Object.keys(o.logitBias).length) return 0;
  if ((o.repetitionPenalty ?? 1) !== 1) return 0;
  if (Math.fround(o.temperature ?? 1) === 0) return 1;
  const k = o.topK ?? 0;
  if (!(k >= 1) || k + EXTRA > TOPK_MAX) return 0;
  return Math.min(vocab, k + EXTRA);
}

/**
 * The logits row the sampler sees, from candidates (id, logit bits) pairs sorted as topk.wgsl
 * sorts them; null when a token outside them could change the draw (see the header).
 * @param {Uint32Array} pairs 2 K words
 * @param {number} vocab
 * @param {object} o the sampling options gpuCandidates accepted
 * @returns {Float32Array|null}
 */
export function candidateLogits(pairs, vocab, o) {
  const K = pairs.length / 2;
  const f = new Float32Array(pairs.buffer, pairs.byteOffset, pairs.length);
  const logit = (i) => (Number.isNaN(f[2 * i + 1]) ? -Infinity : f[2 * i + 1]);
  const T = Math.fround(o.temperature ?? 1);
  if (T !== 0 && K < vocab) {
    const m = Math.fround(logit(0) / T);
    if (Number.isFinite(m)) {
      // x = l / T - max in f32, as the sampler computes it (division and subtraction of f32
      // values in double, rounded once, give the f32 operation's result).
      const x = (i) => Math.fround(Math.fround(logit(i) / T) - m);
      const last = x(K - 1), kth = x(Math.min(o.topK, K) - 1);
      // expf is 0 below -103.97; above -87 its results are normal, and a gap over 2^-20 keeps
      // the weights strictly ordered through exp's sub-ulp rounding.
      const exact = last < -104 || (last >= -87 && kth - last > 2 ** -20);
      if (!exact) return null;
    }
  }
  const row = new Float32Array(vocab).fill(-Infinity);
  for (let i = 0; i < K; i++) row[pairs[2 * i]] = f[2 * i + 1];
  return row;
}

/**
 * The top-k op over row 0 of a logits buffer.
 * @param {GPUDevice} device
 * @param {{logits: GPUBuffer, vocab: number, step: GPUBuffer}} o step: the caller's uniform,
 *   words n, pos, k (the candidates of this step, written by the caller)
 * @returns {{ready: Promise<void>, out: GPUBuffer, encode(pass: GPUComputePassEncoder): void, dispose(): void} | null}
 *   null for vocabularies over the kernel's reach (the caller reads whole rows)
 */
export function createTopK(device, { logits, vocab, step }) {
  if (vocab > MAX_VOCAB) return null;
  const per = Math.max(8, Math.ceil(vocab / (WG * WG)));
  const ch = WG * per, groups = Math.ceil(vocab / ch);
  const storage = (binding, type) => ({ binding, visibility: ShaderStage.COMPUTE, buffer: { type } });
  const layout = device.createBindGroupLayout({
    label: 'qkv topk', entries: [storage(0, 'uniform'), storage(1, 'read-only-storage'), storage(2, 'storage'), storage(3, 'storage')],
  });
  const part = device.createBuffer({ size: groups * TOPK_MAX * 8, usage: BufferUsage.STORAGE, label: 'topk-part' });
  const out = device.createBuffer({ size: TOPK_MAX * 8, usage: BufferUsage.STORAGE | BufferUsage.COPY_SRC, label: 'topk-out' });
  const group = device.createBindGroup({
    layout,
    entries: [step, logits, part, out].map((buffer, binding) => ({ binding, resource: { buffer } })),
  });
  let chunks = null, merge = null;
  const ready = loadShader('topk.wgsl').then(async (src) => {
    const head = `const V = ${vocab}u;\nconst CH = ${ch}u;\nconst G = ${groups}u;\nconst KMAX = ${TOPK_MAX}u;\nconst WG = ${WG}u;\nconst PER = ${per}u;\n`;
    const module = device.createShaderModule({ code: head + src, label: 'topk.wgsl' });
    const pl = device.createPipelineLayout({ bindGroupLayouts: [layout] });
    const make = (entryPoint) => device.createComputePipelineAsync({ label: `topk ${entryPoint}`, layout: pl, compute: { module, entryPoint } });
    try {
      [chunks, merge] = await Promise.all([make('chunks'), make('merge')]);
    } catch (e) {
      throw new QkvError('internal', `WebGPU top-k pipeline: ${e?.message ?? e}`, { cause: e });
    }
  });
  return {
    ready,
    out,
    encode(pass) {
      if (!chunks) throw new QkvError('internal', 'topk: encode() before ready resolved');
      pass.setBindGroup(0, group);
      pass.setPipeline(chunks);
      pass.dispatchWorkgroups(groups);
      pass.setPipeline(merge);
      pass.dispatchWorkgroups(1);
    },
    dispose() { part.destroy(); out.destroy(); },
  };
}
