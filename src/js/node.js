// qkv for Node: loadModel() accepts paths and file: URLs besides the browser's sources, and
// runs on the pthreads build (all cores) unless one thread is asked for.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { listDir } from './checkpoint-dir.js';
import { Model, QkvError, Session, loadModelWith } from './core.js';
import { QUANTIZE_TYPES, quantizeWith } from './quantize.js';
import { MAX_WASM_THREADS, hardwareThreads, loadWasmModule } from './wasm-node.mjs';
import { TRAIN_PRESETS, Trainer, createTrainerWith, trainOptions } from './trainer.js';
import { createRemoteTrainer } from './train-worker-client.js';
import { cachedUrls, clearEntries, deleteEntries, listEntries } from './model-cache.js';
import { nodeStore, nodeStores } from './model-cache-node.js';

export { Model, QkvError, Session, TRAIN_PRESETS, Trainer };
export { ErrorCodes } from './errors.js';
export { QUANTIZE_TYPES };
export { EncoderDecoderModel } from './encdec.js';
export { ImageEncoderModel } from './vision.js';

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
  openCache: nodeStore,
  listDir,
  async load({ threads = 'auto', simd = 'auto' }) {
    const hw = hardwareThreads();
    const wanted = threads === 'auto' ? Math.min(hw, MAX_WASM_THREADS) : Math.min(threads, MAX_WASM_THREADS);
    const { mod, threaded, reason, simd: simdInfo } = await loadWasmModule({ threads: wanted, simd });
    return {
      mod,
      runtime: {
        threads: threaded ? wanted : 1,
        threading: { mode: threaded ? 'pthreads' : 'single', reason },
        simd: simdInfo,
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

/**
 * Re-encodes a model's weight matrices to a block type (the native `qkv quantize`).
 * @param {string | URL | Blob | ArrayBuffer | ArrayBufferView | AsyncIterable<Uint8Array>} source
 * @param {import('../../types/index.js').QuantizeOptions} options
 */
export function quantize(source, options) {
  return quantizeWith(nodeEnv, source, options);
}

/**
 * Creates a trainer (fresh model or fine-tuning) on text. In Node it runs in this thread on the
 * pthreads build by default; {worker: true} runs it in a worker thread.
 * @param {import('../../types/index.js').TrainOptions} options
 */
export async function createTrainer(options) {
  const t = trainOptions(options);  // bad options fail here, before a worker starts
  if (t.worker === true) return createRemoteTrainer(options);
  return createTrainerWith(nodeEnv, options);
}

/**
 * The model cache's entries (loadModel's `cache` option; in Node a directory, by default
 * ~/.cache/qkv/models).
 * @param {{cache?: import('../../types/index.js').CacheOption}} [options]
 */
export async function listCachedModels(options) {
  return listEntries(await nodeStores(options));
}

/**
 * Deletes a model's cached download (every file of a split model); resolves to how many entries there were.
 * @param {string | URL | Array<string | URL>} source
 * @param {{cache?: import('../../types/index.js').CacheOption}} [options]
 */
export async function deleteCachedModel(source, options) {
  return deleteEntries(await nodeStores(options), cachedUrls(source));
}

/**
 * Deletes every cached model; resolves to {entries, bytes} removed.
 * @param {{cache?: import('../../types/index.js').CacheOption}} [options]
 */
export async function clearModelCache(options) {
  return clearEntries(await nodeStores(options));
}
