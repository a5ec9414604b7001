// Flash-style attention for a block of queries (prefill): one workgroup per (query tile, head),
// key/value tiles staged in workgroup memory, online softmax. f32 throughout.
// Prepended by the host: common.wgsl (Params, NEG_BIG, MASKED, pos_visible, masked_exp).
//
// Bindings (group 0):
//   0 params    uniform Params
//   1 q         storage read  array<f32>  (n_q,  n_heads    * HD)
//   2 k         storage read  array<kv_t>  (n_kv, n_kv_heads * HD)
//   3 v         storage read  array<kv_t>  (n_kv, n_kv_heads * HD)
//   4 key_valid storage read  array<u32>  (n_kv,)
//   5 out       storage rw    array<f32>  (n_q,  n_heads    * HD); queries with no visible key get 0
// Dispatch: (ceil(n_q / BQ), n_heads, 1).
// Overrides: WG threads; BQ queries per tile; BK keys per tile; HD head dim.
//   Each query of the tile is owned by TPQ = WG / BQ threads, each holding ceil(HD / TPQ) <= MAX_ACC
//   accumulator lanes (dims lane, lane + TPQ, ...). The host checks WG % BQ == 0, the
//   ceil(HD / TPQ) bound, and that (BQ*HD + 2*BK*HD + BQ*BK) * 4 bytes fit in workgroup storage.

override WG: u32 = 64;
override BQ: u32 = 16;
override BK: u32 = 16;
override HD: u32 = 64;
const MAX_ACC: u32 = 32u;

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<kv_t>;
@group(0) @binding(3) var<storage, read> v: array<kv_t>;
@group(0) @binding(4) var<storage, read> key_valid: array<u32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

var<workgroup> qs: array<f32, BQ * HD>;  // (BQ, HD) query tile
var<workgroup> ks: array<f32, BK * HD>;  // (BK, HD) key tile
var<workgroup> vs: array<f32, BK * HD>;  // (BK, HD) value tile
var<workgroup> sc: array<f32, BQ * BK>;  // (BQ, BK) scaled scores, NEG_BIG where masked

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let p = params;
  let h = wid.y;
  let g = h / (p.n_heads / p.n_kv_heads);
  let i0 = wid.x * BQ;
  let q_stride = p.n_heads * HD;
  let kv_stride = p.n_kv_heads * HD;
  let nq = min(BQ, p.n_q - i0);

  // This thread's query row in the tile and its accumulator lanes.
  let tpq = WG / BQ;
  let qi = lid / tpq;
  let lane = lid % tpq;
  let nacc = (HD + tpq - 1u) / tpq;
  var acc: array<f32, MAX_ACC>;
  for (var c = 0u; c < MAX_ACC; c++) { acc[c] = 0.0; }
  var m = NEG_BIG;  // running max of this query's scores
  var l = 0.0;      // running sum of exp(score - m)

  for (var idx = lid; idx < BQ * HD; idx += WG) {
    let r = idx / HD;
    let d = idx % HD;
    qs[idx] = select(0.0, q[(i0 + r) * q_stride + h * HD + d], r < nq);
  }

  // Keys outside [kv_begin, kv_end) are invisible to every query of the tile.
  let qpos_first = i32(p.q_pos0 + i0);
  let qpos_last = qpos_first + i32(nq) - 1;
  var kv_end = i32(p.n_kv);
  if (p.causal != 0u) { kv_end = min(kv_end, qpos_last + 1); }
  var kv_begin = 0;
  if (p.window > 0u) { kv_begin = max(0, qpos_first - i32(p.window) + 1); }

  for (var j0 = kv_begin; j0 < kv_end; j0 += i32(BK)) {
    let nk = u32(min(i32(BK), kv_end - j0));
    workgroupBarrier();  // previous tile fully consumed (and qs written on the first pass)
    for (var idx = lid; idx < BK * HD; idx += WG) {
      let jj = idx / HD;
      let d = idx % HD;
      let src = (u32(j0) + jj) * kv_stride + g * HD + d;
      let ok = jj < nk;
      ks[idx] = select(0.0, f32(k[select(0u, src, ok)]), ok);
      vs[idx] = select(0.0, f32(v[select(0u, src, ok)]), ok);
    }
    workgroupBarrier();
    for (var idx = lid; idx < BQ * BK; idx += WG) {
      let r = idx / BK;
      let jj = idx % BK;
      let j = j0 + i32(jj);
      var s = NEG_BIG;
      if (r < nq && jj < nk && pos_visible(p, qpos_first + i32(r), j) && key_valid[j] != 0u) {
        var dot = 0.0;
        for (var d = 0u; d < HD; d++) { dot += qs[r * HD + d] * ks[jj * HD + d]; }
        s = dot * p.scale;
      }
      sc[idx] = s;
    }
    workgroupBarrier();
    // Online softmax update for query qi (the TPQ threads of a query repeat it; cheap).
    var tmax = NEG_BIG;
    for (var jj = 0u; jj < nk; jj++) { tmax = max(tmax, sc[qi * BK + jj]); }
    if (tmax > MASKED) {
      let mnew = max(m, tmax);
      let corr = masked_exp(m, mnew);
      var psum = 0.0;
      for (var c = 0u; c < nacc; c++) { acc[c] *= corr; }
      for (var jj = 0u; jj < nk; jj++) {
        let pj = masked_exp(sc[qi * BK + jj], mnew);
        psum += pj;
        for (var c = 0u; c < nacc; c++) {
          let d = lane + c * tpq;
          acc[c] += pj * select(0.0, vs[jj * HD + min(d, HD - 1u)], d < HD);
        }
      }
      l = l * corr + psum;
      m = mnew;
    }
  }

  if (qi < nq) {
    let inv = select(0.0, 1.0 / l, l > 0.0);
    let base = (i0 + qi) * q_stride + h * HD;
    for (var c = 0u; c < nacc; c++) {
      let d = lane + c * tpq;
      if (d < HD) { out[base + d] = acc[c] * inv; }
    }
  }
}
