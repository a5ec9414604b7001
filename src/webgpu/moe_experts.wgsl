// Mixture-of-experts feed-forward products (src/js/gpu-moe.js) over the stacked expert weights
// as stored (weights.wgsl decodes any type), reading each token's chosen experts from the GPU
// (moe_route.wgsl): no readback, and only the chosen experts' rows are read. CPU twin: moe_ffn
// in src/model/blocks.cpp. Prepended by the host: the constants WG, R, RED, TT, REDG,
// weights.wgsl and load_unit for the weight's type.
//
// One weight buffer holds the whole experts e0 .. e0 + ne of a stack (expert e's rows at
// (e - e0) * rows); stacks over the binding limit are split into several such chunks, and each
// chunk's dispatch skips the slots whose expert lives in another.
//   gate_up: h[t * K + k] = silu(G_e x[t]) * (U_e x[t])      e = sel[t * K + k]  (SwiGLU)
//            dispatch (ceil(rows / R), n * K); W = gate, U = up
//   down:    y[t] (+)= sum_k gates[t * K + k] * D_e h[t * K + k]   (first chunk: =, later: +=)
//            dispatch (ceil(rows / R), n); W = U = down
// Prefill groups the slots by expert (moe_route.wgsl group), so that a weight unit read once
// serves TT of an expert's slots:
//   gate_up_grouped: as gate_up, for the slots lists[e][TT z ..] of expert e = e0 + y
//            dispatch (ceil(rows / R), ne, ceil(n / TT))
//   down_grouped: ys[slot] = D_e h[slot] for the same slots (moe_route.wgsl combine then sums
//            them with their weights)   dispatch (ceil(rows / R), ne, ceil(n / TT))
// A workgroup of WG threads computes R consecutive rows of one slot (gate_up) or token (down):
// the threads stride over the rows' 32-value units, then a workgroup-memory reduction.
//
// Bindings (group 0):
//   0 params uniform MoeParams (one chunk)
//   1 step   uniform Step (n tokens of this step)
//   2 W, 3 U storage read array<u32> (weights.wgsl)
//   4 x      storage read  array<f32> (gate_up: (n, cols) activations; down: (n * K, cols) hidden)
//   5 y      storage rw    array<f32> (gate_up: (n * K, rows); down: (n, rows))
//   6 sel    storage read  array<u32> (n, K) chosen experts
//   7 gates  storage read  array<f32> (n, K) their weights (down only)
//   8 counts storage read  array<u32> (E,)   slots per expert (grouped)
//   9 lists  storage read  array<u32> (E, T) each expert's slots (grouped; T = params.cap)

struct MoeParams {
  e0: u32,         // first expert of this chunk
  ne: u32,         // experts in this chunk
  rows: u32,       // rows per expert (output width)
  cols: u32,       // values per row (input width)
  row_bytes: u32,  // stored bytes per row
  units: u32,      // ceil(cols / 32)
  k: u32,          // experts per token
  first: u32,      // down: 1 writes y, 0 adds to it
  cap: u32,        // grouped: tokens per step at most (the row length of lists)
  pad0: u32,
  pad1: u32,
  pad2: u32,
};

struct Step { n: u32 };

@group(0) @binding(0) var<uniform> params: MoeParams;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(4) var<storage, read> x: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
@group(0) @binding(6) var<storage, read> sel: array<u32>;
@group(0) @binding(7) var<storage, read> gates: array<f32>;
@group(0) @binding(8) var<storage, read> counts: array<u32>;
@group(0) @binding(9) var<storage, read> lists: array<u32>;

var<workgroup> red: array<f32, RED>;  // RED = WG * 2 * R

// The 32 values of row `base` of x in unit u (zero past cols).
fn x_unit(base: u32, u: u32, cols: u32) -> array<vec4<f32>, 8> {
  var v: array<vec4<f32>, 8>;
  for (var i = 0u; i < 8u; i++) {
    for (var j = 0u; j < 4u; j++) {
      let c = 32u * u + 4u * i + j;
      if (c < cols) { v[i][j] = x[base + c]; }
    }
  }
  return v;
}

fn dot_unit(xv: array<vec4<f32>, 8>) -> f32 {
  var s = 0.0;
  for (var i = 0u; i < 8u; i++) { s += dot(wv[i], xv[i]); }
  return s;
}

// Sums red[r * WG + lid] over lid for the first `n` rows (all threads take part).
fn reduce(n: u32, lid: u32) {
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) {
      for (var r = 0u; r < n; r++) { red[r * WG + lid] += red[r * WG + lid + s]; }
    }
    workgroupBarrier();
  }
}

@compute @workgroup_size(WG)
fn gate_up(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let p = params;
  let slot = wid.y;
  let r0 = wid.x * R;
  if (slot / p.k >= step.n || r0 >= p.rows) { return; }
  let e = sel[slot];
  if (e < p.e0 || e - p.e0 >= p.ne) { return; }
  let first = (e - p.e0) * p.rows;
  var acc: array<f32, R>;
  var accu: array<f32, R>;
  for (var u = lid; u < p.units; u += WG) {
    let xv = x_unit((slot / p.k) * p.cols, u, p.cols);
    for (var r = 0u; r < R; r++) {
      let row = first + min(r0 + r, p.rows - 1u);  // rows past the end repeat the last one, unstored
      load_unit(row * p.row_bytes, u, p.cols, false);
      acc[r] += dot_unit(xv);
      load_unit(row * p.row_bytes, u, p.cols, true);
      accu[r] += dot_unit(xv);
    }
  }
  for (var r = 0u; r < R; r++) {
    red[r * WG + lid] = acc[r];
    red[(R + r) * WG + lid] = accu[r];
  }
  reduce(2u * R, lid);
  if (lid < R && r0 + lid < p.rows) {
    let g = red[lid * WG];
    y[slot * p.rows + r0 + lid] = g / (1.0 + exp(-g)) * red[(R + lid) * WG];
  }
}

@compute @workgroup_size(WG)
fn down(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let p = params;
  let t = wid.y;
  let r0 = wid.x * R;
  if (t >= step.n || r0 >= p.rows) { return; }
  var acc: array<f32, R>;
  for (var k = 0u; k < p.k; k++) {
    let slot = t * p.k + k;
    let e = sel[slot];
    if (e < p.e0 || e - p.e0 >= p.ne) { continue; }
    let g = gates[slot];
    let first = (e - p.e0) * p.rows;
    for (var u = lid; u < p.units; u += WG) {
      let xv = x_unit(slot * p.cols, u, p.cols);
      for (var r = 0u; r < R; r++) {
        load_unit((first + min(r0 + r, p.rows - 1u)) * p.row_bytes, u, p.cols, false);
        acc[r] += g * dot_unit(xv);
      }
    }
  }
  for (var r = 0u; r < R; r++) { red[r * WG + lid] = acc[r]; }
  reduce(R, lid);
  if (lid < R && r0 + lid < p.rows) {
    let i = t * p.rows + r0 + lid;
    var v = red[lid * WG];
    if (p.first == 0u) { v += y[i]; }
    y[i] = v;
  }
}

var<workgroup> redg: array<f32, REDG>;  // REDG = WG * 2 * R * TT

// The slots of tile z of expert e (e0 + y): their indices, and how many of the TT are real.
fn tile_slots(e: u32, z: u32) -> vec2<u32> {
  let c = counts[e];
  let first = z * TT;
  return vec2<u32>(first, select(0u, min(TT, c - first), first < c));
}

// Sums redg[i * WG + lid] over lid for rows i < n.
fn reduce_g(n: u32, lid: u32) {
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) {
      for (var i = 0u; i < n; i++) { redg[i * WG + lid] += redg[i * WG + lid + s]; }
    }
    workgroupBarrier();
  }
}

@compute @workgroup_size(WG)
fn gate_up_grouped(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let p = params;
  let e = p.e0 + wid.y;
  let r0 = wid.x * R;
  let ts = tile_slots(e, wid.z);
  if (ts.y == 0u || r0 >= p.rows) { return; }
  var slot: array<u32, TT>;
  for (var j = 0u; j < TT; j++) { slot[j] = lists[e * p.cap + ts.x + min(j, ts.y - 1u)]; }
  let first = wid.y * p.rows;
  var acc: array<f32, R * TT>;
  var accu: array<f32, R * TT>;
  for (var u = lid; u < p.units; u += WG) {
    var xv: array<array<vec4<f32>, 8>, TT>;
    for (var j = 0u; j < ts.y; j++) { xv[j] = x_unit((slot[j] / p.k) * p.cols, u, p.cols); }
    for (var r = 0u; r < R; r++) {
      let row = first + min(r0 + r, p.rows - 1u);
      load_unit(row * p.row_bytes, u, p.cols, false);
      for (var j = 0u; j < ts.y; j++) { acc[r * TT + j] += dot_unit(xv[j]); }
      load_unit(row * p.row_bytes, u, p.cols, true);
      for (var j = 0u; j < ts.y; j++) { accu[r * TT + j] += dot_unit(xv[j]); }
    }
  }
  for (var i = 0u; i < R * TT; i++) {
    redg[i * WG + lid] = acc[i];
    redg[(R * TT + i) * WG + lid] = accu[i];
  }
  reduce_g(2u * R * TT, lid);
  if (lid < R * TT) {
    let r = lid / TT;
    let j = lid % TT;
    if (r0 + r < p.rows && j < ts.y) {
      let g = redg[lid * WG];
      y[slot[j] * p.rows + r0 + r] = g / (1.0 + exp(-g)) * redg[(R * TT + lid) * WG];
    }
  }
}

@compute @workgroup_size(WG)
fn down_grouped(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let p = params;
  let e = p.e0 + wid.y;
  let r0 = wid.x * R;
  let ts = tile_slots(e, wid.z);
  if (ts.y == 0u || r0 >= p.rows) { return; }
  var slot: array<u32, TT>;
  for (var j = 0u; j < TT; j++) { slot[j] = lists[e * p.cap + ts.x + min(j, ts.y - 1u)]; }
  let first = wid.y * p.rows;
  var acc: array<f32, R * TT>;
  for (var u = lid; u < p.units; u += WG) {
    var xv: array<array<vec4<f32>, 8>, TT>;
    for (var j = 0u; j < ts.y; j++) { xv[j] = x_unit(slot[j] * p.cols, u, p.cols); }
    for (var r = 0u; r < R; r++) {
      load_unit((first + min(r0 + r, p.rows - 1u)) * p.row_bytes, u, p.cols, false);
      for (var j = 0u; j < ts.y; j++) { acc[r * TT + j] += dot_unit(xv[j]); }
    }
  }
  for (var i = 0u; i < R * TT; i++) { redg[i * WG + lid] = acc[i]; }
  reduce_g(R * TT, lid);
  if (lid < R * TT) {
    let r = lid / TT;
    let j = lid % TT;
    if (r0 + r < p.rows && j < ts.y) { y[slot[j] * p.rows + r0 + r] = redg[lid * WG]; }
  }
}
