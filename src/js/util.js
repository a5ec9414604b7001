// Small helpers the API modules (core.js, encdec.js, trainer.js) share.
import { toQkvError } from './errors.js';

/** Gives the event loop a turn (so aborts, UI events and other tasks can run). */
export const yieldToLoop = typeof setImmediate === 'function'
  ? () => new Promise((r) => setImmediate(r))
  : () => new Promise((r) => { const ch = new MessageChannel(); ch.port1.onmessage = () => r(); ch.port2.postMessage(0); });

/** Milliseconds from a monotonic clock where there is one. */
export function now() { return typeof performance !== 'undefined' ? performance.now() : Date.now(); }

/** Runs fn (an engine call), turning anything it throws into a QkvError. */
export function call(fn) {
  try {
    return fn();
  } catch (e) {
    throw toQkvError(e);
  }
}
