// Weight x vector products for decode (one token): y[r] = sum_c W[r][c] x[c], with the epilogue
// of products.wgsl (bias, GLU, accumulate). Prepended by the host: the variant constants,
// weights.wgsl (the stored-type loader load_unit), products.wgsl.
//
// A workgroup of WG threads computes R consecutive rows: the threads stride over the rows'
// 32-value units (consecutive threads read consecutive blocks: coalesced u32 loads), each unit
// of x is read once for the R rows, then a workgroup-memory tree reduction per row.
// With NORM the input is RMSNorm(x) * nw, folded in: W (x * nw) is accumulated together with
// sum x^2 from the same loads, and the rows scaled by 1 / sqrt(mean x^2 + eps) before the
// epilogue, so the norm costs no dispatch of its own (decode only: prefill keeps norm.wgsl).
// With QKNORM a workgroup computes a whole head (HD rows, CHUNKS = HD / R passes of R rows) into
// workgroup memory, then normalises it (RMSNorm over the head, a workgroup reduction), rotates
// and writes it (products.wgsl store_slot): the Q/K norms, RoPE and the KV-cache write cost no
// dispatch of their own.
// Dispatch: row groups ceil(rows / R) (QKNORM: heads, rows / HD) as (gx, gy) with
// gx <= maxComputeWorkgroupsPerDimension.
// Constants (prepended): R rows per workgroup; WG a power of two; CHUNKS and HV (HD with
// QKNORM, else 1).

var<workgroup> red: array<f32, RED>;  // RED = WG * (R * (2 with GLU, else 1) + NORM)
var<workgroup> hv: array<f32, HV>;    // QKNORM: the head's values (slots) before the norm

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let p = params;
  let g = wid.x + wid.y * p.gx;
  for (var c = 0u; c < CHUNKS; c++) {
    let r0 = select(g * R, g * HD + c * R, QKNORM != 0u);
    if (r0 >= p.rows) { return; }
    var acc = array<f32, R>();
    var accu = array<f32, R>();
    var ss = 0.0;
    for (var u = lid; u < p.units; u += WG) {
      var xv = x_unit(0u, u, p.cols);
      if (NORM != 0u) {
        let gw = nw_unit(u, p.cols);
        for (var i = 0u; i < 8u; i++) {
          ss += dot(xv[i], xv[i]);
          xv[i] *= gw[i];
        }
      }
      for (var r = 0u; r < R; r++) {
        let row = slot_row(min(r0 + r, p.rows - 1u));  // rows past the end repeat the last one, unstored
        load_unit(row * p.row_bytes, u, p.cols, false);
        var s = 0.0;
        for (var i = 0u; i < 8u; i++) { s += dot(wv[i], xv[i]); }
        acc[r] += s;
        if (ACT != 0u) {
          load_unit(row * p.row_bytes, u, p.cols, true);
          var su = 0.0;
          for (var i = 0u; i < 8u; i++) { su += dot(wv[i], xv[i]); }
          accu[r] += su;
        }
      }
    }
    let rows_red = select(R, 2u * R, ACT != 0u);
    for (var r = 0u; r < R; r++) {
      red[r * WG + lid] = acc[r];
      if (ACT != 0u) { red[(R + r) * WG + lid] = accu[r]; }
    }
    if (NORM != 0u) { red[rows_red * WG + lid] = ss; }
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
      if (lid < s) {
        for (var r = 0u; r < RED / WG; r++) { red[r * WG + lid] += red[r * WG + lid + s]; }
      }
      workgroupBarrier();
    }
    if (lid < R && r0 + lid < p.rows) {
      var inv = 1.0;
      if (NORM != 0u) { inv = 1.0 / sqrt(red[rows_red * WG] / f32(p.cols) + p.eps); }
      if (QKNORM != 0u) {
        var v = red[lid * WG] * inv;
        if ((p.flags & FLAG_BIAS) != 0u) { v += bias[p.row0 + slot_row(r0 + lid)]; }
        hv[c * R + lid] = v;
      } else if (ROPE != 0u || (p.flags & FLAG_CACHE) != 0u) {
        store_rope(0u, r0 + lid, red[lid * WG] * inv, red[(lid ^ 1u) * WG] * inv);
      } else {
        var u = 0.0;
        if (ACT != 0u) { u = red[(R + lid) * WG] * inv; }
        store(0u, r0 + lid, red[lid * WG] * inv, u);
      }
    }
    workgroupBarrier();  // red is overwritten by the next pass
  }
  if (QKNORM != 0u) {
    // RMSNorm of the head (norm.wgsl's, over HD values), then RoPE and the write per slot.
    var ss = 0.0;
    for (var j = lid; j < HD; j += WG) { ss += hv[j] * hv[j]; }
    red[lid] = ss;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
      if (lid < s) { red[lid] += red[lid + s]; }
      workgroupBarrier();
    }
    let inv = 1.0 / sqrt(red[0] / f32(HD) + p.qk_eps);
    let h0 = g * HD;
    for (var j = lid; j < HD; j += WG) {
      let jp = j ^ 1u;
      store_slot(0u, h0 + j, hv[j] * inv * qn(slot_row(h0 + j) - h0), hv[jp] * inv * qn(slot_row(h0 + jp) - h0));
    }
  }
}
