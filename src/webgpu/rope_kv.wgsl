// RoPE and the KV-cache write for the whole-model forward (src/js/gpu-model.js): rotates the
// step's queries in place and writes its rotated keys and its values into the layer's cache
// rows pos..pos+n-1. The cos/sin tables are the CPU's (Transformer::rope_table: every scaling
// qkv reads), uploaded once per session, (context, ROT/2) each. CPU twins: rope_adjacent_ref /
// rope_halves_ref (src/kernels/rope.h):
//   adjacent pairs (MODE 1): (x[2p], x[2p+1]);  halves (MODE 2): (x[p], x[p + ROT/2])
//   x0' = x0 cos - x1 sin,  x1' = x0 sin + x1 cos,  for p < ROT/2; dims from ROT on are kept.
// MODE 0 (no RoPE: learned positions) only copies keys and values.
//
// Bindings (group 0):
//   0 step  uniform Step: n, pos
//   1 cosv  storage read  array<f32> (context, ROT/2)
//   2 sinv  storage read  array<f32> (context, ROT/2)
//   3 q     storage rw    array<f32> (n, HEADS * HD)
//   4 k     storage read  array<f32> (n, KV_HEADS * HD)
//   5 v     storage read  array<f32> (n, KV_HEADS * HD)
//   6 kc    storage rw    array<kv_t> (capacity, KV_HEADS * HD): f32, or f16 (the host prepends
//                         common.wgsl, with `enable f16;` and kv_t = f16 for an f16 cache)
//   7 vc    storage rw    array<kv_t> (capacity, KV_HEADS * HD)
// Dispatch: (HEADS + KV_HEADS, n): one workgroup per (head, token); the first HEADS are queries.

struct Step { n: u32, pos: u32, pad0: u32, pad1: u32 };

override HEADS: u32 = 1u;
override KV_HEADS: u32 = 1u;
override HD: u32 = 64u;
override ROT: u32 = 64u;
override MODE: u32 = 1u;
const WG: u32 = 64u;

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> cosv: array<f32>;
@group(0) @binding(2) var<storage, read> sinv: array<f32>;
@group(0) @binding(3) var<storage, read_write> q: array<f32>;
@group(0) @binding(4) var<storage, read> k: array<f32>;
@group(0) @binding(5) var<storage, read> v: array<f32>;
@group(0) @binding(6) var<storage, read_write> kc: array<kv_t>;
@group(0) @binding(7) var<storage, read_write> vc: array<kv_t>;

// Dims of pair p within a head.
fn pair(p: u32) -> vec2<u32> {
  if (MODE == 1u) { return vec2<u32>(2u * p, 2u * p + 1u); }
  return vec2<u32>(p, p + ROT / 2u);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let s = wid.x;
  let t = wid.y;
  if (t >= step.n) { return; }
  let pos = step.pos + t;
  let half = ROT / 2u;
  let rot = select(ROT, 0u, MODE == 0u);
  let tab = pos * half;
  if (s < HEADS) {
    let base = t * HEADS * HD + s * HD;
    for (var p = lid; p < rot / 2u; p += WG) {
      let d = pair(p);
      let c = cosv[tab + p];
      let sn = sinv[tab + p];
      let x0 = q[base + d.x];
      let x1 = q[base + d.y];
      q[base + d.x] = x0 * c - x1 * sn;
      q[base + d.y] = x0 * sn + x1 * c;
    }
    return;
  }
  let g = s - HEADS;
  let src = t * KV_HEADS * HD + g * HD;
  let dst = pos * KV_HEADS * HD + g * HD;
  for (var p = lid; p < rot / 2u; p += WG) {
    let d = pair(p);
    let c = cosv[tab + p];
    let sn = sinv[tab + p];
    let x0 = k[src + d.x];
    let x1 = k[src + d.y];
    kc[dst + d.x] = kv_t(x0 * c - x1 * sn);
    kc[dst + d.y] = kv_t(x0 * sn + x1 * c);
  }
  for (var d = lid; d < HD; d += WG) {
    if (d >= rot) { kc[dst + d] = kv_t(k[src + d]); }
    vc[dst + d] = kv_t(v[src + d]);
  }
}
