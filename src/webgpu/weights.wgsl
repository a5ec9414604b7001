// Stored-weight decoding shared by the product and gather kernels (matvec.wgsl, matmul.wgsl,
// gather.wgsl). The host (src/js/gpu-products.js) prepends the per-variant constants and appends
// `fn load_unit(rb, u, cols, up)` calling the loader of the weight's type, then the kernel.
//
// A weight is its GGUF bytes, rows consecutive, kept as u32 words (array<u32>, padded by one
// word so an unaligned 4-byte read never leaves the buffer). Blocks are not 4-byte aligned in
// general (Q8_0 34 bytes, Q4_0 18, Q5_0 22, Q6_K 210, F16/BF16 rows of odd length), so bytes,
// halves and words are read at arbitrary byte offsets. f16 scales go through unpack2x16float,
// bf16 by shifting into f32 bits: f32 arithmetic everywhere, no shader-f16.
//
// A "unit" is 32 consecutive values of one row (a Q*_0/Q*_1 block, a K-quant sub-block, or 32
// float values; the last float unit of a row of cols % 32 != 0 values is zero-padded).
// load_<type>(rb, u, cols, up) decodes unit u of the row starting at byte rb into wv[0..8),
// exactly as dequantize_row_ref of src/kernels/quant.cpp does (same products, f32).
//
// Bindings (group 0): 2 W, 3 U: storage read array<u32>. U is the GLU "up" weight (W bound
// again when there is none); up selects it.

@group(0) @binding(2) var<storage, read> W: array<u32>;
@group(0) @binding(3) var<storage, read> U: array<u32>;

var<private> wv: array<vec4<f32>, 8>;

fn word(i: u32, up: bool) -> u32 {
  if (up) { return U[i]; }
  return W[i];
}

// The 4 bytes at byte offset b (any alignment), little-endian. Branchless (neighbouring threads
// often differ in alignment: 34-byte blocks alternate); the second shift in two steps so that
// s = 0 shifts by 32 without WGSL's shift-amount rule biting.
fn rd32(b: u32, up: bool) -> u32 {
  let i = b >> 2u;
  let s = (b & 3u) * 8u;
  return (word(i, up) >> s) | ((word(i + 1u, up) << (31u - s)) << 1u);
}

// The half at even byte offset b, as f32.
fn f16at(b: u32, up: bool) -> f32 {
  return unpack2x16float(word(b >> 2u, up) >> ((b & 2u) * 8u)).x;
}

// The signed byte at byte offset b, as f32.
fn i8at(b: u32, up: bool) -> f32 {
  return f32(bitcast<i32>(word(b >> 2u, up) << (24u - 8u * (b & 3u))) >> 24u);
}

// The 4 bytes of w as unsigned / signed values.
fn u8x4(w: u32) -> vec4<f32> {
  return vec4<f32>(f32(w & 0xffu), f32((w >> 8u) & 0xffu), f32((w >> 16u) & 0xffu), f32(w >> 24u));
}
fn i8x4(w: u32) -> vec4<f32> {
  let v = bitcast<i32>(w);
  return vec4<f32>(f32((v << 24u) >> 24u), f32((v << 16u) >> 24u), f32((v << 8u) >> 24u), f32(v >> 24u));
}

// Zeroes the lanes of v at columns >= cols (float types, last unit of a row).
fn mask4(v: vec4<f32>, c: u32, cols: u32) -> vec4<f32> {
  if (c + 4u <= cols) { return v; }
  return select(vec4<f32>(0.0), v, vec4<u32>(c, c + 1u, c + 2u, c + 3u) < vec4<u32>(cols));
}

fn load_f32(rb: u32, u: u32, cols: u32, up: bool) {
  for (var i = 0u; i < 8u; i++) {
    let c = 32u * u + 4u * i;
    let w = (rb >> 2u) + c;
    let v = vec4<f32>(bitcast<f32>(word(w, up)), bitcast<f32>(word(w + 1u, up)),
                      bitcast<f32>(word(w + 2u, up)), bitcast<f32>(word(w + 3u, up)));
    wv[i] = mask4(v, c, cols);
  }
}

fn load_f16(rb: u32, u: u32, cols: u32, up: bool) {
  for (var i = 0u; i < 8u; i++) {
    let c = 32u * u + 4u * i;
    let b = rb + 2u * c;
    let v = vec4<f32>(unpack2x16float(rd32(b, up)), unpack2x16float(rd32(b + 4u, up)));
    wv[i] = mask4(v, c, cols);
  }
}

fn load_bf16(rb: u32, u: u32, cols: u32, up: bool) {
  for (var i = 0u; i < 8u; i++) {
    let c = 32u * u + 4u * i;
    let b = rb + 2u * c;
    let lo = rd32(b, up);
    let hi = rd32(b + 4u, up);
    let v = vec4<f32>(bitcast<f32>(lo << 16u), bitcast<f32>(lo & 0xffff0000u),
                      bitcast<f32>(hi << 16u), bitcast<f32>(hi & 0xffff0000u));
    wv[i] = mask4(v, c, cols);
  }
}

// Q8_0, 34 bytes: f16 d, 32 x int8.  x = d * q
fn load_q8_0(rb: u32, u: u32, cols: u32, up: bool) {
  let b = rb + 34u * u;
  let d = f16at(b, up);
  for (var i = 0u; i < 8u; i++) { wv[i] = d * i8x4(rd32(b + 2u + 4u * i, up)); }
}

// Q4_0, 18 bytes: f16 d, 16 bytes; value j < 16 is the low nibble of byte j, j + 16 its high
// nibble.  x = d * (q - 8)
fn load_q4_0(rb: u32, u: u32, cols: u32, up: bool) {
  let b = rb + 18u * u;
  let d = f16at(b, up);
  for (var i = 0u; i < 4u; i++) {
    let w = rd32(b + 2u + 4u * i, up);
    wv[i] = d * (u8x4(w & 0x0f0f0f0fu) - 8.0);
    wv[i + 4u] = d * (u8x4((w >> 4u) & 0x0f0f0f0fu) - 8.0);
  }
}

// Q4_1, 20 bytes: f16 d, f16 m, 16 bytes of nibbles.  x = d * q + m
fn load_q4_1(rb: u32, u: u32, cols: u32, up: bool) {
  let b = rb + 20u * u;
  let dm = unpack2x16float(word(b >> 2u, up));
  for (var i = 0u; i < 4u; i++) {
    let w = word((b >> 2u) + 1u + i, up);
    wv[i] = dm.x * u8x4(w & 0x0f0f0f0fu) + dm.y;
    wv[i + 4u] = dm.x * u8x4((w >> 4u) & 0x0f0f0f0fu) + dm.y;
  }
}

// The fifth bits of values 4i..4i+3 (bits 4i.. of qh), as 0 or 16 in each byte lane.
fn high4(qh: u32, first: u32) -> vec4<f32> {
  let h = qh >> first;
  return 16.0 * vec4<f32>(f32(h & 1u), f32((h >> 1u) & 1u), f32((h >> 2u) & 1u), f32((h >> 3u) & 1u));
}

// Q5_0, 22 bytes: f16 d, u32 fifth bits, 16 bytes of nibbles.  x = d * ((q | h << 4) - 16)
fn load_q5_0(rb: u32, u: u32, cols: u32, up: bool) {
  let b = rb + 22u * u;
  let d = f16at(b, up);
  let qh = rd32(b + 2u, up);
  for (var i = 0u; i < 4u; i++) {
    let w = rd32(b + 6u + 4u * i, up);
    wv[i] = d * (u8x4(w & 0x0f0f0f0fu) + high4(qh, 4u * i) - 16.0);
    wv[i + 4u] = d * (u8x4((w >> 4u) & 0x0f0f0f0fu) + high4(qh, 16u + 4u * i) - 16.0);
  }
}

// Q5_1, 24 bytes: f16 d, f16 m, u32 fifth bits, 16 bytes of nibbles.  x = d * (q | h << 4) + m
fn load_q5_1(rb: u32, u: u32, cols: u32, up: bool) {
  let b = rb + 24u * u;
  let dm = unpack2x16float(word(b >> 2u, up));
  let qh = word((b >> 2u) + 1u, up);
  for (var i = 0u; i < 4u; i++) {
    let w = word((b >> 2u) + 2u + i, up);
    wv[i] = dm.x * (u8x4(w & 0x0f0f0f0fu) + high4(qh, 4u * i)) + dm.y;
    wv[i + 4u] = dm.x * (u8x4((w >> 4u) & 0x0f0f0f0fu) + high4(qh, 16u + 4u * i)) + dm.y;
  }
}

// Byte k (< 12) of the K-quant scales held in words s0, s1, s2.
fn kbyte(k: u32, s0: u32, s1: u32, s2: u32) -> u32 {
  let w = select(select(s2, s1, k < 8u), s0, k < 4u);
  return (w >> (8u * (k & 3u))) & 0xffu;
}

// (d * scale, dmin * min) of K-quant sub-block j (kquant_scale_min of src/kernels/quant.h).
fn kscale(j: u32, b: u32, up: bool) -> vec2<f32> {
  let dm = unpack2x16float(word(b >> 2u, up));
  let s0 = word((b >> 2u) + 1u, up);
  let s1 = word((b >> 2u) + 2u, up);
  let s2 = word((b >> 2u) + 3u, up);
  var sc: u32;
  var m: u32;
  if (j < 4u) {
    sc = kbyte(j, s0, s1, s2) & 63u;
    m = kbyte(j + 4u, s0, s1, s2) & 63u;
  } else {
    sc = (kbyte(j + 4u, s0, s1, s2) & 15u) | ((kbyte(j - 4u, s0, s1, s2) >> 6u) << 4u);
    m = (kbyte(j + 4u, s0, s1, s2) >> 4u) | ((kbyte(j, s0, s1, s2) >> 6u) << 4u);
  }
  return vec2<f32>(dm.x * f32(sc), dm.y * f32(m));
}

// Q4_K, 144 bytes per 256 values: f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes of
// nibbles; sub-block s takes the low (s even) or high nibbles of bytes 32 (s / 2) .. + 32.
//   x = d * sc * q - dmin * m
fn load_q4_k(rb: u32, u: u32, cols: u32, up: bool) {
  let s = u & 7u;
  let b = rb + 144u * (u >> 3u);
  let dm = kscale(s, b, up);
  let q = (b >> 2u) + 4u + 8u * (s >> 1u);
  let sh = 4u * (s & 1u);
  for (var i = 0u; i < 8u; i++) {
    wv[i] = dm.x * u8x4((word(q + i, up) >> sh) & 0x0f0f0f0fu) - dm.y;
  }
}

// Q5_K, 176 bytes per 256 values: as Q4_K, with 32 bytes of fifth bits after the scales (bit s
// of byte l is value l of sub-block s) and the nibbles after them.
fn load_q5_k(rb: u32, u: u32, cols: u32, up: bool) {
  let s = u & 7u;
  let b = rb + 176u * (u >> 3u);
  let dm = kscale(s, b, up);
  let qh = (b >> 2u) + 4u;
  let q = (b >> 2u) + 12u + 8u * (s >> 1u);
  let sh = 4u * (s & 1u);
  for (var i = 0u; i < 8u; i++) {
    let h = ((word(qh + i, up) >> s) & 0x01010101u) << 4u;
    wv[i] = dm.x * u8x4(((word(q + i, up) >> sh) & 0x0f0f0f0fu) | h) - dm.y;
  }
}

// Q6_K, 210 bytes per 256 values: 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 int8
// scales (one per 16 values), f16 d.  x = d * sc * (q - 32)
// Sub-block s = 4 h + k: values 128 h + 32 k + l take ql byte 64 h + 32 (k & 1) + l (low nibble
// for k < 2, high otherwise) and bits 2k of qh byte 32 h + l.
fn load_q6_k(rb: u32, u: u32, cols: u32, up: bool) {
  let s = u & 7u;
  let b = rb + 210u * (u >> 3u);
  let h = s >> 2u;
  let k = s & 3u;
  let d = f16at(b + 208u, up);
  let sc0 = d * i8at(b + 192u + 8u * h + 2u * k, up);
  let sc1 = d * i8at(b + 193u + 8u * h + 2u * k, up);
  let ql = b + 64u * h + 32u * (k & 1u);
  let qh = b + 128u + 32u * h;
  let shl = 4u * (k >> 1u);
  for (var i = 0u; i < 8u; i++) {
    let lo = (rd32(ql + 4u * i, up) >> shl) & 0x0f0f0f0fu;
    let hi = ((rd32(qh + 4u * i, up) >> (2u * k)) & 0x03030303u) << 4u;
    wv[i] = select(sc1, sc0, i < 4u) * (u8x4(lo | hi) - 32.0);
  }
}
