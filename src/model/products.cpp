#include "products.h"

#include "../common.h"
#include "../kernels/matmul.h"
#include "../kernels/quant.h"

namespace qkv {

void for_rows(ThreadPool& pool, int64_t work, int n, int grain, const std::function<void(int, int, int)>& fn) {
  if (n <= 0) return;
  if (work < kMinParallelWork) fn(0, n, 0);
  else pool.parallel_for(n, grain, fn);
}

void ProductInput::set(const float* x, int64_t ldx, int n_tok, std::initializer_list<const Tensor*> ws) {
  const int cols = (int)(*ws.begin())->cols;
  x_ = x;
  ldx_ = ldx;
  n_tok_ = n_tok;
  cols_ = cols;
  quantized_ = false;
  for (const Tensor* w : ws) {
    if (w->cols != cols)
      fail(ErrorCode::BadModel, "weights of " + std::to_string(w->cols) + " and " + std::to_string(cols) +
                                    " columns share one input");
    quantized_ = quantized_ || qtype_int_dot(w->type);
  }
  if (!quantized_) return;
  const size_t nb = (size_t)cols / 32;
  if (xq_.size() < (size_t)n_tok * nb) {
    try {
      xq_.resize((size_t)n_tok * nb);
    } catch (const std::bad_alloc&) {
      fail(ErrorCode::OutOfMemory, "not enough memory for the quantized activations");
    }
  }
  for (int t = 0; t < n_tok; t++) quantize_act_q8_simd(x + t * ldx, xq_.data() + t * nb, cols);
}

void ProductInput::rows(float* y, int64_t ldy, const Tensor& w, int r0, int r1) const {
  if (r0 >= r1) return;
  if (qtype_int_dot(w.type)) return matmul_q8_simd(w.type, y, ldy, xq_.data(), w.data, n_tok_, cols_, r0, r1);
  if (w.type != DType::F32) {  // decoded on the fly; one panel buffer per thread for prefill
    thread_local std::vector<float> scratch;
    if (scratch.size() < (size_t)kQPanelRows * cols_) scratch.resize((size_t)kQPanelRows * cols_);
    return matmul_q_simd(w.type, y, ldy, x_, ldx_, w.data, n_tok_, cols_, r0, r1, scratch.data());
  }
  matmul_f32_simd(y, ldy, x_, ldx_, w.f32(), n_tok_, cols_, r0, r1);
}

void ProductInput::full(ThreadPool& pool, float* y, int64_t ldy, const Tensor& w) const {
  for_rows(pool, w.rows * w.cols * n_tok_, (int)w.rows, 16, [&](int r0, int r1, int) { rows(y, ldy, w, r0, r1); });
}

}  // namespace qkv
