#!/usr/bin/env node
// Rewrites the relaxed-SIMD multiply-add of a module built by clang 14 to the standard opcode.
//
// clang 14 (Emscripten 3.1.6) knows relaxed SIMD only as the pre-standard proposal: its
// f32x4.fma is opcode 0xfd 0xaf (a + b * c); the standard f32x4.relaxed_madd is 0xfd 0x105
// (a * b + c), which is what engines run (Chromium >= 114, Node >= 22; Node 20 behind
// --experimental-wasm-relaxed-simd). Both LEB128 encodings are two bytes (af 01 / 85 02), so the
// rewrite happens in place. src/kernels/simd.h passes the operands in relaxed_madd's order.
//
// The code section is decoded instruction by instruction (so that immediates and data are never
// mistaken for an opcode); an instruction this decoder does not know stops the build. The result
// must validate with relaxed SIMD enabled and contain at least one multiply-add.
//
// Usage: node scripts/wasm-relaxed.mjs FILE.wasm   (rewrites FILE.wasm; prints the count)
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';

// Pre-standard opcode (clang 14) -> the standard instruction's LEB128 bytes (both two bytes long).
const REWRITES = new Map([
  [0xaf, { name: 'f32x4.fma', to: [0x85, 0x02] }],        // -> 0x105 f32x4.relaxed_madd
  // The stand-in for the 8-bit dot product (src/kernels/qdot/relaxed.cpp, rdot): same types, (v128, v128) -> v128.
  [0xa2, { name: 'i8x16.relaxed_swizzle', to: [0x92, 0x02] }],  // -> 0x112 i16x8.relaxed_dot_i8x16_i7x16_s
]);
const STANDARD = new Set([0x105, 0x112]);
// The other pre-standard relaxed instructions: none has a rewrite, so the build stops on them.
const UNMAPPED = new Set([0xa5, 0xa6, 0xb0, 0xb2, 0xb3, 0xb4, 0xc5, 0xc6, 0xcf, 0xd0, 0xd2, 0xd3, 0xd4]);

export function rewriteRelaxed(bytes) {
  const b = bytes;
  let p = 0;
  const fail = (why) => { throw new Error(`wasm-relaxed: ${why} at byte ${p}`); };
  const u32 = () => {
    let v = 0, shift = 0, byte;
    do {
      if (p >= b.length) fail('truncated LEB128');
      byte = b[p++];
      v += (byte & 0x7f) * 2 ** shift;
      shift += 7;
    } while (byte & 0x80);
    return v;
  };
  const skipLeb = () => { while (b[p++] & 0x80) if (p >= b.length) fail('truncated LEB128'); };
  const memarg = () => { skipLeb(); skipLeb(); };
  const blockType = () => {
    const t = b[p];
    if (t === 0x40 || (t >= 0x7b && t <= 0x7f) || t === 0x70 || t === 0x6f) p++;
    else skipLeb(); // s33 type index
  };

  if (b[0] !== 0 || b[1] !== 0x61 || b[2] !== 0x73 || b[3] !== 0x6d) fail('not a WebAssembly module');
  p = 8;
  let rewritten = 0, already = 0;
  while (p < b.length) {
    const id = b[p++];
    const size = u32();
    const end = p + size;
    if (id !== 10) { p = end; continue; }
    const count = u32();
    for (let f = 0; f < count; f++) {
      const bodySize = u32();
      const bodyEnd = p + bodySize;
      const groups = u32();
      for (let g = 0; g < groups; g++) { skipLeb(); p++; }
      while (p < bodyEnd) {
        const op = b[p++];
        if (op <= 0x01 || op === 0x05 || op === 0x0b || op === 0x0f || op === 0x19 || op === 0x1a || op === 0x1b ||
            (op >= 0x45 && op <= 0xc4) || op === 0xd1) continue;
        if (op >= 0x02 && op <= 0x04 || op === 0x06) { blockType(); continue; }
        if (op >= 0x07 && op <= 0x0d || op === 0x10 || op === 0x12 || op === 0x18 || (op >= 0x20 && op <= 0x26) ||
            op === 0xd2) { skipLeb(); continue; }
        if (op === 0x0e) { const n = u32(); for (let i = 0; i <= n; i++) skipLeb(); continue; }
        if (op === 0x11 || op === 0x13) { skipLeb(); skipLeb(); continue; }
        if (op === 0x1c) { const n = u32(); p += n; continue; }
        if (op >= 0x28 && op <= 0x3e) { memarg(); continue; }
        if (op === 0x3f || op === 0x40 || op === 0xd0) { p++; continue; }
        if (op === 0x41 || op === 0x42) { skipLeb(); continue; }
        if (op === 0x43) { p += 4; continue; }
        if (op === 0x44) { p += 8; continue; }
        if (op === 0xfc) {
          const sub = u32();
          if (sub <= 7) continue;
          if (sub === 8) { skipLeb(); p++; continue; }
          if (sub === 10) { p += 2; continue; }
          if (sub === 11) { p++; continue; }
          if (sub === 12 || sub === 14) { skipLeb(); skipLeb(); continue; }
          if (sub === 9 || sub === 13 || (sub >= 15 && sub <= 17)) { skipLeb(); continue; }
          fail(`unknown 0xfc instruction ${sub}`);
        }
        if (op === 0xfd) {
          const at = p;
          const sub = u32();
          if (sub <= 11 || sub === 92 || sub === 93) { memarg(); continue; }
          if (sub === 12 || sub === 13) { p += 16; continue; }
          if (sub >= 21 && sub <= 34) { p++; continue; }
          if (sub >= 84 && sub <= 91) { memarg(); p++; continue; }
          const rw = REWRITES.get(sub);
          if (rw) {
            if (p - at !== 2) fail(`${rw.name} with an unexpected encoding`);
            b[at] = rw.to[0];
            b[at + 1] = rw.to[1];
            rewritten++;
            continue;
          }
          if (UNMAPPED.has(sub)) fail(`pre-standard relaxed SIMD instruction 0x${sub.toString(16)} has no rewrite (use madd)`);
          if (STANDARD.has(sub)) { already++; continue; }
          if (sub <= 0xff) continue; // every other SIMD128 instruction has no immediate
          fail(`unexpected SIMD instruction ${sub}`);
        }
        if (op === 0xfe) {
          const sub = u32();
          if (sub === 3) { p++; continue; }
          memarg();
          continue;
        }
        fail(`unknown opcode 0x${op.toString(16)}`);
      }
      if (p !== bodyEnd) fail(`function ${f} decoded past its end`);
    }
    if (p !== end) fail('code section size mismatch');
  }
  return { rewritten, already };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop())) {
  const file = process.argv[2];
  if (!file) { console.error('usage: node scripts/wasm-relaxed.mjs FILE.wasm'); process.exit(2); }
  const bytes = readFileSync(file);
  const { rewritten: n, already } = rewriteRelaxed(bytes);
  setFlagsFromString('--experimental-wasm-relaxed-simd');
  if (n === 0 && already > 0) { console.log(`wasm-relaxed: ${file}: already rewritten (${already})`); process.exit(0); }
  if (n === 0) { console.error(`wasm-relaxed: ${file} has no f32x4.fma: was it built with QKV_RELAXED_SIMD?`); process.exit(1); }
  if (!WebAssembly.validate(bytes)) { console.error(`wasm-relaxed: ${file} does not validate after the rewrite`); process.exit(1); }
  writeFileSync(file + '.tmp', bytes);
  renameSync(file + '.tmp', file);
  console.log(`wasm-relaxed: ${file}: ${n} relaxed SIMD instructions rewritten`);
}
