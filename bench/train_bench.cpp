// Training throughput: tokens/s and achieved GFLOP/s of a training step (forward, backward,
// AdamW) on a ~10M-parameter llama-shaped model with random data, against this machine's
// measured f32 FMA peak (independent FMA chains in registers on every thread).
//
//   qkv_train_bench [--threads N] [--steps N] [--batch N] [--seq N] [--small]
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/optim.h"
#include "kernels/simd.h"
#include "threadpool.h"
#include "train/model.h"
#include "train/rng.h"

using namespace qkv;
using clk = std::chrono::steady_clock;

static double seconds_since(clk::time_point t) { return std::chrono::duration<double>(clk::now() - t).count(); }

// CPU seconds used by this process (all its threads). On a shared machine wall time also counts
// the time other programs held our cores; CPU time does not, so FLOPs per CPU-second against the
// peak per CPU-second is the fair efficiency there (spinning workers count as used time).
static double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct Peak {
  double wall_gflops, cpu_gflops;  // per wall second (all threads), per CPU second (one core)
};

// 12 independent accumulators per thread hide the FMA latency on every current x86 core.
static Peak fma_peak(ThreadPool& pool) {
  const int64_t iters = 20000000;
  std::vector<float> sink(pool.size() * 16);
  auto run = [&](int64_t n) {
    pool.parallel_for(pool.size(), 1, [&](int b, int e, int) {
      for (int th = b; th < e; th++) {
        fbatch a[12];
        for (int i = 0; i < 12; i++) a[i] = fbatch(1.0f + i * 1e-3f);
        const fbatch m(0.9999999f), c(1e-7f);
        for (int64_t k = 0; k < n; k++)
          for (int i = 0; i < 12; i++) a[i] = xsimd::fma(a[i], m, c);
        fbatch s = a[0];
        for (int i = 1; i < 12; i++) s += a[i];
        sink[th] = xsimd::reduce_add(s);
      }
    });
  };
  run(iters / 20);  // warm up (clocks, threads)
  auto t0 = clk::now();
  const double c0 = cpu_seconds();
  run(iters);
  const double s = seconds_since(t0), cs = cpu_seconds() - c0;
  const double flops = 2.0 * kLanes * 12 * (double)iters * pool.size();
  return {flops / s / 1e9, flops / cs / 1e9};
}

int main(int argc, char** argv) {
  int threads = ThreadPool::hardware_threads(), steps = 5, batch = 8, seq = 256;
  bool small = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (a == "--threads") threads = next();
    else if (a == "--steps") steps = next();
    else if (a == "--batch") batch = next();
    else if (a == "--seq") seq = next();
    else if (a == "--small") small = true;
    else {
      fprintf(stderr, "usage: qkv_train_bench [--threads N] [--steps N] [--batch N] [--seq N] [--small]\n");
      return 2;
    }
  }
  if (threads < 1 || steps < 1 || batch < 1 || seq < 2) {
    fprintf(stderr, "qkv_train_bench: bad option value\n");
    return 2;
  }
  ThreadPool pool(threads);
  printf("simd: %s (%d lanes), %d threads\n", simd_arch_name(), kLanes, threads);
  const Peak peak = fma_peak(pool);
  printf("measured f32 FMA peak: %.1f GFLOP/s on %d threads (wall clock); %.1f GFLOP/s per CPU-second (one core)\n",
         peak.wall_gflops, threads, peak.cpu_gflops);

  ModelConfig c;
  c.dim = small ? 192 : 384;
  c.n_layers = small ? 4 : 6;
  c.n_heads = 6;
  c.n_kv_heads = small ? 6 : 3;
  c.head_dim = c.dim / c.n_heads;
  c.hidden_dim = small ? 512 : 1024;
  c.vocab_size = small ? 1024 : 2048;
  c.seq_len = seq;
  TrainModel m(c, &pool);
  m.init(1);
  const int64_t P = m.layout().total;
  printf("model: %s\n       %.2fM parameters, batch %d x %d tokens\n", c.describe().c_str(), P / 1e6, batch, seq);
  std::vector<int> in((size_t)batch * seq), tg((size_t)batch * seq);
  Rng rng(7);
  for (auto& t : in) t = (int)rng.below(c.vocab_size);
  for (auto& t : tg) t = (int)rng.below(c.vocab_size);
  std::vector<float> mom(P, 0.0f), var(P, 0.0f);
  const double flops = 3.0 * TrainModel::forward_flops(c, batch, seq);  // forward + backward (2x)
  double best = 1e30, fwd_best = 1e30, cpu_best = 1e30;
  for (int s = 0; s <= steps; s++) {  // step 0 warms up
    auto t0 = clk::now();
    const double c0 = cpu_seconds();
    m.zero_grads();
    m.forward(in.data(), tg.data(), batch, seq);
    const double tf = seconds_since(t0);
    m.backward();
    AdamWParams h;
    h.step = s + 1;
    adamw_simd(m.params().data(), m.grads().data(), mom.data(), var.data(), P, h);
    const double t = seconds_since(t0), ct = cpu_seconds() - c0;
    if (s > 0 && t < best) best = t;
    if (s > 0 && ct < cpu_best) cpu_best = ct;
    if (s > 0 && tf < fwd_best) fwd_best = tf;
  }
  const double tok = (double)batch * seq;
  printf(
      "training step: %.3f s (forward %.3f s) | %.0f tokens/s | %.1f GFLOP/s = %.0f%% of the FMA peak (wall clock)\n",
      best, fwd_best, tok / best, flops / best / 1e9, 100.0 * flops / best / 1e9 / peak.wall_gflops);
  printf("               %.3f CPU-s | %.1f GFLOP per CPU-second = %.0f%% of the per-core FMA peak\n", cpu_best,
         flops / cpu_best / 1e9, 100.0 * flops / cpu_best / 1e9 / peak.cpu_gflops);
  printf("(FLOPs counted: 3x the forward's matmul and causal-attention multiply-adds x2; best of %d steps)\n", steps);
  return 0;
}
