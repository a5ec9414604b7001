// Node: a directory given as a model is a Hugging Face checkpoint (loadModel, quantize, the CLI).
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { QkvError } from './errors.js';
import { isHfFileName } from './source.js';

/** The error text for a directory that is not a checkpoint (the native CLI's words). */
export const notCheckpoint = (path) => `${path} is a directory without config.json: not a Hugging Face checkpoint`;

// A directory is a Hugging Face checkpoint: the files qkv reads from it (config.json,
// tokenizer*.json, *.safetensors but Mistral's consolidated.safetensors duplicate, the index,
// 1_Pooling/config.json); null for anything else.
export async function listDir(path) {
  let st;
  try {
    st = await stat(path);
  } catch {
    return null;
  }
  if (!st.isDirectory()) return null;
  const pick = async (dir) => (await readdir(dir).catch(() => [])).sort()
    .filter((n) => isHfFileName(n) && !n.startsWith('consolidated')).map((n) => join(dir, n));
  const files = [...await pick(path), ...await pick(join(path, '1_Pooling'))];
  if (!files.some((f) => f === join(path, 'config.json'))) {
    throw new QkvError('io', notCheckpoint(path));
  }
  return files;
}

