// RMSNorm and LayerNorm of token rows for the whole-model forward (src/js/gpu-model.js), one
// workgroup per row; the CPU twins are rmsnorm_ref / layernorm_ref (src/kernels/norm.h):
//   RMSNorm:   y = x / sqrt(mean(x^2) + eps) * w
//   LayerNorm: y = (x - mean(x)) / sqrt(mean((x - mean)^2) + eps) * w + b
// f32 throughout.
//
// Bindings (group 0):
//   0 step  uniform Step: n (tokens of this step), pos (position of the first)
//   1 w     storage read  array<f32> (N,)
//   2 b     storage read  array<f32> (N,)  (LayerNorm with HAS_B; else any buffer)
//   3 x     storage rw    array<f32> (rows, N)
//   4 y     storage rw    array<f32> (rows, N)
// Entry points:
//   main:    y[r] = norm(x[r]),  r < n * RPT          dispatch (n * RPT)
//   inplace: x[r] = norm(x[r])   (Qwen3's per-head q/k norms: RPT = heads, N = head_dim)
//   add:     x[r] += SCALE * norm(y[r])  (post-norms before the residual add; SCALE: Granite's residual scale)
//   last:    y[0] = norm(x[n - 1])  (the final norm when only the last token's logits are read)
// Overrides: N row width; EPS; LAYER 0 RMSNorm / 1 LayerNorm; HAS_B; RPT rows per token; SCALE (add).

struct Step { n: u32, pos: u32, pad0: u32, pad1: u32 };

override N: u32 = 64u;
override EPS: f32 = 1e-5;
override LAYER: u32 = 0u;
override HAS_B: u32 = 0u;
override RPT: u32 = 1u;
override SCALE: f32 = 1.0;
const WG: u32 = 64u;

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> x: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

var<workgroup> red: array<f32, WG>;

fn reduce_sum(v: f32, lid: u32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s /= 2u) {
    if (lid < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

// (mean, 1 / sqrt(variance + eps)) of row `base` of x (stats_y: of y); RMSNorm's mean is 0.
// Two copies, so that an entry point binds only the buffers it reads.
fn stats_x(base: u32, lid: u32) -> vec2<f32> {
  var mean = 0.0;
  if (LAYER == 1u) {
    var s = 0.0;
    for (var i = lid; i < N; i += WG) { s += x[base + i]; }
    mean = reduce_sum(s, lid) / f32(N);
  }
  var ss = 0.0;
  for (var i = lid; i < N; i += WG) { let d = x[base + i] - mean; ss += d * d; }
  return vec2<f32>(mean, 1.0 / sqrt(reduce_sum(ss, lid) / f32(N) + EPS));
}

fn stats_y(base: u32, lid: u32) -> vec2<f32> {
  var mean = 0.0;
  if (LAYER == 1u) {
    var s = 0.0;
    for (var i = lid; i < N; i += WG) { s += y[base + i]; }
    mean = reduce_sum(s, lid) / f32(N);
  }
  var ss = 0.0;
  for (var i = lid; i < N; i += WG) { let d = y[base + i] - mean; ss += d * d; }
  return vec2<f32>(mean, 1.0 / sqrt(reduce_sum(ss, lid) / f32(N) + EPS));
}

fn bias(i: u32) -> f32 {
  return select(0.0, b[i], LAYER == 1u && HAS_B != 0u);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = wid.x;
  if (r / RPT >= step.n) { return; }
  let base = r * N;
  let st = stats_x(base, lid);
  for (var i = lid; i < N; i += WG) { y[base + i] = (x[base + i] - st.x) * st.y * w[i] + bias(i); }
}

@compute @workgroup_size(WG)
fn inplace(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = wid.x;
  if (r / RPT >= step.n) { return; }
  let base = r * N;
  let st = stats_x(base, lid);
  for (var i = lid; i < N; i += WG) { x[base + i] = (x[base + i] - st.x) * st.y * w[i] + bias(i); }
}

@compute @workgroup_size(WG)
fn add(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = wid.x;
  if (r / RPT >= step.n) { return; }
  let base = r * N;
  let st = stats_y(base, lid);
  for (var i = lid; i < N; i += WG) { x[base + i] += SCALE * ((y[base + i] - st.x) * st.y * w[i] + bias(i)); }
}

@compute @workgroup_size(WG)
fn last(@builtin(local_invocation_index) lid: u32) {
  let base = (step.n - 1u) * N;
  let st = stats_x(base, lid);
  for (var i = lid; i < N; i += WG) { y[i] = (x[base + i] - st.x) * st.y * w[i] + bias(i); }
}
