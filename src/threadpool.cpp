// Fork-join thread pool used to split matrix rows and attention heads.
#include "threadpool.h"

#include <chrono>
#include <cstdint>
#include <string>

#include "common.h"

namespace qkv {

#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
static constexpr bool kHaveThreads = false;
#else
static constexpr bool kHaveThreads = true;
#endif

// Workers spin this long for the next job before sleeping: decode runs ~50 short parallel
// sections per token with gaps of serial work between them (norms, sampling, the caller's code
// between tokens), and a futex wake-up costs more than a small section's work. Counted in time,
// not rounds: a round is ~40 ns natively (a pause instruction) but ~1 ns in WASM, where 20000
// rounds slept through the gap between two tokens (Chromium, 2 threads: 2-3 sleeps per decoded
// token, each wake-up ~200 us in the notify call alone, plus the worker's late start).
static constexpr auto kSpinTime = std::chrono::milliseconds(2);
static constexpr int kSpinRounds = 20000;  // the calling thread's wait for the last chunks
static constexpr uint64_t kMask20 = (1u << 20) - 1;

static inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static inline uint64_t gen_of(uint64_t s) { return s >> 40; }

int ThreadPool::hardware_threads() {
  if (!kHaveThreads) return 1;
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : (int)n;
}

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads < 1) fail(ErrorCode::BadArgument, "thread count must be at least 1");
  if (n_threads > 256)
    fail(ErrorCode::BadArgument, "thread count " + std::to_string(n_threads) + " is absurd (max 256)");
  if (!kHaveThreads) n_threads = 1;
  n_threads_ = n_threads;
  for (int i = 1; i < n_threads_; i++) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::run_chunks(uint64_t gen, int thread_index) {
  uint64_t s = state_.load(std::memory_order_acquire);
  for (;;) {
    if (gen_of(s) != gen) return;
    const uint64_t next = s & kMask20, total = (s >> 20) & kMask20;
    if (next >= total) return;
    const uint64_t size = claim_size(total - next, n_threads_);
    if (!state_.compare_exchange_weak(s, s + size, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // Claimed blocks [next, next + size) of this generation: the job fields cannot change until
    // they are done.
    const int64_t b = (int64_t)next * job_grain_, e = (int64_t)(next + size) * job_grain_;
    (*job_)((int)b, (int)(e < job_n_ ? e : job_n_), thread_index);
    done_.fetch_add((int)size, std::memory_order_acq_rel);
    s = state_.load(std::memory_order_acquire);
  }
}

// Guided self-scheduling: each claim takes 1/(2 x threads) of the blocks still unclaimed, so
// the first chunks are large (few claims) and the last ones single blocks, which the threads
// share out evenly at the end of the section whatever their speeds. 36 blocks on 2 threads go
// as 9, 7, 5, 4, 3, 2, 2, 1, 1, 1, 1.
int ThreadPool::claim_size(int64_t remaining, int threads) {
  const int64_t size = remaining / (2 * (int64_t)threads);
  return size < 1 ? 1 : (int)size;
}

void ThreadPool::parallel_for(int n, int grain, const std::function<void(int, int, int)>& fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int64_t blocks = ((int64_t)n + grain - 1) / grain;
  if (blocks > (int64_t)kMask20) {  // the state word counts blocks in 20 bits
    grain = (int)(((int64_t)n + kMask20 - 1) / kMask20);
    blocks = ((int64_t)n + grain - 1) / grain;
  }
  if (n_threads_ == 1 || blocks == 1) {
    fn(0, n, 0);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  job_grain_ = grain;
  done_.store(0, std::memory_order_relaxed);
  generation_ = (generation_ + 1) & ((1ull << 24) - 1);
  {
    std::lock_guard<std::mutex> lk(mu_);
    state_.store((generation_ << 40) | ((uint64_t)blocks << 20), std::memory_order_release);
  }
  // A worker counts itself asleep under the mutex before it waits, so one that went to sleep
  // before this store is counted here (the notify is only for sleepers; spinners see the store).
  if (sleepers_.load(std::memory_order_acquire) > 0) cv_work_.notify_all();
  run_chunks(generation_, 0);
  for (int spin = 0; done_.load(std::memory_order_acquire) != (int)blocks; spin++) {
    if (spin < kSpinRounds) cpu_relax();
    else std::this_thread::yield();
  }
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    int spin = 0;
    auto spin_until = std::chrono::steady_clock::time_point::min();
    uint64_t s;
    while (gen_of(s = state_.load(std::memory_order_acquire)) == seen && !stop_.load(std::memory_order_relaxed)) {
      cpu_relax();
      if (++spin % 64 != 0) continue;  // the clock is a call out of WASM: read it now and then
      const auto now = std::chrono::steady_clock::now();
      if (spin == 64) spin_until = now + kSpinTime;
      if (now < spin_until) continue;
      std::unique_lock<std::mutex> lk(mu_);
      sleepers_.fetch_add(1, std::memory_order_acq_rel);
      cv_work_.wait(lk, [&] { return stop_ || gen_of(state_.load()) != seen; });
      sleepers_.fetch_sub(1, std::memory_order_acq_rel);
      spin = 0;
    }
    if (stop_) return;
    seen = gen_of(s);
    run_chunks(seen, index);
  }
}

}  // namespace qkv
