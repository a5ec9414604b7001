// Encoder-decoder models (t5 GGUF) in the JS API: generate(source) streams the target as
// decoder-only models stream a continuation ({token, text} items, stop strings, AbortSignal,
// lastGeneration stats); inspect(source, target) gives encoder, decoder self- and cross-attention.
import { QkvError, check, checkOptions, throwIfAborted } from './errors.js';
import { call, sparseMaskOf } from './util.js';
import { generationOptions, generationStats, tokenLoop, wellFormed } from './generation.js';
import { inspectionView } from './inspection.js';

/** A loaded encoder-decoder model (info.encoderDecoder is true). */
export class EncoderDecoderModel {
  /** @internal */
  constructor(mod, handle, runtime, requested = 'wasm') {
    this._mod = mod;
    this._requested = requested;
    this._h = handle;
    this._runtime = runtime;
    this._info = call(() => handle.info());
    this._info.eogIds = Array.from(this._info.eogIds ?? []);
    this._busy = false;
    /** Statistics of the last generation (as Session.lastGeneration). */
    this.lastGeneration = null;
    this.warnings = [];
  }

  _live() {
    if (!this._h) throw new QkvError('disposed', 'this model was disposed');
    return this._h;
  }

  /** The block-sparse pattern as a mask over (queries, keys): 1 visible (types/index.d.ts). */
  sparseMask(options) {
    const h = this._live();
    return sparseMaskOf(this._info, options, ['queryStart', 'queries', 'keys', 'causal'], (q0, nq, nk, causal) => h.sparseMask(q0, nq, nk, causal));
  }

  /** Architecture, sizes (encoderLayers, decoderLayers), threads, memory. */
  get info() {
    this._live();
    const i = this._info;
    return {
      ...i,
      backend: 'wasm',
      device: {
        kind: 'wasm', requested: this._requested,
        reason: 'encoder-decoder models (t5) run in WASM: their relative-position biases and cross-attention have no WebGPU kernels',
      },
      threading: { ...this._runtime.threading, threads: i.threads },
      simdReason: this._runtime.simd.reason,
      memory: { weightBytes: i.weightBytes, kvCacheBytes: this._h.kvCacheBytes(), gpuKvCacheBytes: 0, heapBytes: this._mod.HEAPU8 ? this._mod.HEAPU8.byteLength : 0 },
    };
  }

  /**
   * Text to ids. By default as the encoder takes a source (EOS appended where the tokenizer asks);
   * {source: false} gives the bare pieces; {special: true} parses control tokens in the text.
   */
  tokenize(text, options) {
    const h = this._live();
    const { source = true, special = false } = checkOptions(options, ['source', 'special'], 'tokenize');
    check(typeof text === 'string', `tokenize takes a string, got ${typeof text}`);
    if (source && !special) return Array.from(call(() => h.tokenizeSource(wellFormed(text))));
    const ids = Array.from(call(() => h.tokenizeSpecial(wellFormed(text), false, !!special)));
    return source && this._info.eosId >= 0 ? [...ids, this._info.eosId] : ids;
  }

  /** Target ids to text (control tokens skipped, leading space of the first piece dropped). */
  detokenize(ids) {
    const h = this._live();
    check((Array.isArray(ids) || ArrayBuffer.isView(ids)) && Array.prototype.every.call(ids, Number.isInteger),
      'detokenize takes an array of integer token ids');
    return new TextDecoder('utf-8', { fatal: false }).decode(call(() => h.detokenize(Array.from(ids))));
  }

  /**
   * Streams the target generated from `source`: an async iterator of {token, text}, with the
   * options of Model.generate (maxTokens, temperature, topK, topP, minP, repetitionPenalty,
   * seed, stop, stopTokens, signal).
   */
  generate(source, options = {}) {
    this._live();
    check(typeof source === 'string', `source must be a string, got ${typeof source}`);
    const opts = generationOptions(options);
    return this._generate(source, opts);
  }

  async *_generate(source, opts) {
    const h = this._live();
    if (this._busy) throw new QkvError('busy', 'this model is already generating: two at once would interleave their tokens');
    const info = this._info;
    const stopTokens = new Set(opts.stopTokens ?? [info.eosId, ...info.eogIds].filter((id) => id >= 0));
    const signal = opts.signal;
    throwIfAborted(signal);
    const stats = generationStats(opts);
    this.lastGeneration = stats;
    const src = call(() => h.tokenizeSource(wellFormed(source)));
    stats.promptTokens = src.length;
    check(src.length <= h.context(), `the source is ${src.length} tokens, longer than the context of ${h.context()}`);
    this._busy = true;
    try {
      yield* tokenLoop(opts, stats, stopTokens, {
        prefill: () => { call(() => h.begin(src, opts)); },
        first: info.decoderStartId,
        live: () => this._live(),
        canStep: () => h.position() < h.context(),
        step: () => ({ token: call(() => h.next()) }),  // next() feeds the previous token itself
        piece: (prev, next) => call(() => h.textPiece(prev, next)),
        dropLeadingSpace: true,  // SentencePiece drops the leading space
      });
    } finally {
      this._busy = false;
    }
  }

  /** Generates and returns the whole target text. */
  async complete(source, options = {}) {
    let out = '';
    for await (const t of this.generate(source, options)) out += t.text;
    return out;
  }

  /** Decoder-only models' chat API does not apply. */
  chat() { throw new QkvError('unsupported', 'encoder-decoder models have no chat format: use generate(source)'); }
  createSession() { throw new QkvError('unsupported', 'encoder-decoder models keep one decoder state: use generate(source)'); }

  /**
   * Attention maps for `source` (text) and `target` (text or ids; default: generate it greedily,
   * up to maxTokens): {sourceTokens, targetTokens (the decoder start token first), heads,
   * encoderLayers, decoderLayers, encoder(layer, head) -> S x S rows, self(layer, head) -> T x T,
   * cross(layer, head) -> T x S (target-by-source alignment)}; each map is an array of Float32Array rows.
   */
  async inspect(source, options = {}) { return inspectionView(await this._inspectRaw(source, options)); }

  /** inspect()'s data without the accessors (what crosses postMessage). @internal */
  async _inspectRaw(source, options) {
    const h = this._live();
    const { target, maxTokens = 32 } = checkOptions(options, ['target', 'maxTokens'], 'inspect');
    check(typeof source === 'string', `source must be a string, got ${typeof source}`);
    if (this._busy) throw new QkvError('busy', 'this model is generating: inspect after the generation ends');
    let tgt;
    if (target === undefined) {
      tgt = [];
      for await (const t of this.generate(source, { maxTokens, temperature: 0 })) if (t.token >= 0) tgt.push(t.token);
    } else if (typeof target === 'string') {
      tgt = this.tokenize(target, { source: false });
    } else {
      check(Array.isArray(target) && target.every(Number.isInteger), 'target must be a string or an array of token ids');
      tgt = target;
    }
    const src = call(() => h.tokenizeSource(wellFormed(source)));
    const r = call(() => h.inspect(src, tgt));
    const piece = (prev, id) => new TextDecoder('utf-8', { fatal: false }).decode(call(() => h.piece(prev, id)));
    const ids = Array.from(r.target);
    return {
      heads: r.heads,
      encoderLayers: r.encoderLayers,
      decoderLayers: r.decoderLayers,
      sourceTokens: Array.from(src, (id) => ({ id, text: piece(-1, id) })),
      targetTokens: ids.map((id, i) => ({ id, text: i === 0 ? '<start>' : piece(ids[i - 1], id) })),
      encoderProbs: r.encoder,
      selfProbs: r.self,
      crossProbs: r.cross,
    };
  }

  /** Frees the model and its heap memory. Safe to call twice. */
  dispose() {
    if (!this._h) return;
    this._h.delete();
    this._h = null;
  }
}
