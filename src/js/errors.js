// QkvError: the one error type of the JS API, with a stable `code`.

/** Stable error codes; `code` never changes meaning between versions. */
export const ErrorCodes = Object.freeze([
  'bad_model', 'bad_tokenizer', 'bad_argument', 'unsupported', 'out_of_memory', 'io', 'aborted',
  'disposed', 'busy', 'internal', 'webgpu_failed', 'quota',
]);

const HINTS = {
  bad_model: '',  // the engine's message says what the file looks like and what was expected
  bad_tokenizer: 'Pass the tokenizer.bin that belongs to this model (options.tokenizer).',
  bad_argument: 'Check the arguments against the API reference (types/index.d.ts).',
  unsupported: '',  // the engine's message names the feature and what is supported
  out_of_memory: 'Use a smaller model or context, or close other sessions.',
  io: 'Check the path or URL and that it is reachable.',
  aborted: '',
  disposed: 'Load the model again or create a new session.',
  busy: 'Finish, break out of or abort the running generation first, or use another session (model.createSession()).',
  internal: 'This is a bug in qkv; please report it with the model and the call that failed.',
  webgpu_failed: 'Load the model again: await model.reload(), or loadModel() with its source.',
  quota: 'Free space (deleteCachedModel(), clearModelCache()) or load with cache: false.',
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

/** An error's message without the advice QkvError appended (to quote it inside another message). */
export function bareMessage(e) {
  const hint = HINTS[e.code];
  return hint && e.message.endsWith(`. ${hint}`) ? e.message.slice(0, -hint.length - 2) : e.message;
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

/** How a value reads in an error message: a string is quoted, so '2' and 2 differ. */
export function describe(v) {
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}...` : v);
  if (v === null || v === undefined || typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (typeof v === 'bigint') return `${v}n (a bigint)`;
  if (typeof v === 'function') return 'a function';
  if (typeof v === 'symbol') return 'a symbol';
  if (Array.isArray(v)) return `an array of ${v.length}`;
  if (ArrayBuffer.isView(v)) return `a ${v.constructor.name}`;
  return `an object (${v.constructor?.name ?? 'no prototype'})`;
}

/** Levenshtein distance, cut off above `max` (option names are short). */
function editDistance(a, b, max) {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length];
}

/** The known name closest to `key`, if one is close enough to be a misspelling of it. */
export function closest(key, known) {
  const lower = key.toLowerCase();
  let best = null, bestD = Infinity;
  for (const k of known) {
    const d = k.toLowerCase() === lower ? 0 : editDistance(lower, k.toLowerCase(), 3);
    if (d < bestD) { best = k; bestD = d; }
  }
  return bestD <= Math.max(1, Math.min(3, Math.floor(key.length / 3))) ? best : null;
}

/**
 * Validates an options object: it must be a plain object (or undefined) whose keys are all in
 * `known`; an unknown key is a bad_argument naming it (and the known key it looks like).
 * `what` names the call, e.g. 'generate'. Returns the options ({} for undefined).
 */
export function checkOptions(options, known, what) {
  if (options === undefined) return {};
  check(options !== null && typeof options === 'object' && !Array.isArray(options),
    `${what} options must be an object, got ${describe(options)}`);
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    const near = closest(key, known);
    throw new QkvError('bad_argument', `${what}: unknown option '${key}'` +
      (near ? ` (did you mean '${near}'?)` : `; the options are ${known.map((k) => `'${k}'`).join(', ')}`));
  }
  return options;
}
