// Image-embedding throughput of a CLIP ViT-B/16-shaped image encoder (random F16 weights, 224 x
// 224 input: 196 patches + the class token, 12 layers of width 768) in Node's WASM build with 1
// and 2 threads, and in the native CLI. A benchmark (prints figures), not a test:
//
//   node bench/bench-vision.mjs [--images 4] [--threads 1,2] [--dir build/bench-vision] [--chromium]
//
// --chromium: the browser build in headless Chromium instead (one page per thread count; the
// image goes in as a PNG Blob), and no native row.
//
// Needs build/qkv_test_models (scripts/build.sh native) for the model, dist/ for WASM and
// build/qkv for the native row (skipped when absent).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { loadModel } from '../src/js/node.js';

const root = join(fileURLToPath(import.meta.url), '..', '..');
const arg = (name, def) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : def;
};
const images = Number(arg('images', 4));
const threads = arg('threads', '1,2').split(',').map(Number);
const dir = arg('dir', join(root, 'build', 'bench-vision'));
mkdirSync(dir, { recursive: true });
const model = join(dir, 'clip-vit-b16.gguf');
if (!existsSync(model)) {
  const r = spawnSync(join(root, 'build', 'qkv_test_models'), ['--vision-shape', model, '768', '3072', '12', '12', '16', '224'], { stdio: 'inherit' });
  if (r.status !== 0) process.exit(1);
}
// 320 x 240 photos-to-be: the preprocessing (resize, crop) is part of what is timed.
const W = 320, H = 240;
const img = { data: new Uint8Array(W * H * 4).map((_, i) => (i * 2654435761) >>> 24), width: W, height: H };
if (process.argv.includes('--chromium')) {
  const { launchBrowser } = await import('../tests/js/browser.mjs');
  const { serveBenchPage } = await import('./bench-server.mjs');
  const rgb = Buffer.alloc(W * H * 3);
  for (let i = 0; i < W * H; i++) for (let c = 0; c < 3; c++) rgb[i * 3 + c] = img.data[i * 4 + c];
  writeFileSync(join(dir, 'image.ppm'), Buffer.concat([Buffer.from(`P6\n${W} ${H}\n255\n`), rgb]));
  if (spawnSync('sh', ['-c', `pnmtopng ${join(dir, 'image.ppm')} > ${join(dir, 'image.png')}`]).status !== 0) process.exit(1);
  const { server, base } = await serveBenchPage({ root, modelDir: dir, title: 'qkv: image embeddings', script: '/qkv/bench/vision-page.mjs' });
  const browser = await launchBrowser();
  console.log(`CLIP ViT-B/16 shape, random F16 weights, ${W}x${H} PNG Blob -> 224x224, ${images} images, headless Chromium`);
  try {
    for (const t of threads) {
      const context = await browser.newContext();
      try {
        const page = await context.newPage();
        await page.goto(base);
        await page.waitForFunction(() => window.benchReady === true, null, { timeout: 60000 });
        const info = await page.evaluate((c) => window.setup(c), { model: '/models/clip-vit-b16.gguf', threads: t, png: '/models/image.png' });
        const ms = await page.evaluate((n) => window.pass(n), images);
        console.log(`WASM (SIMD ${info.simd}) in Chromium, ${info.threads} thread${info.threads > 1 ? 's' : ''}: ${ms.toFixed(0)} ms/image (${(1000 / ms).toFixed(2)} images/s)`);
      } finally {
        await context.close();
      }
    }
  } finally {
    await browser.close();
    server.close();
  }
  process.exit(0);
}
console.log(`CLIP ViT-B/16 shape, random F16 weights, ${W}x${H} RGBA -> 224x224, ${images} images, node ${process.version}`);
for (const t of threads) {
  const m = await loadModel(model, { threads: t });
  await m.embedImage(img);  // warm-up
  const t0 = performance.now();
  for (let i = 0; i < images; i++) await m.embedImage(img);
  const ms = (performance.now() - t0) / images;
  console.log(`WASM (SIMD ${m.info.simd}), ${t} thread${t > 1 ? 's' : ''}: ${ms.toFixed(0)} ms/image (${(1000 / ms).toFixed(2)} images/s)`);
  m.dispose();
}
const native = join(root, 'build', 'qkv');
if (existsSync(native)) {
  const rgb = Buffer.alloc(W * H * 3);
  for (let i = 0; i < W * H; i++) for (let c = 0; c < 3; c++) rgb[i * 3 + c] = img.data[i * 4 + c];
  const ppm = join(dir, 'image.ppm');
  writeFileSync(ppm, Buffer.concat([Buffer.from(`P6\n${W} ${H}\n255\n`), rgb]));
  for (const t of threads) {
    const run = (n) => {
      const t0 = performance.now();
      const r = spawnSync(native, ['embed-image', model, ...Array(n).fill(ppm), '--threads', String(t)]);
      if (r.status !== 0) throw new Error(r.stderr.toString());
      return performance.now() - t0;
    };
    // The difference of two runs leaves out loading the model.
    const ms = (run(images + 1) - run(1)) / images;
    console.log(`native, ${t} thread${t > 1 ? 's' : ''}: ${ms.toFixed(0)} ms/image (${(1000 / ms).toFixed(2)} images/s)`);
  }
}
