// The qkv engine inside a Web Worker (or a Node worker thread): receives requests from
// worker-client.js, runs them, streams generated tokens back. Pages stay responsive.
const isNode = typeof process !== 'undefined' && !!process.versions?.node && typeof window === 'undefined';

const port = isNode ? (await import('node:worker_threads')).parentPort : globalThis;
const api = isNode ? await import('./node.js') : await import('./browser.js');

const objects = new Map();  // handle id -> Model | Session
const running = new Map();  // request id -> AbortController
const flows = new Map();  // generate request id -> {acked, wake}: tokens the client has taken
/** Tokens a generation may run ahead of its consumer (worker-client.js acks each one it hands out). */
const WINDOW = 4;
let nextHandle = 1;

function post(msg, transfer) { port.postMessage(msg, transfer); }
function errorOf(e) {
  const err = e instanceof api.QkvError ? e : new api.QkvError('internal', String(e?.message ?? e));
  return { code: err.code, message: err.message };
}
function target(h) {
  const o = objects.get(h);
  if (!o) throw new api.QkvError('disposed', 'this model or session was disposed');
  return o;
}
function register(o) { const h = nextHandle++; objects.set(h, o); return h; }

const CALLS = {
  model: new Set(['tokenize', 'detokenize', 'sparseMask', 'complete', 'embed', 'rerank', 'applyChatTemplate']),
  session: new Set(['feed', 'prefill', 'logits', 'sample', 'truncate', 'reset', 'attention', 'complete']),
  encdec: new Set(['tokenize', 'detokenize', 'sparseMask', 'complete', '_inspectRaw']),
  image: new Set(['embedImage', '_inspectImageRaw']),
};

async function handle(msg) {
  const { id, op } = msg;
  const ac = new AbortController();
  running.set(id, ac);
  try {
    let value;
    if (op === 'load') {
      const { warnKey, ...rest } = msg.options ?? {};
      const options = {
        ...rest, signal: ac.signal, onProgress: (p) => post({ id, type: 'progress', value: p }),
        onWarning: (w) => post({ type: 'warning', warnKey, value: w }),
      };
      const model = await api.loadModel(msg.source, options);
      value = { handle: register(model), info: model.info };
    } else if (op === 'quantize') {
      // The output: streamed back as 'chunk' messages (the page's onChunk) or one transferred buffer.
      const options = {
        ...msg.options, signal: ac.signal, onProgress: (p) => post({ id, type: 'progress', value: p }),
        onChunk: msg.chunks ? (c) => post({ id, type: 'chunk', value: c }, [c.buffer]) : undefined,
      };
      const r = await api.quantize(msg.source, options);
      post({ id, type: 'result', value: r }, r.bytes ? [r.bytes.buffer] : []);
      return;
    } else if (op === 'info') {
      value = target(msg.handle).info;
    } else if (op === 'createSession') {
      const s = target(msg.handle).createSession(msg.options);
      value = { handle: register(s) };
    } else if (op === 'defaultSession') {
      const m = target(msg.handle);
      value = { handle: register(m.session) };
    } else if (op === 'get') {
      const o = target(msg.handle);
      value = o[msg.property];
    } else if (op === 'set') {
      target(msg.handle)[msg.property] = msg.value;
    } else if (op === 'call') {
      const o = target(msg.handle);
      const kind = o instanceof api.Model ? 'model' : o instanceof api.EncoderDecoderModel ? 'encdec'
        : o instanceof api.ImageEncoderModel ? 'image' : 'session';
      if (!CALLS[kind].has(msg.method)) throw new api.QkvError('bad_argument', `no method ${msg.method}`);
      const args = [...msg.args];
      if (msg.method === 'complete' || msg.method === 'embed') args[1] = { ...(args[1] ?? {}), signal: ac.signal };
      // Image options of the wrong type go through as they are, for the model's own error.
      if (kind === 'image' && (args[1] === undefined || (typeof args[1] === 'object' && args[1] !== null))) args[1] = { ...args[1], signal: ac.signal };
      // Options of the wrong type go through as they are, for the model's own error.
      if (msg.method === 'rerank' && (args[2] === undefined || (typeof args[2] === 'object' && args[2] !== null))) args[2] = { ...args[2], signal: ac.signal };
      value = await o[msg.method](...args);
    } else if (op === 'generate') {
      const o = target(msg.handle);
      const opts = { ...msg.options, signal: ac.signal };
      const it = msg.messages !== undefined ? o.chat(msg.messages, opts) : o.generate(msg.prompt, opts);
      // Credit-based: at most WINDOW tokens beyond what the consumer took, so a consumer that stops
      // pulling stops the computation (an abort or the client's return() ends the wait).
      const flow = { acked: 0, wake: null };
      flows.set(id, flow);
      ac.signal.addEventListener('abort', () => flow.wake?.(), { once: true });
      const wait = () => new Promise((r) => { flow.wake = r; });
      let sent = 0;
      for await (const t of it) {
        post({ id, type: 'token', value: t });
        sent++;
        while (sent - flow.acked >= WINDOW && !ac.signal.aborted) await wait();
      }
      value = { stats: (o instanceof api.Model ? o.session : o).lastGeneration };
    } else if (op === 'dispose') {
      const o = objects.get(msg.handle);
      if (o) {
        o.dispose();
        objects.delete(msg.handle);
        if (o instanceof api.Model) for (const [h, x] of objects) if (x._model === o) objects.delete(h);
      }
    } else {
      throw new api.QkvError('bad_argument', `unknown worker operation ${op}`);
    }
    post({ id, type: 'result', value });
  } catch (e) {
    // A stopped generation still reports its figures (seed, counts, finish reason).
    let stats;
    if (op === 'generate') {
      const o = objects.get(msg.handle);
      stats = o ? (o instanceof api.Model ? o.session : o).lastGeneration : undefined;
    }
    post({ id, type: 'error', error: errorOf(e), stats });
  } finally {
    running.delete(id);
    flows.delete(id);
  }
}

function onMessage(msg) {
  if (msg.op === 'abort') running.get(msg.id)?.abort();
  else if (msg.op === 'ack') {
    const f = flows.get(msg.id);
    if (f) { f.acked++; f.wake?.(); f.wake = null; }
  } else handle(msg);
}

if (isNode) port.on('message', onMessage);
else port.onmessage = (ev) => onMessage(ev.data);
post({ type: 'ready' });
