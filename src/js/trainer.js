// Training in JS: the native trainer (src/train/trainer.h) through Embind, step by step.
// createTrainerWith(env, options) runs it in this thread; train-worker-client.js runs the same
// object in a Worker. Entry points (node.js, browser.js) choose between them.
import { QkvError, check, checkOptions, describe, throwIfAborted, toQkvError } from './errors.js';
import { call, checkSimdOption, yieldToLoop } from './util.js';
import { readSource } from './source.js';

/** Model shapes that train in reasonable time on a CPU (and in a browser tab). */
export const TRAIN_PRESETS = Object.freeze({
  tiny: Object.freeze({ dim: 64, layers: 2, heads: 4, kvHeads: 2, hiddenDim: 192, seq: 64, vocab: 512 }),
  small: Object.freeze({ dim: 128, layers: 4, heads: 4, kvHeads: 2, hiddenDim: 384, seq: 128, vocab: 1024 }),
  medium: Object.freeze({ dim: 192, layers: 4, heads: 6, kvHeads: 3, hiddenDim: 512, seq: 128, vocab: 2048 }),
});

const DEFAULTS = Object.freeze({
  batch: 8, steps: 200, lr: 1e-3, weightDecay: 0.1, clip: 1, beta1: 0.9, beta2: 0.95, seed: 1,
  valFraction: 0.05, evalBatches: 4, maxMemory: 2 * 1024 ** 3,
});

/** The options of createTrainer(). */
const TRAIN_KEYS = ['text', 'model', 'tokenizer', 'shape', 'threads', 'simd', 'worker', 'seq', 'batch', 'steps', 'warmup',
  'lr', 'minLr', 'weightDecay', 'clip', 'beta1', 'beta2', 'seed', 'valFraction', 'evalBatches', 'maxMemory', 'name', 'signal',
  'attention', 'additiveDim', 'sparsePattern'];

/** Attention kinds a trained layer may use (docs/attention-kinds.md). */
const TRAIN_ATTENTION_KINDS = ['softmax', 'additive', 'block_sparse'];

/** Text up to this many UTF-8 bytes (the encoded tokens and the BPE statistics scale with it). */
export const MAX_TRAIN_TEXT_BYTES = 256 * 1024 ** 2;

function int(o, key, lo, hi) {
  const v = o[key];
  if (v === undefined) return;
  check(typeof v === 'number' && Number.isInteger(v), `${key} must be an integer, got ${describe(v)}`);
  check(v >= lo && v <= hi, `${key} must be in [${lo}, ${hi}], got ${v}`);
}

function real(o, key, lo, hi, { open = false } = {}) {
  const v = o[key];
  if (v === undefined) return;
  check(typeof v === 'number' && Number.isFinite(v), `${key} must be a finite number, got ${describe(v)}`);
  check(v >= lo && v <= hi && !(open && v === lo), `${key} must be in ${open ? '(' : '['}${lo}, ${hi}], got ${v}`);
}

function isSource(x) {
  return typeof x === 'string' || x instanceof URL || x instanceof ArrayBuffer || ArrayBuffer.isView(x) ||
    (typeof Blob !== 'undefined' && x instanceof Blob);
}

/**
 * The attention options of a fresh model of `layers` layers, as the engine's native-config
 * equivalents: {attention (comma-separated, one per layer), additiveDim, sparsePattern}.
 */
function attentionOptions({ attention, additiveDim, sparsePattern }, layers, fineTune) {
  const given = attention !== undefined || additiveDim !== undefined || sparsePattern !== undefined;
  if (!given) return {};
  check(!fineTune, 'a fine-tuned model keeps its own attention kinds: leave attention, additiveDim and sparsePattern out');
  const list = attention === undefined ? ['softmax'] : typeof attention === 'string' ? [attention] : attention;
  check(Array.isArray(list) && list.length > 0,
    `attention must be a kind or an array of kinds (one per layer), got ${describe(attention)}`);
  for (const k of list) {
    check(TRAIN_ATTENTION_KINDS.includes(k),
      `attention kind ${describe(k)} is not one of ${TRAIN_ATTENTION_KINDS.map((x) => `'${x}'`).join(', ')}`);
  }
  check(list.length === 1 || list.length === layers,
    `attention lists ${list.length} kinds for ${layers} layers (give one, or one per layer)`);
  int({ additiveDim }, 'additiveDim', 1, 4096);
  check(additiveDim === undefined || list.includes('additive'), 'additiveDim is the width of additive layers: attention has none');
  if (sparsePattern !== undefined) {
    check(sparsePattern !== null && typeof sparsePattern === 'object' && !Array.isArray(sparsePattern),
      'sparsePattern must be {blockSize, windowBlocks, globalTokens, randomBlocks, seed}');
    checkOptions(sparsePattern, ['blockSize', 'windowBlocks', 'globalTokens', 'randomBlocks', 'seed'], 'createTrainer sparsePattern');
    const p = Object.fromEntries(Object.entries(sparsePattern).map(([k, v]) => [`sparsePattern.${k}`, v]));
    int(p, 'sparsePattern.blockSize', 1, 65536);
    int(p, 'sparsePattern.windowBlocks', 0, 65536);
    int(p, 'sparsePattern.globalTokens', 0, 65536);
    int(p, 'sparsePattern.randomBlocks', 0, 1024);
    int(p, 'sparsePattern.seed', 0, 0xffffffff);
    check(list.includes('block_sparse'), 'sparsePattern is the pattern of block_sparse layers: attention has none');
  }
  return { attention: list.join(','), additiveDim, sparsePattern };
}

/**
 * Validates createTrainer options and fills defaults. Throws QkvError('bad_argument') naming
 * the first bad option. Returns {opts (for the engine), model, tokenizer, text, threads}.
 * @internal
 */
export function trainOptions(options) {
  check(options !== null && typeof options === 'object' && !Array.isArray(options), 'createTrainer takes an options object');
  checkOptions(options, TRAIN_KEYS, 'createTrainer');
  const { text, model, tokenizer, shape, threads = 'auto', simd, worker, attention, additiveDim, sparsePattern, ...rest } = options;
  const isText = typeof text === 'string' || text instanceof ArrayBuffer || ArrayBuffer.isView(text) ||
    (typeof Blob !== 'undefined' && text instanceof Blob);
  check(isText, `text must be a string (or UTF-8 bytes, a Blob), got ${text === null ? 'null' : typeof text}`);
  check(worker === undefined || worker === 'auto' || typeof worker === 'boolean', `worker must be 'auto', true or false`);
  if (threads !== 'auto') {
    check(Number.isInteger(threads) && threads >= 1 && threads <= 256, `threads must be 'auto' or an integer in [1, 256], got ${describe(threads)}`);
  }
  checkSimdOption(simd);
  check(model === undefined || model === null || isSource(model),
    'model must be a URL, path, Blob or the bytes of a GGUF model to fine-tune');
  let shp = {};
  if (model === undefined || model === null) {
    const s = shape ?? 'tiny';
    if (typeof s === 'string') {
      check(Object.hasOwn(TRAIN_PRESETS, s), `shape must be one of ${Object.keys(TRAIN_PRESETS).map((k) => `'${k}'`).join(', ')} or an object, got '${s}'`);
      shp = { ...TRAIN_PRESETS[s] };
    } else {
      check(s !== null && typeof s === 'object', 'shape must be a preset name or {dim, layers, heads, kvHeads, hiddenDim}');
      checkOptions(s, ['dim', 'layers', 'heads', 'kvHeads', 'hiddenDim'], 'createTrainer shape');
      shp = { ...s, kvHeads: s.kvHeads ?? s.heads };
      for (const k of ['dim', 'layers', 'heads', 'hiddenDim']) check(shp[k] !== undefined, `shape.${k} is missing`);
    }
    int(shp, 'dim', 8, 4096);
    int(shp, 'layers', 1, 64);
    int(shp, 'heads', 1, 128);
    int(shp, 'kvHeads', 1, 128);
    int(shp, 'hiddenDim', 8, 16384);
    check(shp.dim % shp.heads === 0, `shape.dim ${shp.dim} is not a multiple of shape.heads ${shp.heads}`);
    check((shp.dim / shp.heads) % 2 === 0, `the head dimension (dim / heads = ${shp.dim / shp.heads}) must be even for RoPE`);
    check(shp.heads % shp.kvHeads === 0, `shape.heads ${shp.heads} is not a multiple of shape.kvHeads ${shp.kvHeads}`);
  } else {
    check(shape === undefined, 'give either model (to fine-tune) or shape (a fresh model), not both');
  }
  const kinds = attentionOptions({ attention, additiveDim, sparsePattern }, shp.layers, model !== undefined && model !== null);
  let vocab = 0, tokSource = null;
  if (tokenizer !== undefined && tokenizer !== null) {
    if (isSource(tokenizer)) {
      tokSource = tokenizer;
    } else {
      check(typeof tokenizer === 'object' && Object.keys(tokenizer).every((k) => k === 'vocab'),
        'tokenizer must be {vocab} (learn one from the text) or the bytes/URL of a tokenizer GGUF');
      int(tokenizer, 'vocab', 260, 65536);
      check(tokenizer.vocab !== undefined, 'tokenizer.vocab is missing');
      check(!model, 'a fine-tuned model keeps its own tokenizer: leave tokenizer.vocab out');
      vocab = tokenizer.vocab;
    }
  } else if (!model) {
    vocab = shp.vocab ?? 512;
  }
  const o = { ...DEFAULTS, ...rest };
  int(o, 'seq', 2, 4096);
  int(o, 'batch', 1, 1024);
  int(o, 'steps', 1, 10_000_000);
  int(o, 'warmup', 0, o.steps);
  real(o, 'lr', 0, 1, { open: true });
  real(o, 'minLr', 0, 1);
  real(o, 'weightDecay', 0, 10);
  real(o, 'clip', 0, 1e9);
  real(o, 'beta1', 0, 0.999999);
  real(o, 'beta2', 0, 0.999999);
  int(o, 'seed', 0, Number.MAX_SAFE_INTEGER);
  real(o, 'valFraction', 0, 0.5);
  int(o, 'evalBatches', 1, 100_000);
  real(o, 'maxMemory', 1, 4 * 1024 ** 3);
  check(o.name === undefined || typeof o.name === 'string', 'name must be a string');
  check(o.signal === undefined || o.signal === null || typeof o.signal.aborted === 'boolean', 'signal must be an AbortSignal');
  const seq = o.seq ?? shp.seq ?? (model ? 0 : 64);
  const warmup = o.warmup ?? Math.min(Math.round(o.steps / 10), 100);
  const { signal, name, ...engine } = o;
  return {
    opts: { ...engine, ...shp, ...kinds, seq, warmup, vocab },
    model: model ?? null, tokenizer: tokSource, text, threads, simd: simd ?? 'auto', worker: worker ?? 'auto', signal,
    name: name ?? (model ? 'qkv fine-tuned' : 'qkv trained'),
  };
}

/** Lone UTF-16 surrogates become U+FFFD (Embind's UTF-8 conversion would garble the next character). */
const wellFormed = typeof String.prototype.toWellFormed === 'function'
  ? (s) => s.toWellFormed()
  : (s) => s.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');

async function textOf(text) {
  if (typeof text === 'string') return wellFormed(text);
  const bytes = typeof Blob !== 'undefined' && text instanceof Blob ? new Uint8Array(await text.arrayBuffer())
    : text instanceof ArrayBuffer ? new Uint8Array(text) : new Uint8Array(text.buffer, text.byteOffset, text.byteLength);
  return new TextDecoder('utf-8', { fatal: false }).decode(bytes);
}

/**
 * A training run, step by step. Every method is async so the in-process and the Worker trainer
 * have one interface. step() runs one optimizer step; run() streams steps until the run is
 * complete, stop() is called or the signal aborts; run() again resumes where it stopped.
 */
export class Trainer {
  /** @internal */
  constructor(mod, handle, runtime, name) {
    this._mod = mod;
    this._h = handle;
    this._runtime = runtime;
    this._name = name;
    this._info = call(() => handle.info());
    this._stop = false;
    this._running = false;
    this._tokens = 0;
    this._ms = 0;
    /** Every step so far: {step, loss, lr, gradNorm, tokens, ms, tokensPerSecond, valLoss?}. */
    this.history = [];
  }

  _live() {
    if (!this._h) throw new QkvError('disposed', 'this trainer was disposed');
    return this._h;
  }

  /** Shape, sizes, data split, threads. */
  get info() {
    this._live();
    return {
      ...this._info, threading: { ...this._runtime.threading, threads: this._info.threads },
      simd: this._runtime.simd.build, simdReason: this._runtime.simd.reason, worker: false,
    };
  }

  /** Optimizer steps done so far (restored by loadState). */
  get stepsDone() { return this._live().stepsDone(); }
  /** True once all `steps` are done. */
  get done() { return this.stepsDone >= this._info.steps; }

  _record(s) {
    this._tokens += s.tokens;
    this._ms += s.ms;
    const r = { ...s, tokensPerSecond: this._tokens / Math.max(this._ms, 1e-6) * 1000 };
    this.history.push(r);
    return r;
  }

  /** One optimizer step: {step, loss, lr, gradNorm, tokens, ms, tokensPerSecond}. */
  async step() {
    const h = this._live();
    check(!this._running, 'run() is in progress: stop() it before calling step()');
    return this._record(call(() => h.step()));
  }

  /** Mean loss on the held-out tail of the text (NaN when valFraction is 0). */
  async evaluate() {
    const h = this._live();
    check(!this._running, 'run() is in progress: stop() it before calling evaluate()');
    return call(() => h.evaluate());
  }

  /** Makes a run() in progress end after its current step (resume with run()). */
  stop() { this._stop = true; }

  /**
   * Runs steps until the run is complete, stop() is called or signal aborts (rejects with
   * QkvError 'aborted' after the current step). onStep gets each step's record (the next step
   * waits for the promise it returns, if any; stop() inside it ends the run there); with evalEvery
   * = N the validation loss is computed every N steps and at the end ({valLoss} in the record).
   * Resolves to {stepsDone, stopped, valLoss}.
   */
  async run(options) {
    this._live();
    const { onStep, signal, evalEvery = 0, maxSteps } = checkOptions(options, ['onStep', 'signal', 'evalEvery', 'maxSteps'], 'run');
    check(onStep === undefined || typeof onStep === 'function', 'onStep must be a function');
    check(signal === undefined || signal === null || typeof signal.aborted === 'boolean', 'signal must be an AbortSignal');
    check(Number.isInteger(evalEvery) && evalEvery >= 0, 'evalEvery must be a non-negative integer');
    check(maxSteps === undefined || (Number.isInteger(maxSteps) && maxSteps >= 1), 'maxSteps must be a positive integer');
    check(!this._running, 'run() is already in progress');
    this._running = true;
    this._stop = false;
    let valLoss = null, n = 0;
    try {
      while (!this.done && !this._stop && (maxSteps === undefined || n < maxSteps)) {
        throwIfAborted(signal);
        const r = this._record(call(() => this._live().step()));
        n++;
        if (evalEvery > 0 && (r.step % evalEvery === 0 || r.step === this._info.steps)) {
          r.valLoss = valLoss = call(() => this._h.evaluate());
        }
        if (onStep) await onStep(r);
        await yieldToLoop();  // aborts, stop() and the page get a turn between steps
      }
      throwIfAborted(signal);
      return { stepsDone: this.stepsDone, stopped: !this.done, valLoss };
    } finally {
      this._running = false;
    }
  }

  /** The same as run(), as an async iterator of step records; leaving the loop stops the run. */
  async *steps(options) {
    const { signal, evalEvery = 0 } = checkOptions(options, ['signal', 'evalEvery'], 'steps');
    while (!this.done) {
      throwIfAborted(signal);
      const r = await this.step();
      if (evalEvery > 0 && (r.step % evalEvery === 0 || r.step === this._info.steps)) r.valLoss = await this.evaluate();
      yield r;
      await yieldToLoop();
    }
  }

  /** The model as GGUF bytes (tokenizer embedded) that loadModel accepts: {name, dtype: 'f32'|'f16'}. */
  async toGGUF(options) {
    const h = this._live();
    const { name = this._name, dtype = 'f32' } = checkOptions(options, ['name', 'dtype'], 'toGGUF');
    check(typeof name === 'string', 'name must be a string');
    check(dtype === 'f32' || dtype === 'f16', `dtype must be 'f32' or 'f16', got ${describe(dtype)}`);
    return call(() => h.toGGUF(name, dtype));
  }

  /** Parameters, AdamW moments, step and data position: loadState() continues exactly. */
  async saveState() { return call(() => this._live().saveState()); }

  /** Restores saveState() bytes of a trainer with the same options. */
  async loadState(bytes) {
    const h = this._live();
    check(bytes instanceof ArrayBuffer || ArrayBuffer.isView(bytes), 'loadState takes the bytes of saveState()');
    check(!this._running, 'run() is in progress: stop() it first');
    const u8 = bytes instanceof ArrayBuffer ? new Uint8Array(bytes) : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    call(() => h.loadState(u8));
    this.history = this.history.filter((r) => r.step <= h.stepsDone());
  }

  /** Frees the trainer's memory. Safe to call twice. */
  dispose() {
    this._stop = true;
    if (this._h) { this._h.delete(); this._h = null; }
  }
}

/**
 * Creates an in-process trainer. `env.load` gives the module and runtime (as for loadModel);
 * `env.openPath` reads paths (Node).
 * @internal
 */
export async function createTrainerWith(env, options) {
  const t = trainOptions(options);
  throwIfAborted(t.signal);
  const text = await textOf(t.text);
  check(text.length > 0, 'text is empty: give the text to train on');
  const size = typeof TextEncoder !== 'undefined' ? new TextEncoder().encode(text).byteLength : text.length;
  check(size <= MAX_TRAIN_TEXT_BYTES, `text is ${size} bytes, more than the ${MAX_TRAIN_TEXT_BYTES} this API takes`);
  const { mod, runtime } = await env.load({ threads: t.threads, simd: t.simd });
  throwIfAborted(t.signal);
  // The engine copies the bytes into its own allocation; a view into the WASM heap could be
  // detached by that very allocation growing the heap, so it gets a JS-owned copy.
  const bytesOf = async (source, what) => {
    const buf = await readSource(mod, source, { what, signal: t.signal, openPath: env.openPath });
    try { return buf.view().slice(); } finally { buf.delete(); }
  };
  try {
    const model = t.model ? await bytesOf(t.model, 'the model') : null;
    const tok = t.tokenizer ? await bytesOf(t.tokenizer, 'the tokenizer') : null;
    throwIfAborted(t.signal);
    const handle = call(() => new mod.Trainer(t.opts, text, model, tok, runtime.threads));
    return new Trainer(mod, handle, runtime, t.name);
  } catch (e) {
    throw toQkvError(e);
  }
}
