// Shared declarations of the weight-product kernels (matvec.wgsl for decode, matmul.wgsl for
// prefill): parameters, bindings and the epilogue (bias, GLU activation, accumulate). The host
// (src/js/gpu-products.js) prepends the variant constants and weights.wgsl.
//
// Variant constants (prepended): WG threads; ACT (0: plain product, 1: GLU with silu, 2: GLU
// with gelu-tanh; the up weight is U); NORM (matvec only: x is RMSNorm-ed with weight nw on the
// fly); ROPE (0: none; 1: adjacent pairs, 2: halves, as rope_kv.wgsl) with HD (head size) and
// ROT (rotated dims per head): the epilogue rotates each output pair by the cos/sin table at
// position step.pos + t; QKNORM (matvec only: a workgroup per head of HD rows normalises them,
// RMSNorm with weight qnw and epsilon qk_eps, before RoPE: Qwen3's and Gemma 3's per-head Q/K
// norms). Accumulate, bias, scale and the cache write are runtime parameters (uniform branches
// in the epilogue only), so they cost no extra pipelines.
//
// Slots (ROPE != 0): a workgroup's rows are taken as slots, slot 2p and 2p + 1 of a head being
// the two dims of RoPE pair p (dims p and p + ROT/2 with halves; dims from ROT on are their own
// slots), so that both values of a pair are computed by the same workgroup (matvec: neighbours;
// matmul: the same thread) and the epilogue rotates them without another dispatch.
//
// Bindings (group 0):
//   0 params uniform Params (one weight part: a buffer of whole rows)
//   1 step   uniform Step   (n tokens of this step; written by the caller once per step)
//   2 W, 3 U storage read array<u32> (weights.wgsl)
//   4 x      storage read  array<f32> (n, cols)   token-major
//   7 x4     storage read  array<vec4<f32>>: x again, for 16-byte loads where aligned
//   5 y      storage rw    array<y_t> (n, y_stride) token-major; this part writes columns
//                                      row0 .. row0 + rows. y_t (prepended): f32, or f16 for
//                                      an f16 KV cache written by the epilogue (with
//                                      `enable f16;`, where the device has shader-f16)
//   6 bias   storage read  array<f32> (y_stride,)  (a dummy without FLAG_BIAS)
//   8 nw     storage read  array<f32> (cols,)      RMSNorm weight (NORM; else a dummy)
//   9 rope   storage read  array<f32> cos (context, ROT/2), then sin from rope_sin (ROPE; else a dummy)
//  10 qnw    uniform       array<vec4<f32>, QN4>: the Q/K norm's HD weights (QKNORM; else a
//                          16-byte dummy): a uniform, as storage bindings are at WebGPU's
//                          default limit of 8 per stage

struct Params {
  rows: u32,       // rows of this part
  cols: u32,       // values per row (x's row length)
  row0: u32,       // first row of this part in the whole weight (column of y, index of bias)
  row_bytes: u32,  // stored bytes per row
  units: u32,      // 32-value units per row: ceil(cols / 32)
  y_stride: u32,   // rows of the whole weight (y's row length)
  gx: u32,         // workgroups along x of the dispatch (row groups = x + y * gx)
  flags: u32,      // FLAG_ACCUM | FLAG_BIAS
  eps: f32,        // RMSNorm epsilon (NORM)
  rope_sin: u32,   // index of the sin table in rope (ROPE)
  scale: f32,      // multiplies the product (after bias and GLU) before it is stored or added
  qk_eps: f32,     // the Q/K norm's epsilon (QKNORM)
};

const FLAG_ACCUM: u32 = 1u;  // y += product instead of y = product
const FLAG_BIAS: u32 = 2u;   // add bias[row] (to the gate, before the activation, with GLU)
const FLAG_CACHE: u32 = 4u;  // token t writes y's row step.pos + t (a KV-cache write), not row t

struct Step {
  n: u32,
  pos: u32,  // position of the step's first token (ROPE, FLAG_CACHE)
};

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(4) var<storage, read> x: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<y_t>;
@group(0) @binding(6) var<storage, read> bias: array<f32>;
@group(0) @binding(7) var<storage, read> x4: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read> nw: array<f32>;
@group(0) @binding(9) var<storage, read> rope: array<f32>;
@group(0) @binding(10) var<uniform> qnw: array<vec4<f32>, QN4>;

fn silu(v: f32) -> f32 { return v / (1.0 + exp(-v)); }

// gelu with the tanh approximation (src/kernels/activation.cpp); the tanh argument is clamped
// where tanh is +-1 in f32 so that no implementation overflows inside tanh.
fn gelu(v: f32) -> f32 {
  let a = clamp(0.7978845608028654 * (v + 0.044715 * v * v * v), -15.0, 15.0);
  return 0.5 * v * (1.0 + tanh(a));
}

// Writes row r (of this part) of token t: g = W x, u = U x (GLU only).
fn store(t: u32, r: u32, g: f32, u: f32) {
  let p = params;
  let col = p.row0 + r;
  var v = g;
  if ((p.flags & FLAG_BIAS) != 0u) { v += bias[col]; }
  if (ACT == 1u) { v = silu(v) * u; }
  if (ACT == 2u) { v = gelu(v) * u; }
  v *= p.scale;
  let i = t * p.y_stride + col;
  if ((p.flags & FLAG_ACCUM) != 0u) { v += f32(y[i]); }
  y[i] = y_t(v);
}

// The weight row that slot s computes (the identity without ROPE, and with adjacent pairs).
fn slot_row(s: u32) -> u32 {
  if (ROPE != 2u) { return s; }
  let j = s % HD;
  if (j >= ROT) { return s; }
  return s - j + j / 2u + (j % 2u) * (ROT / 2u);
}

// Writes slot s of token t, its value g and the value gp of its pair's other slot (s ^ 1):
// bias, then store_slot.
fn store_rope(t: u32, s: u32, g: f32, gp: f32) {
  let p = params;
  var v = g;
  var vp = gp;
  if ((p.flags & FLAG_BIAS) != 0u) {
    v += bias[p.row0 + slot_row(s)];
    vp += bias[p.row0 + slot_row(s ^ 1u)];
  }
  store_slot(t, s, v, vp);
}

// The rotation of slot s's pair at position step.pos + t (x0' = x0 cos - x1 sin,
// x1' = x0 sin + x1 cos; v is s's value, vp its pair's), into y's row t (or step.pos + t with
// FLAG_CACHE).
fn store_slot(t: u32, s: u32, v0: f32, vp: f32) {
  let p = params;
  var v = v0;
  let j = s % HD;
  if (ROPE != 0u && j < ROT) {
    let i = (step.pos + t) * (ROT / 2u) + j / 2u;
    let c = rope[i];
    let sn = rope[p.rope_sin + i];
    v = select(vp * sn + v * c, v * c - vp * sn, j % 2u == 0u);
  }
  let row = select(t, step.pos + t, (p.flags & FLAG_CACHE) != 0u);
  y[row * p.y_stride + p.row0 + slot_row(s)] = y_t(v);
}

// The Q/K norm's weight of dim d within the head.
fn qn(d: u32) -> f32 { return qnw[d / 4u][d % 4u]; }

// x[t][c .. c + 4) (zero past cols): one 16-byte load where aligned and whole.
fn x_vec4(t: u32, c: u32, cols: u32) -> vec4<f32> {
  let o = t * cols + c;
  if (c + 4u <= cols) {
    if ((o & 3u) == 0u) { return x4[o >> 2u]; }
    return vec4<f32>(x[o], x[o + 1u], x[o + 2u], x[o + 3u]);
  }
  var v = vec4<f32>(0.0);
  for (var k = 0u; k < 4u; k++) {
    if (c + k < cols) { v[k] = x[o + k]; }
  }
  return v;
}

// The 32 values of x's token t in unit u (zero past cols).
fn x_unit(t: u32, u: u32, cols: u32) -> array<vec4<f32>, 8> {
  var xv: array<vec4<f32>, 8>;
  let o = t * cols + 32u * u;
  if (32u * u + 32u <= cols && (o & 3u) == 0u) {
    for (var i = 0u; i < 8u; i++) { xv[i] = x4[(o >> 2u) + i]; }
  } else {
    for (var i = 0u; i < 8u; i++) { xv[i] = x_vec4(t, 32u * u + 4u * i, cols); }
  }
  return xv;
}

// The RMSNorm weight's 32 values of unit u (zero past cols).
fn nw_unit(u: u32, cols: u32) -> array<vec4<f32>, 8> {
  var v: array<vec4<f32>, 8>;
  for (var i = 0u; i < 8u; i++) {
    for (var k = 0u; k < 4u; k++) {
      let c = 32u * u + 4u * i + k;
      if (c < cols) { v[i][k] = nw[c]; }
    }
  }
  return v;
}
