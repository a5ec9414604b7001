// Small helpers the API modules (core.js, encdec.js, trainer.js) share.
import { QkvError, check, checkOptions, describe, toQkvError } from './errors.js';

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

/** The options of loadModel() (the worker client checks them too, before anything crosses postMessage). */
export const LOAD_KEYS = Object.freeze(['tokenizer', 'onProgress', 'signal', 'onWarning', 'device', 'gpuPrecision', 'gpu', 'weights',
  'gpuLayers', 'threads', 'simd', 'maxMemory', 'mmproj', 'cache']);

/**
 * Checks loadModel's gpuLayers: 'auto' or a whole number of layers, at most `layers` once the
 * model's count is known; with device 'wasm' only 0, with weights 'gpu' at least 1.
 */
export function checkGpuLayers(options, layers) {
  const n = options.gpuLayers;
  if (n === undefined || n === 'auto') return;
  check(Number.isInteger(n) && n >= 0, `gpuLayers must be 'auto' or a whole number of layers >= 0, got ${describe(n)}`);
  check(layers === undefined || n <= layers, `gpuLayers is ${n}, but the model has ${layers} layers`);
  check(n === 0 || options.device !== 'wasm', `gpuLayers: ${n} puts layers on the GPU: it cannot go with device: 'wasm'`);
  check(n > 0 || options.weights !== 'gpu', "gpuLayers: 0 leaves no weights for weights: 'gpu' to put on the GPU");
}

/** Values of the `simd` load option. */
export const SIMD_MODES = ['auto', 'relaxed', 'baseline'];

// A module whose one function runs the two relaxed instructions the relaxed builds use:
// f32x4.relaxed_madd (0xfd 0x105) on three zero vectors, then i16x8.relaxed_dot_i8x16_i7x16_s
// (0xfd 0x112) of that and a zero vector.
const RELAXED_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,  // magic, version
  0x01, 0x04, 0x01, 0x60, 0x00, 0x00,              // type: () -> ()
  0x03, 0x02, 0x01, 0x00,                          // function 0 of type 0
  0x0a, 0x53, 0x01, 0x51, 0x00,                    // code: one body of 81 bytes, no locals
  0xfd, 0x0c, ...new Array(16).fill(0), 0xfd, 0x0c, ...new Array(16).fill(0), 0xfd, 0x0c, ...new Array(16).fill(0),
  0xfd, 0x85, 0x02,                                // f32x4.relaxed_madd
  0xfd, 0x0c, ...new Array(16).fill(0), 0xfd, 0x92, 0x02, 0x1a, 0x0b,  // i16x8.relaxed_dot_i8x16_i7x16_s, drop, end
]);

/** Whether this engine runs relaxed SIMD (Chromium >= 114 and Node >= 22 do). */
export function relaxedSimdSupported() {
  try {
    return WebAssembly.validate(RELAXED_PROBE);
  } catch {
    return false;
  }
}

/** Throws QkvError('bad_argument') unless simd is a valid `simd` option (or undefined). */
export function checkSimdOption(simd) {
  check(simd === undefined || SIMD_MODES.includes(simd),
    `simd must be one of ${SIMD_MODES.map((m) => `'${m}'`).join(', ')}, got ${describe(simd)}`);
}

/**
 * Picks the build variant for the `simd` option: the relaxed-SIMD build (fused multiply-add in
 * the f32 kernels, 8-bit dot products in the block-type kernels) where the engine validates it,
 * the baseline SIMD128 build otherwise.
 * Returns {relaxed, reason}; throws QkvError('unsupported') when 'relaxed' cannot be had.
 */
export function chooseSimd(simd = 'auto', { supported = relaxedSimdSupported(), built = true } = {}) {
  checkSimdOption(simd);
  if (simd === 'baseline') return { relaxed: false, reason: 'baseline SIMD128 requested' };
  if (!supported) {
    if (simd === 'relaxed') {
      throw new QkvError('unsupported', 'simd: \'relaxed\' was requested, but this WebAssembly engine does not run relaxed SIMD '
        + '(Chromium >= 114 and Node >= 22 do; Node 20 with --experimental-wasm-relaxed-simd)');
    }
    return { relaxed: false, reason: 'this WebAssembly engine has no relaxed SIMD' };
  }
  if (!built) {
    if (simd === 'relaxed') throw new QkvError('unsupported', 'simd: \'relaxed\' was requested, but the relaxed-SIMD build is not present (scripts/build.sh wasm)');
    return { relaxed: false, reason: 'the relaxed-SIMD build is not present' };
  }
  return { relaxed: true, reason: 'the engine runs relaxed SIMD: fused multiply-add, 8-bit dot products' };
}

/**
 * sparseMask() of both model classes: options checked, then the engine's mask (fn(queryStart,
 * queries, keys, causal)). @internal
 */
export function sparseMaskOf(info, options, keys, fn) {
  const o = checkOptions(options, keys, 'sparseMask');
  check(info.sparsePattern, 'sparseMask: this model has no block-sparse attention layer');
  const { queryStart = 0, queries, keys: n } = o;
  for (const [k, v] of [['queryStart', queryStart], ['queries', queries], ['keys', n]]) {
    check(Number.isInteger(v) && v >= 0 && v <= 4096, `sparseMask: ${k} must be an integer 0..4096, got ${describe(v)}`);
  }
  return call(() => fn(queryStart, queries, n, !!o.causal));
}
