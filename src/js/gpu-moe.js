// Mixture-of-experts feed-forwards on WebGPU (Qwen3-MoE, OLMoE, Granite-MoE) for the whole-model
// forward (src/js/gpu-model.js), inside the step's single compute pass:
//   router logits = in R^T (gpu-products.js, any stored type)
//   -> softmax, top-K experts and weights per token on the GPU (moe_route.wgsl)
//   -> h = silu(G_e in) * (U_e in) for each chosen expert e (moe_experts.wgsl gate_up)
//   -> out = sum_k w_k D_e h (moe_experts.wgsl down), the caller then adds out into x.
// A prefill step (n > 1) groups the slots by expert first (moe_route.wgsl group), so that the
// grouped kernels read each expert's weights once per TT of its tokens, and sums the slots'
// outputs with their weights at the end (moe_route.wgsl combine).
// The chosen experts never leave the GPU: the expert kernels read them from a storage buffer and
// read only those experts' rows. CPU twin and reference: moe_ffn in src/model/blocks.cpp.
import { QkvError } from './errors.js';
import { gpuRowBytes } from './gpu-products.js';
import { loadShader } from './webgpu.js';

const BufferUsage = globalThis.GPUBufferUsage ?? { COPY_SRC: 0x4, COPY_DST: 0x8, UNIFORM: 0x40, STORAGE: 0x80 };

/** The engine's limit on experts (src/model/config.cpp; MAX_E of moe_route.wgsl). */
export const MOE_MAX_EXPERTS = 512;
const EXPERT_ROLES = new Set(['gate_exps', 'up_exps', 'down_exps']);
const WG = 64, R = 4, TT = 4;  // TT: an expert's slots per workgroup in prefill

/** Whether a tensor role of JsModel.gpuModel() is a stacked expert weight (uploaded by uploadExperts). */
export const isExpertRole = (role) => EXPERT_ROLES.has(role);

/**
 * Uploads a stack of `experts` experts' matrices in chunks of whole experts, each within one
 * buffer of at most `limit` bytes (so an expert's rows never straddle two bindings).
 * @returns {{type, rows, cols, rowsPer, chunks: {e0, ne, weight}[], destroy()}}
 * @throws {QkvError} 'unsupported' when one expert alone exceeds the limit
 */
export function uploadExperts(products, t, experts, limit) {
  const rowsPer = t.rows / experts;
  if (!Number.isInteger(rowsPer)) throw new QkvError('bad_model', `${t.role} of layer ${t.layer}: ${t.rows} rows do not split into ${experts} experts`);
  const rowBytes = gpuRowBytes(t.type, t.cols), expertBytes = rowsPer * rowBytes;
  const per = Math.floor((Math.floor(limit / 4) * 4 - 8) / expertBytes);
  if (per < 1) {
    throw new QkvError('unsupported', `one expert of ${t.role} (layer ${t.layer}, ${expertBytes} bytes) exceeds this GPU's ${limit}-byte buffer limit`);
  }
  const chunks = [];
  for (let e0 = 0; e0 < experts; e0 += per) {
    const ne = Math.min(per, experts - e0);
    const bytes = t.bytes.subarray(e0 * expertBytes, (e0 + ne) * expertBytes);
    chunks.push({ e0, ne, weight: products.upload({ type: t.type, rows: ne * rowsPer, cols: t.cols, bytes, label: `${t.layer}:${t.role} experts ${e0}..${e0 + ne}` }) });
  }
  return {
    type: t.type, rows: t.rows, cols: t.cols, rowsPer, rowBytes, chunks,
    destroy() { for (const c of chunks) c.weight.destroy(); chunks.length = 0; },
  };
}

/** Loads the MoE kernels' sources once per model. */
export async function loadMoeShaders() {
  const [route, experts, weights] = await Promise.all(['moe_route.wgsl', 'moe_experts.wgsl', 'weights.wgsl'].map(loadShader));
  return { route, experts, weights };
}

/**
 * The ops of one MoE feed-forward bound to a forward's buffers, recorded once.
 * @param {object} o
 * @param {GPUDevice} o.device
 * @param {object} o.shaders loadMoeShaders()
 * @param {object} o.products createProducts(device) (the router's product)
 * @param {GPUBuffer} o.step the step uniform (n at offset 0)
 * @param {number} o.T tokens per step at most
 * @param {number} o.experts experts; o.used experts per token; o.normTopk renormalise their weights
 * @param {object} o.router GpuWeight (experts, dim); o.gate, o.up, o.down uploadExperts() stacks
 * @param {GPUBuffer} o.input (T, dim) the normed activations; o.output (T, dim) the experts' sum
 * @param {(size: number, usage: number, label: string) => GPUBuffer} o.make the forward's allocator
 * @param {Map} o.cache pipelines by key, shared by the model's layers
 * @returns {{encode(pass: GPUComputePassEncoder, n: number): void, sel: GPUBuffer, gates: GPUBuffer}}
 *   sel, gates: (T, used) the last step's chosen experts (u32) and their weights (f32)
 */
export function createMoeFfn(o) {
  const { device, shaders, products, step, T, experts: E, used: K, router, gate, up, down, input, output, make, cache } = o;
  if (gate.type !== up.type || gate.rows !== up.rows || gate.cols !== up.cols) {
    throw new QkvError('unsupported', 'expert gate and up weights of different types or shapes are not implemented on WebGPU');
  }
  const hid = gate.rowsPer, dim = down.rowsPer;
  if (down.cols !== hid || gate.cols !== dim || router.rows !== E || router.cols !== dim) {
    throw new QkvError('bad_model', `expert shapes disagree: gate ${gate.rows}x${gate.cols}, down ${down.rows}x${down.cols}, router ${router.rows}x${router.cols}`);
  }
  const maxGroups = device.limits.maxComputeWorkgroupsPerDimension;
  if (Math.ceil(Math.max(hid, dim) / R) > maxGroups || T * K > maxGroups) {
    throw new QkvError('unsupported', `experts of ${hid} x ${dim} exceed this GPU's dispatch limits`);
  }
  const st = BufferUsage.STORAGE | BufferUsage.COPY_SRC;  // COPY_SRC: tests read the routing back
  const logits = make(T * E * 4, st, 'moe-router-logits');
  const sel = make(T * K * 4, st, 'moe-chosen');
  const gates = make(T * K * 4, st, 'moe-gates');
  const hidden = make(T * K * hid * 4, st, 'moe-hidden');
  const counts = T > 1 ? make(E * 4, st, 'moe-counts') : null;
  const lists = T > 1 ? make(E * T * 4, st, 'moe-lists') : null;
  const ys = T > 1 ? make(T * K * dim * 4, st, 'moe-slot-outputs') : null;
  const routerOp = products.product({ weight: router, x: { buffer: input, offset: 0 }, y: { buffer: logits, offset: 0 }, maxTokens: T, step });

  const pipeline = (key, make_) => {
    if (!cache.has(key)) cache.set(key, make_());
    return cache.get(key);
  };
  const routeModule = pipeline('moe_route module', () => device.createShaderModule({ code: shaders.route, label: 'moe_route.wgsl' }));
  const routeEntry = (entryPoint, constants) => pipeline(`moe_route|${entryPoint}|${JSON.stringify(constants)}`, () => device.createComputePipeline({
    layout: 'auto', label: `moe_route.wgsl ${entryPoint}`, compute: { module: routeModule, entryPoint, constants },
  }));
  const routePipe = routeEntry('main', { E, K, NORM_TOPK: o.normTopk ? 1 : 0 });
  const expertPipe = (type, entryPoint) => pipeline(`moe_experts|${type}|${entryPoint}`, () => {
    const code = [`const WG = ${WG}u;\nconst R = ${R}u;\nconst RED = ${WG * 2 * R}u;\nconst TT = ${TT}u;\nconst REDG = ${WG * 2 * R * TT}u;`, shaders.weights,
      `fn load_unit(rb: u32, u: u32, cols: u32, up: bool) { load_${type}(rb, u, cols, up); }`, shaders.experts].join('\n');
    return device.createComputePipeline({
      layout: 'auto', label: `moe_experts ${type} ${entryPoint}`,
      compute: { module: device.createShaderModule({ code, label: `moe_experts.wgsl (${type})` }), entryPoint },
    });
  });
  const group = (pipe, entries) => device.createBindGroup({
    layout: pipe.getBindGroupLayout(0),
    entries: entries.map(([binding, buffer]) => ({ binding, resource: { buffer } })),
  });
  const params = (stack, chunk, first) => {
    const b = make(48, BufferUsage.UNIFORM | BufferUsage.COPY_DST, 'moe-params');
    device.queue.writeBuffer(b, 0, new Uint32Array([chunk.e0, chunk.ne, stack.rowsPer, stack.cols, stack.rowBytes, Math.ceil(stack.cols / 32), K, first ? 1 : 0, T, 0, 0, 0]));
    return b;
  };

  const route = group(routePipe, [[0, step], [1, logits], [2, sel], [3, gates]]);
  const gu = expertPipe(gate.type, 'gate_up'), dn = expertPipe(down.type, 'down');
  const guGroups = gate.chunks.map((c, i) => group(gu, [[0, params(gate, c, false)], [1, step], [2, c.weight.parts[0].buffer],
    [3, up.chunks[i].weight.parts[0].buffer], [4, input], [5, hidden], [6, sel]]));
  const dnGroups = down.chunks.map((c, i) => group(dn, [[0, params(down, c, i === 0)], [1, step], [2, c.weight.parts[0].buffer],
    [3, c.weight.parts[0].buffer], [4, hidden], [5, output], [6, sel], [7, gates]]));
  const guX = Math.ceil(hid / R), dnX = Math.ceil(dim / R);
  // Prefill: grouped by expert.
  let grouped = null;
  if (T > 1) {
    const groupPipe = routeEntry('group', { E, K, T });
    const combinePipe = routeEntry('combine', { K, D: dim });
    const gug = expertPipe(gate.type, 'gate_up_grouped'), dng = expertPipe(down.type, 'down_grouped');
    const paramsOf = (stack) => stack.chunks.map((c) => params(stack, c, false));
    const [gp, dp] = [paramsOf(gate), paramsOf(down)];
    grouped = {
      group: [groupPipe, group(groupPipe, [[0, step], [2, sel], [4, counts], [5, lists]])],
      gateUp: [gug, gate.chunks.map((c, i) => [c.ne, group(gug, [[0, gp[i]], [2, c.weight.parts[0].buffer],
        [3, up.chunks[i].weight.parts[0].buffer], [4, input], [5, hidden], [8, counts], [9, lists]])])],
      down: [dng, down.chunks.map((c, i) => [c.ne, group(dng, [[0, dp[i]], [2, c.weight.parts[0].buffer],
        [3, c.weight.parts[0].buffer], [4, hidden], [5, ys], [8, counts], [9, lists]])])],
      combine: [combinePipe, group(combinePipe, [[0, step], [3, gates], [6, ys], [7, output]])],
    };
  }
  return {
    sel, gates,
    encode(pass, n) {
      routerOp.encode(pass, n);
      pass.setPipeline(routePipe);
      pass.setBindGroup(0, route);
      pass.dispatchWorkgroups(Math.ceil(n / 64));
      if (n > 1) {
        const g = grouped;
        pass.setPipeline(g.group[0]);
        pass.setBindGroup(0, g.group[1]);
        pass.dispatchWorkgroups(Math.ceil(E / 64));
        pass.setPipeline(g.gateUp[0]);
        for (const [ne, bg] of g.gateUp[1]) { pass.setBindGroup(0, bg); pass.dispatchWorkgroups(guX, ne, Math.ceil(n / TT)); }
        pass.setPipeline(g.down[0]);
        for (const [ne, bg] of g.down[1]) { pass.setBindGroup(0, bg); pass.dispatchWorkgroups(dnX, ne, Math.ceil(n / TT)); }
        pass.setPipeline(g.combine[0]);
        pass.setBindGroup(0, g.combine[1]);
        pass.dispatchWorkgroups(Math.ceil(dim / 64), n);
        return;
      }
      pass.setPipeline(gu);
      for (const g of guGroups) { pass.setBindGroup(0, g); pass.dispatchWorkgroups(guX, n * K); }
      pass.setPipeline(dn);
      for (const g of dnGroups) { pass.setBindGroup(0, g); pass.dispatchWorkgroups(dnX, n); }
    },
  };
}
