// Mixture-of-experts feed-forward on WebGPU (src/js/gpu-moe.js, moe_route.wgsl,
// moe_experts.wgsl) for every stored weight type, against a float64 reference written from the
// CPU path's definition (moe_ffn, src/model/blocks.cpp): router softmax, the K most probable
// experts with ties to the lower index, their weights (renormalised with normTopk), then
// sum_k w_k D_e (silu(G_e x) * U_e x). Weights are quantized by the C++ quantizers and decoded by
// dequantize_row_ref (Embind, test-only: bindings/gpu_test_bindings.cpp).
//
// Checked per case: the chosen experts equal the reference's exactly (routers with tied rows
// test the tie rule), their weights within the error the router's f32 logits allow (1e-5 of a
// logit's absolute terms, the products test's bound, twice through the softmax), and each
// output value within the products test's bound (webgpu_products.test.mjs): 1e-5 x the sum of
// the absolute terms, with the errors of h and of the weights propagated. Shapes: odd expert counts, K = 1, K > 1 and K = E,
// decode (n = 1) and prefill (n > 1), the expert stacks split over several buffers.
import { fileURLToPath } from 'node:url';
import { dawnGpu, gpuSkipReason, runGpuChild } from './gpu-env.mjs';

const REL = 1e-5;
const TYPES = ['f32', 'f16', 'bf16', 'q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'q4_k', 'q5_k', 'q6_k'];
const BLOCK = { f32: 1, f16: 1, bf16: 1, q8_0: 32, q4_0: 32, q4_1: 32, q5_0: 32, q5_1: 32, q4_k: 256, q5_k: 256, q6_k: 256 };

/** xorshift32 in [0, 1). */
function rng(seed) {
  let x = seed | 0 || 1;
  return () => { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; return (x >>> 0) / 4294967296; };
}

// [E experts, K per token, n tokens, normTopk, split stacks, tied router rows]: every type gets
// one case; the shapes rotate so that each appears with several types.
const SHAPES = [
  { E: 5, K: 1, n: 1, norm: false, split: false, ties: true },
  { E: 7, K: 3, n: 3, norm: true, split: true, ties: false },
  { E: 4, K: 4, n: 1, norm: true, split: false, ties: true },
  { E: 3, K: 2, n: 5, norm: false, split: true, ties: true },
  { E: 6, K: 2, n: 19, norm: true, split: false, ties: false },
];

function cases() {
  return TYPES.map((type, i) => {
    const b = BLOCK[type];
    // Odd widths for the float types (rows then start mid-word); whole blocks for the others.
    const [dim, hid] = b === 1 ? [45, 37] : b === 32 ? [96, 64] : [256, 512];
    const s = SHAPES[i % SHAPES.length];
    return { type, dim, hid, ...s, seed: 500 + i, name: `${type} E=${s.E} K=${s.K} n=${s.n}${s.norm ? ' renormalised' : ''}${s.split ? ' split' : ''}${s.ties ? ' ties' : ''} (${dim} -> ${hid})` };
  });
}

/** The CPU rule (moe_ffn) in float64: softmax, top-K with ties to the lower index, weights. */
function route(logits, K, norm) {
  const m = Math.max(...logits);
  const e = logits.map((v) => Math.exp(v - m));
  const z = e.reduce((a, b) => a + b, 0);
  const p = e.map((v) => v / z);
  const order = p.map((_, i) => i).sort((a, b) => (p[b] - p[a]) || (a - b)).slice(0, K);
  let w = order.map((i) => p[i]);
  if (norm) { const s = w.reduce((a, b) => a + b, 0); w = w.map((v) => v / Math.max(s, 6.103515625e-5)); }
  return { order, w };
}

async function child() {
  const emit = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
  const { loadWasmModule } = await import('../../src/js/wasm-node.mjs');
  const { mod } = await loadWasmModule({ threads: 1 });
  const { requestQkvDevice } = await import('../../src/js/webgpu.js');
  const { createProducts, gpuRowBytes } = await import('../../src/js/gpu-products.js');
  const { createMoeFfn, loadMoeShaders, uploadExperts } = await import('../../src/js/gpu-moe.js');
  const { device } = await requestQkvDevice({ gpu: await dawnGpu() });
  let gpuError = null;
  device.onuncapturederror = (e) => { gpuError ??= e.error?.message ?? String(e.error); };
  const U = GPUBufferUsage;
  const shaders = await loadMoeShaders();
  const cache = new Map();
  const products = createProducts(device);
  const bufs = [];
  const make = (size, usage, label) => {
    const b = device.createBuffer({ size: Math.max(16, Math.ceil(size / 4) * 4), usage, label });
    bufs.push(b);
    return b;
  };
  async function read(buffer, n, Ctor = Float32Array) {
    const rb = device.createBuffer({ size: n * 4, usage: U.COPY_DST | U.MAP_READ });
    const enc = device.createCommandEncoder();
    enc.copyBufferToBuffer(buffer, 0, rb, 0, n * 4);
    device.queue.submit([enc.finish()]);
    await rb.mapAsync(GPUMapMode.READ);
    const out = new Ctor(rb.getMappedRange().slice(0));
    rb.destroy();
    return out;
  }

  for (const c of cases()) {
    const res = { name: c.name };
    try {
      const r = rng(c.seed);
      const { type, dim, hid, E, K, n } = c;
      const floats = (len, scale = 1) => Float32Array.from({ length: len }, () => (r() * 2 - 1) * scale);
      // Expert stacks as the GGUF stores them: expert e's rows at e * rows.
      const stack = (rows, cols) => {
        const bytes = mod.gpuTestQuantize(type, floats(E * rows * cols), E * rows, cols);
        return { bytes, vals: mod.gpuTestDequantize(type, bytes, E * rows, cols), type, rows: E * rows, cols };
      };
      const G = stack(hid, dim), Uw = stack(hid, dim), D = stack(dim, hid);
      // The router in f32; with ties, some experts share a row, so their logits are equal.
      const router = floats(E * dim, 0.5);
      if (c.ties) for (let e = 1; e < E; e += 2) router.copyWithin(e * dim, (e - 1) * dim, e * dim);
      const x = floats(n * dim);
      // Split: at most two experts per buffer (several chunks, the down stack's first and later ones).
      const limitOf = (t) => (c.split ? 2 * (t.rows / E) * gpuRowBytes(type, t.cols) + 8 : device.limits.maxStorageBufferBindingSize);
      const up = (t, role) => uploadExperts(products, { ...t, role, layer: 0 }, E, limitOf(t));
      const gate = up(G, 'gate_exps'), upw = up(Uw, 'up_exps'), down = up(D, 'down_exps');
      res.chunks = down.chunks.length;
      const routerW = products.upload({ type: 'f32', rows: E, cols: dim, bytes: new Uint8Array(router.buffer), label: 'router' });
      const step = make(16, U.UNIFORM | U.COPY_DST, 'step');
      const input = make(n * dim * 4, U.STORAGE | U.COPY_DST, 'x');
      const output = make(n * dim * 4, U.STORAGE | U.COPY_SRC, 'out');
      device.queue.writeBuffer(input, 0, x);
      device.queue.writeBuffer(step, 0, new Uint32Array([n, 0, 0, 0]));
      const ffn = createMoeFfn({
        device, shaders, products, step, T: n, experts: E, used: K, normTopk: c.norm,
        router: routerW, gate, up: upw, down, input, output, make, cache,
      });
      await products.ready();
      const enc = device.createCommandEncoder();
      const pass = enc.beginComputePass();
      ffn.encode(pass, n);
      pass.end();
      device.queue.submit([enc.finish()]);
      const [got, sel, gates] = [await read(output, n * dim), await read(ffn.sel, n * K, Uint32Array), await read(ffn.gates, n * K)];

      let selOk = true, gateErr = 0, worst = 0;
      for (let t = 0; t < n; t++) {
        const xt = x.subarray(t * dim, (t + 1) * dim);
        const logits = Array.from({ length: E }, (_, e) => { let s = 0; for (let j = 0; j < dim; j++) s += router[e * dim + j] * xt[j]; return s; });
        const ref = route(logits, K, c.norm);
        // A logit is off by at most REL x its absolute terms (the router is a product); a
        // softmax probability, and a renormalised weight, then by twice the largest such error.
        let la = 0;
        for (let e = 0; e < E; e++) { let a = 0; for (let j = 0; j < dim; j++) a += Math.abs(router[e * dim + j] * xt[j]); la = Math.max(la, a); }
        const wRel = 2 * REL * la + REL;
        for (let k = 0; k < K; k++) {
          if (sel[t * K + k] !== ref.order[k]) selOk = false;
          gateErr = Math.max(gateErr, Math.abs(gates[t * K + k] - ref.w[k]) / ref.w[k] / wRel);
        }
        const out = new Float64Array(dim), bound = new Float64Array(dim);
        for (let k = 0; k < K; k++) {
          const e = ref.order[k], w = ref.w[k];
          const h = new Float64Array(hid), eh = new Float64Array(hid);
          for (let i = 0; i < hid; i++) {
            let g = 0, u = 0, ga = 0, ua = 0;
            for (let j = 0; j < dim; j++) {
              const gw = G.vals[(e * hid + i) * dim + j] * xt[j], uw = Uw.vals[(e * hid + i) * dim + j] * xt[j];
              g += gw; u += uw; ga += Math.abs(gw); ua += Math.abs(uw);
            }
            const sg = g / (1 + Math.exp(-g));
            h[i] = sg * u;
            // |silu'| <= 1.1; the GPU's exp adds REL of |silu(g) u|.
            eh[i] = REL * (1.1 * ga * Math.abs(u) + Math.abs(sg) * ua + Math.abs(h[i]));
          }
          for (let o = 0; o < dim; o++) {
            let s = 0, a = 0, ae = 0;
            for (let i = 0; i < hid; i++) {
              const dv = D.vals[(e * dim + o) * hid + i];
              s += dv * h[i]; a += Math.abs(dv * h[i]); ae += Math.abs(dv) * eh[i];
            }
            out[o] += w * s;
            bound[o] += w * (REL * a + ae + wRel * Math.abs(s));
          }
        }
        for (let o = 0; o < dim; o++) {
          const err = Math.abs(got[t * dim + o] - out[o]);
          worst = Math.max(worst, err / Math.max(bound[o], 1e-30));
        }
      }
      Object.assign(res, { selOk, gateErr, worst, sel: Array.from(sel) });
      for (const t of [gate, upw, down, routerW]) t.destroy();
    } catch (e) {
      res.error = `${e?.code ?? ''} ${e?.stack ?? e}`;
    }
    res.gpuError = gpuError;
    emit(res);
  }
  // Bad shapes are typed errors, not wrong results.
  const checks = [];
  try {
    uploadExperts(products, { role: 'gate_exps', layer: 2, type: 'f32', rows: 10, cols: 4, bytes: new Uint8Array(160) }, 3, 1 << 20);
  } catch (e) { checks.push(`${e.code}: ${e.message}`); }
  try {
    uploadExperts(products, { role: 'down_exps', layer: 1, type: 'f32', rows: 8, cols: 64, bytes: new Uint8Array(8 * 256) }, 2, 512);
  } catch (e) { checks.push(`${e.code}: ${e.message}`); }
  emit({ name: 'errors', checks });
  process.exit(0);  // Dawn keeps the event loop alive otherwise
}

if (process.argv.includes('--child')) {
  await child();
} else {
  const { test } = await import('node:test');
  const assert = (await import('node:assert/strict')).default;
  const skipReason = gpuSkipReason();
  test('mixture-of-experts feed-forward on WebGPU against float64 (SwiftShader)', { timeout: 600000 }, async (t) => {
    if (skipReason) { t.skip(skipReason); return; }
    const { code, lines, stderr } = await runGpuChild(fileURLToPath(import.meta.url));
    assert.equal(code, 0, `child exited ${code}\n${stderr}`);
    const byName = new Map(lines.map((l) => [l.name, l]));
    for (const c of cases()) {
      await t.test(c.name, () => {
        const r = byName.get(c.name);
        assert.ok(r, `no result\n${stderr}`);
        assert.ok(!r.error, r.error);
        assert.equal(r.gpuError, null);
        assert.ok(r.selOk, `chosen experts ${r.sel} differ from the CPU rule's`);
        assert.ok(r.gateErr <= 1, `an expert weight exceeds its error bound by ${r.gateErr}x`);
        assert.ok(r.worst <= 1, `an output exceeds its error bound by ${r.worst}x`);
        if (c.split) assert.ok(r.chunks >= 2, `split into ${r.chunks} chunk(s)`);
        t.diagnostic(`${c.name}: worst error ${r.worst.toFixed(3)} of its bound (weights ${r.gateErr.toFixed(3)}), ${r.chunks} down chunk(s)`);
      });
    }
    await t.test('bad expert shapes are typed errors', () => {
      const r = byName.get('errors');
      assert.ok(r, stderr);
      assert.equal(r.checks.length, 2);
      assert.match(r.checks[0], /^bad_model: gate_exps of layer 2: 10 rows do not split into 3 experts/);
      assert.match(r.checks[1], /^unsupported: one expert of down_exps \(layer 1, 1024 bytes\) exceeds this GPU's 512-byte buffer limit/);
    });
  });
}
