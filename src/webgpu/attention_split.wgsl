// Split-K (flash-decoding) attention of one decoded token over a layer's KV cache, for the
// whole-model forward (src/js/gpu-model.js): the keys are cut into S splits, one workgroup per
// (head, split) computes its split's online softmax (max m, sum l, unnormalized output), and a
// reduce pass combines them, so a long context keeps HEADS * S workgroups busy instead of HEADS.
// Same contract as attention_cached.wgsl (attention_ref of src/kernels/attention.h): the query at
// position pos sees keys j <= pos (and pos - j < WINDOW with a sliding window), scores q.k * SCALE,
// soft-capped as SOFTCAP * tanh(s / SOFTCAP) when SOFTCAP > 0; grouped-query heads share kv heads.
// f32 throughout.
//
// Bindings (group 0):
//   0 step  uniform Step: n (1), pos, k (unused here), s (splits, 1..MAXS)
//   1 q     storage read  array<f32> (1, HEADS * HD)
//   2 kc    storage read  array<f32> (capacity, KV_HEADS * HD)
//   3 vc    storage read  array<f32> (capacity, KV_HEADS * HD)
//   4 part  storage rw    array<f32> (HEADS, MAXS, HD + 2): m, l, then the output's HD values
//   5 out   storage rw    array<f32> (1, HEADS * HD)
// Entry points: partial, dispatch (HEADS, s); reduce_splits, dispatch (HEADS).
// Overrides: HEADS, KV_HEADS, HD (<= 8 * WG), WINDOW, SCALE, SOFTCAP.

struct Step { n: u32, pos: u32, k: u32, s: u32 };

fn tanh_f(v: f32) -> f32 {
  return sign(v) * (1.0 - 2.0 / (exp(2.0 * abs(v)) + 1.0));
}

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
const NEG_BIG: f32 = -3.0e38;

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<f32>;
@group(0) @binding(3) var<storage, read> vc: array<f32>;
@group(0) @binding(4) var<storage, read_write> part: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

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

@compute @workgroup_size(WG)
fn partial(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = wid.x;
  let split = wid.y;
  let g = h / (HEADS / KV_HEADS);
  let kvs = KV_HEADS * HD;
  let qpos = step.pos;
  var first = 0u;
  if (WINDOW > 0u && qpos + 1u > WINDOW) { first = qpos + 1u - WINDOW; }
  let span = (qpos + 1u - first + step.s - 1u) / step.s;
  let j_begin = min(first + split * span, qpos + 1u);
  let j_end = min(j_begin + span, qpos + 1u);
  for (var d = lid; d < HD; d += WG) { qs[d] = q[h * HD + d]; }
  workgroupBarrier();

  var acc: array<f32, MAX_ACC>;
  for (var i = 0u; i < MAX_ACC; i++) { acc[i] = 0.0; }
  var m = NEG_BIG;
  var l = 0.0;
  for (var j0 = j_begin; j0 < j_end; j0 += CHUNK) {
    let nk = min(CHUNK, j_end - j0);
    var lmax = NEG_BIG;
    for (var jj = lid; jj < nk; jj += WG) {
      let kb = (j0 + jj) * kvs + g * HD;
      var dot = 0.0;
      for (var d = 0u; d < HD; d++) { dot += qs[d] * kc[kb + d]; }
      var s = dot * SCALE;
      if (SOFTCAP > 0.0) { s = SOFTCAP * tanh_f(s / SOFTCAP); }
      sc[jj] = s;
      lmax = max(lmax, s);
    }
    let mnew = max(m, reduce(lmax, lid, true));
    let corr = exp(m - mnew);
    var lsum = 0.0;
    for (var jj = lid; jj < nk; jj += WG) {
      let p = exp(sc[jj] - mnew);
      sc[jj] = p;
      lsum += p;
    }
    l = l * corr + reduce(lsum, lid, false);
    for (var i = 0u; i < MAX_ACC; i++) {
      let d = lid + i * WG;
      if (d < HD) {
        var a = acc[i] * corr;
        for (var jj = 0u; jj < nk; jj++) { a += sc[jj] * vc[(j0 + jj) * kvs + g * HD + d]; }
        acc[i] = a;
      }
    }
    m = mnew;
    workgroupBarrier();  // sc is rewritten by the next chunk
  }
  let base = (h * MAXS + split) * (HD + 2u);
  if (lid == 0u) {
    part[base] = m;
    part[base + 1u] = l;
  }
  for (var i = 0u; i < MAX_ACC; i++) {
    let d = lid + i * WG;
    if (d < HD) { part[base + 2u + d] = acc[i]; }
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
