// The generation loop every model kind shares (decoder-only sessions, encoder-decoder models):
// generate() options and their defaults, UTF-8 text streaming, stop strings, and the async token loop.
import { check, checkOptions, describe, throwIfAborted } from './errors.js';
import { now, yieldToLoop } from './util.js';
import { constraintOptions, samplingExtras, withLogprobs } from './sampling.js';

const DEFAULTS = Object.freeze({
  maxTokens: 256, temperature: 0.8, topK: 0, topP: 0.9, minP: 0, repetitionPenalty: 1,
});
/** The options the WASM Sampler reads (bindings_common.h sampler_options). */
export const SAMPLER_KEYS = ['temperature', 'topP', 'topK', 'minP', 'repetitionPenalty', 'repetitionWindow', 'seed'];
/** The options of generate() and complete() (sample() takes them too, so one object serves both). */
export const GENERATE_KEYS = Object.freeze([...SAMPLER_KEYS, 'maxTokens', 'stop', 'stopTokens', 'signal',
  'presencePenalty', 'frequencyPenalty', 'logitBias', 'logprobs', 'grammar', 'jsonSchema']);

/** Lone UTF-16 surrogates become U+FFFD (Embind's UTF-8 conversion would garble the next character). */
export const wellFormed = typeof String.prototype.toWellFormed === 'function'
  ? (s) => s.toWellFormed()
  : (s) => s.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');

export function checkNumber(opts, key, lo, hi, integer = false) {
  const v = opts[key];
  if (v === undefined) return;
  check(typeof v === 'number' && !Number.isNaN(v), `${key} must be a number, got ${describe(v)}`);
  check(v >= lo && v <= hi, `${key} must be in [${lo}, ${hi}], got ${v}`);
  if (integer) check(Number.isInteger(v), `${key} must be an integer, got ${v}`);
}

/** Validates generation options and fills defaults. */
export function generationOptions(options = {}, known = GENERATE_KEYS, what = 'generate') {
  checkOptions(options, known, what);
  checkNumber(options, 'maxTokens', 0, 1 << 24, true);
  checkNumber(options, 'temperature', 0, 100);
  checkNumber(options, 'topK', 0, 1 << 24, true);
  checkNumber(options, 'topP', 0, 1);
  checkNumber(options, 'minP', 0, 1);
  checkNumber(options, 'repetitionPenalty', 1e-3, 100);
  checkNumber(options, 'seed', 0, Number.MAX_SAFE_INTEGER, true);
  let stop = options.stop ?? [];
  if (typeof stop === 'string') stop = [stop];
  check(Array.isArray(stop) && stop.every((s) => typeof s === 'string' && s.length > 0),
    'stop must be a non-empty string or an array of them');
  if (options.stopTokens !== undefined) {
    check(Array.isArray(options.stopTokens) && options.stopTokens.every(Number.isInteger),
      'stopTokens must be an array of token ids');
  }
  if (options.signal !== undefined && options.signal !== null) {
    check(typeof options.signal.aborted === 'boolean', 'signal must be an AbortSignal');
  }
  const seed = options.seed ?? ((Math.random() * 0xffffffff) >>> 0 || 1);
  return { ...DEFAULTS, ...options, stop, seed, ...constraintOptions(options), ...samplingExtras(options) };
}

/** Decodes UTF-8 bytes incrementally; invalid sequences become U+FFFD, never an exception. */
export class TextStream {
  constructor() { this.decoder = new TextDecoder('utf-8', { fatal: false }); }
  push(bytes) { return this.decoder.decode(bytes, { stream: true }); }
  end() { return this.decoder.decode(); }
}

/** Holds back text that could be the start of a stop string. */
export class StopMatcher {
  constructor(stops) { this.stops = stops; this.pending = ''; }
  /** Returns {emit, stopped}. */
  push(text) {
    this.pending += text;
    let cut = -1;
    for (const s of this.stops) {
      const i = this.pending.indexOf(s);
      if (i >= 0 && (cut < 0 || i < cut)) cut = i;
    }
    if (cut >= 0) {
      const emit = this.pending.slice(0, cut);
      this.pending = '';
      return { emit, stopped: true };
    }
    let keep = 0;  // longest suffix of pending that is a proper prefix of some stop string
    for (const s of this.stops) {
      for (let k = Math.min(s.length - 1, this.pending.length); k > keep; k--) {
        if (this.pending.endsWith(s.slice(0, k))) { keep = k; break; }
      }
    }
    const emit = this.pending.slice(0, this.pending.length - keep);
    this.pending = this.pending.slice(this.pending.length - keep);
    return { emit, stopped: false };
  }
  flush() { const t = this.pending; this.pending = ''; return t; }
}

/** A fresh lastGeneration record for a generation with options `opts`. */
export function generationStats(opts) {
  return { promptTokens: 0, reusedTokens: 0, generatedTokens: 0, prefillMs: 0, decodeMs: 0, finishReason: 'length', seed: opts.seed };
}

/**
 * The async token loop: prefills, then steps until maxTokens, a stop token, a stop string, the
 * context's end or an abort, yielding {token, text} (text: complete characters only, stop strings
 * held back; a last {token: -1, text} carries what was held) and filling `stats`. The model kind
 * supplies the engine calls in `engine`:
 *   prefill()      runs the prompt (may be async); returns how many prompt tokens a cache reused
 *   first          the id the first generated token follows (its piece depends on it)
 *   live()         throws once the model or session is disposed
 *   canStep()      optional: false when the context has no room for another step
 *   step()         {token, logprobs}: the next token (logprobs: the sampler's, when asked)
 *   piece(prev, id) the UTF-8 bytes of `id` after `prev`
 *   feed(id)       optional, may be async: feeds the token; false when the context is full (the
 *                  token is still handed out, then the generation ends with 'context')
 *   dropLeadingSpace  the first piece's leading space is dropped (SentencePiece targets)
 */
export async function* tokenLoop(opts, stats, stopTokens, engine) {
  const signal = opts.signal;
  const text = new TextStream();
  const stops = new StopMatcher(opts.stop);
  try {
    let t0 = now();
    stats.reusedTokens = (await engine.prefill()) ?? 0;
    stats.prefillMs = now() - t0;
    let prev = engine.first, first = true, lastYield = now();
    t0 = now();
    while (stats.generatedTokens < opts.maxTokens) {
      throwIfAborted(signal);
      engine.live();  // dispose() inside the loop ends it with 'disposed'
      if (engine.canStep && !engine.canStep()) { stats.finishReason = 'context'; break; }
      const { token: next, logprobs } = engine.step();
      if (stopTokens.has(next)) { stats.finishReason = 'stop'; break; }
      stats.generatedTokens++;
      let piece = text.push(engine.piece(prev, next));
      if (engine.dropLeadingSpace && first && piece.startsWith(' ')) piece = piece.slice(1);
      if (piece) first = false;
      const { emit, stopped } = stops.push(piece);
      if (stopped) {
        stats.finishReason = 'stop';
        if (emit) yield withLogprobs({ token: next, text: emit }, logprobs);
        break;
      }
      prev = next;
      // Feed the token now so the cache matches the text handed out; stop at the context's end.
      const room = engine.feed ? await engine.feed(next) : true;
      stats.decodeMs = now() - t0;
      yield withLogprobs({ token: next, text: emit }, logprobs);
      if (!room) { stats.finishReason = 'context'; break; }
      // Let the event loop run (abort signals, UI) about every 10 ms of engine time.
      if (now() - lastYield > 10) { await yieldToLoop(); lastYield = now(); }
    }
    stats.decodeMs = now() - t0;
    const tail = stops.push(text.end()).emit + stops.flush();
    if (tail) yield { token: -1, text: tail };
  } finally {
    if (signal?.aborted) stats.finishReason = 'aborted';
  }
}
