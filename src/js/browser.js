// qkv for browsers and workers: the pthreads build where the page is cross-origin isolated
// (SharedArrayBuffer available), the single-thread build everywhere else.
import { Model, QkvError, Session, loadModelWith } from './core.js';
import { QUANTIZE_TYPES, quantizeWith } from './quantize.js';
import { TRAIN_PRESETS, Trainer, createTrainerWith, trainOptions } from './trainer.js';
import { createRemoteTrainer } from './train-worker-client.js';
import { chooseSimd } from './util.js';
import { browserStore, browserStores, cachedUrls, clearEntries, deleteEntries, listEntries } from './model-cache.js';

export { Model, QkvError, Session, TRAIN_PRESETS, Trainer };
export { ErrorCodes } from './errors.js';
export { QUANTIZE_TYPES };
export { EncoderDecoderModel } from './encdec.js';
export { ImageEncoderModel } from './vision.js';

const MAX_WASM_THREADS = 8;
const cache = new Map();

function distUrl(file) { return new URL(`../../dist/${file}`, import.meta.url).href; }

async function instantiate(name) {
  const glue = distUrl(`${name}.mjs`);
  const factory = (await import(/* @vite-ignore */ glue)).default;
  return factory({
    locateFile: (f) => distUrl(f),
    mainScriptUrlOrBlob: glue,
  });
}

async function cached(name) {
  if (!cache.has(name)) cache.set(name, instantiate(name));
  try {
    return await cache.get(name);
  } catch (e) {
    cache.delete(name);
    throw e;
  }
}

const browserEnv = {
  openPath: null,
  openCache: browserStore,
  async load({ threads = 'auto', simd = 'auto' }) {
    const hw = Math.max(1, globalThis.navigator?.hardwareConcurrency ?? 1);
    const isolated = globalThis.crossOriginIsolated === true && typeof SharedArrayBuffer !== 'undefined';
    const wanted = threads === 'auto' ? Math.min(hw, MAX_WASM_THREADS) : Math.min(threads, MAX_WASM_THREADS);
    let name, reason;
    if (!isolated) {
      name = 'qkv';
      reason = 'the page is not cross-origin isolated (serve it with COOP: same-origin and COEP: require-corp for threads)';
    } else if (wanted === 1) {
      name = 'qkv';
      reason = hw === 1 ? 'one hardware thread' : 'one thread requested';
    } else {
      name = 'qkv-mt';
      reason = 'cross-origin isolated page: WebAssembly threads available';
    }
    // The relaxed-SIMD variant where the engine runs it; 'auto' falls back to the baseline build
    // if the variant cannot be fetched (a deployment that left it out).
    let variant = chooseSimd(simd);
    let mod;
    try {
      if (variant.relaxed) {
        try {
          mod = await cached(`${name}-relaxed`);
        } catch (e) {
          if (simd === 'relaxed') throw e;
          variant = { relaxed: false, reason: `the relaxed-SIMD build failed to load (${e.message})` };
        }
      }
      mod ??= await cached(name);
    } catch (e) {
      throw new QkvError('internal', `cannot start the WebAssembly engine (${name}): ${e.message}`, { cause: e });
    }
    const threaded = name === 'qkv-mt';
    return {
      mod,
      runtime: {
        threads: threaded ? wanted : 1,
        threading: { mode: threaded ? 'pthreads' : 'single', reason },
        simd: { build: variant.relaxed ? 'wasm-relaxed' : 'wasm', reason: variant.reason },
      },
    };
  },
};

/**
 * Loads a llama2.c model and its tokenizer from a URL, Blob/File, bytes or an async iterable of chunks.
 * @param {string | URL | Blob | ArrayBuffer | ArrayBufferView | AsyncIterable<Uint8Array>} source
 * @param {import('../../types/index.js').LoadOptions} options
 */
export function loadModel(source, options = {}) {
  return loadModelWith(browserEnv, source, options);
}

/**
 * Re-encodes a model's weight matrices to a block type (the native `qkv quantize`).
 * @param {string | URL | Blob | ArrayBuffer | ArrayBufferView | AsyncIterable<Uint8Array>} source
 * @param {import('../../types/index.js').QuantizeOptions} options
 */
export function quantize(source, options) {
  return quantizeWith(browserEnv, source, options);
}

/**
 * Creates a trainer (fresh model or fine-tuning) on text. On a page it runs in a dedicated
 * Worker by default ({worker: 'auto'}), with threads where the page is cross-origin isolated;
 * inside a worker, or with {worker: false}, it runs in this thread.
 * @param {import('../../types/index.js').TrainOptions} options
 */
export async function createTrainer(options) {
  const t = trainOptions(options);  // bad options fail here, before a worker starts
  const onPage = typeof globalThis.document !== 'undefined' && typeof Worker === 'function';
  if (t.worker === true || (t.worker === 'auto' && onPage)) return createRemoteTrainer(options);
  return createTrainerWith(browserEnv, options);
}

/**
 * The model cache's entries (loadModel's `cache` option): every backend the browser has, or the
 * one options.cache names.
 * @param {{cache?: import('../../types/index.js').CacheOption}} [options]
 */
export async function listCachedModels(options) {
  return listEntries(await browserStores(options));
}

/**
 * Deletes a model's cached download (every file of a split model); resolves to how many entries there were.
 * @param {string | URL | Array<string | URL>} source
 * @param {{cache?: import('../../types/index.js').CacheOption}} [options]
 */
export async function deleteCachedModel(source, options) {
  return deleteEntries(await browserStores(options), cachedUrls(source));
}

/**
 * Deletes every cached model; resolves to {entries, bytes} removed.
 * @param {{cache?: import('../../types/index.js').CacheOption}} [options]
 */
export async function clearModelCache(options) {
  return clearEntries(await browserStores(options));
}
