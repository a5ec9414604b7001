// Element-wise steps of the whole-model forward (src/js/gpu-model.js), each over rows of N
// values of the step's tokens; CPU twins in src/kernels (activation.h, the forward's adds).
//   add_pos: x[t] += src[pos + t]               (learned positions, GPT-2, BERT)
//   add_row: x[t] += src[0]                     (BERT's token-type row 0)
//   axpy:    x[t] += SCALE * src[t]             (a mixture-of-experts sum into the residual)
//   act:     x = gelu(x) (tanh form, gelu_ref) or relu(x)   (ACT 0 gelu, 1 relu)
//   logits:  x = SCALE * x, then CAP * tanh(x / CAP) when CAP > 0  (logit scale, Gemma 2's soft-cap)
// f32 throughout.
//
// Bindings (group 0):
//   0 step  uniform Step: n, pos
//   1 x     storage rw    array<f32> (rows, N)
//   2 src   storage read  array<f32>  (add_pos: (context, N); add_row: (N,); axpy: (rows, N))
// Dispatch: (ceil(N / 64), rows); logits takes the rows asked for, the others rows = n.

struct Step { n: u32, pos: u32, pad0: u32, pad1: u32 };

// tanh that stays finite for any argument (exp overflows to infinity, 2 / inf = 0).
fn tanh_f(v: f32) -> f32 {
  return sign(v) * (1.0 - 2.0 / (exp(2.0 * abs(v)) + 1.0));
}

override N: u32 = 64u;
override ACT: u32 = 0u;
override CAP: f32 = 0.0;
override SCALE: f32 = 1.0;

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> src: array<f32>;

@compute @workgroup_size(64)
fn add_pos(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  let t = gid.y;
  if (i >= N || t >= step.n) { return; }
  x[t * N + i] += src[(step.pos + t) * N + i];
}

@compute @workgroup_size(64)
fn add_row(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  let t = gid.y;
  if (i >= N || t >= step.n) { return; }
  x[t * N + i] += src[i];
}

@compute @workgroup_size(64)
fn axpy(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  let t = gid.y;
  if (i >= N || t >= step.n) { return; }
  x[t * N + i] += SCALE * src[t * N + i];
}

@compute @workgroup_size(64)
fn act(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  let t = gid.y;
  if (i >= N || t >= step.n) { return; }
  let v = x[t * N + i];
  if (ACT == 0u) {
    x[t * N + i] = 0.5 * v * (1.0 + tanh_f(0.7978845608028654 * (v + 0.044715 * v * v * v)));
  } else {
    x[t * N + i] = max(v, 0.0);
  }
}

@compute @workgroup_size(64)
fn logits(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= N) { return; }
  let j = gid.y * N + i;
  var v = x[j] * SCALE;
  if (CAP > 0.0) { v = CAP * tanh_f(v / CAP); }
  x[j] = v;
}
