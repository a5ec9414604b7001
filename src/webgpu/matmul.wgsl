// Weight x matrix products for prefill (n > 1 tokens): y[t][r] = sum_c W[r][c] x[t][c], with the
// epilogue of products.wgsl (bias, GLU, accumulate). Prepended by the host: the variant
// constants, weights.wgsl (the stored-type loader load_unit), products.wgsl.
//
// A workgroup computes a tile of TR rows x TT tokens, 32 columns (one unit) at a time: TR
// threads decode the tile's weight unit (once for all TT tokens) into workgroup memory, all
// threads stage the tokens' 32 x values beside it, then each thread of a GR x GR grid
// multiplies 4 rows x 4 tokens out of workgroup memory (rows tr + GR i, tokens tc + GR j:
// neighbouring threads read neighbouring staged rows). Staged rows are padded to 9 vec4 so
// that those reads fall in distinct banks. The decoding threads fetch the next unit between the
// barriers, so its memory latency hides behind the other threads' multiply-adds.
// With ROPE the tile's staged row i holds slot 4 (i % GR) + i / GR (products.wgsl), so a
// thread's 4 rows are two whole RoPE pairs, rotated in its epilogue.
// Dispatch: (gx, gy, ceil(n / TT)) with row tiles ceil(rows / TR) = x + y * gx.
// Constants (prepended): WG = GR * GR threads; TR = TT = 4 GR; US = TR * KP with GLU, else 1.

const KP: u32 = 9u;  // vec4 per staged row: 8, plus one of padding

var<workgroup> ws: array<vec4<f32>, TR * KP>;
var<workgroup> us: array<vec4<f32>, US>;
var<workgroup> xs: array<vec4<f32>, TT * KP>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let p = params;
  let n = step.n;
  let r0 = (wid.x + wid.y * p.gx) * TR;
  let t0 = wid.z * TT;
  if (r0 >= p.rows || t0 >= n) { return; }
  let tr = lid / GR;
  let tc = lid % GR;
  let lr = select(lid, 4u * (lid % GR) + lid / GR, ROPE != 0u);  // the staged row's slot in the tile
  let rb = slot_row(min(r0 + lr, p.rows - 1u)) * p.row_bytes;  // rows past the end repeat the last, unstored
  var acc: array<vec4<f32>, 4>;
  var accu: array<vec4<f32>, 4>;
  var wg: array<vec4<f32>, 8>;  // the decoding thread's next unit of its row, gate and up
  var wu: array<vec4<f32>, 8>;
  if (lid < TR) {
    load_unit(rb, 0u, p.cols, false);
    wg = wv;
    if (ACT != 0u) {
      load_unit(rb, 0u, p.cols, true);
      wu = wv;
    }
  }
  for (var u = 0u; u < p.units; u++) {
    if (lid < TR) {
      for (var i = 0u; i < 8u; i++) { ws[lid * KP + i] = wg[i]; }
      if (ACT != 0u) {
        for (var i = 0u; i < 8u; i++) { us[lid * KP + i] = wu[i]; }
      }
    }
    for (var i = lid; i < TT * 8u; i += WG) {
      let t = t0 + i / 8u;
      let c = 32u * u + 4u * (i % 8u);
      var v = vec4<f32>(0.0);
      if (t < n) { v = x_vec4(t, c, p.cols); }
      xs[(i / 8u) * KP + i % 8u] = v;
    }
    workgroupBarrier();
    if (lid < TR && u + 1u < p.units) {
      load_unit(rb, u + 1u, p.cols, false);
      wg = wv;
      if (ACT != 0u) {
        load_unit(rb, u + 1u, p.cols, true);
        wu = wv;
      }
    }
    for (var k = 0u; k < 8u; k++) {
      let x0 = xs[tc * KP + k];
      let x1 = xs[(tc + GR) * KP + k];
      let x2 = xs[(tc + 2u * GR) * KP + k];
      let x3 = xs[(tc + 3u * GR) * KP + k];
      for (var i = 0u; i < 4u; i++) {
        let w = ws[(tr + i * GR) * KP + k];
        acc[i] += vec4<f32>(dot(w, x0), dot(w, x1), dot(w, x2), dot(w, x3));
        if (ACT != 0u) {
          let w2 = us[(tr + i * GR) * KP + k];
          accu[i] += vec4<f32>(dot(w2, x0), dot(w2, x1), dot(w2, x2), dot(w2, x3));
        }
      }
    }
    workgroupBarrier();
  }
  if (ROPE != 0u || (p.flags & FLAG_CACHE) != 0u) {
    for (var i = 0u; i < 4u; i++) {
      let s = r0 + select(tr + i * GR, 4u * tr + i, ROPE != 0u);
      for (var j = 0u; j < 4u; j++) {
        let t = t0 + tc + j * GR;
        if (s < p.rows && t < n) { store_rope(t, s, acc[i][j], acc[i ^ 1u][j]); }
      }
    }
    return;
  }
  for (var i = 0u; i < 4u; i++) {
    let r = r0 + tr + i * GR;
    for (var j = 0u; j < 4u; j++) {
      let t = t0 + tc + j * GR;
      if (r < p.rows && t < n) { store(t, r, acc[i][j], accu[i][j]); }
    }
  }
}
