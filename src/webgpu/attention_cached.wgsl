// Causal attention of the step's queries over a layer's KV cache, for the whole-model forward
// (src/js/gpu-model.js). The host prepends common.wgsl (NEG_BIG, tanh_f). One online-softmax
// loop (attend) serves both ways of running it:
//   main: one workgroup per (head, query), every key the query sees (prefill chunks, and a
//     decoded token with few keys);
//   partial + reduce_splits: split-K (flash-decoding) for a decoded token: its keys cut into s
//     splits, one workgroup per (head, split) writes its split's max m, sum l and unnormalized
//     output, and reduce_splits combines them, so a long context keeps HEADS * s workgroups
//     busy instead of HEADS.
// Positions and counts come from the step uniform, so the bind groups stay the same from token
// to token. The CPU contract is attention_ref's (src/kernels/attention.h): query i sits at
// position pos + i and sees keys j <= its position (and, with a sliding WINDOW > 0,
// position - j < WINDOW); scores are q.k * SCALE, soft-capped as SOFTCAP * tanh(s / SOFTCAP)
// when SOFTCAP > 0 (Gemma 2); grouped-query heads share kv heads. f32 arithmetic throughout.
//
// Bindings (group 0):
//   0 step  uniform Step: n, pos, k (unused here), s (splits, 1..MAXS)
//   1 q     storage read  array<f32> (n, HEADS * HD)
//   2 kc    storage read  array<kv_t> (capacity, KV_HEADS * HD): f32, or f16 (common.wgsl)
//   3 vc    storage read  array<kv_t> (capacity, KV_HEADS * HD)
//   4 out   storage rw    array<f32> (n, HEADS * HD)
//   5 part  storage rw    array<f32> (HEADS, MAXS, HD + 2): m, l, then the output's HD values
// Entry points: main, dispatch (HEADS, n); partial, dispatch (HEADS, s); reduce_splits,
// dispatch (HEADS). Overrides: HEADS, KV_HEADS, HD (<= 8 * WG), WINDOW, SCALE, SOFTCAP.

struct Step { n: u32, pos: u32, k: u32, s: u32 };

override HEADS: u32 = 1u;
override KV_HEADS: u32 = 1u;
override HD: u32 = 64u;
override WINDOW: u32 = 0u;
override SCALE: f32 = 0.125;
override SOFTCAP: f32 = 0.0;
const WG: u32 = 64u;
const CHUNK: u32 = 64u;
const MAX_ACC: u32 = 8u;
const MAXS: u32 = 64u;

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<kv_t>;
@group(0) @binding(3) var<storage, read> vc: array<kv_t>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read_write> part: array<f32>;

var<workgroup> qs: array<f32, HD>;
var<workgroup> sc: array<f32, CHUNK>;
var<workgroup> red: array<f32, WG>;

fn reduce(v: f32, lid: u32, is_max: bool) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s /= 2u) {
    if (lid < s) { red[lid] = select(red[lid] + red[lid + s], max(red[lid], red[lid + s]), is_max); }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

// A softmax in progress: the max m of the scores so far, l = sum exp(s - m), and this thread's
// output dims lid + i WG of sum exp(s - m) v (unnormalized).
struct Online {
  m: f32,
  l: f32,
  acc: array<f32, MAX_ACC>,
};

// Loads query row qbase into qs, then attends over keys j_begin .. j_end of kv head g, CHUNK
// keys at a time (scores into sc, the running max and sum rescaled per chunk).
fn attend(qbase: u32, g: u32, j_begin: u32, j_end: u32, lid: u32) -> Online {
  let kvs = KV_HEADS * HD;
  for (var d = lid; d < HD; d += WG) { qs[d] = q[qbase + d]; }
  workgroupBarrier();
  var o: Online;
  o.m = NEG_BIG;
  o.l = 0.0;
  for (var j0 = j_begin; j0 < j_end; j0 += CHUNK) {
    let nk = min(CHUNK, j_end - j0);
    var lmax = NEG_BIG;
    for (var jj = lid; jj < nk; jj += WG) {
      let kb = (j0 + jj) * kvs + g * HD;
      var dot = 0.0;
      for (var d = 0u; d < HD; d++) { dot += qs[d] * f32(kc[kb + d]); }
      var s = dot * SCALE;
      if (SOFTCAP > 0.0) { s = SOFTCAP * tanh_f(s / SOFTCAP); }
      sc[jj] = s;
      lmax = max(lmax, s);
    }
    let mnew = max(o.m, reduce(lmax, lid, true));
    let corr = exp(o.m - mnew);
    var lsum = 0.0;
    for (var jj = lid; jj < nk; jj += WG) {
      let p = exp(sc[jj] - mnew);
      sc[jj] = p;
      lsum += p;
    }
    o.l = o.l * corr + reduce(lsum, lid, false);
    for (var i = 0u; i < MAX_ACC; i++) {
      let d = lid + i * WG;
      if (d < HD) {
        var a = o.acc[i] * corr;
        for (var jj = 0u; jj < nk; jj++) { a += sc[jj] * f32(vc[(j0 + jj) * kvs + g * HD + d]); }
        o.acc[i] = a;
      }
    }
    o.m = mnew;
    workgroupBarrier();  // sc is rewritten by the next chunk
  }
  return o;
}

// The first key a query at qpos sees.
fn first_key(qpos: u32) -> u32 {
  if (WINDOW > 0u && qpos + 1u > WINDOW) { return qpos + 1u - WINDOW; }
  return 0u;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = wid.x;
  let t = wid.y;
  if (t >= step.n) { return; }
  let qpos = step.pos + t;
  let qbase = t * HEADS * HD + h * HD;
  let o = attend(qbase, h / (HEADS / KV_HEADS), first_key(qpos), qpos + 1u, lid);
  for (var i = 0u; i < MAX_ACC; i++) {
    let d = lid + i * WG;
    if (d < HD) { out[qbase + d] = o.acc[i] / o.l; }
  }
}

@compute @workgroup_size(WG)
fn partial(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = wid.x;
  let split = wid.y;
  let qpos = step.pos;
  let first = first_key(qpos);
  let span = (qpos + 1u - first + step.s - 1u) / step.s;
  let j_begin = min(first + split * span, qpos + 1u);
  let j_end = min(j_begin + span, qpos + 1u);
  let o = attend(h * HD, h / (HEADS / KV_HEADS), j_begin, j_end, lid);
  let base = (h * MAXS + split) * (HD + 2u);
  if (lid == 0u) {
    part[base] = o.m;
    part[base + 1u] = o.l;
  }
  for (var i = 0u; i < MAX_ACC; i++) {
    let d = lid + i * WG;
    if (d < HD) { part[base + 2u + d] = o.acc[i]; }
  }
}

@compute @workgroup_size(WG)
fn reduce_splits(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = wid.x;
  let ns = step.s;
  var mx = NEG_BIG;
  for (var s = 0u; s < ns; s++) { mx = max(mx, part[(h * MAXS + s) * (HD + 2u)]); }
  var l = 0.0;
  for (var s = 0u; s < ns; s++) {
    let b = (h * MAXS + s) * (HD + 2u);
    l += part[b + 1u] * exp(part[b] - mx);
  }
  for (var d = lid; d < HD; d += WG) {
    var a = 0.0;
    for (var s = 0u; s < ns; s++) {
      let b = (h * MAXS + s) * (HD + 2u);
      a += part[b + 2u + d] * exp(part[b] - mx);
    }
    out[h * HD + d] = a / l;
  }
}
