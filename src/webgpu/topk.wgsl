// The top candidates of a logits row on the GPU (src/js/gpu-topk.js), so that a decode step
// reads back K (id, logit) pairs instead of the whole vocabulary when the sampler only looks at
// the best tokens (greedy, top-k). Order: logit descending, id ascending among equal logits (the
// CPU sampler's argmax and its stable sort); NaN ranks as -inf, as the sampler maps it, and -0 as +0.
//
// Two entry points, recorded one after the other in the step's compute pass:
//   chunks: workgroup g takes logits [g * CH, (g + 1) * CH) into workgroup memory and extracts its
//           best K one by one (a max reduction per round, the winner marked taken), writing the
//           sorted list part[g * KMAX ..]. Dispatch (G = ceil(V / CH)).
//   merge:  one workgroup merges the G sorted lists (thread g holds list g's head; K rounds of a
//           max reduction, the winner's list advances) into out[0 .. K): (id, logit bits).
//           Dispatch (1).
// K (step.k, <= KMAX, <= V) is per step, so one pipeline serves every top_k.
//
// Bindings (group 0):
//   0 step    uniform Step: n, pos, k
//   1 logits  storage read array<f32> (V,)   (row 0 of the step's logits)
//   2 part    storage rw   array<vec2<u32>> (G * KMAX): (id, key) per chunk
//   3 out     storage rw   array<vec2<u32>> (KMAX): (id, logit bits)
// Constants (prepended by the host): V vocabulary; CH = WG * PER values per chunk; G chunks
// (<= WG); KMAX; WG threads (a power of two); PER values per thread.

struct Step { n: u32, pos: u32, k: u32, pad: u32 };

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> part: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> out: array<vec2<u32>>;

var<workgroup> keys: array<u32, CH>;
var<workgroup> rk: array<u32, WG>;
var<workgroup> ri: array<u32, WG>;

// An order-preserving u32 of a logit, >= 1 for every value (0 marks "taken" or "none"); NaN as -inf.
fn key_of(v: f32) -> u32 {
  var b = bitcast<u32>(v);
  if ((b & 0x7fffffffu) > 0x7f800000u) { b = 0xff800000u; }
  if (b == 0x80000000u) { b = 0u; }  // -0 ties with +0, as the sampler compares them
  if ((b & 0x80000000u) != 0u) { return ~b; }
  return b | 0x80000000u;
}

// (key a, id ia) ranks before (key b, id ib).
fn better(a: u32, ia: u32, b: u32, ib: u32) -> bool {
  return a > b || (a == b && ia < ib);
}

// The best (key, id) over the workgroup's (k, i); every thread gets it.
fn reduce_best(k: u32, i: u32, lid: u32) -> vec2<u32> {
  rk[lid] = k;
  ri[lid] = i;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s && better(rk[lid + s], ri[lid + s], rk[lid], ri[lid])) {
      rk[lid] = rk[lid + s];
      ri[lid] = ri[lid + s];
    }
    workgroupBarrier();
  }
  let r = vec2<u32>(rk[0], ri[0]);
  workgroupBarrier();
  return r;
}

@compute @workgroup_size(WG)
fn chunks(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let base = wid.x * CH;
  for (var j = 0u; j < PER; j++) {
    let i = lid + j * WG;
    keys[i] = select(0u, key_of(logits[min(base + i, V - 1u)]), base + i < V);
  }
  workgroupBarrier();
  let k = min(step.k, KMAX);
  for (var r = 0u; r < k; r++) {
    var bk = 0u;
    var bi = 0xffffffffu;
    for (var j = 0u; j < PER; j++) {
      let i = lid + j * WG;
      if (better(keys[i], i, bk, bi)) { bk = keys[i]; bi = i; }
    }
    let best = reduce_best(bk, bi, lid);
    if (lid == 0u) {
      part[wid.x * KMAX + r] = vec2<u32>(base + best.y, best.x);
      if (best.x != 0u) { keys[best.y] = 0u; }
    }
    workgroupBarrier();
  }
}

@compute @workgroup_size(WG)
fn merge(@builtin(local_invocation_index) lid: u32) {
  let k = min(step.k, KMAX);
  var p = 0u;  // this thread's position in list lid
  var head = vec2<u32>(0xffffffffu, 0u);
  if (lid < G) { head = part[lid * KMAX]; }
  for (var r = 0u; r < k; r++) {
    let best = reduce_best(head.y, head.x, lid);
    if (lid == 0u) { out[r] = vec2<u32>(best.y, bitcast<u32>(logits[min(best.y, V - 1u)])); }
    if (lid < G && head.x == best.y && head.y == best.x) {
      p++;
      if (p < k) { head = part[lid * KMAX + p]; } else { head = vec2<u32>(0xffffffffu, 0u); }
    }
  }
}
