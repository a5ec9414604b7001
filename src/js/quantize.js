// quantize(): re-encodes a model's weight matrices (GGUF, or a llama2.c checkpoint with its
// tokenizer) to a block type in WASM, the native `qkv quantize` policy (src/formats/quantize.h).
// The heap holds the input and one chunk of output rows at a time; the output arrives in chunks
// (options.onChunk) or as one Uint8Array.
import { QkvError, check, checkOptions, describe, throwIfAborted, toQkvError } from './errors.js';
import { readModelSource, readSource } from './source.js';

/** The types `quantize` writes (the native CLI's --type). */
export const QUANTIZE_TYPES = Object.freeze(['q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'q4_k', 'q5_k', 'f16', 'bf16', 'f32']);

/**
 * @param {{load: Function, openPath: Function | null}} env  as for loadModelWith
 * @param {*} source  a model (as loadModel takes it: one source, or the files of a split GGUF)
 * @param {import('../../types/index.js').QuantizeOptions} options
 * @returns {Promise<import('../../types/index.js').QuantizeResult>}
 */
export async function quantizeWith(env, source, options = {}) {
  checkOptions(options, ['type', 'tokenizer', 'onProgress', 'onChunk', 'signal', 'name', 'allowRequantize'], 'quantize');
  const { type, tokenizer, onProgress, onChunk, signal, name = 'model', allowRequantize = false } = options;
  check(typeof type === 'string' && QUANTIZE_TYPES.includes(type),
    `type must be one of ${QUANTIZE_TYPES.map((t) => `'${t}'`).join(', ')}, got ${describe(type)}`);
  check(onProgress === undefined || typeof onProgress === 'function', 'onProgress must be a function');
  check(onChunk === undefined || typeof onChunk === 'function', 'onChunk must be a function');
  check(typeof name === 'string', 'name must be a string');
  check(typeof allowRequantize === 'boolean', `allowRequantize must be a boolean, got ${typeof allowRequantize}`);
  check(signal === undefined || signal === null || typeof signal.aborted === 'boolean', 'signal must be an AbortSignal');
  throwIfAborted(signal);
  const { mod } = await env.load({ threads: 1 });
  let modelBuf = null, tokBuf = null;
  try {
    modelBuf = await readModelSource(mod, source, {
      what: 'the model', signal, openPath: env.openPath, listDir: env.listDir,
      onProgress: onProgress && (({ loaded, total }) => onProgress({ phase: 'read', done: loaded, total })),
    });
    const head = modelBuf.view().subarray(0, 4);
    const gguf = head.length === 4 && String.fromCharCode(...head) === 'GGUF';
    if (!gguf) {  // a llama2.c checkpoint (or not a model: the engine says which)
      if (tokenizer !== undefined && tokenizer !== null)
        tokBuf = await readSource(mod, tokenizer, { what: 'the tokenizer', signal, openPath: env.openPath });
    }
    throwIfAborted(signal);
    const parts = [];
    let report;
    try {
      report = mod.quantizeModel(modelBuf, tokBuf, name, type, allowRequantize,
        (view) => { if (onChunk) onChunk(view.slice()); else parts.push(view.slice()); },
        onProgress ? (done, total) => onProgress({ phase: 'quantize', done, total }) : null);
    } catch (e) {
      throw toQkvError(e);
    }
    let bytes = null;
    if (!onChunk) {
      bytes = new Uint8Array(report.outBytes);
      let off = 0;
      for (const p of parts) { bytes.set(p, off); off += p.byteLength; }
    }
    return { bytes, inBytes: report.inBytes, outBytes: report.outBytes, fromGguf: report.fromGguf, fromHuggingFace: report.fromHuggingFace, tensors: report.tensors };
  } catch (e) {
    throw e instanceof QkvError ? e : toQkvError(e);
  } finally {
    modelBuf?.delete();
    tokBuf?.delete();
  }
}
