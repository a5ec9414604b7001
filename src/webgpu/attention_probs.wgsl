// Optional inspection pass: the softmax probabilities of every (head, query) row over all keys,
// recomputing the scores. One workgroup per row: pass 1 writes the raw scores into `probs` and
// merges per-thread online (max, sum) pairs; pass 2 rewrites each entry as exp(s - M) / L.
// Masked keys get 0; a row with no visible key is all 0. Prepended by the host: common.wgsl.
//
// Bindings (group 0):
//   0 params    uniform Params
//   1 q         storage read  array<f32>  (n_q,  n_heads    * HD)
//   2 k         storage read  array<kv_t>  (n_kv, n_kv_heads * HD)
//   3 key_valid storage read  array<u32>  (n_kv,)
//   4 probs     storage rw    array<f32>  (n_heads, n_q, n_kv)
// Dispatch: (n_q, n_heads, 1). Overrides: WG threads (a power of two), HD.

override WG: u32 = 64;
override HD: u32 = 64;

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<kv_t>;
@group(0) @binding(3) var<storage, read> key_valid: array<u32>;
@group(0) @binding(4) var<storage, read_write> probs: array<f32>;

var<workgroup> qs: array<f32, HD>;
var<workgroup> red_m: array<f32, WG>;
var<workgroup> red_l: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let p = params;
  let i = wid.x;
  let h = wid.y;
  let g = h / (p.n_heads / p.n_kv_heads);
  let kv_stride = p.n_kv_heads * HD;
  let qpos = i32(p.q_pos0 + i);
  let row = (h * p.n_q + i) * p.n_kv;

  for (var d = lid; d < HD; d += WG) { qs[d] = q[i * p.n_heads * HD + h * HD + d]; }
  workgroupBarrier();

  var m = NEG_BIG;
  var l = 0.0;
  for (var j = lid; j < p.n_kv; j += WG) {
    var s = NEG_BIG;
    if (pos_visible(p, qpos, i32(j)) && key_valid[j] != 0u) {
      var dot = 0.0;
      let kb = j * kv_stride + g * HD;
      for (var d = 0u; d < HD; d++) { dot += qs[d] * f32(k[kb + d]); }
      s = dot * p.scale;
      let mnew = max(m, s);
      l = l * masked_exp(m, mnew) + exp(s - mnew);
      m = mnew;
    }
    probs[row + j] = s;
  }
  red_m[lid] = m;
  red_l[lid] = l;
  workgroupBarrier();
  for (var w = WG / 2u; w > 0u; w /= 2u) {
    if (lid < w) {
      let m2 = red_m[lid + w];
      let mx = max(red_m[lid], m2);
      red_l[lid] = red_l[lid] * masked_exp(red_m[lid], mx) + red_l[lid + w] * masked_exp(m2, mx);
      red_m[lid] = mx;
    }
    workgroupBarrier();
  }
  let mx = red_m[0];
  let sum = red_l[0];
  let inv = select(0.0, 1.0 / sum, sum > 0.0);
  // Each thread rereads only the entries it wrote itself, so no barrier is needed for them.
  for (var j = lid; j < p.n_kv; j += WG) {
    probs[row + j] = masked_exp(probs[row + j], mx) * inv;
  }
}
