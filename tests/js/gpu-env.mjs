// Running WebGPU tests without a GPU: Dawn (npm 'webgpu') on SwiftShader, the Vulkan driver that
// Debian's chromium ships. Dawn picks its driver when it loads (VK_ICD_FILENAMES, and
// LD_LIBRARY_PATH for chromium's libvulkan.so.1), so GPU work runs in a child process that
// prints one JSON object per line; the parent test checks them.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';

export const ICD = process.env.QKV_VK_ICD || '/usr/lib/chromium/vk_swiftshader_icd.json';
const CHROMIUM_LIB = '/usr/lib/chromium';

/** Why GPU tests cannot run here, or null. */
export function gpuSkipReason() {
  try {
    createRequire(import.meta.url).resolve('webgpu');
  } catch {
    return "npm package 'webgpu' is not installed (npm install)";
  }
  if (!existsSync(ICD)) return `SwiftShader Vulkan ICD ${ICD} is missing (apt-get install chromium)`;
  return null;
}

/** Runs `node file --child` with the GPU environment; returns {code, lines (parsed JSON), stderr}. */
export async function runGpuChild(file) {
  const env = {
    ...process.env, VK_ICD_FILENAMES: ICD,
    LD_LIBRARY_PATH: [process.env.LD_LIBRARY_PATH, CHROMIUM_LIB].filter(Boolean).join(':'),
  };
  const proc = spawn(process.execPath, [file, '--child'], { env });
  let stdout = '', stderr = '';
  proc.stdout.on('data', (d) => { stdout += d; });
  proc.stderr.on('data', (d) => { stderr += d; });
  const code = await new Promise((res) => proc.on('close', res));
  const lines = stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
  return { code, lines, stderr };
}

/** In the child: a WebGPU entry point from Dawn, with the WebGPU globals installed. */
export async function dawnGpu() {
  const { create, globals } = await import('webgpu');
  Object.assign(globalThis, globals);
  return create([]);
}
