// Embedding-row gather: y[t][c] = scale * W[ids[t]][c] for the rows of one weight part, any
// stored type (weights.wgsl decodes them). Prepended by the host: the variant constants and
// weights.wgsl. Tokens whose id is not in this part's rows are left to the other parts'
// dispatches; ids past the weight's rows leave their y row unwritten.
//
// Bindings (group 0):
//   0 params uniform GatherParams (one weight part)
//   1 step   uniform Step (n tokens of this step)
//   2 W, 3 U storage read array<u32> (weights.wgsl; U is W again)
//   4 ids    storage read  array<u32> (n,)
//   5 y      storage rw    array<f32> (n, cols)
// Dispatch: (ceil(units / WG), n): one thread per 32-value unit of a token's row.

struct GatherParams {
  rows: u32,       // rows of this part
  cols: u32,
  row0: u32,       // first row of this part in the whole weight
  row_bytes: u32,
  units: u32,      // ceil(cols / 32)
  scale: f32,
  pad0: u32,
  pad1: u32,
};

struct Step {
  n: u32,
};

@group(0) @binding(0) var<uniform> params: GatherParams;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(4) var<storage, read> ids: array<u32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let p = params;
  let u = gid.x;
  let t = gid.y;
  if (u >= p.units || t >= step.n) { return; }
  let id = ids[t];
  if (id < p.row0 || id - p.row0 >= p.rows) { return; }
  load_unit((id - p.row0) * p.row_bytes, u, p.cols, false);
  let base = t * p.cols + 32u * u;
  if (32u * u + 32u <= p.cols) {
    for (var i = 0u; i < 8u; i++) {
      let v = p.scale * wv[i];
      y[base + 4u * i] = v.x;
      y[base + 4u * i + 1u] = v.y;
      y[base + 4u * i + 2u] = v.z;
      y[base + 4u * i + 3u] = v.w;
    }
  } else {
    for (var j = 0u; 32u * u + j < p.cols; j++) { y[base + j] = p.scale * wv[j / 4u][j % 4u]; }
  }
}
