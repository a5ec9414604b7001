// WebGPU attention kernels (src/webgpu/*.wgsl via src/js/webgpu.js) against a double-precision JS
// reference of the CPU contract (src/kernels/attention.h), on SwiftShader through the `webgpu`
// npm package (Dawn). Tolerance: max |gpu - ref| <= 1e-4 on outputs and probabilities.
//
// Dawn needs its Vulkan driver chosen before it loads (VK_ICD_FILENAMES, and LD_LIBRARY_PATH for
// the libvulkan.so.1 that Debian's chromium ships), so the GPU work runs in a child process
// (this file with --child) that prints one JSON result per case; the parent checks them.
import { fileURLToPath } from 'node:url';
import { dawnGpu, gpuSkipReason, runGpuChild } from './gpu-env.mjs';

const TOL = 1e-4;

// ---------------------------------------------------------------- reference (double precision)

/** attention_ref of src/kernels/attention.cpp in float64: returns {out, probs}. */
function attentionRef(a) {
  const { nQ, nKv, nHeads, nKvHeads, headDim: hd, q, k, v, scale, qPos0, causal, window, keyValid } = a;
  const group = nHeads / nKvHeads;
  const out = new Float64Array(nQ * nHeads * hd);
  const probs = new Float64Array(nHeads * nQ * nKv);
  const sc = new Float64Array(nKv);
  for (let h = 0; h < nHeads; h++) {
    const g = Math.floor(h / group);
    for (let i = 0; i < nQ; i++) {
      const qpos = qPos0 + i, qo = i * nHeads * hd + h * hd;
      let mx = -Infinity;
      for (let j = 0; j < nKv; j++) {
        const vis = !(causal && j > qpos) && !(window > 0 && qpos - j >= window) && !(keyValid && !keyValid[j]);
        if (!vis) { sc[j] = -Infinity; continue; }
        let s = 0;
        const ko = j * nKvHeads * hd + g * hd;
        for (let d = 0; d < hd; d++) s += q[qo + d] * k[ko + d];
        sc[j] = s * scale;
        if (sc[j] > mx) mx = sc[j];
      }
      let sum = 0;
      for (let j = 0; j < nKv; j++) { sc[j] = sc[j] === -Infinity ? 0 : Math.exp(sc[j] - mx); sum += sc[j]; }
      for (let j = 0; j < nKv; j++) {
        sc[j] = sum > 0 ? sc[j] / sum : 0;
        probs[(h * nQ + i) * nKv + j] = sc[j];
        if (sc[j] === 0) continue;
        const vo = j * nKvHeads * hd + g * hd;
        for (let d = 0; d < hd; d++) out[qo + d] += sc[j] * v[vo + d];
      }
    }
  }
  return { out, probs };
}

function maxDiff(a, b) {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return a.length === b.length ? m : Infinity;
}

/** xorshift32 in [0, 1). */
function rng(seed) {
  let x = seed | 0 || 1;
  return () => { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; return (x >>> 0) / 4294967296; };
}

// ---------------------------------------------------------------- cases

const MASKS = ['none', 'causal', 'window', 'padding', 'all'];

/** The sweep: every listed size appears; shapes kept small because SwiftShader is slow. */
function sweepCases() {
  const nQs = [1, 3, 17, 64], nKvs = [1, 5, 64, 65, 300];
  const heads = [[1, 1], [4, 2], [6, 3], [8, 1]], dims = [32, 64, 80, 128, 37];
  const cases = [];
  const r = rng(12345);
  for (let i = 0; i < 30; i++) {
    const nQ = nQs[i % 4], nKv = nKvs[(i * 3) % 5], [nHeads, nKvHeads] = heads[(i * 7 + (i >> 2)) % 4];
    const headDim = dims[(i * 2 + (i >> 3)) % 5], mask = MASKS[(i + (i >> 1)) % 5];
    const mode = i % 3 === 2 && nQ <= 3 ? 'decode' : 'auto';  // split-K on small caches too
    cases.push({
      name: `sweep#${i} nQ=${nQ} nKv=${nKv} heads=${nHeads}/${nKvHeads} d=${headDim} mask=${mask} mode=${mode}`,
      nQ, nKv, nHeads, nKvHeads, headDim, mask, mode, wantProbs: i % 4 === 1,
      qPos0: 1 + Math.floor(r() * nKv), seed: 1000 + i,
    });
  }
  return cases;
}

function specialCases() {
  return [
    // Fully masked queries: padding hides keys 0..7; query positions 1..7 (causal) see only those.
    { name: 'fully masked queries (prefill)', nQ: 10, nKv: 12, nHeads: 4, nKvHeads: 2, headDim: 32, mask: 'custom',
      causal: true, window: 0, qPos0: 1, validFn: (j) => j >= 8, wantProbs: true, mode: 'prefill', seed: 7,
      expectZeroRows: [0, 1, 2, 3, 4, 5, 6] },  // positions 1..7; rows 7..9 see keys 8..10
    { name: 'fully masked query (decode)', nQ: 1, nKv: 300, nHeads: 2, nKvHeads: 1, headDim: 64, mask: 'custom',
      causal: true, window: 0, qPos0: 299, validFn: () => false, wantProbs: true, mode: 'decode', seed: 8,
      expectZeroRows: [0] },
    // No mask at all, probs, GQA 8/1, odd head dim.
    { name: 'probs, no mask, d=37', nQ: 17, nKv: 65, nHeads: 8, nKvHeads: 1, headDim: 37, mask: 'none', qPos0: 3,
      wantProbs: true, mode: 'auto', seed: 9 },
    // Long context.
    { name: 'long decode nKv=4096 causal', nQ: 1, nKv: 4096, nHeads: 4, nKvHeads: 2, headDim: 64, mask: 'causal',
      qPos0: 4095, mode: 'auto', expectMode: 'decode', wantProbs: true, seed: 10 },
    { name: 'long decode nKv=4096 window+padding', nQ: 1, nKv: 4096, nHeads: 8, nKvHeads: 1, headDim: 128, mask: 'all',
      qPos0: 4095, mode: 'auto', expectMode: 'decode', seed: 11 },
    { name: 'long prefill nKv=4096 nQ=64 at 4032..4095', nQ: 64, nKv: 4096, nHeads: 4, nKvHeads: 2, headDim: 64,
      mask: 'causal', qPos0: 4032, mode: 'auto', expectMode: 'prefill', wantProbs: true, seed: 12 },
  ];
}

function buildInputs(c) {
  const r = rng(c.seed * 2654435761);
  const rand = (n) => Float32Array.from({ length: n }, () => r() * 2 - 1);
  const a = {
    nQ: c.nQ, nKv: c.nKv, nHeads: c.nHeads, nKvHeads: c.nKvHeads, headDim: c.headDim,
    q: rand(c.nQ * c.nHeads * c.headDim), k: rand(c.nKv * c.nKvHeads * c.headDim),
    v: rand(c.nKv * c.nKvHeads * c.headDim), scale: 1 / Math.sqrt(c.headDim), qPos0: c.qPos0,
    causal: false, window: 0, keyValid: undefined, wantProbs: !!c.wantProbs, mode: c.mode,
  };
  const padding = () => Uint8Array.from({ length: c.nKv }, (_, j) => (j % 5 === 3 || r() < 0.2 ? 0 : 1));
  const win = () => Math.max(1, Math.floor(c.nKv / 3));
  if (c.mask === 'causal') a.causal = true;
  if (c.mask === 'window') { a.causal = true; a.window = win(); }
  if (c.mask === 'padding') a.keyValid = padding();
  if (c.mask === 'all') { a.causal = true; a.window = win(); a.keyValid = padding(); }
  if (c.mask === 'custom') {
    a.causal = c.causal; a.window = c.window;
    a.keyValid = Uint8Array.from({ length: c.nKv }, (_, j) => (c.validFn(j) ? 1 : 0));
  }
  return a;
}

// ---------------------------------------------------------------- child: runs on the GPU

async function child() {
  const gpu = await dawnGpu();
  const { requestQkvDevice, createAttention } = await import('../../src/js/webgpu.js');
  const { device, adapterInfo } = await requestQkvDevice({ gpu });
  const emit = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
  emit({ adapter: adapterInfo });
  const att = createAttention(device);
  for (const c of [...sweepCases(), ...specialCases()]) {
    const res = { name: c.name };
    try {
      const a = buildInputs(c);
      const t0 = performance.now();
      const got = await att.run(a);
      res.ms = performance.now() - t0;
      res.mode = got.mode;
      const ref = attentionRef(a);
      res.outDiff = maxDiff(got.out, ref.out);
      if (c.expectMode) res.expectMode = c.expectMode;
      if (a.wantProbs) {
        res.probsDiff = maxDiff(got.probs, ref.probs);
        // Row sums (rows with a visible key must sum to 1) and exact zeros where masked.
        let sumErr = 0, maskedNonZero = 0;
        for (let row = 0; row < a.nHeads * a.nQ; row++) {
          let s = 0, rs = 0;
          for (let j = 0; j < a.nKv; j++) {
            const x = got.probs[row * a.nKv + j];
            s += x; rs += ref.probs[row * a.nKv + j];
            if (ref.probs[row * a.nKv + j] === 0 && x !== 0) maskedNonZero++;
          }
          sumErr = Math.max(sumErr, Math.abs(s - rs));  // rs is 1, or 0 for a fully masked row
        }
        res.rowSumErr = sumErr;
        res.maskedNonZero = maskedNonZero;
      }
      if (c.expectZeroRows) {
        let nz = 0;
        for (const i of c.expectZeroRows) {
          for (let x = i * a.nHeads * a.headDim; x < (i + 1) * a.nHeads * a.headDim; x++) if (got.out[x] !== 0) nz++;
          if (got.probs) {
            for (let h = 0; h < a.nHeads; h++) {
              for (let j = 0; j < a.nKv; j++) if (got.probs[(h * a.nQ + i) * a.nKv + j] !== 0) nz++;
            }
          }
        }
        res.zeroRowNonZero = nz;
      }
    } catch (e) {
      res.error = `${e?.code ?? ''} ${e?.stack ?? e}`;
    }
    emit(res);
  }
  att.dispose();
  device.destroy();
  process.exit(0);  // Dawn keeps the event loop alive otherwise
}

if (process.argv.includes('--child')) {
  await child();
} else {
  const { test } = await import('node:test');
  const assert = (await import('node:assert/strict')).default;

  const skipReason = gpuSkipReason();

  test('toHalf: exact on every half value, ties to even, overflow to infinity', async () => {
    const { toHalf } = await import('../../src/js/webgpu.js');
    // Decode every finite half by formula, encode it back: must give the same bits.
    const halfValue = (h) => {
      const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
      return s * (e === 0 ? m * 2 ** -24 : (1 + m / 1024) * 2 ** (e - 15));
    };
    const finite = [];
    for (let h = 0; h < 0x10000; h++) if (((h >> 10) & 0x1f) !== 0x1f) finite.push(h);
    const back = toHalf(new Float32Array(finite.map(halfValue)), new Uint16Array(finite.length));
    let bad = 0;
    for (let i = 0; i < finite.length; i++) if (back[i] !== finite[i] && !(finite[i] === 0x8000 && back[i] === 0x8000)) bad++;
    assert.equal(bad, 0, `${bad} half values do not round-trip`);
    // Midpoints between neighbours round to the even one; just above rounds up.
    const cases = [
      [1 + 2 ** -11, 0x3c00], [1 + 3 * 2 ** -11, 0x3c02], [1 + 2 ** -11 + 2 ** -20, 0x3c01],
      [2 ** -25, 0x0000], [3 * 2 ** -25, 0x0002], [65504, 0x7bff], [65519, 0x7bff], [65520, 0x7c00],
      [-Infinity, 0xfc00], [1e30, 0x7c00], [-0, 0x8000],
    ];
    const got = toHalf(new Float32Array(cases.map((c) => c[0])), new Uint16Array(cases.length));
    cases.forEach(([x, want], i) => assert.equal(got[i], want, `toHalf(${x}) = ${got[i].toString(16)}, want ${want.toString(16)}`));
    assert.equal(toHalf(new Float32Array([NaN]), new Uint16Array(1))[0] & 0x7e00, 0x7e00, 'NaN stays NaN');
  });

  test('requestQkvDevice reports unsupported without WebGPU', async () => {
    const { requestQkvDevice } = await import('../../src/js/webgpu.js');
    if (!globalThis.navigator?.gpu) {
      // Node is told where a GPU comes from; a browser, that it lacks navigator.gpu.
      const want = typeof process !== 'undefined' && process.versions?.node ? /in Node by itself: pass \{gpu\} from the 'webgpu' package/ : /navigator\.gpu/;
      await assert.rejects(requestQkvDevice(), (e) => e.code === 'unsupported' && want.test(e.message));
    }
    await assert.rejects(requestQkvDevice({ gpu: { requestAdapter: async () => null } }),
      (e) => e.code === 'unsupported' && /no GPU adapter/.test(e.message));
  });

  test('WebGPU attention matches the double-precision reference (SwiftShader)', { timeout: 420000 }, async (t) => {
    if (skipReason) { t.skip(skipReason); return; }
    const t0 = performance.now();
    const { code, lines, stderr } = await runGpuChild(fileURLToPath(import.meta.url));
    assert.equal(code, 0, `child exited ${code}\n${stderr}`);
    const [{ adapter }, ...results] = lines;
    t.diagnostic(`adapter: ${adapter.vendor} ${adapter.architecture}; ${results.length} cases in ` +
      `${((performance.now() - t0) / 1000).toFixed(1)} s; tolerance ${TOL}`);
    const expected = sweepCases().length + specialCases().length;
    assert.equal(results.length, expected, `expected ${expected} results\n${stderr}`);
    let worst = 0;
    for (const r of results) {
      await t.test(r.name, () => {
        assert.ok(!r.error, r.error);
        const extra = r.probsDiff !== undefined ? ` probs ${r.probsDiff.toExponential(2)} rowsum ${r.rowSumErr.toExponential(2)}` : '';
        t.diagnostic(`${r.name}: ${r.mode} ${r.ms.toFixed(0)} ms, max |out - ref| ${r.outDiff.toExponential(2)}${extra}`);
        worst = Math.max(worst, r.outDiff, r.probsDiff ?? 0);
        assert.ok(r.outDiff <= TOL, `max |out - ref| = ${r.outDiff} > ${TOL}`);
        if (r.expectMode) assert.equal(r.mode, r.expectMode);
        if (r.probsDiff !== undefined) {
          assert.ok(r.probsDiff <= TOL, `max |probs - ref| = ${r.probsDiff} > ${TOL}`);
          assert.ok(r.rowSumErr <= TOL, `probability rows do not sum to 1 (err ${r.rowSumErr})`);
          assert.equal(r.maskedNonZero, 0, 'masked keys must get probability exactly 0');
        }
        if (r.zeroRowNonZero !== undefined) assert.equal(r.zeroRowNonZero, 0, 'fully masked queries must output zeros');
      });
    }
    t.diagnostic(`worst max difference over all cases: ${worst.toExponential(2)} (tolerance ${TOL})`);
  });
}
