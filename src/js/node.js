// qkv for Node: loadModel() accepts paths and file: URLs besides the browser's sources, and
// runs on the pthreads build (all cores) unless one thread is asked for.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { Model, QkvError, Session, loadModelWith } from './core.js';
import { MAX_WASM_THREADS, hardwareThreads, loadWasmModule } from './wasm-node.mjs';

export { Model, QkvError, Session };
export { ErrorCodes } from './errors.js';
export { EncoderDecoderModel } from './encdec.js';

async function openPath(path, signal) {
  let st;
  try {
    st = await stat(path);
  } catch (e) {
    throw new QkvError('io', `cannot open ${path}: ${e.code === 'ENOENT' ? 'no such file' : e.message}`, { cause: e });
  }
  if (!st.isFile()) throw new QkvError('io', `cannot read ${path}: not a regular file`);
  return { size: st.size, chunks: createReadStream(path, { highWaterMark: 1 << 22, signal }) };
}

const nodeEnv = {
  openPath,
  async load({ threads = 'auto' }) {
    const hw = hardwareThreads();
    const wanted = threads === 'auto' ? Math.min(hw, MAX_WASM_THREADS) : Math.min(threads, MAX_WASM_THREADS);
    const { mod, threaded, reason } = await loadWasmModule({ threads: wanted });
    return {
      mod,
      runtime: {
        threads: threaded ? wanted : 1,
        threading: { mode: threaded ? 'pthreads' : 'single', reason },
      },
    };
  },
};

/**
 * Loads a llama2.c model and its tokenizer.
 * @param {string | URL | Blob | ArrayBuffer | ArrayBufferView | AsyncIterable<Uint8Array>} source
 * @param {import('../../types/index.js').LoadOptions} options
 */
export function loadModel(source, options = {}) {
  return loadModelWith(nodeEnv, source, options);
}
