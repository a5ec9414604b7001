// Fork-join thread pool used to split matrix rows and attention heads.
#include "threadpool.h"

#include "common.h"

namespace qkv {

#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
static constexpr bool kHaveThreads = false;
#else
static constexpr bool kHaveThreads = true;
#endif

int ThreadPool::hardware_threads() {
  if (!kHaveThreads) return 1;
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : (int)n;
}

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads < 1) fail(ErrorCode::BadArgument, "thread count must be at least 1");
  if (n_threads > 256) fail(ErrorCode::BadArgument, "thread count " + std::to_string(n_threads) + " is absurd (max 256)");
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

// Workers spin this many rounds for the next job before sleeping: decode runs ~100 short
// parallel sections per token, and a futex wake-up for each would cost more than the work.
static constexpr int kSpinRounds = 20000;

static inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static void chunk(int n, int grain, int parts, int index, int* b, int* e) {
  int blocks = (n + grain - 1) / grain;
  int per = blocks / parts, extra = blocks % parts;
  int first = index * per + (index < extra ? index : extra);
  int count = per + (index < extra ? 1 : 0);
  *b = first * grain;
  *e = (first + count) * grain;
  if (*b > n) *b = n;
  if (*e > n) *e = n;
}

void ThreadPool::parallel_for(int n, int grain, const std::function<void(int, int, int)>& fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (n_threads_ == 1 || n <= grain) {
    fn(0, n, 0);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  job_grain_ = grain;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lk(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_work_.notify_all();
  int b, e;
  chunk(n, grain, n_threads_, 0, &b, &e);
  if (b < e) fn(b, e, 0);
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; spin++) {
    if (spin < kSpinRounds) cpu_relax();
    else std::this_thread::yield();
  }
  job_ = nullptr;
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    int spin = 0;
    while (generation_.load(std::memory_order_acquire) == seen && !stop_.load(std::memory_order_relaxed)) {
      if (++spin < kSpinRounds) {
        cpu_relax();
        continue;
      }
      std::unique_lock<std::mutex> lk(mu_);
      cv_work_.wait(lk, [&] { return stop_ || generation_.load() != seen; });
    }
    if (stop_) return;
    seen = generation_.load(std::memory_order_acquire);
    int b, e;
    chunk(job_n_, job_grain_, n_threads_, index, &b, &e);
    if (b < e) (*job_)(b, e, index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace qkv
