// The stored-type kernels timed inside a browser's WebAssembly engine (bench/bench-kernels-chromium.mjs
// loads this module, built as build-wasm*/qkv_kernel_bench_web.mjs, into headless Chromium).
// Node's V8 and Chromium's differ in how they lower SIMD128, so kernel work for the browser is
// measured in the browser. Each case: quantize the activations, then Y = X W^T through
// matmul_q8_simd, 1 thread; decode (T = 1) over a matrix that fits in cache and one that does
// not, and a 64-token prefill (the build's choice, and "-tile" / "-gemm": the grouped tile or the
// packed GEMM kept, for every integer type; "-ktile" for the K types: the super-block kernel the
// relaxed builds decode with, against BlockQ8K, its 2 x 4 tile over the stored rows; "-kpanel": its
// prefill over rows decoded once per block of tokens); decode from DRAM ("-dram": a 131072 x 2048 matrix, 151-285 MiB,
// far past the L3; "f32-dec-dram": f32, 192 MiB) and through four layers of the ~1B shape ("-layers": width 2048,
// hidden 5632, each matrix its own buffer, as a decode step reads them). Then the f32 product of a 64-token prefill
// (matmul_f32_simd's packed-token kernel) at the 110M shape's two matrix shapes: "f32" with the tile height the build
// picks (the relaxed builds time both on the first calls), "f32-r4" and "f32-r6" with each height kept, and f32 decode
// ("f32-dec": matvec_f32_simd, 2048 x 768). Then attention_flash as the 110M shape decodes (12 heads of 64, one query
// against 320 cached positions): one layer's cache (in cache) and 12 layers' in turn (out of it, as in a decode step).
// The JS side alternates builds case by case and keeps the best.
#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/qdot.h"
#include "kernels/quant.h"

namespace {

enum class Kind { Quant, F32, Attention, Layers };

struct Case {
  Kind kind;
  qkv::QType type;  // the stored type of Quant cases
  const char* type_name;
  int d, n, T;   // attention: d = cached positions, n = heads x head_dim, T = layers
  int tile = 0;  // F32: the tile height to keep (matmul_f32_force_tile_rows), 0 for the build's choice;
                 // Quant: 1 the grouped prefill tile, 2 the packed GEMM (qdot_force_prefill_kernel),
                 // 3 / 4 the super-block kernel (matmul_q8k_simd; K types) with the tile over the
                 // stored rows / the decoded rows (qdot_force_prefill_kernel 0 / 1)
};

const Case kCases[] = {
    {Kind::Quant, qkv::QType::Q8_0, "q8_0", 2048, 768, 1},
    {Kind::Quant, qkv::QType::Q8_0, "q8_0", 32768, 768, 1},
    {Kind::Quant, qkv::QType::Q8_0, "q8_0", 2048, 768, 64},
    {Kind::Quant, qkv::QType::Q4_0, "q4_0", 2048, 768, 1},
    {Kind::Quant, qkv::QType::Q4_0, "q4_0", 32768, 768, 1},
    {Kind::Quant, qkv::QType::Q4_0, "q4_0", 2048, 768, 64},
    {Kind::Quant, qkv::QType::Q4_K, "q4_k", 2048, 768, 1},
    {Kind::Quant, qkv::QType::Q4_K, "q4_k", 32768, 768, 1},
    {Kind::Quant, qkv::QType::Q4_K, "q4_k", 2048, 768, 64},
    {Kind::Quant, qkv::QType::Q6_K, "q6_k", 2048, 768, 1},
    {Kind::Quant, qkv::QType::Q6_K, "q6_k", 32768, 768, 1},
    {Kind::Quant, qkv::QType::Q6_K, "q6_k", 2048, 768, 64},
    {Kind::Quant, qkv::QType::Q8_0, "q8_0-tile", 2048, 768, 64, 1},
    {Kind::Quant, qkv::QType::Q8_0, "q8_0-gemm", 2048, 768, 64, 2},
    {Kind::Quant, qkv::QType::Q4_0, "q4_0-tile", 2048, 768, 64, 1},
    {Kind::Quant, qkv::QType::Q4_0, "q4_0-gemm", 2048, 768, 64, 2},
    {Kind::Quant, qkv::QType::Q4_1, "q4_1-tile", 2048, 768, 64, 1},
    {Kind::Quant, qkv::QType::Q4_1, "q4_1-gemm", 2048, 768, 64, 2},
    {Kind::Quant, qkv::QType::Q5_0, "q5_0-tile", 2048, 768, 64, 1},
    {Kind::Quant, qkv::QType::Q5_0, "q5_0-gemm", 2048, 768, 64, 2},
    {Kind::Quant, qkv::QType::Q5_1, "q5_1-tile", 2048, 768, 64, 1},
    {Kind::Quant, qkv::QType::Q5_1, "q5_1-gemm", 2048, 768, 64, 2},
    {Kind::Quant, qkv::QType::Q4_K, "q4_k-tile", 2048, 768, 64, 1},
    {Kind::Quant, qkv::QType::Q4_K, "q4_k-gemm", 2048, 768, 64, 2},
    {Kind::Quant, qkv::QType::Q5_K, "q5_k-tile", 2048, 768, 64, 1},
    {Kind::Quant, qkv::QType::Q5_K, "q5_k-gemm", 2048, 768, 64, 2},
    {Kind::Quant, qkv::QType::Q6_K, "q6_k-tile", 2048, 768, 64, 1},
    {Kind::Quant, qkv::QType::Q6_K, "q6_k-gemm", 2048, 768, 64, 2},
    {Kind::Quant, qkv::QType::Q4_K, "q4_k-ktile", 2048, 768, 64, 3},
    {Kind::Quant, qkv::QType::Q5_K, "q5_k-ktile", 2048, 768, 64, 3},
    {Kind::Quant, qkv::QType::Q6_K, "q6_k-ktile", 2048, 768, 64, 3},
    {Kind::Quant, qkv::QType::Q4_K, "q4_k-kpanel", 2048, 768, 64, 4},
    {Kind::Quant, qkv::QType::Q5_K, "q5_k-kpanel", 2048, 768, 64, 4},
    {Kind::Quant, qkv::QType::Q6_K, "q6_k-kpanel", 2048, 768, 64, 4},
    {Kind::Quant, qkv::QType::Q8_0, "q8_0-dram", 131072, 2048, 1},
    {Kind::Quant, qkv::QType::Q4_0, "q4_0-dram", 131072, 2048, 1},
    {Kind::Quant, qkv::QType::Q4_K, "q4_k-dram", 131072, 2048, 1},
    {Kind::Quant, qkv::QType::Q6_K, "q6_k-dram", 131072, 2048, 1},
    {Kind::Layers, qkv::QType::Q4_0, "q4_0-layers", 2048, 5632, 4},
    {Kind::Layers, qkv::QType::Q8_0, "q8_0-layers", 2048, 5632, 4},
    {Kind::F32, qkv::QType::F32, "f32", 2048, 768, 64},
    {Kind::F32, qkv::QType::F32, "f32", 768, 2048, 64},
    {Kind::F32, qkv::QType::F32, "f32-r4", 2048, 768, 64, 4},
    {Kind::F32, qkv::QType::F32, "f32-r4", 768, 2048, 64, 4},
    {Kind::F32, qkv::QType::F32, "f32-r6", 2048, 768, 64, 6},
    {Kind::F32, qkv::QType::F32, "f32-r6", 768, 2048, 64, 6},
    {Kind::F32, qkv::QType::F32, "f32-dec", 2048, 768, 1},
    {Kind::F32, qkv::QType::F32, "f32-dec-dram", 65536, 768, 1},
    {Kind::Attention, qkv::QType::F32, "attn-1l", 320, 768, 1},
    {Kind::Attention, qkv::QType::F32, "attn-12l", 320, 768, 12},
};
constexpr int kHeadDim = 64;
constexpr int kNumCases = sizeof kCases / sizeof kCases[0];

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void quantize(qkv::QType t, const float* x, void* dst, int n) {
  switch (t) {
    case qkv::QType::Q8_0: return qkv::quantize_row_q8_0(x, dst, n);
    case qkv::QType::Q4_0: return qkv::quantize_row_q4_0(x, dst, n);
    case qkv::QType::Q4_K: return qkv::quantize_row_q4_k(x, dst, n);
    default: return qkv::quantize_row_q6_k(x, dst, n);
  }
}

volatile float g_sink;

// Seconds per call of f, the best of 3 timings of a loop of at least 10 ms.
template <class F>
double time_best(F once) {
  once();
  int iters = 1;
  for (;;) {
    const double t0 = now();
    for (int i = 0; i < iters; i++) once();
    if (now() - t0 > 0.01) break;
    iters *= 2;
  }
  double best = 1e30;
  for (int rep = 0; rep < 3; rep++) {
    const double t0 = now();
    for (int i = 0; i < iters; i++) once();
    best = std::min(best, (now() - t0) / iters);
  }
  return best;
}

double run_attention(const Case& k) {
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int layers = k.T, n_kv = k.d, width = k.n;
  std::vector<float> K((size_t)layers * n_kv * width), V(K.size()), q(width), out(width);
  for (float& v : K) v = nd(rng);
  for (float& v : V) v = nd(rng);
  for (float& v : q) v = nd(rng);
  qkv::AttentionArgs a;
  a.n_q = 1;
  a.n_kv = n_kv;
  a.n_heads = a.n_kv_heads = width / kHeadDim;
  a.head_dim = kHeadDim;
  a.q = q.data();
  a.q_stride = a.kv_stride = a.out_stride = width;
  a.out = out.data();
  a.scale = 0.125f;
  a.q_pos0 = n_kv - 1;
  return time_best([&] {
    for (int l = 0; l < layers; l++) {
      a.k = K.data() + (size_t)l * n_kv * width;
      a.v = V.data() + (size_t)l * n_kv * width;
      qkv::attention_flash(a, 0, a.n_heads);
    }
    g_sink = out[0];
  });
}

// The f32 product as prefill runs it (matmul_f32_simd: the tokens packed into tiles, row-major
// weights), or as decode does (T = 1: matvec_f32_simd).
double run_f32(const Case& k) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> W((size_t)k.d * k.n), X((size_t)k.T * k.n), Y((size_t)k.T * k.d);
  for (float& v : W) v = nd(rng);
  for (float& v : X) v = nd(rng);
  auto once = [&] {
    qkv::matmul_f32_simd(Y.data(), k.d, X.data(), k.n, W.data(), k.T, k.n, 0, k.d);
    g_sink = Y[0];
  };
  // The build's choice: what a model runs after its first products (the trial ends by itself;
  // decode, T = 1, has none).
  while (k.T > 1 && qkv::matmul_f32_tile_rows() == 0) once();
  const int kept = qkv::matmul_f32_tile_rows();  // restored after a forced height
  if (k.tile) qkv::matmul_f32_force_tile_rows(k.tile);
  const double s = time_best(once);
  if (k.tile) qkv::matmul_f32_force_tile_rows(kept);
  return s;
}

// A stored (rows, cols) matrix of type t: 64 distinct random rows repeated, so a big matrix is
// out of cache without quantizing all of its rows.
std::vector<uint8_t> stored_matrix(qkv::QType t, int rows, int cols, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 0.05f);
  const size_t rb = qkv::qtype_row_bytes(t, cols);
  std::vector<float> row(cols);
  std::vector<uint8_t> W(rb * rows);
  for (int r = 0; r < 64 && r < rows; r++) {
    for (float& v : row) v = nd(rng);
    quantize(t, row.data(), W.data() + r * rb, cols);
  }
  for (int r = 64; r < rows; r++) std::copy_n(W.begin() + (r % 64) * rb, rb, W.begin() + r * rb);
  return W;
}

// Decode through T llama layers of width d and hidden n (q, k, v, o: d x d; gate, up: n x d;
// down: d x n), each matrix its own buffer, as a model's decode step reads them.
double run_layers(const Case& k) {
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  struct M {
    int rows, cols;
    std::vector<uint8_t> w;
    bool finite;
  };
  std::vector<M> ms;
  for (int l = 0; l < k.T; l++) {
    for (int i = 0; i < 4; i++) ms.push_back({k.d, k.d, {}, false});
    for (int i = 0; i < 2; i++) ms.push_back({k.n, k.d, {}, false});
    ms.push_back({k.d, k.n, {}, false});
  }
  for (M& m : ms) {
    m.w = stored_matrix(k.type, m.rows, m.cols, rng);
    m.finite = qkv::qdot_scales_finite(k.type, m.w.data(), m.rows, m.cols);
  }
  std::vector<float> X(std::max(k.d, k.n)), Y(std::max(k.d, k.n));
  for (float& v : X) v = 20.0f * nd(rng);
  std::vector<qkv::BlockQ8A> xq(std::max(k.d, k.n) / 32);
  return time_best([&] {
    for (const M& m : ms) {
      qkv::quantize_act_q8_simd(X.data(), xq.data(), m.cols);
      qkv::matmul_q8_simd(k.type, Y.data(), m.rows, xq.data(), m.w.data(), 1, m.cols, 0, m.rows, m.finite);
    }
    g_sink = Y[0];
  });
}

}  // namespace

extern "C" {

int n_cases() { return kNumCases; }
const char* case_type(int c) { return kCases[c].type_name; }
int case_d(int c) { return kCases[c].d; }
int case_n(int c) { return kCases[c].n; }
int case_tokens(int c) { return kCases[c].kind == Kind::Attention || kCases[c].kind == Kind::Layers ? 1 : kCases[c].T; }
// Attention: q.k and p v, 2 flops each per cached position and element, per layer.
double case_flops(int c) {
  const Case& k = kCases[c];
  if (k.kind == Kind::Layers) return 2.0 * k.T * (4.0 * k.d * k.d + 3.0 * k.d * k.n);
  return (k.kind == Kind::Attention ? 4.0 : 2.0) * k.T * k.d * k.n;
}

// Seconds per call of case c: the best of 3 timings of a loop of at least 10 ms.
double run_case(int c) {
  if (c < 0 || c >= kNumCases) return -1.0;
  const Case k = kCases[c];
  if (k.kind == Kind::Attention) return run_attention(k);
  if (k.kind == Kind::F32) return run_f32(k);
  if (k.kind == Kind::Layers) return run_layers(k);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  const std::vector<uint8_t> W = stored_matrix(k.type, k.d, k.n, rng);
  std::vector<float> X((size_t)k.T * k.n), Y((size_t)k.T * k.d);
  for (float& v : X) v = 20.0f * nd(rng);
  std::vector<qkv::BlockQ8A> xq((size_t)k.T * k.n / 32);
  const bool finite = qkv::qdot_scales_finite(k.type, W.data(), k.d, k.n);  // as the loader checks
  // As ProductInput multiplies them, or the super-block kernel kept (it is the reference kernel
  // in the builds that do not use it).
  if (qkv::qtype_k_super(k.type) && (k.tile >= 3 || (k.tile == 0 && qkv::qdot_k_super_blocks()))) {
    std::vector<qkv::BlockQ8K> xk((size_t)k.T * k.n / 256);
    qkv::qdot_force_prefill_kernel(k.tile >= 3 ? k.tile - 3 : -1);
    const double s = time_best([&] {
      for (int i = 0; i < k.T; i++)
        qkv::quantize_act_q8k_simd(X.data() + (size_t)i * k.n, xk.data() + (size_t)i * k.n / 256, k.n);
      qkv::matmul_q8k_simd(k.type, Y.data(), k.d, xk.data(), W.data(), k.T, k.n, 0, k.d);
      g_sink = Y[0];
    });
    qkv::qdot_force_prefill_kernel(-1);
    return s;
  }
  auto once = [&] {
    for (int i = 0; i < k.T; i++)
      qkv::quantize_act_q8_simd(X.data() + (size_t)i * k.n, xq.data() + (size_t)i * k.n / 32, k.n);
    qkv::matmul_q8_simd(k.type, Y.data(), k.d, xq.data(), W.data(), k.T, k.n, 0, k.d, finite);
    g_sink = Y[0];
  };
  qkv::qdot_force_prefill_kernel(k.tile - 1);
  const double s = time_best(once);
  qkv::qdot_force_prefill_kernel(-1);
  return s;
}

}  // extern "C"

int main() { return 0; }
