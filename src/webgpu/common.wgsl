// Shared declarations for the attention shaders: the Params uniform, the mask test, tanh_f.
// The hosts (src/js/webgpu.js, src/js/gpu-model.js) prepend this file to each attention_*.wgsl
// before compiling, so every kernel sees the same Params layout and helpers. Keep in sync with writeParams() in webgpu.js.
//
// Conventions (the CPU contract of src/kernels/attention.h):
//   q:   (n_q,  n_heads    * head_dim) f32, row-major; query row i sits at position q_pos0 + i
//   k,v: (n_kv, n_kv_heads * head_dim) f32, row-major; key row j sits at position j
//   key_valid: (n_kv,) u32, 0 = padding (masked), anything else = visible
//   query head h reads kv head h / (n_heads / n_kv_heads)  (grouped-query attention)

// Element type of the k and v buffers: f32, or f16 when the device has shader-f16 and the host
// asked for a half-precision KV cache (it then also prepends `enable f16;` and rewrites this
// line). Kernels read k/v through f32(...) and compute in f32 either way.
alias kv_t = f32;

struct Params {
  n_q: u32,
  n_kv: u32,
  n_heads: u32,
  n_kv_heads: u32,
  head_dim: u32,     // must equal the HD override the pipeline was built with
  q_pos0: u32,
  causal: u32,       // 1: key j visible only if j <= query position
  window: u32,       // > 0: key j visible only if query position - j < window
  scale: f32,        // multiplies q.k (usually 1/sqrt(head_dim))
  n_splits: u32,     // decode only: key chunks per (query, head)
  kv_begin: u32,     // decode only: first key any query can see
  kv_end: u32,       // decode only: one past the last key any query can see
};

// Stands for -infinity (WGSL has no infinity literal): a masked score.
const NEG_BIG: f32 = -3.0e38;
// Anything at or below this is a masked score.
const MASKED: f32 = -1.0e38;

// Is key j visible from a query at absolute position qpos? (causal, sliding window; the caller
// checks key_valid, which needs its own binding.)
fn pos_visible(p: Params, qpos: i32, j: i32) -> bool {
  if (p.causal != 0u && j > qpos) { return false; }
  if (p.window > 0u && qpos - j >= i32(p.window)) { return false; }
  return true;
}

// tanh that stays finite for any argument (exp overflows to infinity, 2 / inf = 0): soft-caps.
fn tanh_f(v: f32) -> f32 {
  return sign(v) * (1.0 - 2.0 / (exp(2.0 * abs(v)) + 1.0));
}

// exp(s - m) for a score s, or 0 if s is masked.
fn masked_exp(s: f32, m: f32) -> f32 {
  return select(exp(s - m), 0.0, s <= MASKED);
}
