// A Trainer whose engine runs in a Worker (train-worker.js): the same methods as the in-process
// Trainer of trainer.js, each a message; run() streams its steps back.
import { QkvError, checkOptions } from './errors.js';

const isNode = typeof process !== 'undefined' && !!process.versions?.node && typeof window === 'undefined';

async function spawn() {
  const url = new URL('./train-worker.js', import.meta.url);
  if (isNode) {
    const { Worker } = await import('node:worker_threads');
    const w = new Worker(url);
    return { post: (m, t) => w.postMessage(m, t), on: (f) => w.on('message', f), onError: (f) => w.on('error', f), terminate: () => w.terminate() };
  }
  const w = new Worker(url, { type: 'module' });
  return {
    post: (m, t) => w.postMessage(m, t), on: (f) => { w.onmessage = (e) => f(e.data); },
    onError: (f) => { w.onerror = (e) => { e.preventDefault?.(); f(e); }; }, terminate: () => w.terminate(),
  };
}

export class RemoteTrainer {
  /** @internal */
  constructor(w) {
    this._w = w;
    this._next = 1;
    this._pending = new Map();
    this._info = null;
    this._steps = 0;
    this._running = false;
    /** Every step so far (as the in-process Trainer's history). */
    this.history = [];
    this._ready = new Promise((resolve) => { this._markReady = resolve; });
    w.on((msg) => {
      if (msg.type === 'ready') return this._markReady();
      this._pending.get(msg.id)?.(msg);
    });
    w.onError((e) => {
      const error = { code: 'internal', message: `the qkv training worker failed: ${e?.message ?? e}` };
      for (const f of this._pending.values()) f({ type: 'error', error });
      this._pending.clear();
    });
  }

  _request(msg, { onStep, signal, transfer } = {}) {
    if (!this._w) return Promise.reject(new QkvError('disposed', 'this trainer was disposed'));
    return new Promise((resolve, reject) => {
      const id = this._next++;
      const onAbort = () => this._w?.post({ op: 'abort', id });
      let failure = null;
      this._pending.set(id, (m) => {
        if (m.type === 'step') {
          // The worker waits for this ack before its next step, so a stop() in onStep ends the
          // run at this step (the 'stop' message is posted before the ack).
          this._steps = m.value.step;
          this.history.push(m.value);
          // An onStep that throws ends the run with its error, as in process.
          Promise.resolve().then(() => onStep?.(m.value)).then(
            () => this._w?.post({ op: 'ack', id }),
            (e) => { failure = e; this._w?.post({ op: 'abort', id }); });
          return;
        }
        this._pending.delete(id);
        signal?.removeEventListener('abort', onAbort);
        if (failure) reject(failure);
        else if (m.type === 'result') resolve(m.value);
        else reject(new QkvError(m.error.code, m.error.message));
      });
      signal?.addEventListener('abort', onAbort, { once: true });
      this._ready.then(() => this._w?.post({ ...msg, id }, transfer ?? []));
    });
  }

  get info() {
    if (!this._w) throw new QkvError('disposed', 'this trainer was disposed');
    return { ...this._info, worker: true };
  }
  get stepsDone() { return this._steps; }
  get done() { return this._steps >= this._info.steps; }

  async step() {
    if (this._running) throw new QkvError('bad_argument', 'run() is in progress: stop() it before calling step()');
    const r = await this._request({ op: 'step' });
    this._steps = r.step;
    this.history.push(r);
    return r;
  }
  evaluate() { return this._request({ op: 'evaluate' }); }
  stop() { this._w?.post({ op: 'stop' }); }

  async run(options) {
    const { onStep, signal, evalEvery, maxSteps } = checkOptions(options, ['onStep', 'signal', 'evalEvery', 'maxSteps'], 'run');
    if (signal?.aborted) throw new QkvError('aborted', 'the operation was aborted');
    if (onStep !== undefined && typeof onStep !== 'function') throw new QkvError('bad_argument', 'onStep must be a function');
    this._running = true;
    try {
      return await this._request({ op: 'run', options: { evalEvery, maxSteps } }, { onStep, signal });
    } finally {
      this._running = false;
    }
  }

  async *steps(options) {
    const { signal, evalEvery = 0 } = checkOptions(options, ['signal', 'evalEvery'], 'steps');
    while (!this.done) {
      if (signal?.aborted) throw new QkvError('aborted', 'the operation was aborted');
      const r = await this.step();
      if (evalEvery > 0 && (r.step % evalEvery === 0 || r.step === this._info.steps)) r.valLoss = await this.evaluate();
      yield r;
    }
  }

  toGGUF(options) { return this._request({ op: 'toGGUF', args: [options] }); }
  saveState() { return this._request({ op: 'saveState' }); }
  async loadState(bytes) {
    if (!(bytes instanceof ArrayBuffer || ArrayBuffer.isView(bytes))) throw new QkvError('bad_argument', 'loadState takes the bytes of saveState()');
    this._steps = await this._request({ op: 'loadState', bytes });
    this.history = this.history.filter((r) => r.step <= this._steps);
  }

  /** Frees the trainer and ends its worker. */
  async dispose() {
    const w = this._w;
    if (!w) return;
    try { await this._request({ op: 'dispose' }); } catch { /* the worker may be gone */ }
    this._w = null;
    await w.terminate();
  }
}

/**
 * Starts a worker and creates the trainer in it. Options as createTrainer's, except that an
 * AsyncIterable source cannot cross to a worker (give a URL, path, Blob or bytes).
 * @internal
 */
export async function createRemoteTrainer(options) {
  const { signal, worker, ...rest } = options;
  const t = new RemoteTrainer(await spawn());
  try {
    t._info = await t._request({ op: 'create', options: rest }, { signal });
    t._steps = 0;
    return t;
  } catch (e) {
    await t.dispose().catch(() => {});
    throw e;
  }
}
