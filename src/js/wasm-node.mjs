// Loads the Emscripten/Embind module under Node: the pthreads build (dist/qkv-mt.*) by default,
// the single-thread build (dist/qkv.*) when asked for one thread or when the threaded one is absent;
// each in its relaxed-SIMD variant (dist/qkv-mt-relaxed.*, qkv-relaxed.*) where Node runs relaxed
// SIMD (Node >= 22, or --experimental-wasm-relaxed-simd) unless {simd: 'baseline'}.
// Emscripten 3.1.6's ES6 output expects CommonJS globals under Node and would try to fetch()
// the .wasm by path, so we define the globals and hand it the bytes ourselves.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { availableParallelism, cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { chooseSimd } from './util.js';

export const distDir = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist');

const cache = new Map();

/** Hardware threads of this machine. */
export function hardwareThreads() {
  return typeof availableParallelism === 'function' ? availableParallelism() : cpus().length;
}

async function instantiate(name) {
  const glue = join(distDir, `${name}.mjs`);
  globalThis.__dirname ??= distDir;
  globalThis.require ??= createRequire(glue);
  let factory;
  try {
    factory = (await import(pathToFileURL(glue).href)).default;
  } catch (e) {
    const err = new Error(`the WASM build is missing or broken (${glue}); run scripts/build.sh wasm`, { cause: e });
    err.code = 'internal';
    throw err;
  }
  const wasmBinary = await readFile(join(distDir, `${name}.wasm`));
  const mod = await factory({ wasmBinary, mainScriptUrlOrBlob: pathToFileURL(glue).href });
  // The pthread pool's workers must not keep the process alive once the program is done with
  // the engine: those started up front, and those the pool adds when more threads are asked for.
  const pt = mod.PThread;
  if (pt) {
    for (const w of [...(pt.unusedWorkers ?? []), ...(pt.runningWorkers ?? [])]) w.unref?.();
    const allocate = pt.allocateUnusedWorker;
    if (typeof allocate === 'function') {
      pt.allocateUnusedWorker = function allocateUnref(...args) {
        const r = allocate.apply(this, args);
        pt.unusedWorkers.at(-1)?.unref?.();
        return r;
      };
    }
  }
  return mod;
}

/** Threads the pthreads build can run (its worker pool is started with this many). */
export const MAX_WASM_THREADS = 8;

/**
 * Returns {mod, threaded, reason, simd: {build: 'wasm' | 'wasm-relaxed', reason}}. threads: 'auto' | number (1 = the
 * single-thread build); simd: 'auto' | 'relaxed' | 'baseline'.
 * Modules are cached: each build is instantiated once per process.
 */
export async function loadWasmModule({ threads = 'auto', simd = 'auto' } = {}) {
  const haveMt = existsSync(join(distDir, 'qkv-mt.wasm'));
  let name, reason;
  if (threads === 1) {
    name = 'qkv';
    reason = 'one thread requested';
  } else if (!haveMt) {
    name = 'qkv';
    reason = 'the pthreads build (dist/qkv-mt.wasm) is not present';
  } else {
    name = 'qkv-mt';
    reason = 'Node supports WebAssembly threads';
  }
  const variant = chooseSimd(simd, { built: existsSync(join(distDir, `${name}-relaxed.wasm`)) });
  const file = variant.relaxed ? `${name}-relaxed` : name;
  if (!cache.has(file)) cache.set(file, instantiate(file));
  try {
    return {
      mod: await cache.get(file), threaded: name === 'qkv-mt', reason,
      simd: { build: variant.relaxed ? 'wasm-relaxed' : 'wasm', reason: variant.reason },
    };
  } catch (e) {
    cache.delete(file);
    throw e;
  }
}

/** Copies a file (or bytes) into a fresh WASM-heap buffer: the only copy the engine keeps. */
export async function toHeapBuffer(mod, source) {
  const bytes = typeof source === 'string' ? await readFile(source) : source;
  const buf = new mod.Buffer(bytes.byteLength);
  buf.view().set(bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes));
  return buf;
}
