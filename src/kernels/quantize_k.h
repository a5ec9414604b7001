// K-quant writers (reading them is in quant.cpp). Reference code, for conversion and tests.
#pragma once

namespace qkv {

// One row of n values (n a multiple of 256) as Q4_K super-blocks (144 bytes each): per
// sub-block of 32 a scale and a min fitted by least squares over a few candidate grids, both
// then stored as 6-bit multiples of the super-block's f16 d and dmin (llama.cpp's layout).
void quantize_row_q4_k(const float* x, void* dst, int n);

}  // namespace qkv
