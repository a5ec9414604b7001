// The qkv API with the engine in a Web Worker (or Node worker thread): the same shape as the
// main entry, every method async, generation streamed across postMessage.
import { QkvError, checkOptions, describe } from './errors.js';
import { inspectionView } from './inspection.js';
import { isPartSource } from './source.js';
import { LOAD_KEYS } from './util.js';
import { imageInspection, toRgba } from './vision.js';

export { QkvError };

const isNode = typeof process !== 'undefined' && !!process.versions?.node && typeof window === 'undefined';

async function spawn(url) {
  if (isNode) {
    const { Worker } = await import('node:worker_threads');
    const w = new Worker(url);
    return {
      post: (m, t) => w.postMessage(m, t), on: (f) => w.on('message', f), onError: (f) => w.on('error', f),
      terminate: () => w.terminate(), ref: () => w.ref(), unref: () => w.unref(),
    };
  }
  const w = new Worker(url, { type: 'module' });
  return {
    post: (m, t) => w.postMessage(m, t), on: (f) => { w.onmessage = (e) => f(e.data); }, onError: (f) => { w.onerror = (e) => f(e); },
    terminate: () => w.terminate(), ref: () => {}, unref: () => {},
  };
}

class Connection {
  constructor(w) {
    this.w = w;
    this.nextId = 1;
    this.pending = new Map();  // id -> {onMessage}
    this.warnings = new Map();  // warnKey -> handler of a model's warnings (they come at any time)
    this.nextWarnKey = 1;
    this.ready = new Promise((resolve) => { this.markReady = resolve; });
    this.waiting = 0;  // requests and stream reads being awaited: only these keep a Node process alive
    this.closed = null;  // the QkvError every call gets once terminate() ran
    w.unref();
    w.on((msg) => {
      if (msg.type === 'ready') return this.markReady();
      if (msg.type === 'warning') return this.warnings.get(msg.warnKey)?.(msg.value);
      this.pending.get(msg.id)?.(msg);
    });
    w.onError((e) => {
      const err = new QkvError('internal', `the qkv worker failed: ${e?.message ?? e}`);
      for (const f of this.pending.values()) f({ type: 'error', error: { code: err.code, message: err.message } });
      this.pending.clear();
    });
  }

  /** Someone awaits the worker: Node keeps running until release(). */
  hold() { if (this.waiting++ === 0) this.w.ref(); }
  release() { if (--this.waiting === 0) this.w.unref(); }

  /** Stops the worker; pending and later calls fail with 'disposed'. */
  close() {
    if (this.closed) return Promise.resolve();
    this.closed = new QkvError('disposed', 'the qkv worker was terminated');
    const error = { code: this.closed.code, message: this.closed.message };
    for (const f of [...this.pending.values()]) f({ type: 'error', error });
    this.pending.clear();
    this.warnings.clear();
    return Promise.resolve(this.w.terminate()).then(() => undefined);
  }

  /** Sends a request; onMessage gets every reply for it. Returns the request id. */
  send(msg, onMessage, transfer = []) {
    if (this.closed) throw this.closed;
    const id = this.nextId++;
    this.pending.set(id, onMessage);
    this.ready.then(() => this.w.post({ ...msg, id }, transfer));
    return id;
  }

  /** One request, one result. */
  request(msg, { signal, onProgress, onChunk, transfer } = {}) {
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(this.closed);
      if (signal?.aborted) return reject(new QkvError('aborted', 'the operation was aborted'));
      const onAbort = () => this.w.post({ op: 'abort', id });
      this.hold();
      const id = this.send(msg, (m) => {
        if (m.type === 'progress') return onProgress?.(m.value);
        if (m.type === 'chunk') return onChunk?.(m.value);
        this.pending.delete(id);
        this.release();
        signal?.removeEventListener('abort', onAbort);
        if (m.type === 'result') resolve(m.value);
        else reject(new QkvError(m.error.code, m.error.message));
      }, transfer);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** A streaming generate request as an async iterator; leaving the loop aborts it. */
  async *stream(msg, signal, statsSink) {
    const queue = [];
    let wake = null, done = false, failure = null, stats = null;
    const sink = (s) => { stats = s; statsSink(s); };
    const id = this.send(msg, (m) => {
      if (m.type === 'token') queue.push(m.value);
      else {
        this.pending.delete(id);
        if (m.type === 'error') {
          failure = new QkvError(m.error.code, m.error.message);
          if (m.stats) sink(m.stats);
        } else sink(m.value.stats);
        done = true;
      }
      wake?.();
    });
    const onAbort = () => { if (!this.closed) this.w.post({ op: 'abort', id }); };
    signal?.addEventListener('abort', onAbort, { once: true });
    // Waits (bounded) for the worker's last message, so stats are in place when we return.
    const settle = async () => {
      const until = Date.now() + 2000;
      while (!done && !this.closed && Date.now() < until) await new Promise((r) => { wake = r; setTimeout(r, 50); });
      wake = null;
    };
    // The process stays alive only while the consumer waits for a token, never for an idle stream.
    const next = async () => {
      this.hold();
      try { await new Promise((r) => { wake = r; }); } finally { this.release(); }
      wake = null;
    };
    try {
      for (;;) {
        if (signal?.aborted) {
          await settle();
          // The worker may have finished before the abort reached it; for the caller the
          // generation was stopped all the same (as in-process, where the abort is seen first).
          if (stats && stats.finishReason !== 'aborted') sink({ ...stats, finishReason: 'aborted' });
          throw new QkvError('aborted', 'the operation was aborted');
        }
        if (queue.length) {
          const t = queue.shift();
          if (!done && !this.closed) this.w.post({ op: 'ack', id });  // one more token may be computed
          yield t;
          continue;
        }
        if (failure) throw failure;
        if (done) return;
        await next();
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
      if (!done && !this.closed) {
        this.w.post({ op: 'abort', id });
        await settle();
      }
    }
  }
}

function stripSignal(options = {}) {
  const { signal, ...rest } = options ?? {};
  return [rest, signal];
}

class RemoteSession {
  constructor(conn, handle) { this._c = conn; this._h = handle; this.lastGeneration = null; }
  _call(method, ...args) { return this._c.request({ op: 'call', handle: this._h, method, args }); }
  /** Tokens in the KV cache. */
  tokens() { return this._c.request({ op: 'get', handle: this._h, property: 'tokens' }); }
  position() { return this._c.request({ op: 'get', handle: this._h, property: 'position' }); }
  setCaptureAttention(on) { return this._c.request({ op: 'set', handle: this._h, property: 'captureAttention', value: !!on }); }
  feed(tokens, options) { return this._call('feed', Array.from(tokens), options); }
  prefill(tokens) { return this._call('prefill', Array.from(tokens)); }
  logits(i) { return this._call('logits', i); }
  sample(options) { return this._call('sample', options); }
  truncate(n) { return this._call('truncate', n); }
  reset() { return this._call('reset'); }
  attention(layer, head) { return this._call('attention', layer, head); }
  generate(prompt, options) {
    const [rest, signal] = stripSignal(options);
    return this._c.stream({ op: 'generate', handle: this._h, prompt, options: rest }, signal, (s) => { this.lastGeneration = s; });
  }
  chat(messages, options) {
    const [rest, signal] = stripSignal(options);
    return this._c.stream({ op: 'generate', handle: this._h, messages, options: rest }, signal, (s) => { this.lastGeneration = s; });
  }
  async complete(prompt, options) {
    let out = '';
    for await (const t of this.generate(prompt, options)) out += t.text;
    return out;
  }
  dispose() { return this._c.request({ op: 'dispose', handle: this._h }); }
}

class RemoteModel {
  constructor(conn, handle, info) { this._c = conn; this._h = handle; this.info = info; this._session = null; }
  /** Fresh model info (memory figures change as sessions grow). */
  refreshInfo() { return this._c.request({ op: 'info', handle: this._h }).then((i) => (this.info = i)); }
  tokenize(text, options) { return this._c.request({ op: 'call', handle: this._h, method: 'tokenize', args: [text, options] }); }
  detokenize(ids) { return this._c.request({ op: 'call', handle: this._h, method: 'detokenize', args: [Array.from(ids)] }); }
  sparseMask(options) { return this._c.request({ op: 'call', handle: this._h, method: 'sparseMask', args: [options] }); }
  /** Sentence embeddings (see Model.embed); the Float32Arrays come back as transferred copies. */
  embed(texts, options = {}) {
    const { signal, ...rest } = options ?? {};
    return this._c.request({ op: 'call', handle: this._h, method: 'embed', args: [texts, rest] }, { signal });
  }
  /** Reranker scores (see Model.rerank), computed in the worker. */
  rerank(query, documents, options = {}) {
    const plain = options !== null && typeof options === 'object';
    const { signal, ...rest } = plain ? options : {};
    return this._c.request({ op: 'call', handle: this._h, method: 'rerank', args: [query, documents, plain ? rest : options] }, { signal });
  }
  async createSession(options) {
    const { handle } = await this._c.request({ op: 'createSession', handle: this._h, options });
    return new RemoteSession(this._c, handle);
  }
  /** The default session (its KV cache is reused between generate calls). */
  async session() {
    if (!this._session) {
      const { handle } = await this._c.request({ op: 'defaultSession', handle: this._h });
      this._session = new RemoteSession(this._c, handle);
    }
    return this._session;
  }
  generate(prompt, options) {
    const self = this;
    return (async function* () { yield* (await self.session()).generate(prompt, options); })();
  }
  chat(messages, options) {
    const self = this;
    return (async function* () { yield* (await self.session()).chat(messages, options); })();
  }
  /** The prompt text chat() would feed (see Model.applyChatTemplate). */
  applyChatTemplate(messages, options) {
    return this._c.request({ op: 'call', handle: this._h, method: 'applyChatTemplate', args: [messages, options] });
  }
  async complete(prompt, options) { return (await this.session()).complete(prompt, options); }
  dispose() {
    if (this._warnKey) this._c.warnings.delete(this._warnKey);
    return this._c.request({ op: 'dispose', handle: this._h });
  }
}

/** An encoder-decoder model (t5) in the worker: generate(source) streams the target. */
class RemoteEncoderDecoderModel {
  constructor(conn, handle, info) { this._c = conn; this._h = handle; this.info = info; this.lastGeneration = null; }
  _call(method, ...args) { return this._c.request({ op: 'call', handle: this._h, method, args }); }
  refreshInfo() { return this._c.request({ op: 'info', handle: this._h }).then((i) => (this.info = i)); }
  tokenize(text, options) { return this._call('tokenize', text, options); }
  detokenize(ids) { return this._call('detokenize', Array.from(ids)); }
  sparseMask(options) { return this._call('sparseMask', options); }
  generate(source, options) {
    const [rest, signal] = stripSignal(options);
    return this._c.stream({ op: 'generate', handle: this._h, prompt: source, options: rest }, signal, (s) => { this.lastGeneration = s; });
  }
  async complete(source, options) {
    let out = '';
    for await (const t of this.generate(source, options)) out += t.text;
    return out;
  }
  async inspect(source, options) { return inspectionView(await this._call('_inspectRaw', source, options)); }
  dispose() {
    if (this._warnKey) this._c.warnings.delete(this._warnKey);
    return this._c.request({ op: 'dispose', handle: this._h });
  }
}

/**
 * An image encoder (mmproj GGUF) in the worker: embedImage / inspectImage as on the page. Images
 * that cannot cross postMessage (elements, and Blobs in Node) become RGBA or bytes here first.
 */
class RemoteImageEncoderModel {
  constructor(conn, handle, info) { this._c = conn; this._h = handle; this.info = info; }
  refreshInfo() { return this._c.request({ op: 'info', handle: this._h }).then((i) => (this.info = i)); }
  async _call(method, image, options) {
    const plain = options !== null && typeof options === 'object';
    const { signal, ...rest } = plain ? options : {};
    const img = await portable(image, method);
    return this._c.request({ op: 'call', handle: this._h, method, args: [img, plain ? rest : options] }, { signal });
  }
  /** The image's embedding, computed in the worker (see ImageEncoderModel.embedImage). */
  embedImage(image, options = {}) { return this._call('embedImage', image, options); }
  /** The embedding and every layer's and head's attention (see ImageEncoderModel.inspectImage). */
  async inspectImage(image, options = {}) {
    return imageInspection(await this._call('_inspectImageRaw', image, options), this.info);
  }
  /** embedImage() over a list, in order. */
  async embedImages(images, options = {}) {
    if (!Array.isArray(images)) throw new QkvError('bad_argument', `embedImages takes an array of images, got ${describe(images)}`);
    const out = [];
    for (const img of images) out.push(await this.embedImage(img, options));
    return out;
  }
  dispose() {
    if (this._warnKey) this._c.warnings.delete(this._warnKey);
    return this._c.request({ op: 'dispose', handle: this._h });
  }
}

// What postMessage can carry: canvas-drawable elements are read to RGBA on this side (the worker has
// no DOM); a Blob in Node goes as its bytes; everything else as it is (the worker checks it).
async function portable(image, what) {
  if (isNode && typeof Blob !== 'undefined' && image instanceof Blob) return new Uint8Array(await image.arrayBuffer());
  const element = ['HTMLImageElement', 'HTMLCanvasElement', 'HTMLVideoElement', 'SVGImageElement']
    .some((k) => typeof globalThis[k] === 'function' && image instanceof globalThis[k]);
  return element ? toRgba(image, what) : image;
}

// Async iterables cannot cross postMessage: gather them here, then send the bytes. A relative
// URL means relative to the page, not to the worker's script.
async function pack(s) {
  // The files of a split model: each packed as a source of its own (loadModel reads them in order).
  if (Array.isArray(s) && s.length > 0 && s.every(isPartSource)) return Promise.all(s.map(pack));
  if (s && typeof s === 'object' && !(s instanceof URL) && !ArrayBuffer.isView(s) && !(s instanceof ArrayBuffer) &&
      !(typeof Blob !== 'undefined' && s instanceof Blob) && (s[Symbol.asyncIterator] || s[Symbol.iterator])) {
    const parts = [];
    for await (const c of s) parts.push(c instanceof Uint8Array ? c : new Uint8Array(c));
    const out = new Uint8Array(parts.reduce((a, p) => a + p.byteLength, 0));
    let o = 0; for (const p of parts) { out.set(p, o); o += p.byteLength; }
    return out;
  }
  if (s instanceof URL) return s.href;
  if (typeof s === 'string' && !isNode && globalThis.location) return new URL(s, globalThis.location.href).href;
  return s;
}

/**
 * Starts the engine in a worker. `url` defaults to this package's worker.js.
 * Returns {loadModel, quantize, terminate, dispose}. In Node the worker thread keeps the process
 * alive only while a call is awaited; terminate() (or dispose()) stops it and frees every model in it.
 */
export async function createWorker(url = new URL('./worker.js', import.meta.url)) {
  const w = await spawn(url);
  const conn = new Connection(w);
  return {
    async loadModel(source, options = {}) {
      checkOptions(options, LOAD_KEYS, 'loadModel');
      // gpu: the worker uses its own navigator.gpu (a GPU object cannot cross postMessage).
      const { onProgress, signal, onWarning, gpu: _gpu, ...rest } = options ?? {};
      const warnKey = conn.nextWarnKey++;
      const warnings = [];
      conn.warnings.set(warnKey, (w) => {
        warnings.push(w);
        if (onWarning) {
          try { onWarning(w); } catch { /* a throwing handler must not break the engine */ }
        } else {
          console.warn(`qkv: ${w.message}`);
        }
      });
      const source2 = await pack(source);
      const tok2 = await pack(rest.tokenizer);
      const mm2 = rest.mmproj === undefined ? undefined : await pack(rest.mmproj);
      let loaded;
      try {
        loaded = await conn.request({ op: 'load', source: source2, options: { ...rest, tokenizer: tok2, mmproj: mm2, warnKey } },
          { signal, onProgress });
      } catch (e) {
        conn.warnings.delete(warnKey);
        throw e;
      }
      const model = loaded.info.encoderDecoder
        ? new RemoteEncoderDecoderModel(conn, loaded.handle, loaded.info)
        : loaded.info.imageEncoder ? new RemoteImageEncoderModel(conn, loaded.handle, loaded.info)
          : new RemoteModel(conn, loaded.handle, loaded.info);
      model._warnKey = warnKey;
      /** Warnings so far (WebGPU unavailable or lost, with the fallback taken). */
      model.warnings = warnings;
      return model;
    },
    /** quantize() (see the package's main entry) with the work in the worker. */
    async quantize(source, options = {}) {
      const { onProgress, onChunk, signal, tokenizer, ...rest } = options ?? {};
      if (onChunk !== undefined && typeof onChunk !== 'function') throw new QkvError('bad_argument', 'onChunk must be a function');
      if (onProgress !== undefined && typeof onProgress !== 'function') throw new QkvError('bad_argument', 'onProgress must be a function');
      return conn.request({ op: 'quantize', source: await pack(source), chunks: !!onChunk,
        options: { ...rest, tokenizer: await pack(tokenizer) } }, { signal, onProgress, onChunk });
    },
    /** Stops the worker: its models are freed, pending and later calls fail with 'disposed'. */
    terminate() { return conn.close(); },
    /** The same as terminate(). */
    dispose() { return conn.close(); },
  };
}
