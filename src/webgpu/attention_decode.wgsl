// Split-K attention, pass 1 of 2 (decode: few queries over a long cache). The visible key range
// [kv_begin, kv_end) is cut into n_splits chunks of CHUNK keys; one workgroup per
// (chunk, head, query) computes that chunk's partial softmax state. Pass 2 is
// attention_decode_reduce.wgsl. Prepended by the host: common.wgsl.
//
// Bindings (group 0):
//   0 params    uniform Params (n_splits, kv_begin, kv_end used here)
//   1 q         storage read  array<f32>  (n_q,  n_heads    * HD)
//   2 k         storage read  array<kv_t>  (n_kv, n_kv_heads * HD)
//   3 v         storage read  array<kv_t>  (n_kv, n_kv_heads * HD)
//   4 key_valid storage read  array<u32>  (n_kv,)
//   5 partial   storage rw    array<f32>  (n_q, n_heads, n_splits, 2 + HD):
//                 [m = max score (NEG_BIG if none visible), l = sum exp(s - m), acc[HD] = sum exp(s - m) v]
// Dispatch: (n_splits, n_heads, n_q).
// Overrides: WG threads (a power of two, for the tree reductions); CHUNK keys per workgroup; HD.

override WG: u32 = 64;
override CHUNK: u32 = 256;
override HD: u32 = 64;

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<kv_t>;
@group(0) @binding(3) var<storage, read> v: array<kv_t>;
@group(0) @binding(4) var<storage, read> key_valid: array<u32>;
@group(0) @binding(5) var<storage, read_write> partial: array<f32>;

var<workgroup> qs: array<f32, HD>;     // the query row
var<workgroup> sc: array<f32, CHUNK>;  // scores, then probabilities exp(s - m)
var<workgroup> red: array<f32, WG>;    // reduction scratch

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let p = params;
  let split = wid.x;
  let h = wid.y;
  let i = wid.z;
  let g = h / (p.n_heads / p.n_kv_heads);
  let kv_stride = p.n_kv_heads * HD;
  let qpos = i32(p.q_pos0 + i);
  let j0 = p.kv_begin + split * CHUNK;
  let nk = select(0u, min(CHUNK, p.kv_end - j0), j0 < p.kv_end);

  for (var d = lid; d < HD; d += WG) { qs[d] = q[i * p.n_heads * HD + h * HD + d]; }
  workgroupBarrier();

  var lmax = NEG_BIG;
  for (var jj = lid; jj < CHUNK; jj += WG) {
    let j = j0 + jj;
    var s = NEG_BIG;
    if (jj < nk && pos_visible(p, qpos, i32(j)) && key_valid[j] != 0u) {
      var dot = 0.0;
      let kb = j * kv_stride + g * HD;
      for (var d = 0u; d < HD; d++) { dot += qs[d] * f32(k[kb + d]); }
      s = dot * p.scale;
    }
    sc[jj] = s;
    lmax = max(lmax, s);
  }
  red[lid] = lmax;
  workgroupBarrier();
  for (var w = WG / 2u; w > 0u; w /= 2u) {
    if (lid < w) { red[lid] = max(red[lid], red[lid + w]); }
    workgroupBarrier();
  }
  let m = red[0];
  workgroupBarrier();

  var lsum = 0.0;
  for (var jj = lid; jj < CHUNK; jj += WG) {
    let pj = masked_exp(sc[jj], m);
    sc[jj] = pj;
    lsum += pj;
  }
  red[lid] = lsum;
  workgroupBarrier();
  for (var w = WG / 2u; w > 0u; w /= 2u) {
    if (lid < w) { red[lid] += red[lid + w]; }
    workgroupBarrier();
  }
  let l = red[0];

  let base = ((i * p.n_heads + h) * p.n_splits + split) * (2u + HD);
  for (var d = lid; d < HD; d += WG) {
    var a = 0.0;
    for (var jj = 0u; jj < nk; jj++) {
      a += sc[jj] * f32(v[(j0 + jj) * kv_stride + g * HD + d]);
    }
    partial[base + 2u + d] = a;
  }
  if (lid == 0u) {
    partial[base] = m;
    partial[base + 1u] = l;
  }
}
