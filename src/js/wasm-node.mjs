// Loads the Emscripten/Embind module (dist/qkv.mjs + dist/qkv.wasm) under Node.
// Emscripten 3.1.6's ES6 output expects CommonJS globals under Node and would try to fetch()
// the .wasm by path, so we define the globals and hand it the bytes ourselves.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const distDir = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist');

let modulePromise = null;

/** Returns the (cached) instantiated WASM module. */
export function loadWasmModule() {
  if (!modulePromise) {
    modulePromise = (async () => {
      const glue = join(distDir, 'qkv.mjs');
      globalThis.__dirname ??= distDir;
      globalThis.require ??= createRequire(glue);
      let factory;
      try {
        factory = (await import(glue)).default;
      } catch (e) {
        throw new Error(`qkv: the WASM build is missing (${glue}); run scripts/build-wasm.sh first`, { cause: e });
      }
      const wasmBinary = await readFile(join(distDir, 'qkv.wasm'));
      return factory({ wasmBinary });
    })();
  }
  return modulePromise;
}

/** Copies a file (or bytes) into a fresh WASM-heap buffer: the only copy the engine keeps. */
export async function toHeapBuffer(mod, source) {
  const bytes = typeof source === 'string' ? await readFile(source) : source;
  const buf = new mod.Buffer(bytes.byteLength);
  buf.view().set(bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes));
  return buf;
}
