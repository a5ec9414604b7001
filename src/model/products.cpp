#include "products.h"

#include <algorithm>

#include "../common.h"
#include "../kernels/matmul.h"
#include "../kernels/quant.h"

namespace qkv {

void for_rows(ThreadPool& pool, int64_t work, int n, int grain, int n_tok,
              const std::function<void(int, int, int)>& fn) {
  if (n <= 0) return;
  if (work < kMinParallelWork) return fn(0, n, 0);
  if (n_tok == 1 && grain > 0) {
    const int64_t per = ((int64_t)n + 2 * pool.size() - 1) / (2 * pool.size());
    grain = (int)std::max<int64_t>(grain, (per + grain - 1) / grain * grain);
  }
  pool.parallel_for(n, grain, fn);
}

// Whether w multiplies against super-block activations in this build (qdot.h).
static bool super_blocks(const Tensor& w) { return qdot_k_super_blocks() && qtype_k_super(w.type); }

void ProductInput::set(const float* x, int64_t ldx, int n_tok, const Tensor* const* ws, int n_ws) {
  const int cols = (int)ws[0]->cols;
  x_ = x;
  ldx_ = ldx;
  n_tok_ = n_tok;
  cols_ = cols;
  quantized_ = quantized_k_ = packed_ = false;
  bool f32_product = false;
  QType int_types[8];  // the distinct integer-dot types, for the packed layouts they read
  int n_int = 0;
  for (int i = 0; i < n_ws; i++) {
    const Tensor* w = ws[i];
    if (w->cols != cols)
      fail(ErrorCode::BadModel,
           "weights of " + std::to_string(w->cols) + " and " + std::to_string(cols) + " columns share one input");
    if (super_blocks(*w)) quantized_k_ = true;
    else if (qtype_int_dot(w->type)) {
      quantized_ = true;
      if (std::find(int_types, int_types + n_int, w->type) == int_types + n_int && n_int < 8)
        int_types[n_int++] = w->type;
    } else f32_product = true;
  }
  xqp_.T = 0;  // no packed copy until this X has one
  try {
    if (quantized_) {
      const size_t nb = (size_t)cols / 32;
      if (xq_.size() < (size_t)n_tok * nb) xq_.resize((size_t)n_tok * nb);
      for (int t = 0; t < n_tok; t++) quantize_act_q8_simd(x + t * ldx, xq_.data() + t * nb, cols);
      qdot_pack_prefill(xqp_, xq_.data(), n_tok, cols, int_types, n_int);
    }
    if (quantized_k_) {  // K-type weights have whole super-blocks per row (checked on load)
      const size_t nb = (size_t)cols / 256;
      if (xk_.size() < (size_t)n_tok * nb) xk_.resize((size_t)n_tok * nb);
      for (int t = 0; t < n_tok; t++) quantize_act_q8k_simd(x + t * ldx, xk_.data() + t * nb, cols);
    }
    if (f32_product && n_tok >= kXPackMinTokens) {
      packed_ = true;
      if (xp_.size() < xpack_f32_floats(n_tok, cols)) xp_.resize(xpack_f32_floats(n_tok, cols));
      xpack_f32(xp_.data(), x, ldx, n_tok, cols);
    }
  } catch (const std::bad_alloc&) {
    fail(ErrorCode::OutOfMemory, "not enough memory for the quantized or packed activations");
  }
}

void ProductInput::rows(float* y, int64_t ldy, const Tensor& w, int r0, int r1) const {
  if (r0 >= r1) return;
  if (super_blocks(w)) return matmul_q8k_simd(w.type, y, ldy, xk_.data(), w.data, n_tok_, cols_, r0, r1);
  if (qtype_int_dot(w.type))
    return matmul_q8_simd(w.type, y, ldy, xq_.data(), w.data, n_tok_, cols_, r0, r1, w.finite_scales, &xqp_);
  if (w.type != DType::F32) {  // decoded on the fly; one panel buffer per thread for prefill
    thread_local std::vector<float> scratch;
    if (scratch.size() < (size_t)kQPanelRows * cols_) scratch.resize((size_t)kQPanelRows * cols_);
    return matmul_q_simd(w.type, y, ldy, x_, ldx_, w.data, n_tok_, cols_, r0, r1, scratch.data(),
                         packed_ ? xp_.data() : nullptr);
  }
  if (packed_) return matmul_f32_xpacked(y, ldy, xp_.data(), w.f32(), cols_, n_tok_, cols_, r0, r1, false);
  matmul_f32_simd(y, ldy, x_, ldx_, w.f32(), n_tok_, cols_, r0, r1);
}

void ProductInput::full(ThreadPool& pool, float* y, int64_t ldy, const Tensor& w) const {
  for_rows(pool, w.rows * w.cols * n_tok_, (int)w.rows, 16, n_tok_,
           [&](int r0, int r1, int) { rows(y, ldy, w, r0, r1); });
}

void stacked_products(ThreadPool& pool, ProductInput& in, const float* x, int64_t ldx, int n_tok,
                      std::initializer_list<Product> parts, int grain,
                      const std::function<void(int, int, int)>& finish) {
  if (parts.size() == 0) return;
  if (parts.size() > 4) fail(ErrorCode::BadArgument, "at most 4 products share a section");
  const Tensor* ws[4] = {};
  int n = 0;
  int64_t total = 0;
  for (const Product& p : parts) ws[n++] = p.w, total += p.w->rows;
  in.set(x, ldx, n_tok, ws, n);
  const int64_t cols = ws[0]->cols;
  for_rows(pool, total * cols * n_tok, (int)total, grain, n_tok, [&](int b, int e, int) {
    int off = 0, i = 0;
    for (const Product& p : parts) {
      const int rows = (int)p.w->rows, r0 = std::max(b - off, 0), r1 = std::min(e - off, rows);
      off += rows;
      if (r0 < r1) {
        in.rows(p.y, p.ld, *p.w, r0, r1);
        for (int t = 0; p.bias && t < n_tok; t++) add_f32_simd(p.y + (int64_t)t * p.ld + r0, p.bias + r0, r1 - r0);
        if (finish) finish(i, r0, r1);
      }
      i++;
    }
  });
}

}  // namespace qkv
