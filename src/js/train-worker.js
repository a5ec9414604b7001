// A Trainer inside a Web Worker (or a Node worker thread), driven by train-worker-client.js:
// the page stays responsive while the engine computes, and the worker starts the pthreads
// build where threads are available (cross-origin isolated pages, Node).
const isNode = typeof process !== 'undefined' && !!process.versions?.node && typeof window === 'undefined';

const port = isNode ? (await import('node:worker_threads')).parentPort : globalThis;
const api = isNode ? await import('./node.js') : await import('./browser.js');

let trainer = null;
const running = new Map();  // request id -> AbortController
// request id -> resolve: a run waits after each step until the page has seen it (its onStep may
// call stop(), which must end the run at that step, as in process).
const acks = new Map();

function post(msg, transfer) { port.postMessage(msg, transfer ?? []); }
function errorOf(e) {
  const err = e instanceof api.QkvError ? e : new api.QkvError('internal', String(e?.message ?? e));
  return { code: err.code, message: err.message };
}
function live() {
  if (!trainer) throw new api.QkvError('disposed', 'this trainer was disposed');
  return trainer;
}

async function handle(msg) {
  const { id, op } = msg;
  const ac = new AbortController();
  running.set(id, ac);
  try {
    let value, transfer;
    if (op === 'create') {
      trainer = await api.createTrainer({ ...msg.options, worker: false, signal: ac.signal });
      value = trainer.info;
    } else if (op === 'step') {
      value = await live().step();
    } else if (op === 'evaluate') {
      value = await live().evaluate();
    } else if (op === 'run') {
      value = await live().run({
        ...msg.options, signal: ac.signal,
        onStep: (r) => new Promise((resolve) => { acks.set(id, resolve); post({ id, type: 'step', value: r }); }),
      });
    } else if (op === 'stop') {
      trainer?.stop();
    } else if (op === 'stepsDone') {
      value = live().stepsDone;
    } else if (op === 'toGGUF' || op === 'saveState') {
      value = await live()[op](...(msg.args ?? []));
      transfer = [value.buffer];
    } else if (op === 'loadState') {
      await live().loadState(msg.bytes);
      value = live().stepsDone;
    } else if (op === 'dispose') {
      trainer?.dispose();
      trainer = null;
    } else {
      throw new api.QkvError('bad_argument', `unknown trainer operation ${op}`);
    }
    post({ id, type: 'result', value }, transfer);
  } catch (e) {
    post({ id, type: 'error', error: errorOf(e) });
  } finally {
    running.delete(id);
    acks.delete(id);
  }
}

function ack(id) {
  const resolve = acks.get(id);
  acks.delete(id);
  resolve?.();
}

function onMessage(msg) {
  if (msg.op === 'abort') { running.get(msg.id)?.abort(); ack(msg.id); }
  else if (msg.op === 'ack') ack(msg.id);
  else if (msg.op === 'stop') trainer?.stop();  // at once, not queued behind a running step
  else handle(msg);
}

if (isNode) port.on('message', onMessage);
else port.onmessage = (ev) => onMessage(ev.data);
post({ type: 'ready' });
