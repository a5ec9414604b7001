// Runs in the page bench/bench-vision.mjs --chromium serves: qkv's browser build embedding one
// PNG (a Blob, decoded by the browser as a page would) with a CLIP-shaped image encoder.
import { loadModel } from '/qkv/src/js/browser.js';

let model = null, image = null;

window.setup = async ({ model: url, threads, png }) => {
  model = await loadModel(url, { threads });
  image = new Blob([await (await fetch(png)).arrayBuffer()], { type: 'image/png' });
  await model.embedImage(image);  // warm-up
  return { threads: model.info.threading.threads, simd: model.info.simd };
};

// Milliseconds per image over n images.
window.pass = async (n) => {
  const t = performance.now();
  for (let i = 0; i < n; i++) await model.embedImage(image);
  return (performance.now() - t) / n;
};

window.benchReady = true;
