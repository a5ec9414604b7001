// qkv for browsers and workers: the pthreads build where the page is cross-origin isolated
// (SharedArrayBuffer available), the single-thread build everywhere else.
import { Model, QkvError, Session, loadModelWith } from './core.js';

export { Model, QkvError, Session };
export { ErrorCodes } from './errors.js';
export { EncoderDecoderModel } from './encdec.js';

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

const browserEnv = {
  openPath: null,
  async load({ threads = 'auto' }) {
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
    if (!cache.has(name)) cache.set(name, instantiate(name));
    let mod;
    try {
      mod = await cache.get(name);
    } catch (e) {
      cache.delete(name);
      throw new QkvError('internal', `cannot start the WebAssembly engine (${name}): ${e.message}`, { cause: e });
    }
    const threaded = name === 'qkv-mt';
    return { mod, runtime: { threads: threaded ? wanted : 1, threading: { mode: threaded ? 'pthreads' : 'single', reason } } };
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
