// qkv_bench: how fast the engine is on this machine, and how close decode gets to the
// memory-bandwidth limit.
//
// What it measures (plain-text tables on stdout):
//   1. Build: compiler flags, xsimd instruction set, SIMD lanes, thread counts, one core's FMA
//      peak, and a CPU check (N threads of pure compute vs 1, also repeated at the end): on a
//      machine shared with other work, fork-join figures collapse and it prints a WARNING.
//   2. Memory read bandwidth: an xsimd sum over a 1 GiB float buffer (256 MiB with --quick),
//      best of several passes, with 1 thread and with N threads (ThreadPool::parallel_for).
//   3. Kernels: matvec_f32_simd (GFLOP/s and GB/s of weights streamed), matmul_f32_simd at
//      T=1 (the decode path) and T=64 tokens, the stored-type products (f16 through
//      matmul_q_simd, every block type through matmul_q8_simd with the activation quantization
//      included), attention_flash (prefill and decode shapes),
//      and the fork-join cost of one empty parallel_for.
//   4. End to end, through Transformer::forward: prefill tokens/s (the whole prompt in one
//      forward call) and decode tokens/s (one token per call), with 1 thread and N threads, on
//      the shared llama2.c test models and on a random-weight model of llama2.c's 110M shape
//      built in memory and loaded through VectorBlob + load_llama2c (the real-file path).
//      Decode is compared with its bandwidth bound: every weight byte is read once per token,
//      so tokens/s <= bandwidth / model bytes. The project's target is >= 70% of that bound.
//
// Run (from the project root, so ../shared/models/ resolves):
//   cmake -S . -B build-bench -DBUILD_TESTING=OFF && cmake --build build-bench --target qkv_bench
//   ./build-bench/qkv_bench [--quick] [--threads N] [--model PATH]...
//     --quick      skip the 110M model and the big buffers (a smoke run of a few seconds)
//     --no-types   skip the 110M model's stored-type variants
//     --types LIST the 110M model's variants to run, comma-separated (default f16,q8_0,q4_0,q4_k;
//                  f32 always runs; q4_k is quantized in memory, the others go through GGUF)
//     --no-f32     skip the 110M model's f32 run (its variants still run)
//     --threads N  the multi-thread figures use N threads (default: all hardware threads)
//     --model PATH benchmark this llama2.c checkpoint instead of the shared models (repeatable)
// Only std::chrono and the project's own wrappers (map_file) touch the platform, so the same
// file builds under Emscripten (where the pool runs inline with one thread).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "common.h"
#include "formats/file.h"
#include "formats/llama2c.h"
#include "formats/gguf_writer.h"
#include "formats/loader.h"
#include "tokenizer/tokenizer.h"
#include "train/rng.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/qdot.h"
#include "kernels/quant.h"
#include "kernels/simd.h"
#include "model/transformer.h"
#include "threadpool.h"

#ifndef QKV_BUILD_FLAGS
#define QKV_BUILD_FLAGS "(unknown: QKV_BUILD_FLAGS not defined by the build)"
#endif

namespace {

using Clock = std::chrono::steady_clock;

double now_s() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// Keeps results alive so the optimiser cannot drop the work that produced them.
volatile float g_sink = 0.0f;

// Best seconds per call of f: each sample repeats f until it has run >= min_sample seconds.
double best_time(const std::function<void()>& f, int samples, double min_sample) {
  f();  // warm-up: page faults, caches, thread wake-up
  double best = 1e30;
  for (int s = 0; s < samples; s++) {
    int iters = 0;
    double t0 = now_s(), t;
    do {
      f();
      iters++;
      t = now_s() - t0;
    } while (t < min_sample);
    best = std::min(best, t / iters);
  }
  return best;
}

// Cheap deterministic random numbers: the trainer's xorshift64* stream (train/rng.h), with a
// fast approximate normal for filling large random models.
struct XorShift {
  qkv::Rng r;
  explicit XorShift(uint64_t seed) : r(seed) {}
  uint64_t next() { return r.next(); }
  // Approximately N(0, sigma): Irwin-Hall sum of four 16-bit uniforms, rescaled to unit variance.
  float normal(float sigma) {
    uint64_t x = next();
    float u = (float)(x & 0xFFFF) + (float)((x >> 16) & 0xFFFF) + (float)((x >> 32) & 0xFFFF) + (float)(x >> 48);
    // Sum of 4 U(0, 65536): mean 131070, variance 4 * 65536^2 / 12.
    return (u - 131070.0f) * (sigma * 1.7320508f / 65536.0f);
  }
  float uniform() { return (float)(next() >> 40) * (1.0f / 16777216.0f); }
};

std::vector<float> random_floats(size_t n, uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(n);
  XorShift r(seed);
  for (auto& x : v) x = (r.uniform() * 2.0f - 1.0f) * scale;
  return v;
}

// ---- memory bandwidth ---------------------------------------------------------------------

float sum_simd(const float* p, size_t n) {
  using qkv::fbatch;
  constexpr size_t L = qkv::kLanes;
  fbatch a0(0.0f), a1(0.0f), a2(0.0f), a3(0.0f);
  size_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    a0 += fbatch::load_unaligned(p + i);
    a1 += fbatch::load_unaligned(p + i + L);
    a2 += fbatch::load_unaligned(p + i + 2 * L);
    a3 += fbatch::load_unaligned(p + i + 3 * L);
  }
  float s = xsimd::reduce_add((a0 + a1) + (a2 + a3));
  for (; i < n; i++) s += p[i];
  return s;
}

// Best read bandwidth in bytes/s of a full pass over buf with the pool's threads.
double read_bandwidth(const std::vector<float>& buf, qkv::ThreadPool& pool, int passes) {
  constexpr size_t kBlock = 1 << 18;  // 1 MiB of floats per parallel_for item
  const size_t n = buf.size();
  const int blocks = (int)((n + kBlock - 1) / kBlock);
  std::vector<float> partial((size_t)pool.size() * 16, 0.0f);  // one cache line per thread
  auto pass = [&] {
    pool.parallel_for(blocks, 1, [&](int b0, int b1, int t) {
      size_t i0 = (size_t)b0 * kBlock, i1 = std::min(n, (size_t)b1 * kBlock);
      partial[(size_t)t * 16] += sum_simd(buf.data() + i0, i1 - i0);
    });
  };
  pass();  // warm-up (threads awake, TLB)
  double best = 1e30;
  for (int r = 0; r < passes; r++) {
    double t0 = now_s();
    pass();
    best = std::min(best, now_s() - t0);
  }
  float s = 0.0f;
  for (float x : partial) s += x;
  g_sink = s;
  return (double)n * sizeof(float) / best;
}

// ---- CPU availability ----------------------------------------------------------------------

// Twelve independent register-only FMA chains (no memory traffic): enough to fill the FMA
// pipes, so its rate is the core's f32 FMA peak and its time depends only on the core it gets.
constexpr int kSpinChains = 12;
float spin_compute(int iters) {
  using qkv::fbatch;
  fbatch a[kSpinChains];
  for (int j = 0; j < kSpinChains; j++) a[j] = fbatch(1.0f + j);
  const fbatch m(0.999999f), k(1e-7f);
  for (int i = 0; i < iters; i++)
    for (int j = 0; j < kSpinChains; j++) a[j] = xsimd::fma(a[j], m, k);
  fbatch s(0.0f);
  for (int j = 0; j < kSpinChains; j++) s += a[j];
  return xsimd::reduce_add(s);
}

struct CpuCheck {
  double peak_gflops = 0.0;  // one thread
  double efficiency = 1.0;   // N threads vs 1 on the same per-thread work
};

// FMA peak of one core, and the pool's parallel efficiency on pure compute: 1.0 when every
// thread gets a core of its own; much less when other processes share the cores (then the
// multi-thread figures mean little).
CpuCheck cpu_check(qkv::ThreadPool& pool) {
  const int iters = 1000000;
  auto one = [&] { g_sink = spin_compute(iters); };
  auto all = [&] { pool.parallel_for(pool.size(), 1, [&](int, int, int) { g_sink = spin_compute(iters); }); };
  CpuCheck c;
  double t1 = best_time(one, 5, 0.0);
  c.peak_gflops = 2.0 * kSpinChains * qkv::kLanes * (double)iters / t1 * 1e-9;
  if (pool.size() > 1) c.efficiency = t1 / best_time(all, 5, 0.0);
  return c;
}

// ---- the random 110M-shape model -----------------------------------------------------------

// A llama2.c legacy checkpoint (7-int32 header, f32 weights in llama2.c order, no freq_cis
// block, shared classifier when vocab > 0) filled with N(0, 0.02) weights. RMSNorm weights are
// 1.0, as in a freshly initialised llama2.c model, so activations keep a realistic scale
// (tiny norm weights would drive activations towards denormals and distort the timing).
std::vector<uint8_t> make_llama2c_checkpoint(int dim, int hidden, int layers, int heads, int kv_heads, int vocab,
                                             int seq_len, uint64_t seed) {
  const uint64_t d = dim, h = hidden, L = layers, V = vocab, kvd = (uint64_t)dim / heads * kv_heads;
  struct Part {
    uint64_t n;
    bool ones;
  };
  const Part parts[] = {
      {V * d, false},        // token_embedding
      {L * d, true},         // rms_att
      {L * d * d, false},    // wq
      {L * kvd * d, false},  // wk
      {L * kvd * d, false},  // wv
      {L * d * d, false},    // wo
      {L * d, true},         // rms_ffn
      {L * h * d, false},    // w1
      {L * d * h, false},    // w2
      {L * h * d, false},    // w3
      {d, true},             // rms_final
  };
  uint64_t floats = 0;
  for (const Part& p : parts) floats += p.n;
  std::vector<uint8_t> bytes(28 + floats * 4);
  const int32_t header[7] = {dim, hidden, layers, heads, kv_heads, vocab, seq_len};
  std::memcpy(bytes.data(), header, sizeof header);
  uint8_t* out = bytes.data() + 28;
  XorShift rng(seed);
  constexpr size_t kChunk = 4096;
  float tmp[kChunk];
  for (const Part& p : parts) {
    for (uint64_t done = 0; done < p.n;) {
      size_t m = (size_t)std::min<uint64_t>(kChunk, p.n - done);
      for (size_t i = 0; i < m; i++) tmp[i] = p.ones ? 1.0f : rng.normal(0.02f);
      std::memcpy(out, tmp, m * 4);
      out += m * 4;
      done += m;
    }
  }
  return bytes;
}

// One row of n floats stored as `type` (the types the benchmark uses).
void quantize_row(qkv::QType type, const float* x, void* dst, int n) {
  switch (type) {
    case qkv::QType::F16:
      for (int i = 0; i < n; i++) {
        const uint16_t h = qkv::f32_to_f16(x[i]);
        std::memcpy(static_cast<uint8_t*>(dst) + 2 * i, &h, 2);
      }
      return;
    case qkv::QType::Q8_0: return qkv::quantize_row_q8_0(x, dst, n);
    case qkv::QType::Q4_0: return qkv::quantize_row_q4_0(x, dst, n);
    case qkv::QType::Q4_1: return qkv::quantize_row_q4_1(x, dst, n);
    case qkv::QType::Q5_0: return qkv::quantize_row_q5_0(x, dst, n);
    case qkv::QType::Q5_1: return qkv::quantize_row_q5_1(x, dst, n);
    case qkv::QType::Q4_K: return qkv::quantize_row_q4_k(x, dst, n);
    case qkv::QType::Q5_K: return qkv::quantize_row_q5_k(x, dst, n);
    case qkv::QType::Q6_K: return qkv::quantize_row_q6_k(x, dst, n);
    default: qkv::fail(qkv::ErrorCode::Unsupported, "the benchmark does not quantize to this type");
  }
}

// The f32 model's weight matrices quantized to a K type in one in-memory blob (the norms stay
// the f32 model's, which outlives the copy). As llama2c_to_gguf stores them: every matrix and
// the (tied) classifier take the type.
qkv::LoadedModel requantized(const qkv::LoadedModel& src, qkv::QType type) {
  qkv::LoadedModel m = src;
  std::vector<qkv::Tensor*> ts = {&m.weights.tok_embed};
  for (auto& L : m.weights.layers)
    for (qkv::Tensor* t : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_down, &L.w_up}) ts.push_back(t);
  if (!m.config.tied_classifier) ts.push_back(&m.weights.classifier);
  std::vector<size_t> offset;
  size_t total = 0;
  for (qkv::Tensor* t : ts) {
    offset.push_back(total);
    total += (size_t)t->rows * qkv::qtype_row_bytes(type, (int)t->cols);
  }
  std::vector<uint8_t> bytes(total);
  for (size_t i = 0; i < ts.size(); i++) {
    qkv::Tensor& t = *ts[i];
    const size_t rb = qkv::qtype_row_bytes(type, (int)t.cols);
    for (int64_t r = 0; r < t.rows; r++) {
      const float* row = t.f32() + r * t.cols;
      uint8_t* dst = bytes.data() + offset[i] + (size_t)r * rb;
      quantize_row(type, row, dst, (int)t.cols);
    }
  }
  auto blob = std::make_shared<qkv::VectorBlob>(std::move(bytes));  // the vector's buffer moves, not its bytes
  for (size_t i = 0; i < ts.size(); i++) {
    ts[i]->type = type;
    ts[i]->data = blob->data() + offset[i];
  }
  if (m.config.tied_classifier) m.weights.classifier = m.weights.tok_embed;
  m.storage = blob;
  return m;
}

// ---- printing helpers ----------------------------------------------------------------------

void section(const char* title) { std::printf("\n== %s\n", title); }

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string time_str(double s) {
  if (s < 1e-3) return fmt("%.1f us", s * 1e6);
  if (s < 1.0) return fmt("%.2f ms", s * 1e3);
  return fmt("%.3f s", s);
}

struct Options {
  bool quick = false;
  int threads = 0;
  std::vector<std::string> models;
  std::vector<std::string> types = {"f16", "q8_0", "q4_0", "q4_k"};  // stored-type variants of the 110M model
  bool f32 = true;
};

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= argc) qkv::fail(qkv::ErrorCode::BadArgument, std::string(name) + " needs a value");
      return argv[++i];
    };
    if (a == "--quick") {
      o.quick = true;
    } else if (a == "--threads") {
      std::string v = value("--threads");
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 256)
        qkv::fail(qkv::ErrorCode::BadArgument, "--threads wants a number from 1 to 256, got '" + v + "'");
      o.threads = (int)n;
    } else if (a == "--model") {
      o.models.push_back(value("--model"));
    } else if (a == "--no-types") {
      o.types.clear();
    } else if (a == "--types") {
      o.types.clear();
      std::string v = value("--types") + ",";
      for (size_t at = 0, comma; (comma = v.find(',', at)) != std::string::npos; at = comma + 1)
        if (comma > at) o.types.push_back(v.substr(at, comma - at));
      for (const std::string& t : o.types)
        if (t != "q4_k") qkv::parse_qtype(t);  // unknown names fail here, before any work
    } else if (a == "--no-f32") {
      o.f32 = false;
    } else if (a == "-h" || a == "--help") {
      std::printf(
          "usage: qkv_bench [--quick] [--threads N] [--model PATH]... [--types f16,q8_0,q4_0,q4_k] [--no-f32]\n");
      std::exit(0);
    } else {
      qkv::fail(qkv::ErrorCode::BadArgument,
                "unknown argument '" + a + "'; usage: qkv_bench [--quick] [--threads N] [--model PATH]...");
    }
  }
  return o;
}

// ---- kernels -------------------------------------------------------------------------------

void bench_kernels(const Options& opt, const std::vector<std::shared_ptr<qkv::ThreadPool>>& pools) {
  const double kMin = opt.quick ? 0.02 : 0.05;

  section("kernels: matvec_f32_simd, 1 thread (y = W x, W streamed once per call)");
  std::printf("  %-12s %10s %10s %10s\n", "d x n", "time", "GFLOP/s", "GB/s");
  {
    std::vector<int> ds = {768, 2048};
    if (!opt.quick) ds.push_back(32000);
    const int n = 768;
    for (int d : ds) {
      std::vector<float> W = random_floats((size_t)d * n, 11 + d, 0.05f), x = random_floats(n, 7), y(d);
      double t = best_time(
          [&] {
            qkv::matvec_f32_simd(y.data(), W.data(), x.data(), n, 0, d);
            g_sink = y[0];
          },
          5, kMin);
      double flops = 2.0 * d * n, bytes = 4.0 * d * n;
      std::printf("  %-12s %10s %10.1f %10.1f\n", (std::to_string(d) + "x" + std::to_string(n)).c_str(),
                  time_str(t).c_str(), flops / t * 1e-9, bytes / t * 1e-9);
    }
  }

  section("kernels: matmul_f32_simd, rows split over the pool as Transformer does (grain 16)");
  std::printf("  %-12s %4s %8s %10s %10s %10s\n", "d x n", "T", "threads", "time", "GFLOP/s", "GB/s(W)");
  {
    struct Shape {
      int d, T;
    };
    std::vector<Shape> shapes = {{768, 1}, {2048, 1}};
    if (!opt.quick) shapes.push_back({32000, 1});
    shapes.push_back({768, 64});
    shapes.push_back({2048, 64});
    const int n = 768;
    for (const Shape& s : shapes) {
      std::vector<float> W = random_floats((size_t)s.d * n, 13 + s.d, 0.05f), X = random_floats((size_t)s.T * n, 3),
                         Y((size_t)s.T * s.d);
      for (const auto& pool : pools) {
        double t = best_time(
            [&] {
              pool->parallel_for(s.d, 16, [&](int r0, int r1, int) {
                qkv::matmul_f32_simd(Y.data(), s.d, X.data(), n, W.data(), s.T, n, r0, r1);
              });
              g_sink = Y[0];
            },
            5, kMin);
        double flops = 2.0 * s.T * s.d * n, bytes = 4.0 * s.d * n;
        std::printf("  %-12s %4d %8d %10s %10.1f %10.1f\n", (std::to_string(s.d) + "x" + std::to_string(n)).c_str(),
                    s.T, pool->size(), time_str(t).c_str(), flops / t * 1e-9, bytes / t * 1e-9);
      }
    }
  }

  section(
      "kernels: stored-type matmul, 1 thread (block types: activations quantized once per call, "
      "included; f16: decoded in registers)");
  std::printf("  %-6s %-12s %4s %10s %10s %10s\n", "type", "d x n", "T", "time", "GFLOP/s", "GB/s(W)");
  {
    const int n = 768, d = 2048;
    const std::vector<float> Wf = random_floats((size_t)d * n, 17, 0.05f);
    for (qkv::QType type : {qkv::QType::F16, qkv::QType::Q8_0, qkv::QType::Q4_0, qkv::QType::Q4_1, qkv::QType::Q5_0,
                            qkv::QType::Q5_1, qkv::QType::Q4_K, qkv::QType::Q5_K, qkv::QType::Q6_K}) {
      const size_t rb = qkv::qtype_row_bytes(type, n);
      std::vector<uint8_t> W(rb * d);
      for (int r = 0; r < d; r++) quantize_row(type, Wf.data() + (size_t)r * n, W.data() + r * rb, n);
      for (int T : {1, 64}) {
        std::vector<float> X = random_floats((size_t)T * n, 5), Y((size_t)T * d), scratch((size_t)qkv::kQPanelRows * n);
        std::vector<qkv::BlockQ8A> xq((size_t)T * n / 32);
        const bool finite = qkv::qdot_uses_finite_scales() && qkv::qdot_scales_finite(type, W.data(), d, n);
        double t = best_time(
            [&] {
              if (qkv::qtype_int_dot(type)) {
                for (int i = 0; i < T; i++)
                  qkv::quantize_act_q8_simd(X.data() + (size_t)i * n, xq.data() + (size_t)i * n / 32, n);
                qkv::matmul_q8_simd(type, Y.data(), d, xq.data(), W.data(), T, n, 0, d, finite);
              } else {
                qkv::matmul_q_simd(type, Y.data(), d, X.data(), n, W.data(), T, n, 0, d, scratch.data());
              }
              g_sink = Y[0];
            },
            5, kMin);
        const char* names[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"};
        std::printf("  %-6s %-12s %4d %10s %10.1f %10.1f\n", names[(int)type],
                    (std::to_string(d) + "x" + std::to_string(n)).c_str(), T, time_str(t).c_str(),
                    2.0 * T * d * n / t * 1e-9, (double)W.size() / t * 1e-9);
      }
    }
  }

  section("kernels: attention_flash, 12 heads x head_dim 64, heads split over the pool");
  std::printf("  %-26s %8s %10s\n", "case", "threads", "time");
  {
    const int H = 12, hd = 64, qd = H * hd;
    struct Case {
      const char* name;
      int n_q, n_kv;
    };
    const Case cases[] = {{"prefill n=256 (causal)", 256, 256},
                          {"prefill n=512 (causal)", 512, 512},
                          {"decode n_kv=512", 1, 512},
                          {"decode n_kv=2048", 1, 2048}};
    for (const Case& c : cases) {
      std::vector<float> q = random_floats((size_t)c.n_q * qd, 21), k = random_floats((size_t)c.n_kv * qd, 22),
                         v = random_floats((size_t)c.n_kv * qd, 23), o((size_t)c.n_q * qd);
      qkv::AttentionArgs a;
      a.n_q = c.n_q;
      a.n_kv = c.n_kv;
      a.n_heads = H;
      a.n_kv_heads = H;
      a.head_dim = hd;
      a.q = q.data();
      a.q_stride = qd;
      a.k = k.data();
      a.v = v.data();
      a.kv_stride = qd;
      a.out = o.data();
      a.out_stride = qd;
      a.scale = 1.0f / std::sqrt((float)hd);
      a.q_pos0 = c.n_kv - c.n_q;
      a.causal = true;
      for (const auto& pool : pools) {
        double t = best_time(
            [&] {
              pool->parallel_for(H, 1, [&](int h0, int h1, int) { qkv::attention_flash(a, h0, h1); });
              g_sink = o[0];
            },
            5, kMin);
        std::printf("  %-26s %8d %10s\n", c.name, pool->size(), time_str(t).c_str());
      }
    }
  }

  if (pools.size() > 1) section("thread pool: one empty parallel_for (decode runs ~8 per layer + 1 per token)");
  for (const auto& pool : pools) {
    if (pool->size() == 1) continue;
    int n = pool->size() * 16;
    double t = best_time([&] { pool->parallel_for(n, 16, [](int, int, int) {}); }, 5, kMin);
    std::printf("  threads %-3d %10s per call\n", pool->size(), time_str(t).c_str());
  }
}

// ---- end to end ----------------------------------------------------------------------------

struct Bandwidth {
  int threads;
  double bytes_per_s;
};

double bandwidth_for(const std::vector<Bandwidth>& bw, int threads) {
  for (const Bandwidth& b : bw)
    if (b.threads == threads) return b.bytes_per_s;
  return bw.empty() ? 0.0 : bw.back().bytes_per_s;
}

void bench_model(const std::string& name, const qkv::LoadedModel& model,
                 const std::vector<std::shared_ptr<qkv::ThreadPool>>& pools, const std::vector<Bandwidth>& bw,
                 bool big) {
  const qkv::ModelConfig& c = model.config;
  const uint64_t bytes = model.storage ? model.storage->size() : 0;
  const int prompt = std::min(128, c.seq_len - 32);
  const int decode = std::min(32, c.seq_len - std::max(prompt, 1));
  if (prompt < 1 || decode < 1) {
    std::printf("  %s: seq_len %d is too short to benchmark\n", name.c_str(), c.seq_len);
    return;
  }
  std::printf("\n  %s: %s, %s\n", name.c_str(), c.describe().c_str(), qkv::format_bytes(bytes).c_str());
  std::printf("  prompt %d tokens in one forward, then %d decode steps of one token\n", prompt, decode);
  std::printf("  %7s %12s %12s %12s %12s %10s\n", "threads", "prefill t/s", "decode t/s", "ms/token", "bound t/s",
              "of bound");

  std::vector<int> tokens(prompt + decode);
  XorShift r(1234);
  for (int& t : tokens) t = 1 + (int)(r.next() % (uint64_t)(c.vocab_size - 1));

  const int prefill_reps = big ? 3 : 5, decode_reps = big ? 3 : 5;
  for (const auto& pool : pools) {
    qkv::Transformer tf(model, 0, pool);
    tf.forward(tokens.data(), prompt, 0);  // warm-up: pages the weights in, wakes the threads
    double best_prefill = 1e30;
    for (int i = 0; i < prefill_reps; i++) {
      double t0 = now_s();
      const float* lg = tf.forward(tokens.data(), prompt, 0);
      best_prefill = std::min(best_prefill, now_s() - t0);
      g_sink = lg[0];
    }
    double best_decode = 1e30;
    for (int i = 0; i < decode_reps; i++) {
      double t0 = now_s();
      for (int s = 0; s < decode; s++) g_sink = tf.forward(&tokens[prompt + s], 1, prompt + s)[0];
      best_decode = std::min(best_decode, now_s() - t0);
    }
    const double bwt = bandwidth_for(bw, pool->size());
    const double decode_tps = decode / best_decode, bound = bwt > 0 && bytes > 0 ? bwt / (double)bytes : 0.0;
    std::string frac = bound > 0 ? fmt("%.0f%%", 100.0 * decode_tps / bound) : "-";
    const char* note = "";
    if (bytes < (64ull << 20)) note = "  (weights fit in cache: bound not meaningful)";
    else if (bound > 0 && decode_tps < 0.7 * bound) note = "  BELOW 70% TARGET";
    std::printf("  %7d %12.1f %12.1f %12.3f %12.1f %10s%s\n", pool->size(), prompt / best_prefill, decode_tps,
                1e3 * best_decode / decode, bound, frac.c_str(), note);
  }
}

int run(int argc, char** argv) {
  const Options opt = parse_args(argc, argv);
  const double t_start = now_s();
  const int hw = qkv::ThreadPool::hardware_threads();
  const int nt = opt.threads > 0 ? opt.threads : hw;
  std::vector<std::shared_ptr<qkv::ThreadPool>> pools;
  pools.push_back(std::make_shared<qkv::ThreadPool>(1));
  if (nt > 1) pools.push_back(std::make_shared<qkv::ThreadPool>(nt));

  section("build");
  std::printf("  flags       %s\n", QKV_BUILD_FLAGS);
  std::printf("  simd        %s, %d f32 lanes (%d-bit)\n", qkv::simd_arch_name(), qkv::kLanes, qkv::kLanes * 32);
  std::printf("  int dots    %s (quantized weights x 8-bit activations)\n", qkv::qdot_impl_name());
  std::printf("  threads     %s (hardware: %d)%s\n", nt > 1 ? ("1 and " + std::to_string(nt)).c_str() : "1", hw,
              opt.quick ? "   [--quick]" : "");

  {
    CpuCheck cc = cpu_check(*pools.back());
    std::printf("  fma peak    %.1f GFLOP/s on one thread (register-only FMA chains)\n", cc.peak_gflops);
    if (pools.back()->size() > 1)
      std::printf("  cpu check   %d threads of pure compute run at %.0f%% of linear speed-up%s\n", pools.back()->size(),
                  100.0 * cc.efficiency,
                  (cc.efficiency < 0.85 || cc.efficiency > 1.15)
                      ? "  WARNING: cores shared with other load; multi-thread figures unreliable"
                      : "");
  }

  // 2. Bandwidth.
  std::vector<Bandwidth> bw;
  {
    const size_t bytes = opt.quick ? (256ull << 20) : (1ull << 30);
    section("memory read bandwidth (xsimd sum over a float buffer, best pass)");
    std::vector<float> buf;
    try {
      buf.assign(bytes / sizeof(float), 1.0f);
    } catch (const std::bad_alloc&) {
      qkv::fail(qkv::ErrorCode::OutOfMemory, "cannot allocate the " + qkv::format_bytes(bytes) + " bandwidth buffer");
    }
    std::printf("  buffer %s\n", qkv::format_bytes(bytes).c_str());
    for (const auto& pool : pools) {
      double b = read_bandwidth(buf, *pool, opt.quick ? 3 : 5);
      bw.push_back({pool->size(), b});
      std::printf("  threads %-3d %8.1f GB/s\n", pool->size(), b * 1e-9);
    }
  }

  // 3. Kernels.
  bench_kernels(opt, pools);

  // 4. End to end.
  section("end to end: Transformer::forward (bound = bandwidth(threads) / model bytes per decoded token)");
  std::vector<std::string> paths = opt.models;
  if (paths.empty()) paths = {"../shared/models/stories260K.bin", "../shared/models/aidreams260K.bin"};
  for (const std::string& path : paths) {
    std::shared_ptr<const qkv::Blob> blob;
    try {
      blob = qkv::map_file(path);
    } catch (const qkv::Error& e) {
      if (!opt.models.empty()) throw;  // a model the user named must exist
      std::printf("\n  %s: skipped (%s)\n", path.c_str(), e.what());
      continue;
    }
    qkv::LoadedModel m = qkv::load_model(blob);
    std::string name = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
    bench_model(name, m, pools, bw, m.storage->size() > (64ull << 20));
  }
  if (!opt.quick) {
    double t0 = now_s();
    std::vector<uint8_t> bytes = make_llama2c_checkpoint(768, 2048, 12, 12, 12, 32000, 1024, 42);
    double t_gen = now_s() - t0;
    auto blob = std::make_shared<qkv::VectorBlob>(std::move(bytes));
    qkv::LoadedModel m = qkv::load_llama2c(blob);
    std::printf("\n  (random 110M-shape checkpoint generated in memory in %.2f s)", t_gen);
    if (opt.f32) bench_model("random-110M (llama2.c shape)", m, pools, bw, true);
    // The same weights stored as GGUF types (converted in memory; the classifier and all
    // matrices take the type, norms stay f32).
    std::vector<std::string> pieces;
    for (int i = 0; i < m.config.vocab_size; i++) pieces.push_back("<t" + std::to_string(i) + ">");
    qkv::Tokenizer tok =
        qkv::Tokenizer::from_spm_pieces(pieces, std::vector<float>(pieces.size(), 0.0f), {}, 1, 2, 0, true);
    for (const std::string& type : opt.types) {
      if (type == "q4_k") {  // the GGUF writer has no K-quant output: quantized in memory
        t0 = now_s();
        qkv::LoadedModel km = requantized(m, qkv::QType::Q4_K);
        std::printf("\n  (quantized to Q4_K in %.1f s)", now_s() - t0);
        bench_model("random-110M as Q4_K", km, pools, bw, true);
        continue;
      }
      auto gb = std::make_shared<qkv::VectorBlob>(qkv::llama2c_to_gguf(m, tok, "bench", qkv::parse_qtype(type)));
      qkv::LoadedModel gm = qkv::load_model(gb);
      bench_model("random-110M as GGUF " + type, gm, pools, bw, true);
    }
  }
  if (pools.back()->size() > 1) {
    // Other processes may have started meanwhile; say so, since fork-join figures collapse then.
    CpuCheck cc = cpu_check(*pools.back());
    std::printf("\n  cpu check at the end: %d threads at %.0f%% of linear speed-up%s\n", pools.back()->size(),
                100.0 * cc.efficiency,
                (cc.efficiency < 0.85 || cc.efficiency > 1.15)
                    ? "  WARNING: cores shared with other load; multi-thread figures unreliable"
                    : "");
  }
  std::printf("\n  total bench time %.1f s\n", now_s() - t_start);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const qkv::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "qkv_bench: error (%s): %s\n", qkv::error_code_name(e.code()), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "qkv_bench: error: %s\n", e.what());
    return 1;
  }
}
