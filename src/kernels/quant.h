// Weights kept in their stored type: row dequantization, float dot products that decode on the
// fly (so no f32 copy of the model is ever made), and quantizers. The block types' fast path is
// the integer one in qdot.h.
#pragma once
#include <cstddef>
#include <cstdint>

namespace qkv {

// Storage types of weight rows (GGUF layouts).
//   F16/BF16: 2 bytes per element.
//   Q8_0: blocks of 32: f16 scale d, 32 x int8 q;         x = d * q
//   Q4_0: blocks of 32: f16 scale d, 16 bytes of nibbles; x = d * (nibble - 8), element j of a
//         block is the low nibble of byte j (j < 16) or the high nibble of byte j - 16.
//   Q4_1: f16 d, f16 m, 16 bytes of nibbles;              x = d * nibble + m
//   Q5_0: f16 d, u32 high bits, 16 bytes of nibbles;      x = d * (nibble | high << 4) - 16 d
//   Q5_1: f16 d, f16 m, u32 high bits, nibbles;           x = d * (nibble | high << 4) + m
//         (element j takes high bit j of the u32, element j + 16 bit j + 16)
//   Q4_K: super-blocks of 256: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins for 8
//         sub-blocks of 32, 128 bytes of nibbles;      x = d * sc * q - dmin * m
//   Q5_K: as Q4_K plus 32 bytes of fifth bits.
//   Q6_K: 128 bytes low nibbles, 64 bytes 2-bit highs, 16 int8 scales, f16 d; x = d * sc * (q - 32)
enum class QType { F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K };

// Bytes of one row of n elements (n a multiple of the block size for Q types).
size_t qtype_row_bytes(QType t, int n);
int qtype_block(QType t);
// Lower-case name of a type, as qkv's options spell it: f32, f16, bf16, q8_0, ..., q6_k.
const char* qtype_name(QType t);

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float bf16_to_f32(uint16_t h);

// K-quant (Q4_K/Q5_K) sub-block j's 6-bit scale and min from the 12 packed bytes at q.
inline void kquant_scale_min(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// dst[0..n) = the row's values.  (scalar reference)
void dequantize_row_ref(QType t, const void* row, float* dst, int n);
// The same, vectorised where the layout allows.
void dequantize_row_simd(QType t, const void* row, float* dst, int n);

// sum_k w[k] * x[k] for one stored row.
float dot_row_ref(QType t, const void* row, const float* x, int n);
float dot_row_simd(QType t, const void* row, const float* x, int n);

// Quantizers (reference; for conversion and tests): n a multiple of 32.
void quantize_row_q8_0(const float* x, void* dst, int n);
void quantize_row_q4_0(const float* x, void* dst, int n);
void quantize_row_q4_1(const float* x, void* dst, int n);
void quantize_row_q5_0(const float* x, void* dst, int n);
void quantize_row_q5_1(const float* x, void* dst, int n);
// K-quants: n a multiple of 256. Q4_K searches each sub-block of 32 for the scale and min that
// minimise the weighted squared error, then quantizes the 8 scales and 8 mins to 6 bits under
// f16 super-scales; Q5_K does the same with 5-bit values. Q6_K takes per-16 scales from the largest magnitude,
// quantized to int8.
void quantize_row_q4_k(const float* x, void* dst, int n);
void quantize_row_q5_k(const float* x, void* dst, int n);
void quantize_row_q6_k(const float* x, void* dst, int n);

// Y = X W^T over rows [r0, r1) of a stored matrix W (d, n), in f32 arithmetic (the path of
// F16/BF16; the block types have integer kernels in qdot.h). T = 1 decodes in registers; for
// T > 1 panels of kQPanelRows rows are decoded once into `scratch` (kQPanelRows * n floats)
// and multiplied with all T tokens by the register-blocked f32 kernel. For T >= kXPackMinTokens
// that kernel reads X as xpack_f32 lays it out: pass `Xp` so laid out (once for several calls),
// or null to have it done here, into a buffer of this thread's.
constexpr int kQPanelRows = 64;
void matmul_q_simd(QType t, float* Y, int64_t ldy, const float* X, int64_t ldx, const void* W, int T, int n, int r0,
                   int r1, float* scratch, const float* Xp = nullptr);

}  // namespace qkv
