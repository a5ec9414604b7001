// Image decoding speed: qkv's PNG and JPEG decoders (C++ in WASM, the path of Node's embedImage
// and the Node CLI) beside Debian's libjpeg-turbo (djpeg, native with SIMD) and libpng (through
// netpbm's pngtopam), on photo-sized pictures generated here and encoded by cjpeg / pnmtopng.
// A benchmark (prints figures), not a test:
//
//   node bench/bench-decode.mjs [--width 3000] [--height 2000] [--runs 5] [--dir build/bench-decode]
//
// Needs dist/ (the WASM build), cjpeg, djpeg, pnmtopng and pngtopam (scripts/setup.sh). Times are
// the median of --runs; the native tools' include starting the process (a few ms).
import { execSync } from 'node:child_process';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { loadWasmModule } from '../src/js/wasm-node.mjs';

const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
const arg = (name, def) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : def;
};
const W = Number(arg('width', 3000)), H = Number(arg('height', 2000)), runs = Number(arg('runs', 5));
const dir = resolve(arg('dir', join(root, 'build', 'bench-decode')));
mkdirSync(dir, { recursive: true });

// Smooth gradients with some texture: compresses like a photo, not like noise or a flat fill.
const rgb = Buffer.alloc(W * H * 3);
let s = 1;
for (let y = 0; y < H; y++) {
  for (let x = 0; x < W; x++) {
    s = (s * 1103515245 + 12345) >>> 0;
    const n = (s >>> 28) - 8, i = (y * W + x) * 3;
    rgb[i] = (x * 255 / W + n) & 255;
    rgb[i + 1] = ((x + y) * 127 / (W + H) + 64 + 40 * Math.sin(x / 37) * Math.cos(y / 53) + n) & 255;
    rgb[i + 2] = (y * 255 / H - n) & 255;
  }
}
const ppm = join(dir, 'picture.ppm');
writeFileSync(ppm, Buffer.concat([Buffer.from(`P6\n${W} ${H}\n255\n`), rgb]));
const files = {
  'JPEG baseline 4:2:0 q85': ['cjpeg -quality 85 -sample 2x2', 'picture.jpg', 'djpeg -pnm'],
  'JPEG progressive 4:2:0 q85': ['cjpeg -quality 85 -sample 2x2 -progressive', 'picture-p.jpg', 'djpeg -pnm'],
  'PNG RGB 8-bit': ['pnmtopng -force', 'picture.png', 'pngtopam'],
};
const { mod } = await loadWasmModule({ threads: 1 });
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`Decoding a ${W}x${H} picture (${(W * H / 1e6).toFixed(1)} MP), median of ${runs}, node ${process.version}\n`);
console.log('| file | size | qkv (WASM) | Debian native |');
console.log('| --- | --- | --- | --- |');
for (const [name, [enc, out, dec]] of Object.entries(files)) {
  const path = join(dir, out);
  execSync(`${enc} ${ppm} > ${path}`, { stdio: ['ignore', 'ignore', 'ignore'] });
  const bytes = readFileSync(path);
  const qkv = [], native = [];
  for (let r = 0; r < runs; r++) {
    const buf = new mod.Buffer(bytes.length);
    buf.view().set(bytes);
    let t = performance.now();
    const img = mod.decodeImage(buf);
    qkv.push(performance.now() - t);
    buf.delete();
    if (img.width !== W || img.height !== H) throw new Error(`${name}: decoded ${img.width}x${img.height}`);
    t = performance.now();
    execSync(`${dec} ${path} > /dev/null`);
    native.push(performance.now() - t);
  }
  console.log(`| ${name} | ${(statSync(path).size / 1048576).toFixed(1)} MiB | ${median(qkv).toFixed(0)} ms | ` +
    `${median(native).toFixed(0)} ms (${dec.split(' ')[0]}) |`);
}
