// Weight x matrix products for prefill (n > 1 tokens): y[t][r] = sum_c W[r][c] x[t][c], with the
// epilogue of products.wgsl (bias, GLU, accumulate). Prepended by the host: the variant
// constants, weights.wgsl (the stored-type loader load_unit), products.wgsl.
//
// A workgroup computes a tile of TR rows x TT tokens. KS threads share a row and take
// interleaved 32-value units of it (neighbouring threads read neighbouring blocks); the tile's
// x columns are staged in workgroup memory chunk by chunk (KS units wide), so each weight unit
// is decoded once per tile of TT tokens. The KS partial sums of a row are added through
// workgroup memory at the end.
// Dispatch: (gx, gy, ceil(n / TT)) with row tiles ceil(rows / TR) = x + y * gx.
// Constants (prepended): TT tokens, KS threads per row, TR = WG / KS rows per tile.

const KC4: u32 = KS * 8u;  // vec4 columns per staged chunk (KS units of 32 values)

var<workgroup> xs: array<vec4<f32>, TT * KC4>;
var<workgroup> part: array<f32, PART>;  // PART = WG * TT * (2 with GLU, else 1)

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let p = params;
  let n = step.n;
  let r0 = (wid.x + wid.y * p.gx) * TR;
  let t0 = wid.z * TT;
  if (r0 >= p.rows || t0 >= n) { return; }
  let rl = lid / KS;
  let kl = lid % KS;
  let rb = min(r0 + rl, p.rows - 1u) * p.row_bytes;  // rows past the end repeat the last, unstored
  var acc: array<f32, TT>;
  var accu: array<f32, TT>;
  let chunks = (p.units + KS - 1u) / KS;
  for (var ch = 0u; ch < chunks; ch++) {
    for (var i = lid; i < TT * KC4; i += WG) {
      let t = t0 + i / KC4;
      let c = ch * KS * 32u + 4u * (i % KC4);
      var v = vec4<f32>(0.0);
      if (t < n) {
        let o = t * p.cols + c;
        if (c + 4u <= p.cols) {
          v = vec4<f32>(x[o], x[o + 1u], x[o + 2u], x[o + 3u]);
        } else {
          for (var k = 0u; k < 4u; k++) {
            if (c + k < p.cols) { v[k] = x[o + k]; }
          }
        }
      }
      xs[i] = v;
    }
    workgroupBarrier();
    let u = ch * KS + kl;
    if (u < p.units) {
      load_unit(rb, u, p.cols, false);
      for (var t = 0u; t < TT; t++) {
        let xo = t * KC4 + kl * 8u;
        var s = 0.0;
        for (var i = 0u; i < 8u; i++) { s += dot(wv[i], xs[xo + i]); }
        acc[t] += s;
      }
      if (ACT != 0u) {
        load_unit(rb, u, p.cols, true);
        for (var t = 0u; t < TT; t++) {
          let xo = t * KC4 + kl * 8u;
          var s = 0.0;
          for (var i = 0u; i < 8u; i++) { s += dot(wv[i], xs[xo + i]); }
          accu[t] += s;
        }
      }
    }
    workgroupBarrier();
  }
  for (var t = 0u; t < TT; t++) {
    part[lid * TT + t] = acc[t];
    if (ACT != 0u) { part[(WG + lid) * TT + t] = accu[t]; }
  }
  workgroupBarrier();
  // The KS threads of row rl each finish TT / KS of its tokens.
  let r = r0 + rl;
  for (var tt = kl; tt < TT; tt += KS) {
    var g = 0.0;
    var uu = 0.0;
    for (var k = 0u; k < KS; k++) {
      g += part[(rl * KS + k) * TT + tt];
      if (ACT != 0u) { uu += part[(WG + rl * KS + k) * TT + tt]; }
    }
    if (r < p.rows && t0 + tt < n) { store(t0 + tt, r, g, uu); }
  }
}
