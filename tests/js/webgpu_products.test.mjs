// WebGPU weight products and embedding-row gather (src/js/gpu-products.js, src/webgpu/
// matvec/matmul/gather/weights.wgsl) for every stored weight type, against the C++ reference:
// weights are quantized by the C++ quantizers or filled with random bytes (every quant bit
// pattern, with finite f16 scales), decoded by dequantize_row_ref (Embind, test-only:
// bindings/gpu_test_bindings.cpp), and multiplied in float64 here.
//
// Tolerance of a product: |gpu - ref| <= 1e-5 * sum_c |W[r][c] x[t][c]| (+ the same share of
// the bias and accumulated terms). The GPU decodes each weight exactly as the C++ code does (the
// same f32 products; at most one extra rounding where it fuses a multiply-add), then sums in
// f32 along a tree of about 40 additions deep (8 vec4 dot products per 32-value unit, the units
// of a thread, a 6-level workgroup reduction): the rounding error is below 40 * 2^-24 * sum |w x|
// = 2.4e-6 * sum |w x|, so 1e-5 leaves a 4x margin yet fails on any wrong value or bit.
// GLU adds the error of act(g) * u propagated from those of g and u (|silu'|, |gelu'| <= 1.13),
// and 1e-5 relative for the shader's exp/tanh. RMSNorm folded into decode (NORM) adds 1e-5 of
// |W xn| for the f32 mean square and its root.
//
// RoPE and the KV-cache write in the epilogue: the rotation of the reference's pair (g0, g1)
// carries their product errors (REL * (sum |w x| of both)) plus REL of the rotated terms for the
// f32 multiply-adds.
//
// Like tests/js/webgpu.test.mjs the GPU work runs in a child process (Dawn on SwiftShader).
import { fileURLToPath } from 'node:url';
import { dawnGpu, gpuSkipReason, runGpuChild } from './gpu-env.mjs';

const REL = 1e-5;
const TYPES = ['f32', 'f16', 'bf16', 'q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'q4_k', 'q5_k', 'q6_k'];
const BLOCK = { f32: 1, f16: 1, bf16: 1, q8_0: 32, q4_0: 32, q4_1: 32, q5_0: 32, q5_1: 32, q4_k: 256, q5_k: 256, q6_k: 256 };
// Byte offsets of the f16 scales in a block, and the block size in bytes.
const SCALES = {
  q8_0: [[0], 34], q4_0: [[0], 18], q4_1: [[0, 2], 20], q5_0: [[0], 22], q5_1: [[0, 2], 24],
  q4_k: [[0, 2], 144], q5_k: [[0, 2], 176], q6_k: [[208], 210],
};

/** xorshift32 in [0, 1). */
function rng(seed) {
  let x = seed | 0 || 1;
  return () => { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; return (x >>> 0) / 4294967296; };
}

// ---------------------------------------------------------------- cases

// Types whose GLU is also tested in the prefill kernel (the GLU code is the same for every type:
// only the weight read differs, and that is tested in decode GLU for every type). Pipelines are
// what costs time on SwiftShader, so each is compiled for a reason.
const PREFILL_GLU = ['f16', 'q5_0', 'q4_k'];
// Types whose decode is also tested with RMSNorm folded in (the norm code is the same for every type).
const NORM_TYPES = ['f32', 'q4_0', 'q6_k'];

/**
 * Every type x {n = 1, 3, 17, 67} x odd shapes (37 rows: not a multiple of any row tile), half
 * of them split over several buffers; accumulate, bias, GLU silu/gelu on decode and prefill.
 * Prefill runs on the small 16 x 16 tile (prefillGrid 4: several row and token tiles, and a
 * fast compile on SwiftShader); the larger tiles real GPUs get are tested on two types.
 */
function productCases() {
  const cases = [];
  TYPES.forEach((type, ti) => {
    const b = BLOCK[type];
    // Float rows of odd length (f16/bf16 rows then start mid-word); block rows of 3 or 70 units.
    const colsList = b === 1 ? [77, 2085] : b === 32 ? [96, 2240] : [512, 2304];
    const [a1, a2] = ti % 2 ? ['silu', 'gelu'] : ['gelu', 'silu'];
    const variants = [
      { n: 1 }, { n: 3 }, { n: 17 }, { n: 67 },
      { n: 1, accumulate: true, bias: true }, { n: 17, accumulate: true, bias: true },
      { n: 1, glu: a1 }, { n: 1, glu: a1, bias: true, accumulate: true },
    ];
    if (PREFILL_GLU.includes(type)) variants.push({ n: 67, glu: a2, bias: true }, { n: 3, glu: a2, accumulate: true });
    if (type === 'q4_k') variants.push({ n: 67, grid: 16 });
    if (type === 'q8_0') variants.push({ n: 33, grid: 8, accumulate: true });
    // RMSNorm folded into decode (matvec NORM): plain, and with bias, GLU and accumulate.
    if (NORM_TYPES.includes(type)) variants.push({ n: 1, norm: true }, { n: 1, norm: true, glu: a2, bias: true, accumulate: true });
    // A scaled residual add in the epilogue (Granite's residual multiplier), decode and prefill.
    if (NORM_TYPES.includes(type)) variants.push({ n: 1, accumulate: true, bias: true, scale: 0.25 }, { n: 17, accumulate: true, scale: -1.5 });
    variants.forEach((v, vi) => {
      const cols = colsList[(vi + ti) % 2 === 0 || v.n === 67 ? 0 : 1];
      const rows = v.n === 1 && vi === 0 ? 301 : 37;
      const split = vi % 2 === 1;
      cases.push({
        type, rows, cols, grid: 4, ...v, split, random: type === 'bf16' || (b > 1 ? vi % 2 === 0 : vi % 3 === 0),
        seed: 1000 + ti * 100 + vi,
        name: `${type} ${rows}x${cols} n=${v.n}${v.accumulate ? ' acc' : ''}${v.scale ? ` scale ${v.scale}` : ''}${v.bias ? ' bias' : ''}${v.glu ? ` glu-${v.glu}` : ''}${v.norm ? ' rmsnorm' : ''}${split ? ' split' : ''}${v.grid ? ` tile ${4 * v.grid}` : ''}`,
      });
    });
  });
  return cases;
}

/**
 * RoPE and the KV-cache write in the product epilogue (products.wgsl ROPE, FLAG_CACHE), decode
 * and prefill: both pair layouts, partial rotary (dims from rot on kept), bias before the
 * rotation, the folded RMSNorm, rows at step.pos + t (cache) or t, and the cache write without
 * a rotation (v). Reference: the float64 product, then the rotation with the same cos/sin table.
 */
function ropeCases() {
  const list = [
    { type: 'f32', heads: 3, hd: 10, rot: 6, mode: 'halves', cols: 77, bias: true, cache: true },
    { type: 'q4_0', heads: 4, hd: 16, rot: 16, mode: 'adjacent', cols: 96, norm: true },
    { type: 'q4_k', heads: 5, hd: 8, rot: 8, mode: 'halves', cols: 512, cache: true },
    { type: 'q8_0', heads: 2, hd: 12, rot: 0, mode: null, cols: 64, bias: true, cache: true },
    // Per-head Q/K RMSNorms in the decode epilogue (qkNorm): a head of 68 rows is 17 passes of
    // the workgroup's 4; with RoPE of both layouts, partial rotary, bias, the folded pre-norm;
    // without RoPE (a layer that skips it).
    { type: 'q4_k', heads: 3, hd: 68, rot: 40, mode: 'halves', cols: 256, qk: true, norm: true, cache: true, only1: true },
    { type: 'f16', heads: 2, hd: 16, rot: 16, mode: 'adjacent', cols: 45, qk: true, bias: true, only1: true },
    { type: 'q8_0', heads: 2, hd: 8, rot: 0, mode: null, cols: 64, qk: true, cache: true, only1: true },
  ];
  const cases = [];
  list.forEach((c, ci) => {
    for (const n of c.only1 ? [1] : [1, 3, 67]) {
      cases.push({
        ...c, n, rows: c.heads * c.hd, norm: c.norm && n === 1, grid: 4, seed: 7000 + 10 * ci + n,
        name: `rope ${c.mode ?? 'none'} ${c.type} ${c.heads}x${c.hd} rot ${c.rot} n=${n}${c.bias ? ' bias' : ''}${c.cache ? ' cache' : ''}${c.norm && n === 1 ? ' rmsnorm' : ''}${c.qk ? ' q/k norm' : ''}`,
      });
    }
  });
  return cases;
}

function gatherCases() {
  return TYPES.map((type, ti) => ({
    type, rows: 37, cols: BLOCK[type] === 1 ? 77 : BLOCK[type] === 32 ? 96 : 512, n: 9,
    scale: ti % 2 ? 1 : 0.125, split: ti % 2 === 0, random: ti % 3 !== 0, seed: 5000 + ti,
    name: `gather ${type}`,
  }));
}

// ---------------------------------------------------------------- child: runs on the GPU

/** A weight's stored bytes: quantized from random floats, or random bits with finite scales. */
function makeWeight(mod, c, rowBytes, r) {
  const { type, rows, cols } = c;
  // bf16 has no C++ quantizer: always random bits.
  if ((c.random && type !== 'f32') || type === 'bf16') {
    const bytes = new Uint8Array(rows * rowBytes);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (r() * 256) | 0;
    const half = () => {  // a random finite f16: any exponent but 31
      const h = (r() * 65536) | 0;
      return ((h >> 10) & 31) === 31 ? h & ~0x4000 : h;
    };
    if (type === 'f16' || type === 'bf16') {
      const u16 = new Uint16Array(bytes.buffer);
      for (let i = 0; i < u16.length; i++) {
        // bf16: exponents 2^-20 .. 2^20 so that no product overflows f32
        u16[i] = type === 'f16' ? half() : (u16[i] & 0x807f) | ((107 + ((r() * 40) | 0)) << 7);
      }
    } else {
      const [offs, bb] = SCALES[type];
      for (let blk = 0; blk < bytes.length / bb; blk++) {
        for (const o of offs) {
          const h = half();
          bytes[blk * bb + o] = h & 255;
          bytes[blk * bb + o + 1] = h >> 8;
        }
      }
    }
    return bytes;
  }
  const vals = new Float32Array(rows * cols);
  for (let i = 0; i < vals.length; i++) vals[i] = (r() * 2 - 1) * (1 + 3 * r());
  return mod.gpuTestQuantize(type, vals, rows, cols);
}

const randomFloats = (n, r, scale = 1) => Float32Array.from({ length: n }, () => (r() * 2 - 1) * scale);

async function child() {
  const emit = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
  const { loadWasmModule } = await import('../../src/js/wasm-node.mjs');
  const { mod } = await loadWasmModule({ threads: 1 });
  const { requestQkvDevice } = await import('../../src/js/webgpu.js');
  const { createProducts, gpuRowBytes, productHeader } = await import('../../src/js/gpu-products.js');
  const { device, adapterInfo } = await requestQkvDevice({ gpu: await dawnGpu() });
  emit({ adapter: adapterInfo });
  let gpuError = null;
  device.onuncapturederror = (e) => { gpuError ??= e.error?.message ?? String(e.error); };
  const U = GPUBufferUsage;
  const step = device.createBuffer({ size: 16, usage: U.UNIFORM | U.COPY_DST });

  const makeBuf = (size, data, usage = U.STORAGE | U.COPY_DST | U.COPY_SRC, at = 0) => {
    const b = device.createBuffer({ size: Math.ceil(size / 4) * 4, usage });
    if (data) device.queue.writeBuffer(b, at, data);
    return b;
  };
  async function read(buffer, offset, n) {
    const rb = device.createBuffer({ size: n * 4, usage: U.COPY_DST | U.MAP_READ });
    const enc = device.createCommandEncoder();
    enc.copyBufferToBuffer(buffer, offset, rb, 0, n * 4);
    device.queue.submit([enc.finish()]);
    await rb.mapAsync(GPUMapMode.READ);
    const out = new Float32Array(rb.getMappedRange().slice(0));
    rb.destroy();
    return out;
  }
  async function run(op, n) {
    await op.ready;
    device.queue.writeBuffer(step, 0, new Uint32Array([n, 0, 0, 0]));
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    op.encode(pass, n);
    pass.end();
    device.queue.submit([enc.finish()]);
  }

  const plain = createProducts(device);
  const X_OFF = 256, Y_OFF = 512;
  const only = process.env.QKV_PRODUCTS_ONLY;  // a name's part: only those cases (a quicker run while working on them)
  for (const c of productCases()) {
    if (only && !c.name.includes(only)) continue;
    const res = { name: c.name };
    try {
      const r = rng(c.seed);
      const { type, rows, cols, n } = c;
      const rowBytes = gpuRowBytes(type, cols);
      const products = createProducts(device, { prefillGrid: c.grid, ...(c.split ? { maxBindingBytes: 10 * rowBytes + 13 } : {}) });
      const wBytes = makeWeight(mod, c, rowBytes, r);
      const w = mod.gpuTestDequantize(type, wBytes, rows, cols);
      const weight = products.upload({ type, rows, cols, bytes: wBytes, label: 'w' });
      let up = null, uVals = null;
      if (c.glu) {
        const uBytes = makeWeight(mod, { ...c, random: !c.random }, rowBytes, r);
        uVals = mod.gpuTestDequantize(type, uBytes, rows, cols);
        up = products.upload({ type, rows, cols, bytes: uBytes, label: 'up' });
      }
      if (c.split) res.parts = weight.parts.length;
      const x = randomFloats(n * cols, r), y0 = randomFloats(n * rows, r, 4), bias = randomFloats(rows, r, 2);
      const xb = makeBuf(X_OFF + x.byteLength, x, undefined, X_OFF);
      const yb = makeBuf(Y_OFF + y0.byteLength, y0, undefined, Y_OFF);
      const bb = c.bias ? makeBuf(bias.byteLength, bias) : null;
      // With norm the product reads x raw and normalizes it: xn = x / sqrt(mean x^2 + eps) * nw.
      const EPS = 1e-5, nwv = c.norm ? randomFloats(cols, r, 2) : null;
      const nb = c.norm ? makeBuf(nwv.byteLength, nwv) : null;
      let xs = x;
      if (c.norm) {
        let ss = 0;
        for (let k = 0; k < cols; k++) ss += x[k] * x[k];
        const inv = 1 / Math.sqrt(ss / cols + EPS);
        xs = Array.from(x, (v, k) => v * inv * nwv[k]);
      }
      const op = products.product({
        weight, x: { buffer: xb, offset: X_OFF }, y: { buffer: yb, offset: Y_OFF }, maxTokens: n,
        accumulate: !!c.accumulate, bias: bb ? { buffer: bb, offset: 0 } : undefined,
        glu: c.glu ? { up, act: c.glu } : undefined, step, scale: c.scale,
        norm: c.norm ? { weight: { buffer: nb, offset: 0 }, eps: EPS, x: { buffer: xb, offset: X_OFF } } : undefined,
      });
      const t0 = performance.now();
      await run(op, n);
      const got = await read(yb, Y_OFF, n * rows);
      res.ms = performance.now() - t0;
      // float64 reference and the per-value tolerance
      let worst = 0, worstAt = -1;
      const act = c.glu === 'silu' ? (v) => v / (1 + Math.exp(-v))
        : (v) => 0.5 * v * (1 + Math.tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
      for (let t = 0; t < n; t++) {
        for (let i = 0; i < rows; i++) {
          let g = 0, ga = 0, u = 0, ua = 0;
          for (let k = 0; k < cols; k++) {
            const xv = xs[t * cols + k], wv = w[i * cols + k];
            g += wv * xv; ga += Math.abs(wv * xv);
            if (uVals) { const uv = uVals[i * cols + k]; u += uv * xv; ua += Math.abs(uv * xv); }
          }
          if (c.norm) { ga += Math.abs(g); ua += Math.abs(u); }  // + REL |g|: the f32 mean square and its root
          if (c.bias) { g += bias[i]; ga += Math.abs(bias[i]); }
          let ref = g, tol = REL * ga;
          if (c.glu) {
            const eg = REL * ga, eu = REL * ua, a = act(g);
            ref = a * u;
            tol = 1.13 * eg * (Math.abs(u) + eu) + (Math.abs(a) + 1.13 * eg) * eu + REL * Math.abs(ref);
          }
          if (c.scale !== undefined) { ref *= c.scale; tol = tol * Math.abs(c.scale) + REL * Math.abs(ref); }
          if (c.accumulate) { ref += y0[t * rows + i]; tol += REL * Math.abs(y0[t * rows + i]); }
          const e = Math.abs(got[t * rows + i] - ref) / Math.max(tol, 1e-30);
          if (!(e <= worst)) { worst = e; worstAt = t * rows + i; }  // NaN counts as worst
          if (Number.isNaN(e)) worst = Infinity;
        }
      }
      res.worst = worst;  // max |gpu - ref| / tolerance: must be <= 1
      if (worst > 1) res.detail = `at y[${Math.floor(worstAt / rows)}][${worstAt % rows}]: got ${got[worstAt]}`;
      weight.destroy(); up?.destroy();
      xb.destroy(); yb.destroy(); bb?.destroy(); nb?.destroy();
      products.dispose();
    } catch (e) {
      res.error = `${e?.code ?? ''} ${e?.stack ?? e}`;
    }
    if (gpuError) { res.error = `GPU error: ${gpuError}`; gpuError = null; }
    emit(res);
  }

  for (const c of ropeCases()) {
    if (only && !c.name.includes(only)) continue;
    const res = { name: c.name };
    try {
      const r = rng(c.seed);
      const { type, rows, cols, n, hd, rot } = c;
      const POS = 5, CTX = POS + n, half = rot / 2;
      const products = createProducts(device, { prefillGrid: c.grid });
      const wBytes = makeWeight(mod, c, gpuRowBytes(type, cols), r);
      const w = mod.gpuTestDequantize(type, wBytes, rows, cols);
      const weight = products.upload({ type, rows, cols, bytes: wBytes, label: 'w' });
      const x = randomFloats(n * cols, r), bias = randomFloats(rows, r, 2);
      // cos (CTX, rot/2), then sin from index `sin`: angles of any size.
      const sin = 64 * Math.ceil((CTX * half) / 64) || 64;
      const table = new Float32Array(sin + CTX * half);
      for (let i = 0; i < CTX * half; i++) { const a = r() * 20 - 10; table[i] = Math.cos(a); table[sin + i] = Math.sin(a); }
      const yRows = c.cache ? CTX : n;
      const y0 = randomFloats(yRows * rows, r, 4);
      const xb = makeBuf(x.byteLength, x), yb = makeBuf(y0.byteLength, y0), tb = makeBuf(table.byteLength, table);
      const bb = c.bias ? makeBuf(bias.byteLength, bias) : null;
      const EPS = 1e-5, nwv = c.norm ? randomFloats(cols, r, 2) : null;
      const nb = c.norm ? makeBuf(nwv.byteLength, nwv) : null;
      const QK_EPS = 1e-6, qw = c.qk ? randomFloats(hd, r, 2) : null;
      const qb = c.qk ? makeBuf(qw.byteLength, qw, U.UNIFORM | U.COPY_DST) : null;
      let xs = x;
      if (c.norm) {
        let ss = 0;
        for (let k = 0; k < cols; k++) ss += x[k] * x[k];
        const inv = 1 / Math.sqrt(ss / cols + EPS);
        xs = Array.from(x, (v, k) => v * inv * nwv[k]);
      }
      const op = products.product({
        weight, x: { buffer: xb }, y: { buffer: yb }, maxTokens: n, step, cache: !!c.cache,
        bias: bb ? { buffer: bb, offset: 0 } : undefined,
        norm: c.norm ? { weight: { buffer: nb, offset: 0 }, eps: EPS, x: { buffer: xb, offset: 0 } } : undefined,
        rope: c.mode ? { table: { buffer: tb }, sin, mode: c.mode, headDim: hd, rotDims: rot } : undefined,
        qkNorm: c.qk ? { weight: { buffer: qb, offset: 0 }, eps: QK_EPS, headDim: hd } : undefined,
      });
      await op.ready;
      device.queue.writeBuffer(step, 0, new Uint32Array([n, POS, 0, 0]));
      const enc = device.createCommandEncoder();
      const pass = enc.beginComputePass();
      op.encode(pass, n);
      pass.end();
      device.queue.submit([enc.finish()]);
      const got = await read(yb, 0, yRows * rows);
      // float64 products (+ bias) and their tolerances, then the rotation of each pair.
      let worst = 0, worstAt = -1;
      const check = (i, ref, tol) => {
        const e = Math.abs(got[i] - ref) / Math.max(tol, 1e-30);
        if (!(e <= worst)) { worst = e; worstAt = i; }
        if (Number.isNaN(e)) worst = Infinity;
      };
      for (let t = 0; t < n; t++) {
        const g = new Float64Array(rows), ga = new Float64Array(rows);
        for (let i = 0; i < rows; i++) {
          for (let k = 0; k < cols; k++) { const p = w[i * cols + k] * xs[t * cols + k]; g[i] += p; ga[i] += Math.abs(p); }
          if (c.norm) ga[i] += Math.abs(g[i]);
          if (c.bias) { g[i] += bias[i]; ga[i] += Math.abs(bias[i]); }
        }
        if (c.qk) {
          // RMSNorm per head; the sum of squares carries the values' errors into every row's scale.
          for (let h = 0; h < c.heads; h++) {
            let ss = 0, sa = 0;
            for (let i = h * hd; i < (h + 1) * hd; i++) { ss += g[i] * g[i]; sa += Math.abs(g[i]) * ga[i]; }
            const inv = 1 / Math.sqrt(ss / hd + QK_EPS), rel = 2 * sa / (ss + hd * QK_EPS);
            for (let i = h * hd; i < (h + 1) * hd; i++) {
              const wq = qw[i - h * hd];
              ga[i] = Math.abs(inv * wq) * (ga[i] + Math.abs(g[i]) * (rel + 4 * REL));
              g[i] *= inv * wq;
            }
          }
        }
        const row = (c.cache ? POS + t : t) * rows, pos = POS + t;
        const out = Float64Array.from(g), tol = Float64Array.from(ga, (a) => REL * a);
        for (let h = 0; h < c.heads && c.mode; h++) {
          for (let p = 0; p < half; p++) {
            const [d0, d1] = c.mode === 'adjacent' ? [2 * p, 2 * p + 1] : [p, p + half];
            const i0 = h * hd + d0, i1 = h * hd + d1;
            const cs = table[pos * half + p], sn = table[sin + pos * half + p];
            out[i0] = g[i0] * cs - g[i1] * sn;
            out[i1] = g[i0] * sn + g[i1] * cs;
            const e = REL * (ga[i0] + ga[i1]);
            tol[i0] = e + REL * (Math.abs(g[i0] * cs) + Math.abs(g[i1] * sn));
            tol[i1] = e + REL * (Math.abs(g[i0] * sn) + Math.abs(g[i1] * cs));
          }
        }
        for (let i = 0; i < rows; i++) check(row + i, out[i], tol[i]);
      }
      // Rows the step does not write keep their values (the cache's earlier positions).
      for (let t = 0; t < yRows; t++) {
        if (c.cache ? t >= POS : t < n) continue;
        for (let i = 0; i < rows; i++) check(t * rows + i, y0[t * rows + i], 0);
      }
      res.worst = worst;
      if (worst > 1) res.detail = `at y[${Math.floor(worstAt / rows)}][${worstAt % rows}]: got ${got[worstAt]}`;
      weight.destroy();
      for (const b of [xb, yb, tb, bb, nb, qb]) b?.destroy();
      products.dispose();
    } catch (e) {
      res.error = `${e?.code ?? ''} ${e?.stack ?? e}`;
    }
    if (gpuError) { res.error = `GPU error: ${gpuError}`; gpuError = null; }
    emit(res);
  }

  for (const c of gatherCases()) {
    const res = { name: c.name };
    try {
      const r = rng(c.seed);
      const { type, rows, cols, n } = c;
      const rowBytes = gpuRowBytes(type, cols);
      const products = c.split ? createProducts(device, { maxBindingBytes: 7 * rowBytes + 5 }) : plain;
      const wBytes = makeWeight(mod, c, rowBytes, r);
      const w = mod.gpuTestDequantize(type, wBytes, rows, cols);
      const weight = products.upload({ type, rows, cols, bytes: wBytes });
      if (c.split) res.parts = weight.parts.length;
      // First and last rows, repeats, and one id past the end (its y row must stay untouched).
      const ids = new Uint32Array([0, rows - 1, 5, 5, 20, rows + 3, 13, 36, 1]);
      const sentinel = new Float32Array(n * cols).fill(-7);
      const idb = makeBuf(256 + ids.byteLength, ids, undefined, 256);
      const yb = makeBuf(sentinel.byteLength, sentinel);
      const op = products.gather({ weight, ids: { buffer: idb, offset: 256 }, y: { buffer: yb }, maxTokens: n, scale: c.scale, step });
      await run(op, n);
      const got = await read(yb, 0, n * cols);
      let worst = 0;
      for (let t = 0; t < n; t++) {
        let rowMax = 0;
        if (ids[t] < rows) for (let k = 0; k < cols; k++) rowMax = Math.max(rowMax, Math.abs(w[ids[t] * cols + k]));
        for (let k = 0; k < cols; k++) {
          const ref = ids[t] < rows ? c.scale * w[ids[t] * cols + k] : -7;
          // A decoded value may differ from the C++ one by the rounding of a fused multiply-add.
          const tol = ids[t] < rows ? 2 ** -22 * Math.abs(c.scale) * rowMax : 0;
          const e = Math.abs(got[t * cols + k] - ref);
          worst = Math.max(worst, tol ? e / tol : (e ? Infinity : 0));
          if (Number.isNaN(e)) worst = Infinity;
        }
      }
      res.worst = worst;
      weight.destroy(); idb.destroy(); yb.destroy();
      if (c.split) products.dispose();
    } catch (e) {
      res.error = `${e?.code ?? ''} ${e?.stack ?? e}`;
    }
    if (gpuError) { res.error = `GPU error: ${gpuError}`; gpuError = null; }
    emit(res);
  }

  // Bad arguments: typed errors, no GPU error.
  const errs = {};
  const code = (f) => { try { f(); return 'none'; } catch (e) { return e.code ?? String(e); } };
  errs.type = code(() => plain.upload({ type: 'q2_k', rows: 1, cols: 256, bytes: new Uint8Array(84) }));
  errs.length = code(() => plain.upload({ type: 'q8_0', rows: 2, cols: 32, bytes: new Uint8Array(67) }));
  errs.cols = code(() => plain.upload({ type: 'q4_k', rows: 1, cols: 32, bytes: new Uint8Array(18) }));
  const small = plain.upload({ type: 'f32', rows: 2, cols: 4, bytes: new Uint8Array(32) });
  const sb = makeBuf(64);
  errs.offset = code(() => plain.product({ weight: small, x: { buffer: sb, offset: 4 }, y: { buffer: sb }, maxTokens: 1, step }));
  errs.act = code(() => plain.product({ weight: small, x: { buffer: sb }, y: { buffer: sb }, maxTokens: 1, step, glu: { up: small, act: 'relu' } }));
  errs.fits = code(() => plain.product({ weight: small, x: { buffer: sb }, y: { buffer: sb }, maxTokens: 100, step }));
  errs.step = code(() => plain.product({ weight: small, x: { buffer: sb }, y: { buffer: sb }, maxTokens: 1, step: sb }));
  errs.grid = code(() => createProducts(device, { prefillGrid: 5 }));
  emit({ name: 'bad arguments', errs });

  // The f16 KV cache written by the epilogue (yType 'f16'): where the device has shader-f16, the
  // decode and prefill cache rows against the same product written as f32, each value within one
  // f16 rounding (relative 2^-11, or 2^-25 absolute near zero); without it, a typed refusal and
  // the variant's text (what such a device would compile).
  {
    const res = { name: 'f16 KV-cache epilogue', shaderF16: device.features.has('shader-f16') };
    try {
      const header = productHeader('matvec', { WG: 64, Y16: 1 });
      res.header = header.startsWith('enable f16;') && header.includes('alias y_t = f16;') && !header.includes('Y16');
      res.noCache = code(() => plain.product({ weight: small, x: { buffer: sb }, y: { buffer: sb }, maxTokens: 1, step, yType: 'f16' }));
      if (!res.shaderF16) {
        res.refused = code(() => plain.product({ weight: small, x: { buffer: sb }, y: { buffer: sb }, maxTokens: 1, step, cache: true, yType: 'f16' }));
      } else {
        const r = rng(9100);
        const heads = 2, hd = 16, rows = heads * hd, cols = 64, POS = 3, CTX = 8, half = hd / 2;
        const c = { type: 'q8_0', rows, cols };
        const weight = plain.upload({ type: 'q8_0', rows, cols, bytes: makeWeight(mod, c, gpuRowBytes('q8_0', cols), r) });
        const sin = 64;
        const table = new Float32Array(sin + CTX * half);
        for (let i = 0; i < CTX * half; i++) { const a = r() * 20 - 10; table[i] = Math.cos(a); table[sin + i] = Math.sin(a); }
        const tb = makeBuf(table.byteLength, table), xb = makeBuf(4 * 4 * cols, randomFloats(4 * cols, r));
        const y32 = makeBuf(CTX * rows * 4), y16 = makeBuf(CTX * rows * 2);
        let worst = 0;
        for (const n of [1, 4]) {
          const ops = [y32, y16].map((y, i) => plain.product({
            weight, x: { buffer: xb }, y: { buffer: y }, maxTokens: n, step, cache: true, yType: i ? 'f16' : 'f32',
            rope: { table: { buffer: tb }, sin, mode: 'halves', headDim: hd, rotDims: hd },
          }));
          await Promise.all(ops.map((o) => o.ready));
          device.queue.writeBuffer(step, 0, new Uint32Array([n, POS, 0, 0]));
          const enc = device.createCommandEncoder();
          const pass = enc.beginComputePass();
          for (const o of ops) o.encode(pass, n);
          pass.end();
          device.queue.submit([enc.finish()]);
          const want = await read(y32, 0, CTX * rows);
          const words = new Uint32Array((await read(y16, 0, CTX * rows / 2)).buffer);
          for (let i = POS * rows; i < (POS + n) * rows; i++) {
            const h = (words[i >> 1] >>> (16 * (i & 1))) & 0xffff;
            const e = (h >> 10) & 31, m = h & 1023, sign = h >> 15 ? -1 : 1;
            const got = sign * (e === 0 ? m * 2 ** -24 : (1 + m / 1024) * 2 ** (e - 15));
            worst = Math.max(worst, Math.abs(got - want[i]) / (2 ** -11 * Math.abs(want[i]) + 2 ** -25));
          }
        }
        res.worst = worst;
        weight.destroy();
        for (const b of [tb, xb, y32, y16]) b.destroy();
      }
    } catch (e) {
      res.error = `${e?.code ?? ''} ${e?.stack ?? e}`;
    }
    emit(res);
  }
  plain.dispose();
  device.destroy();
  process.exit(0);  // Dawn keeps the event loop alive otherwise
}

if (process.argv.includes('--child')) {
  await child();
} else {
  const { test } = await import('node:test');
  const assert = (await import('node:assert/strict')).default;
  const { existsSync } = await import('node:fs');
  const skipReason = gpuSkipReason() ??
    (existsSync(new URL('../../dist/qkv.wasm', import.meta.url)) ? null : 'dist/qkv.wasm not built (scripts/build.sh wasm)');

  test('WebGPU weight products and gather match the C++ decoders in float64 (SwiftShader)', { timeout: 300000 }, async (t) => {
    if (skipReason) { t.skip(skipReason); return; }
    const t0 = performance.now();
    const { code, lines, stderr } = await runGpuChild(fileURLToPath(import.meta.url));
    assert.equal(code, 0, `child exited ${code}\n${stderr}`);
    const [{ adapter }, ...results] = lines;
    t.diagnostic(`adapter: ${adapter.vendor} ${adapter.architecture}; ${results.length} results in ` +
      `${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const expected = productCases().length + ropeCases().length + gatherCases().length + 2;
    assert.equal(results.length, expected, `expected ${expected} results\n${stderr}`);
    let worst = 0;
    for (const r of results) {
      await t.test(r.name, () => {
        assert.ok(!r.error, r.error);
        if (r.shaderF16 !== undefined) {
          assert.ok(r.header, "the f16 variant's text: enable f16, y_t = f16");
          assert.equal(r.noCache, 'bad_argument');
          if (!r.shaderF16) {
            assert.equal(r.refused, 'unsupported');
            t.diagnostic('no shader-f16 on this adapter (SwiftShader): the f16 cache epilogue was not run, only refused');
          } else {
            assert.ok(r.worst <= 1, `f16 cache values off by ${r.worst} f16 roundings`);
          }
          return;
        }
        if (r.errs) {
          assert.deepEqual(r.errs, { type: 'unsupported', length: 'bad_argument', cols: 'bad_argument', offset: 'bad_argument', act: 'bad_argument', fits: 'bad_argument', step: 'bad_argument', grid: 'bad_argument' });
          return;
        }
        if (r.parts !== undefined) assert.ok(r.parts > 1, `expected a split weight, got ${r.parts} part(s)`);
        worst = Math.max(worst, r.worst);
        assert.ok(r.worst <= 1, `max |gpu - ref| / tolerance = ${r.worst} ${r.detail ?? ''}`);
      });
    }
    t.diagnostic(`worst |gpu - ref| / tolerance over all cases: ${worst.toExponential(2)}`);
  });
}
