// Test helpers shared by the stored-type kernel tests: random values and stored rows of every
// weight type.
#pragma once
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/quant.h"

namespace qkv {

inline std::vector<float> randn(int n, unsigned seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// A row of `type` holding quantized random values, stored at a byte offset (rows of Q4_0 are
// 18-byte blocks and never aligned in real files).
inline std::vector<uint8_t> stored_row(QType t, const std::vector<float>& x, int offset) {
  const int n = (int)x.size();
  std::vector<uint8_t> buf(offset + qtype_row_bytes(t, n));
  uint8_t* p = buf.data() + offset;
  switch (t) {
    case QType::F32: std::memcpy(p, x.data(), n * 4); break;
    case QType::F16:
      for (int i = 0; i < n; i++) {
        uint16_t h = f32_to_f16(x[i]);
        std::memcpy(p + 2 * i, &h, 2);
      }
      break;
    case QType::BF16:
      for (int i = 0; i < n; i++) {
        uint32_t b;
        std::memcpy(&b, &x[i], 4);
        uint16_t h = b >> 16;
        std::memcpy(p + 2 * i, &h, 2);
      }
      break;
    case QType::Q8_0: quantize_row_q8_0(x.data(), p, n); break;
    case QType::Q4_0: quantize_row_q4_0(x.data(), p, n); break;
    case QType::Q4_1: quantize_row_q4_1(x.data(), p, n); break;
    case QType::Q5_0: quantize_row_q5_0(x.data(), p, n); break;
    case QType::Q5_1: quantize_row_q5_1(x.data(), p, n); break;
    default: {  // K-quants: random blocks with small half scales
      std::mt19937 rng(n + offset);
      const size_t bb = qtype_row_bytes(t, 256);
      for (size_t i = 0; i < qtype_row_bytes(t, n); i++) p[i] = (uint8_t)rng();
      for (int b = 0; b < n / 256; b++) {
        uint8_t* blk = p + b * bb;
        const uint16_t d = f32_to_f16(0.001f * (1 + rng() % 50)), dm = f32_to_f16(0.0005f * (rng() % 50));
        if (t == QType::Q6_K) std::memcpy(blk + 208, &d, 2);
        else {
          std::memcpy(blk, &d, 2);
          std::memcpy(blk + 2, &dm, 2);
        }
      }
    }
  }
  return buf;
}

}  // namespace qkv
