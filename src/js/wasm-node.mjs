// Loads the Emscripten/Embind module under Node: the pthreads build (dist/qkv-mt.*) by default,
// the single-thread build (dist/qkv.*) when asked for one thread or when the threaded one is absent.
// Emscripten 3.1.6's ES6 output expects CommonJS globals under Node and would try to fetch()
// the .wasm by path, so we define the globals and hand it the bytes ourselves.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { availableParallelism, cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

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
  // The pthread pool's workers (all started up front) must not keep the process alive once
  // the program is done with the engine.
  const pt = mod.PThread;
  if (pt) for (const w of [...(pt.unusedWorkers ?? []), ...(pt.runningWorkers ?? [])]) w.unref?.();
  return mod;
}

/** Threads the pthreads build can run (its worker pool is started with this many). */
export const MAX_WASM_THREADS = 8;

/**
 * Returns {mod, threaded, reason}. threads: 'auto' | number (1 = the single-thread build).
 * Modules are cached: each build is instantiated once per process.
 */
export async function loadWasmModule({ threads = 'auto' } = {}) {
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
  if (!cache.has(name)) cache.set(name, instantiate(name));
  try {
    return { mod: await cache.get(name), threaded: name === 'qkv-mt', reason };
  } catch (e) {
    cache.delete(name);
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
