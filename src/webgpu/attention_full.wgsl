// Attention that keeps its probabilities, for the whole-model forward (src/js/gpu-model.js):
// encoders' bidirectional attention over a text's keys (CAUSAL 0), and decoder steps whose
// attention maps are captured for the explorer (CAUSAL 1). One workgroup per (head, query):
// the scores go to the query's row of `probs`, become exp(s - max) / sum there, and the output
// is their weighted sum of values. The CPU contract is attention_ref's (src/kernels/attention.h):
// query t sits at position pos + t; causal queries see keys j <= their position (and, with a
// sliding WINDOW > 0, position - j < WINDOW); bidirectional ones see keys 0..pos+n-1; scores
// are q.k * SCALE, soft-capped as SOFTCAP * tanh(s / SOFTCAP) when SOFTCAP > 0; grouped-query
// heads share kv heads. Keys a query does not see get probability 0. f32 throughout. The host
// prepends common.wgsl (NEG_BIG, tanh_f).
//
// Bindings (group 0):
//   0 step  uniform Step: n, pos
//   1 q     storage read  array<f32> (n, HEADS * HD)
//   2 kc    storage read  array<kv_t> (>= pos + n, KV_HEADS * HD): f32, or f16 (common.wgsl)
//   3 vc    storage read  array<kv_t> (>= pos + n, KV_HEADS * HD)
//   4 out   storage rw    array<f32> (n, HEADS * HD)
//   5 probs storage rw    array<f32> (HEADS, n, pos + n): row (h, t) at (h * n + t) * (pos + n)
// Dispatch: (HEADS, n). Overrides: HEADS, KV_HEADS, HD, CAUSAL, WINDOW, SCALE, SOFTCAP.

struct Step { n: u32, pos: u32, pad0: u32, pad1: u32 };

override HEADS: u32 = 1u;
override KV_HEADS: u32 = 1u;
override HD: u32 = 64u;
override CAUSAL: u32 = 1u;
override WINDOW: u32 = 0u;
override SCALE: f32 = 0.125;
override SOFTCAP: f32 = 0.0;
const WG: u32 = 64u;

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<kv_t>;
@group(0) @binding(3) var<storage, read> vc: array<kv_t>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read_write> probs: array<f32>;

var<workgroup> qs: array<f32, HD>;
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
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = wid.x;
  let t = wid.y;
  if (t >= step.n) { return; }
  let keys = step.pos + step.n;
  let g = h / (HEADS / KV_HEADS);
  let kvs = KV_HEADS * HD;
  let qpos = step.pos + t;
  var j_begin = 0u;
  var j_end = keys;
  if (CAUSAL == 1u) {
    j_end = qpos + 1u;
    if (WINDOW > 0u && qpos + 1u > WINDOW) { j_begin = qpos + 1u - WINDOW; }
  }
  let row = (h * step.n + t) * keys;
  let qbase = t * HEADS * HD + h * HD;
  for (var d = lid; d < HD; d += WG) { qs[d] = q[qbase + d]; }
  workgroupBarrier();

  var lmax = NEG_BIG;
  for (var j = lid; j < keys; j += WG) {
    if (j < j_begin || j >= j_end) { probs[row + j] = 0.0; continue; }
    let kb = j * kvs + g * HD;
    var dot = 0.0;
    for (var d = 0u; d < HD; d++) { dot += qs[d] * f32(kc[kb + d]); }
    var s = dot * SCALE;
    if (SOFTCAP > 0.0) { s = SOFTCAP * tanh_f(s / SOFTCAP); }
    probs[row + j] = s;
    lmax = max(lmax, s);
  }
  let m = reduce(lmax, lid, true);
  var lsum = 0.0;
  // Each thread rereads only the entries it wrote; the storage barrier then publishes them all.
  for (var j = lid; j < keys; j += WG) {
    if (j >= j_begin && j < j_end) {
      let p = exp(probs[row + j] - m);
      probs[row + j] = p;
      lsum += p;
    }
  }
  let inv = 1.0 / reduce(lsum, lid, false);
  for (var j = lid; j < keys; j += WG) {
    if (j >= j_begin && j < j_end) { probs[row + j] *= inv; }
  }
  storageBarrier();
  workgroupBarrier();
  for (var d = lid; d < HD; d += WG) {
    var a = 0.0;
    for (var j = j_begin; j < j_end; j++) { a += probs[row + j] * f32(vc[j * kvs + g * HD + d]); }
    out[qbase + d] = a;
  }
}
