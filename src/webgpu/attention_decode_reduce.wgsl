// Split-K attention, pass 2 of 2: combines the n_splits partial softmax states that
// attention_decode.wgsl wrote for each (query, head) into the output row:
//   M = max m_s;  L = sum l_s exp(m_s - M);  out = (sum acc_s exp(m_s - M)) / L   (0 if L == 0)
// Prepended by the host: common.wgsl.
//
// Bindings (group 0):
//   0 params  uniform Params (n_splits used here)
//   1 partial storage read array<f32>  (n_q, n_heads, n_splits, 2 + HD), see attention_decode.wgsl
//   2 out     storage rw   array<f32>  (n_q, n_heads * HD)
// Dispatch: (n_heads, n_q, 1). Overrides: WG threads, HD.

override WG: u32 = 64;
override HD: u32 = 64;

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> partial: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let p = params;
  let h = wid.x;
  let i = wid.y;
  let stride = 2u + HD;
  let base = (i * p.n_heads + h) * p.n_splits * stride;

  var mx = NEG_BIG;
  for (var s = 0u; s < p.n_splits; s++) { mx = max(mx, partial[base + s * stride]); }
  var l = 0.0;
  for (var s = 0u; s < p.n_splits; s++) {
    l += partial[base + s * stride + 1u] * masked_exp(partial[base + s * stride], mx);
  }
  let inv = select(0.0, 1.0 / l, l > 0.0);
  for (var d = lid; d < HD; d += WG) {
    var a = 0.0;
    for (var s = 0u; s < p.n_splits; s++) {
      a += partial[base + s * stride + 2u + d] * masked_exp(partial[base + s * stride], mx);
    }
    out[i * p.n_heads * HD + h * HD + d] = a * inv;
  }
}
