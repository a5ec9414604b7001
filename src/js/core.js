// The qkv JS API over the Embind module, independent of where it runs (Node, browser, worker).
// Entry points (node.js, browser.js) supply the module loader and path reading.
import { QkvError, bareMessage, check, checkOptions, describe, throwIfAborted, toQkvError } from './errors.js';
import { LOAD_KEYS, call, checkGpuLayers, checkSimdOption, sparseMaskOf, yieldToLoop } from './util.js';
import { isPartSource, readModelSource, readSource } from './source.js';
import { cacheOption } from './model-cache.js';
import { DEVICES, GPU_PRECISIONS, WEIGHTS, chooseDevice, createGpuSession, embedGpu, feedGpu, layerSplit, loadWeightsOnGpu } from './gpu-backend.js';
import { EncoderDecoderModel } from './encdec.js';
import { ImageEncoderModel } from './vision.js';
import { contentWithImages, imagePrompt } from './chat-images.js';
import { constrainSampler } from './sampling.js';
import { GENERATE_KEYS, SAMPLER_KEYS, checkNumber, generationOptions, generationStats, tokenLoop, wellFormed } from './generation.js';

export { QkvError } from './errors.js';
export { GENERATE_KEYS, StopMatcher, TextStream, generationOptions } from './generation.js';

const POOLINGS = Object.freeze(['mean', 'cls', 'last']);

const TEMPLATE_KEYS = ['tools', 'templateVars'];
const CHAT_KEYS = [...GENERATE_KEYS, ...TEMPLATE_KEYS];

function checkIds(ids, fn) {
  check((Array.isArray(ids) || ArrayBuffer.isView(ids)) && Array.prototype.every.call(ids, Number.isInteger),
    `${fn} takes an array of integer token ids`);
}

function mib(n) { return `${(n / 1024 ** 2).toFixed(1)} MiB`; }

/** Bytes a session of `context` tokens can grow to: its f32 KV cache and one row of logits. */
function sessionBytes(info, context) {
  return { kv: context * info.layers * info.kvHeads * info.headDim * 2 * 4, logits: info.vocabSize * 4 };
}

/**
 * Refuses (out_of_memory, with the sizes) a session that would take the model past maxMemory
 * once its KV cache fills its context: checked before the cache, which grows as tokens come, exists.
 */
function checkSessionMemory(model, context, what) {
  const max = model._maxMemory;
  if (max === undefined) return;
  const info = model._info;
  const ctx = context || info.contextLength;
  let others = 0;
  for (const s of model._sessions) {
    if (s._h) { const b = sessionBytes(info, s._h.context()); others += b.kv + b.logits; }
  }
  const { kv, logits } = sessionBytes(info, ctx);
  const total = info.weightBytes + others + kv + logits;
  if (total <= max) return;
  throw new QkvError('out_of_memory', `${what} needs ${mib(total)}, over maxMemory (${mib(max)}): weights ${mib(info.weightBytes)}` +
    `${others ? ` + other sessions ${mib(others)}` : ''} + KV cache ${mib(kv)} for a context of ${ctx} tokens + ` +
    `logits ${mib(logits)} for a vocabulary of ${info.vocabSize}; ` +
    (what === 'this model' ? 'raise maxMemory' : 'ask for a shorter context (createSession({contextLength})), dispose other ' +
      'sessions or raise maxMemory'));
}

/** Internal option: parse control tokens spelled in the prompt (chat markers). */
const SPECIAL = Symbol('special');
const IMAGES = Symbol('images');  // chat(): the image parts of the messages, in prompt order

/** Ids that end a generation by default: BOS and EOS (run.c's rule) and the model's end-of-turn ids. */
function defaultStopTokens(info) {
  return [info.bosId, info.eosId, ...(info.eogIds ?? [])].filter((id) => id >= 0);
}

/** JSON text of a value handed to a chat template (tools, variables, message fields). */
function templateJson(value, what) {
  let text;
  try {
    text = JSON.stringify(value);
  } catch (e) {
    throw new QkvError('bad_argument', `${what} must be JSON-serializable (${e.message})`);
  }
  check(typeof text === 'string', `${what} must be JSON-serializable`);
  return text;
}

/**
 * Validates chat messages and options and renders them with the model's chat template:
 * messages [{role, content, ...fields}], options.tools (the template's `tools`),
 * options.templateVars (further variables, e.g. {enable_thinking: false}).
 */
function chatPrompt(model, messages, options = {}, addGenerationPrompt = true, images = []) {
  check(Array.isArray(messages) && messages.length > 0, 'chat takes a non-empty array of messages');
  const rendered = messages.map((m, i) => {
    check(m !== null && typeof m === 'object' && !Array.isArray(m), `chat message ${i} must be an object {role, content}`);
    check(['system', 'user', 'assistant', 'tool'].includes(m.role),
      `chat message ${i}: role must be 'system', 'user', 'assistant' or 'tool', got ${JSON.stringify(m.role)}`);
    // null content: an assistant turn that only calls tools, as OpenAI-style messages write it.
    check(typeof m.content === 'string' || Array.isArray(m.content) || (m.content === null && m.role === 'assistant'),
      `chat message ${i}: content must be a string or an array of content parts, got ${m.content === null ? 'null' : typeof m.content}`);
    const { role, content, ...rest } = m;
    const out = { role, content: wellFormed(content === null ? '' : contentWithImages(content, `chat message ${i}`, images)) };
    if (Object.keys(rest).length > 0) out.fields = templateJson(rest, `chat message ${i}'s fields`);
    return out;
  });
  let vars = {};
  if (options.templateVars !== undefined) {
    const v = options.templateVars;
    const proto = v !== null && typeof v === 'object' ? Object.getPrototypeOf(v) : undefined;
    check(proto === Object.prototype || proto === null, 'templateVars must be a plain object of template variables');
    vars = { ...v };
  }
  if (options.tools !== undefined) {
    check(Array.isArray(options.tools), 'tools must be an array of tool definitions');
    check(!('tools' in vars), 'tools given twice (options.tools and templateVars.tools)');
    vars.tools = options.tools;
  }
  const varsJson = Object.keys(vars).length > 0 ? templateJson(vars, 'templateVars') : '';
  const info = model.info;
  if ((info.chatFormatGuessed || info.chatTemplate === 'builtin') && !model._warnedChat) {
    model._warnedChat = true;
    const why = info.chatFallbackReason ? ` (${info.chatFallbackReason})` : '';
    console.warn(info.chatFormatGuessed
      ? `qkv: this model has no chat template qkv can run or recognize${why}; using ChatML`
      : `qkv: this model's chat template cannot run here${why}; rendering its ${info.chatFormat} format by hand`);
  }
  if (images.length > 0 && !model.info.mmproj) {
    throw new QkvError('bad_argument', 'this model was loaded without an mmproj, so its messages cannot hold images: ' +
      'load it with loadModel(text, {mmproj}) (the vision-language model\'s mmproj GGUF)');
  }
  return call(() => model._h.renderChat(rendered, addGenerationPrompt, varsJson));
}

/**
 * A conversation: its own KV cache. generate() on a session reuses the cached prefix, so a
 * prompt that extends the previous text (prompt + generated text + more) prefills only the new tokens.
 */
export class Session {
  /** @internal */
  constructor(model, handle) {
    this._model = model;
    this._h = handle;
    this._capture = false;
    this._gpu = null;  // the session on the GPU when the model runs on WebGPU (src/js/gpu-model.js)
    this._busy = false;  // a WebGPU feed is in flight
    this._gpuFed = false;  // the last forward ran on the GPU: attention() reads _maps, not WASM's
    this._maps = null;  // its captured attention ({queries, keys, probs (layers, heads, queries, keys)})
    this._generating = false;  // a generate()/chat() stream owns the cache (one at a time)
    this._sampler = null;  // sample()'s sampler: {key, position, sampler}, kept while a loop goes on
    /** Figures of the last generate() call. */
    this.lastGeneration = null;
    const gpu = model._gpu;
    if (gpu) {
      try {
        this._gpu = createGpuSession(gpu, handle);
      } catch (e) {
        model._gpuFailed(e);
      }
    }
  }

  /** Where this session's forward runs: 'webgpu' or 'wasm'. */
  get backend() { this._live(); return this._gpu ? 'webgpu' : 'wasm'; }

  /**
   * Moves this session back to WASM after a GPU failure. The token list lives in WASM, and the
   * engine computes the tokens its CPU cache lacks before its next feed, so generation continues
   * where it was.
   * @internal
   */
  _toWasm() {
    this._gpu?.dispose();
    this._gpu = null;
  }

  /**
   * A feed through the GPU, falling back to WASM (with a warning) if the GPU fails. Tokens fed
   * on the CPU meanwhile (captured feeds) enter the GPU cache first. `sampling`: the generation
   * options whose sampler will read these logits (the GPU may then read back its top candidates only).
   */
  async _feedGpu(ids, allLogits, sampling = null) {
    const h = this._live();
    if (this._busy) throw new QkvError('busy', 'another feed is running on this session: await it first');
    const g = this._gpu, capture = this._capture;
    // Maps over the GPU's buffer limits are recorded by the WASM engine (the GPU cache catches up after).
    if (capture && !g.captureFits(h.position(), ids.length)) return this._feedWasm(() => h.feed(ids, !!allLogits));
    this._busy = true;
    try {
      const position = h.position();
      if (g.position < position) await g.feed(Array.from(h.tokens()).slice(g.position), false);
      await feedGpu(this._model._gpu, this._live(), g, ids, allLogits, capture, sampling);
      this._gpuFed = true;
      this._maps = capture ? g.captured : null;
    } catch (e) {
      const err = toQkvError(e);
      if (!this._h || !this._gpu || err.code === 'bad_argument' || err.code === 'disposed') throw err;
      this._model._gpuFailed(e);  // warns once and moves every session of the model to WASM
      if (this._gpu) this._toWasm();
      if (this._model._lost) throw this._model._lost;  // its weights were on the GPU only
      this._feedWasm(() => this._h.feed(Array.from(ids), !!allLogits));
    } finally {
      this._busy = false;
    }
  }

  /** A forward in WASM (which records the attention maps when capturing). */
  _feedWasm(fn) {
    this._gpuFed = false;
    this._maps = null;
    return call(fn);
  }

  /** Refuses a call that would change the cache under a running feed or generation. */
  _checkIdle() {
    if (this._generating) {
      throw new QkvError('busy', 'a generation is running on this session (generate/chat/complete); ' +
        'its tokens would interleave with this call\'s');
    }
    if (this._busy) throw new QkvError('busy', 'a feed is running on this session (WebGPU): await it first');
  }

  _live() {
    if (!this._h) throw new QkvError('disposed', 'this session was disposed');
    this._model._live();
    if (this._model._lost) throw this._model._lost;
    return this._h;
  }

  /** Tokens held in the KV cache. */
  get tokens() { return Array.from(this._live().tokens()); }
  /** Number of tokens in the KV cache (the position of the next token). */
  get position() { return this._live().position(); }
  /** KV-cache length in tokens. */
  get contextLength() { return this._live().context(); }

  /**
   * Appends token ids to the cache and computes them (one batched pass). With {allLogits: true}
   * the logits of every fed token stay readable through logits(i).
   */
  feed(tokens, options) {
    const h = this._live();
    const { allLogits = false } = checkOptions(options, ['allLogits'], 'feed');
    checkIds(tokens, 'feed');
    check(tokens.length > 0, 'feed needs at least one token');
    this._checkIdle();
    if (this._gpu) return this._feedGpu(Array.from(tokens), !!allLogits);
    this._feedWasm(() => h.feed(Array.from(tokens), !!allLogits));
    return undefined;
  }

  /** Makes the cache hold exactly `tokens`, reusing the longest cached prefix. Returns tokens computed. */
  prefill(tokens) {
    this._live();
    checkIds(tokens, 'prefill');
    check(tokens.length > 0, 'prefill needs at least one token');
    this._checkIdle();
    return this._prefill(tokens);
  }

  _prefill(tokens, sampling = null) {
    const h = this._live();
    if (!this._gpu) return this._feedWasm(() => h.prefill(Array.from(tokens)));
    const ids = Array.from(tokens), cached = h.tokens();
    let common = 0;
    while (common < ids.length && common < cached.length && ids[common] === cached[common]) common++;
    if (common === ids.length) common--;  // recompute the last token for its logits
    call(() => h.truncate(common));
    this._gpu.truncate(common);
    return this._feedGpu(ids.slice(common), false, sampling).then(() => ids.length - common);
  }

  /** Logits of the last token fed, or of the i-th token of an allLogits feed: Float32Array(vocabSize). */
  logits(i = -1) {
    const h = this._live();
    check(Number.isInteger(i) && i >= -1, 'logits(i) takes a token index of the last feed');
    return call(() => h.logits(i));
  }

  /**
   * Chooses the next token from the current logits with the given sampling options (does not
   * feed it). A loop of sample() and feed([token]) with the same options draws from one random
   * stream, as generate() does, so a seed gives generate()'s tokens. The stream starts again
   * (from `seed`, or a new random seed) when the options change or the cache is anything but one
   * token longer than at the last sample(): a new prompt, truncate(), reset(), or sample() again
   * without a feed, which therefore gives the same token.
   */
  sample(options = {}) {
    const h = this._live();
    const o = generationOptions(options, GENERATE_KEYS, 'sample');
    this._checkIdle();
    const key = JSON.stringify(SAMPLER_KEYS.map((k) => (k === 'seed' ? options.seed ?? null : o[k] ?? null)));
    const position = h.position();
    let c = this._sampler;
    if (!c || c.key !== key || position !== c.position + 1) {
      this._dropSampler();
      c = this._sampler = { key, position, sampler: call(() => new this._model._mod.Sampler(this._model.info.vocabSize, o)) };
    }
    c.position = position;
    return call(() => h.sample(c.sampler));
  }

  _dropSampler() {
    this._sampler?.sampler.delete();
    this._sampler = null;
  }

  /** Forgets cached tokens from position n on. */
  truncate(n) {
    const h = this._live();
    check(Number.isInteger(n), 'truncate takes an integer');
    this._checkIdle();
    call(() => h.truncate(n));
    this._gpu?.truncate(n);
  }
  /** Empties the cache. */
  reset() { this.truncate(0); }

  /** Records attention probabilities on the next feeds (costs memory and time: off by default). */
  set captureAttention(on) { this._live().setCaptureAttention(!!on); this._capture = !!on; }
  get captureAttention() { return this._capture; }

  /**
   * Attention probabilities of the last feed for one layer and head: {queries, keys, probs}, where
   * probs is a Float32Array(queries * keys), row i = query at position (keys - queries + i).
   */
  attention(layer, head) {
    const h = this._live();
    check(Number.isInteger(layer) && Number.isInteger(head), 'attention(layer, head) takes integers');
    if (!this._gpuFed) return call(() => h.attention(layer, head));
    // The GPU's maps, with the WASM engine's checks and messages.
    const m = this._maps, { layers, heads } = this._model._info;
    if (!m) throw new QkvError('bad_argument', 'no attention recorded: turn capture on, then feed tokens');
    if (layer < 0 || layer >= layers) throw new QkvError('bad_argument', `layer ${layer} out of range (0..${layers - 1})`);
    if (head < 0 || head >= heads) throw new QkvError('bad_argument', `head ${head} out of range (0..${heads - 1})`);
    const per = m.queries * m.keys, at = (layer * heads + head) * per;
    return { queries: m.queries, keys: m.keys, probs: m.probs.slice(at, at + per) };
  }

  /**
   * Streams generated text: an async iterator of {token, text}. `text` is the newly decoded text
   * (complete UTF-8 characters only; may be '' while a character is incomplete or a stop string
   * is being matched). Break out of the loop or abort options.signal to stop.
   */
  generate(prompt, options = {}) {
    this._live();
    check(typeof prompt === 'string', `prompt must be a string, got ${typeof prompt}`);
    const opts = generationOptions(options);
    return this._generate(prompt, opts);
  }

  async *_generate(prompt, opts) {
    const model = this._model;
    const h = this._live();
    // One stream per session: a second one would feed its tokens into the same cache.
    if (this._generating) {
      throw new QkvError('busy', 'a generation is already running on this session: two at once would interleave their ' +
        'tokens');
    }
    this._checkIdle();
    this._generating = true;
    try {
      yield* this._stream(prompt, opts);
    } finally {
      this._generating = false;
    }
  }

  async *_stream(prompt, opts) {
    const model = this._model;
    const h = this._live();
    const info = model.info;
    const stopTokens = new Set(opts.stopTokens ?? defaultStopTokens(info));
    const signal = opts.signal;
    throwIfAborted(signal);
    const stats = generationStats(opts);
    this.lastGeneration = stats;
    let ids, rows = null;
    if (opts[IMAGES]?.length) {
      ({ ids, rows } = await imagePrompt(model, wellFormed(prompt), opts[IMAGES], !!opts[SPECIAL]));
      throwIfAborted(signal);
      // Image rows enter the WASM forward only: a WebGPU session moves there (its tokens come along).
      if (this._gpu) this._toWasm();
    } else {
      ids = call(() => model._h.tokenizeSpecial(wellFormed(prompt), true, !!opts[SPECIAL]));
    }
    stats.promptTokens = ids.length;
    check(ids.length > 0, 'the prompt is empty and this model adds no BOS token: give a prompt');
    check(ids.length <= h.context(), `the prompt is ${ids.length} tokens, longer than the context of ${h.context()}`);
    const sampler = call(() => new model._mod.Sampler(info.vocabSize, opts));
    try { constrainSampler(model, sampler, opts); } catch (e) { sampler.delete(); throw e; }
    try {
      yield* tokenLoop(opts, stats, stopTokens, {
        prefill: async () => ids.length - await (rows ? this._feedWasm(() => h.prefillRows(ids, rows)) : this._prefill(ids, opts)),
        first: ids[ids.length - 1],
        live: () => this._live(),
        step: () => {
          const token = call(() => h.sample(sampler));
          return { token, logprobs: opts.logprobs !== undefined ? sampler.lastLogprobs() : undefined };
        },
        piece: (prev, next) => call(() => model._h.piece(prev, next)),
        feed: async (next) => {
          if (h.position() >= h.context()) return false;
          if (this._gpu) await this._feedGpu([next], false, opts);
          else this._feedWasm(() => h.feedOne(next));
          return true;
        },
      });
    } finally {
      sampler.delete();
      await this._wholeLogits();
    }
  }

  /** After a generation that read back only top candidates: the last token's whole logits row, for logits(). */
  async _wholeLogits() {
    const g = this._gpu, h = this._h;
    if (!g?.partial || !h) return;
    try {
      const row = await g.lastLogits();
      const last = h.tokens().at(-1);
      h.truncate(h.position() - 1);
      h.feedLogits([last], row, 1);
    } catch { /* a failed GPU: the next feed moves the session to WASM */ }
  }

  /**
   * Streams the assistant's reply to a conversation: `messages` ({role: 'system'|'user'|'assistant',
   * content}) rendered in the model's chat format (model.info.chatFormat), control tokens of the
   * format parsed as such, generation stopping at the model's end-of-turn tokens. Same items and
   * options as generate(); a follow-up turn that extends the conversation reuses the KV cache.
   */
  chat(messages, options = {}) {
    this._live();
    const opts = generationOptions(options, CHAT_KEYS, 'chat');
    const images = [];
    const prompt = chatPrompt(this._model, messages, options, true, images);
    return this._generate(prompt, { ...opts, [SPECIAL]: true, [IMAGES]: images });
  }

  /** Generates and returns the whole text. */
  async complete(prompt, options = {}) {
    let out = '';
    for await (const t of this.generate(prompt, options)) out += t.text;
    return out;
  }

  /** Frees the session's KV cache (in WASM and on the GPU). Safe to call twice. */
  dispose() {
    this._gpu?.dispose();
    this._gpu = null;
    this._dropSampler();
    if (this._h) { this._h.delete(); this._h = null; this._model._sessions.delete(this); }
  }
}

/** A loaded model: weights and tokenizer in the WASM heap, shared by its sessions. */
export class Model {
  /** @internal */
  constructor(mod, handle, runtime, device = { kind: 'wasm', requested: 'wasm', reason: 'requested' }, onWarning, maxMemory) {
    this._mod = mod;
    this._maxMemory = maxMemory;
    this._h = handle;
    this._runtime = runtime;
    this._sessions = new Set();
    this._info = call(() => handle.info());
    // The mmproj loaded with the model (images in chat), or null.
    this._info.mmproj = handle.hasMmproj?.() ? call(() => handle.mmprojInfo()) : null;
    this._info.eogIds = Array.from(this._info.eogIds ?? []);  // a plain array (JSON, postMessage)
    this._default = null;
    /** Texts and tokens of the last embed() call. */
    this.lastEmbedding = null;
    const { gpu, warning, memory, ...deviceInfo } = device;
    this._device = { ...layerSplit(0, this._info.layers), ...deviceInfo };
    // A GPU-resident load (weights: 'gpu'): the matrices are in GPU memory only.
    this._gpuOnly = deviceInfo.weights === 'gpu';
    this._loadMemory = memory ?? null;  // {heapWeightBytes, stagingBytes} of such a load
    this._lost = null;  // the QkvError('webgpu_failed') every call gets once its GPU is lost
    this._reload = null;  // loads the model again from its source (reload())
    this._gpu = gpu ?? null;
    this._onWarning = onWarning;
    /** Warnings so far ({code, message}): WebGPU unavailable or lost, with the fallback taken. */
    this.warnings = [];
    if (warning) this._warn(warning);
    gpu?.device.lost?.then((lost) => {
      if (this._gpu === gpu && lost?.reason !== 'destroyed') {
        this._gpuFailed(new QkvError('unsupported', `the WebGPU device was lost (${lost?.message || lost?.reason || 'unknown'})`));
      }
    });
  }

  _warn(w) {
    this.warnings.push(w);
    if (this._onWarning) {
      try { this._onWarning(w); } catch { /* a throwing handler must not break generation */ }
    } else if (typeof console !== 'undefined') {
      console.warn(`qkv: ${w.message}`);
    }
  }

  /**
   * A WebGPU failure: warn once, then run every session in WASM; a GPU-resident model, whose
   * weights were on the GPU only, cannot: every later call throws 'webgpu_failed'. @internal
   */
  _gpuFailed(e) {
    const gpu = this._gpu;
    if (!gpu) return;
    this._gpu = null;
    const message = e?.message ?? String(e);
    if (this._gpuOnly) {
      this._lost = new QkvError('webgpu_failed', `WebGPU failed (${message}) and this model's weights were in GPU memory ` +
        "only (weights: 'gpu'), so it cannot go on in WASM", { cause: e });
      this._device = { ...this._device, kind: 'wasm', reason: `WebGPU failed; the weights were on the GPU only: ${message}`, ...layerSplit(0, this._info.layers) };
      this._warn({ code: 'webgpu_failed', message: this._lost.message });
      for (const s of this._sessions) if (s._gpu && !s._busy) s._toWasm();
      try { gpu.model.dispose(); gpu.device.destroy?.(); } catch { /* already gone */ }
      return;
    }
    this._device = { ...this._device, kind: 'wasm', reason: `WebGPU failed, moved to WASM: ${message}`, ...layerSplit(0, this._info.layers) };
    this._warn({ code: 'webgpu_failed', message: `WebGPU failed, the model now runs in WASM: ${message}` });
    for (const s of this._sessions) if (s._gpu && !s._busy) s._toWasm();
    try { gpu.model.dispose(); gpu.device.destroy?.(); } catch { /* already gone */ }
  }

  _live() {
    if (!this._h) throw new QkvError('disposed', 'this model was disposed');
    return this._h;
  }

  /** Architecture, sizes, threads, memory. */
  get info() {
    this._live();
    const i = this._info;
    let kv = 0, gpuKv = 0;
    for (const s of this._sessions) {
      kv += s._h ? s._h.kvCacheBytes() : 0;
      gpuKv += s._gpu ? s._gpu.bytes : 0;
    }
    return {
      ...i,
      backend: this._device.kind,
      device: { ...this._device },
      threading: { ...this._runtime.threading, threads: i.threads },
      simdReason: this._runtime.simd.reason,
      memory: this._memory(kv, gpuKv),
    };
  }

  /** info.memory: the heap, the GPU's buffers and the load's staging, apart. */
  _memory(kv, gpuKv) {
    const weightBytes = this._info.weightBytes, gpuWeightBytes = this._gpu?.model.weightBytes ?? 0;
    return {
      weightBytes, kvCacheBytes: kv, gpuKvCacheBytes: gpuKv,
      heapBytes: this._mod.HEAPU8 ? this._mod.HEAPU8.byteLength : 0,
      heapWeightBytes: this._loadMemory ? this._loadMemory.heapWeightBytes : weightBytes,
      gpuWeightBytes, gpuBufferBytes: gpuWeightBytes + gpuKv,
      stagingBytes: this._loadMemory ? this._loadMemory.stagingBytes : 0,
    };
  }

  /**
   * Loads this model again from the same source with the same options (after a lost GPU: code
   * 'webgpu_failed'), disposes this one and returns the new one.
   */
  async reload() {
    if (!this._reload) {
      throw new QkvError('unsupported', 'this model was loaded from a one-time stream of chunks: call loadModel() with its source again');
    }
    const fresh = await this._reload();
    this.dispose();
    return fresh;
  }

  /**
   * Text to token ids: BOS first where the model adds one, unless {bos: false}; with
   * {special: true} control tokens written in the text (e.g. '<|im_start|>') become their ids.
   */
  tokenize(text, options) {
    const h = this._live();
    const { bos = true, special = false } = checkOptions(options, ['bos', 'special'], 'tokenize');
    check(typeof text === 'string', `tokenize takes a string, got ${typeof text}`);
    return Array.from(call(() => h.tokenizeSpecial(wellFormed(text), !!bos, !!special)));
  }

  /** The block-sparse pattern as a mask over (queries, keys): 1 visible (types/index.d.ts). */
  sparseMask(options) {
    const h = this._live();
    return sparseMaskOf(this._info, options, ['queryStart', 'queries', 'keys'], (q0, nq, nk) => h.sparseMask(q0, nq, nk));
  }

  /** Token ids to text (BOS/EOS skipped; invalid UTF-8 becomes U+FFFD). */
  detokenize(ids) {
    const h = this._live();
    checkIds(ids, 'detokenize');
    return new TextDecoder('utf-8', { fatal: false }).decode(call(() => h.detokenize(Array.from(ids))));
  }

  /**
   * Sentence embeddings: one Float32Array (length info.dim) per text, in order. Encoders
   * (BERT, Nomic BERT) read each text in both directions; texts are batched together into
   * passes of up to `batchSize` texts. {pooling: 'mean' | 'cls' | 'last'} (default: the
   * model's, info.pooling), {normalize: true} (unit L2 length), {truncate: false} (true: a text
   * longer than the context keeps its first tokens and its closing one), {signal} (checked
   * between batches).
   */
  async embed(texts, options = {}) {
    const h = this._live();
    if (typeof texts === 'string') texts = [texts];
    check(Array.isArray(texts), `embed takes an array of strings, got ${texts === null ? 'null' : typeof texts}`);
    check(texts.length > 0, 'embed needs at least one text');
    texts.forEach((t, i) => check(typeof t === 'string', `embed: text ${i} is not a string (${t === null ? 'null' : typeof t})`));
    checkOptions(options, ['pooling', 'normalize', 'truncate', 'signal', 'batchSize'], 'embed');
    const { pooling, normalize = true, truncate = false, signal, batchSize = 32 } = options;
    check(pooling === undefined || POOLINGS.includes(pooling), `pooling must be one of ${POOLINGS.join(', ')}, got ${describe(pooling)}`);
    check(typeof normalize === 'boolean', `normalize must be a boolean, got ${describe(normalize)}`);
    check(typeof truncate === 'boolean', `truncate must be a boolean, got ${describe(truncate)}`);
    checkNumber(options, 'batchSize', 1, 4096, true);
    const opts = { normalize, truncate, ...(pooling ? { pooling } : {}) };
    const out = [];
    let tokens = 0;
    for (let i = 0; i < texts.length; i += batchSize) {
      throwIfAborted(signal);
      const batch = texts.slice(i, i + batchSize).map(wellFormed);
      const r = await this._embedBatch(h, batch, opts);
      for (let k = 0; k < batch.length; k++) out.push(r.data.slice(k * r.dim, (k + 1) * r.dim));
      for (const n of r.tokens) tokens += n;
      if (i + batchSize < texts.length) await yieldToLoop();
    }
    this.lastEmbedding = { texts: texts.length, tokens };
    return out;
  }

  /**
   * Reranking with a reranker model (info.reranker: a BERT-family GGUF with rank pooling and a
   * classification head): each document is read together with the query, as llama.cpp pairs them,
   * and scored by the head. Returns {index, score, tokens} per document, highest score first,
   * the first `topN` (default all); tokens: the pair's length. {signal} is checked between passes
   * of `batchSize` documents.
   */
  async rerank(query, documents, options = {}) {
    const h = this._live();
    check(typeof query === 'string', `rerank: the query must be a string, got ${describe(query)}`);
    check(Array.isArray(documents), `rerank takes an array of document strings, got ${documents === null ? 'null' : typeof documents}`);
    check(documents.length > 0, 'rerank needs at least one document');
    documents.forEach((t, i) => check(typeof t === 'string', `rerank: document ${i} is not a string (${t === null ? 'null' : typeof t})`));
    checkOptions(options, ['topN', 'signal', 'batchSize'], 'rerank');
    const { topN = documents.length, signal, batchSize = 32 } = options;
    checkNumber(options, 'topN', 1, Number.MAX_SAFE_INTEGER, true);
    checkNumber(options, 'batchSize', 1, 4096, true);
    if (!this._info.reranker) {
      throw new QkvError('unsupported', `rerank: this model is not a reranker (${this._info.encoder ? 'an encoder without rank pooling and a classification head' : 'a decoder'})`);
    }
    const q = wellFormed(query);
    const results = [];
    for (let i = 0; i < documents.length; i += batchSize) {
      throwIfAborted(signal);
      const r = call(() => h.rerank(q, documents.slice(i, i + batchSize).map(wellFormed)));
      r.scores.forEach((score, k) => results.push({ index: i + k, score, tokens: r.tokens[k] }));
      if (i + batchSize < documents.length) await yieldToLoop();
    }
    // Highest first; equal scores keep their documents' order.
    results.sort((a, b) => b.score - a.score || a.index - b.index);
    return results.slice(0, topN);
  }

  /** One batch of embed(): on the GPU (an encoder loaded with WebGPU), else in WASM; a GPU failure warns and moves to WASM. */
  async _embedBatch(h, batch, opts) {
    const gpu = this._gpu;
    if (gpu && !gpu.model.decoder) {
      try {
        return await embedGpu(gpu, h, batch, opts);
      } catch (e) {
        const err = toQkvError(e);
        if (err.code === 'bad_argument' || !this._h) throw err;
        this._gpuFailed(e);
      }
    }
    if (this._lost) throw this._lost;
    return call(() => h.embed(batch, opts));
  }

  /** A new conversation with its own KV cache ({contextLength} defaults to the model's). */
  createSession(options) {
    const h = this._live();
    const { contextLength = 0 } = checkOptions(options, ['contextLength'], 'createSession');
    check(Number.isInteger(contextLength) && contextLength >= 0,
      `contextLength must be a non-negative integer, got ${describe(contextLength)}`);
    checkSessionMemory(this, Math.min(contextLength || this._info.contextLength, this._info.contextLength), 'this session');
    const s = new Session(this, call(() => h.createSession(contextLength)));
    this._sessions.add(s);
    return s;
  }

  /** The model's default session (reuses its KV cache between calls). */
  get session() {
    if (!this._default || !this._default._h) this._default = this.createSession();
    return this._default;
  }

  /** Streams text from the default session; see Session.generate. */
  generate(prompt, options) { this._live(); return this.session.generate(prompt, options); }
  /** Generates and returns the whole text from the default session. */
  async complete(prompt, options) { this._live(); return this.session.complete(prompt, options); }
  /** Streams a chat reply from the default session; see Session.chat. */
  chat(messages, options) { this._live(); return this.session.chat(messages, options); }
  /**
   * The prompt text chat() would feed for `messages`: the model's chat template rendered with
   * options.tools / options.templateVars, ending with the assistant's turn opener unless
   * options.addGenerationPrompt is false. Control tokens are spelled out as text.
   */
  applyChatTemplate(messages, options = {}) {
    this._live();
    checkOptions(options, [...TEMPLATE_KEYS, 'addGenerationPrompt'], 'applyChatTemplate');
    const { addGenerationPrompt = true } = options;
    check(typeof addGenerationPrompt === 'boolean', 'addGenerationPrompt must be a boolean');
    return chatPrompt(this, messages, options, addGenerationPrompt);
  }

  /** Frees the model, its sessions and its heap memory. Safe to call twice. */
  dispose() {
    if (!this._h) return;
    for (const s of [...this._sessions]) s.dispose();
    const gpu = this._gpu;
    this._gpu = null;
    if (gpu) { gpu.model.dispose(); gpu.device.destroy?.(); }
    this._h.delete();
    this._h = null;
  }
}

/**
 * Loads a model. `load` gives the module and runtime facts; `openPath` reads paths (Node only).
 * @internal
 */
export async function loadModelWith(env, source, options = {}) {
  checkOptions(options, LOAD_KEYS, 'loadModel');
  const { tokenizer, onProgress, signal, onWarning } = options;
  check(onProgress === undefined || typeof onProgress === 'function', 'onProgress must be a function');
  check(onWarning === undefined || typeof onWarning === 'function', 'onWarning must be a function');
  check(options.device === undefined || DEVICES.includes(options.device),
    `device must be one of ${DEVICES.map((d) => `'${d}'`).join(', ')}, got ${describe(options.device)}`);
  check(options.weights === undefined || WEIGHTS.includes(options.weights),
    `weights must be one of ${WEIGHTS.map((d) => `'${d}'`).join(', ')}, got ${describe(options.weights)}`);
  check(options.weights !== 'gpu' || options.device !== 'wasm', "weights: 'gpu' runs on WebGPU: it cannot go with device: 'wasm'");
  check(options.gpuPrecision === undefined || GPU_PRECISIONS.includes(options.gpuPrecision),
    `gpuPrecision must be one of ${GPU_PRECISIONS.map((d) => `'${d}'`).join(', ')}, got ${describe(options.gpuPrecision)}`);
  checkGpuLayers(options);
  check(signal === undefined || signal === null || typeof signal.aborted === 'boolean', 'signal must be an AbortSignal');
  if (options.threads !== undefined && options.threads !== 'auto') {
    check(Number.isInteger(options.threads) && options.threads >= 1 && options.threads <= 256,
      `threads must be 'auto' or an integer in [1, 256], got ${describe(options.threads)}`);
  }
  checkSimdOption(options.simd);
  checkNumber(options, 'maxMemory', 1, Number.MAX_SAFE_INTEGER, true);
  const cacheOpt = cacheOption(options.cache, 'options.cache');
  throwIfAborted(signal);
  const { mod, runtime } = await env.load(options);
  const cache = cacheOpt && await env.openCache(cacheOpt);  // http(s) downloads kept (model-cache.js)
  throwIfAborted(signal);
  // Progress over both files: the tokenizer is small, the model dominates.
  // Sources that can be read again (reload(), and 'auto' moving a model too big for the heap to the GPU).
  const again = isPartSource(source) || (Array.isArray(source) && source.every(isPartSource)) ||
    source instanceof ArrayBuffer || ArrayBuffer.isView(source);
  const finish = (m) => {
    if (again) m._reload = () => loadModelWith(env, source, options);
    return m;
  };
  const onGpu = async (why) => {
    const device = await loadWeightsOnGpu(mod, source, options, { threads: runtime.threads, openPath: env.openPath, listDir: env.listDir, cache }, why);
    if (signal?.aborted) { device.gpu.model.dispose(); device.gpu.device.destroy?.(); device.handle.delete(); }
    throwIfAborted(signal);
    const { handle: h, ...rest } = device;
    return finish(new Model(mod, h, runtime, rest, onWarning, options.maxMemory));
  };
  check(options.mmproj === undefined || options.weights !== 'gpu',
    "mmproj: images in chat run in WASM; they cannot go with weights: 'gpu'");
  if (options.weights === 'gpu') return onGpu(null);
  let modelBuf = null, tokBuf = null, handle = null;
  try {
    try {
      modelBuf = await readModelSource(mod, source, { what: 'the model', onProgress, signal, openPath: env.openPath, listDir: env.listDir, cache });
    } catch (e) {
      // 'auto' for a model the heap cannot hold: its weights straight to the GPU, if there is one.
      const err = toQkvError(e);
      if (err.code !== 'out_of_memory' || options.weights !== undefined || options.device === 'wasm' || !again ||
        options.mmproj !== undefined) throw err;  // image rows need the WASM forward
      return await onGpu(bareMessage(err));
    }
    const kind = call(() => mod.modelKind(modelBuf));  // one parse of the header
    check(options.mmproj === undefined || kind === 'decoder',
      `mmproj goes with a text (decoder) model; this file is ${kind === 'image' ? 'itself an image encoder' : `an ${kind} model`}`);
    if (kind === 'image') {  // mmproj / clip: an image encoder, its own class (src/js/vision.js)
      handle = call(() => new mod.ImageModel(modelBuf, runtime.threads));
      modelBuf.delete(); modelBuf = null;
      throwIfAborted(signal);
      return new ImageEncoderModel(mod, handle, runtime, options.device ?? 'auto');
    }
    if (kind === 'encdec') {  // t5: encoder-decoder, its own class (src/js/encdec.js)
      handle = call(() => new mod.EncDecModel(modelBuf, runtime.threads));
      modelBuf.delete(); modelBuf = null;
      throwIfAborted(signal);
      const m = new EncoderDecoderModel(mod, handle, runtime, options.device ?? 'auto');
      if (options.device === 'webgpu') {  // relative-position biases and cross-attention have no WebGPU kernels
        const w = { code: 'webgpu_unsupported', message: `WebGPU not used: ${m.info.device.reason}` };
        m.warnings.push(w);
        if (onWarning) { try { onWarning(w); } catch { /* as Model._warn */ } } else if (typeof console !== 'undefined') console.warn(`qkv: ${w.message}`);
      }
      return m;
    }
    handle = call(() => new mod.Model(modelBuf, runtime.threads));
    modelBuf.delete(); modelBuf = null;
    if (!handle.hasTokenizer()) {  // GGUF carries its tokenizer; llama2.c checkpoints do not
      check(tokenizer !== undefined && tokenizer !== null,
        'llama2.c models need their tokenizer: pass options.tokenizer (a URL, path, Blob or bytes of tokenizer.bin)');
      tokBuf = await readSource(mod, tokenizer, { what: 'the tokenizer', signal, openPath: env.openPath });
      call(() => handle.setTokenizer(tokBuf));
      tokBuf.delete(); tokBuf = null;
    }
    if (options.mmproj !== undefined) {  // images in chat: the vision tower and projector, checked against this model
      tokBuf = await readSource(mod, options.mmproj, { what: 'the mmproj', signal, openPath: env.openPath });
      call(() => handle.attachMmproj(tokBuf));
      tokBuf.delete(); tokBuf = null;
    }
    throwIfAborted(signal);
    const info = call(() => handle.info());
    checkGpuLayers(options, info.layers);
    // The declared context and vocabulary against maxMemory, before a session allocates for them.
    checkSessionMemory({ _maxMemory: options.maxMemory, _info: info, _sessions: [] }, info.contextLength, 'this model');
    const device = await chooseDevice(handle, info, options);
    if (signal?.aborted) device.gpu?.device.destroy?.();
    throwIfAborted(signal);
    return finish(new Model(mod, handle, runtime, device, onWarning, options.maxMemory));
  } catch (e) {
    modelBuf?.delete();
    tokBuf?.delete();
    handle?.delete();
    throw toQkvError(e);
  }
}
