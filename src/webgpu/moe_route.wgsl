// Mixture-of-experts routing for the whole-model forward (src/js/gpu-moe.js). CPU twin: moe_ffn
// in src/model/blocks.cpp (softmax_simd, partial_sort). f32 throughout.
//   main:    per token, the router's softmax over the E experts, the K most probable (ties: the
//            lower index) and their weights, renormalised to sum 1 when NORM_TOPK (the sum
//            clamped below at f16's smallest normal, as llama.cpp does). One thread per token:
//            E <= MAX_E, and K passes over E are cheap next to the experts' products.
//            Dispatch (ceil(n / 64)).
//   group:   prefill: per expert, the (token, rank) slots t * K + k that chose it, in slot order,
//            and their count (moe_experts.wgsl's *_grouped read them). Dispatch (ceil(E / 64)).
//   combine: prefill: out[t] = sum_k gates[t * K + k] * ys[t * K + k] in rank order, as moe_ffn
//            sums its scaled rows. Dispatch (ceil(D / 64), n).
//
// Bindings (group 0):
//   0 step    uniform Step: n (tokens of this step)
//   1 logits  storage read  array<f32> (n, E)   the router's product
//   2 sel     storage rw    array<u32> (n, K)   chosen experts, most probable first
//   3 gates   storage rw    array<f32> (n, K)   their weights
//   4 counts  storage rw    array<u32> (E,)     slots per expert (group)
//   5 lists   storage rw    array<u32> (E, T)   the slots of each expert (group; T = step capacity)
//   6 ys      storage read  array<f32> (n * K, D) each slot's expert output (combine)
//   7 out     storage rw    array<f32> (n, D)   (combine)
// Overrides: E experts, K experts per token, NORM_TOPK 0/1, T tokens per step at most, D width.

struct Step { n: u32, pos: u32, pad0: u32, pad1: u32 };

const MAX_E: u32 = 512u;  // the engine's limit on experts (src/model/config.cpp)

override E: u32 = 8u;
override K: u32 = 2u;
override NORM_TOPK: u32 = 0u;
override T: u32 = 64u;
override D: u32 = 64u;

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> sel: array<u32>;
@group(0) @binding(3) var<storage, read_write> gates: array<f32>;
@group(0) @binding(4) var<storage, read_write> counts: array<u32>;
@group(0) @binding(5) var<storage, read_write> lists: array<u32>;
@group(0) @binding(6) var<storage, read> ys: array<f32>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;

var<private> p: array<f32, MAX_E>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let t = gid.x;
  if (t >= step.n) { return; }
  let base = t * E;
  var m = logits[base];
  for (var e = 1u; e < E; e++) { m = max(m, logits[base + e]); }
  var sum = 0.0;
  for (var e = 0u; e < E; e++) {
    p[e] = exp(logits[base + e] - m);
    sum += p[e];
  }
  let inv = 1.0 / sum;
  for (var e = 0u; e < E; e++) { p[e] *= inv; }
  // Probabilities are >= 0, so -1 marks an expert already taken; the strict > keeps the lower
  // index among equals.
  var total = 0.0;
  for (var k = 0u; k < K; k++) {
    var best = 0u;
    var bp = -1.0;
    for (var e = 0u; e < E; e++) {
      if (p[e] > bp) { bp = p[e]; best = e; }
    }
    sel[t * K + k] = best;
    gates[t * K + k] = bp;
    total += bp;
    p[best] = -1.0;
  }
  if (NORM_TOPK != 0u) {
    let d = max(total, 6.103515625e-5);
    for (var k = 0u; k < K; k++) { gates[t * K + k] /= d; }
  }
}

@compute @workgroup_size(64)
fn group(@builtin(global_invocation_id) gid: vec3<u32>) {
  let e = gid.x;
  if (e >= E) { return; }
  var c = 0u;
  for (var i = 0u; i < step.n * K; i++) {
    if (sel[i] == e) {
      lists[e * T + c] = i;
      c++;
    }
  }
  counts[e] = c;
}

@compute @workgroup_size(64)
fn combine(@builtin(global_invocation_id) gid: vec3<u32>) {
  let c = gid.x;
  let t = gid.y;
  if (c >= D || t >= step.n) { return; }
  var v = gates[t * K] * ys[t * K * D + c];
  for (var k = 1u; k < K; k++) { v += gates[t * K + k] * ys[(t * K + k) * D + c]; }
  out[t * D + c] = v;
}
