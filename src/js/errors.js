// QkvError: the one error type of the JS API, with a stable `code`.

/** Stable error codes; `code` never changes meaning between versions. */
export const ErrorCodes = Object.freeze([
  'bad_model', 'bad_tokenizer', 'bad_argument', 'unsupported', 'out_of_memory', 'io', 'aborted',
  'disposed', 'internal',
]);

const HINTS = {
  bad_model: '',  // the engine's message says what the file looks like and what was expected
  bad_tokenizer: 'Pass the tokenizer.bin that belongs to this model (options.tokenizer).',
  bad_argument: 'Check the arguments against the API reference (types/index.d.ts).',
  unsupported: '',  // the engine's message names the feature and what is supported
  out_of_memory: 'Use a smaller model or context, or close other sessions.',
  io: 'Check the path or URL and that it is reachable.',
  aborted: '',
  disposed: 'Create a new model or session; this one was disposed.',
  internal: 'This is a bug in qkv; please report it with the model and the call that failed.',
};

export class QkvError extends Error {
  /**
   * @param {string} code one of ErrorCodes
   * @param {string} message what went wrong
   * @param {{cause?: unknown}} [options]
   */
  constructor(code, message, options) {
    const hint = HINTS[code];
    super(hint && !message.endsWith(hint) ? `${message}. ${hint}` : message, options);
    this.name = 'QkvError';
    this.code = ErrorCodes.includes(code) ? code : 'internal';
  }
}

/** Converts anything thrown by the engine or the platform into a QkvError. */
export function toQkvError(e) {
  if (e instanceof QkvError) return e;
  if (e && (e.name === 'AbortError' || e.code === 'ABORT_ERR')) return new QkvError('aborted', 'aborted', { cause: e });
  if (e && typeof e.code === 'string' && ErrorCodes.includes(e.code)) return new QkvError(e.code, e.message, { cause: e });
  if (e instanceof WebAssembly.RuntimeError || (e && /out of memory|Cannot enlarge memory/i.test(String(e.message)))) {
    return new QkvError('out_of_memory', `the WebAssembly engine ran out of memory (${e.message})`, { cause: e });
  }
  return new QkvError('internal', String(e && e.message ? e.message : e), { cause: e });
}

/** Throws QkvError('aborted') if the signal has fired. */
export function throwIfAborted(signal) {
  if (signal && signal.aborted) throw new QkvError('aborted', 'the operation was aborted');
}

/** Throws QkvError('bad_argument') unless cond. */
export function check(cond, message) {
  if (!cond) throw new QkvError('bad_argument', message);
}
