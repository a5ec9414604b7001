// Fork-join thread pool used to split matrix rows and attention heads.
#include "threadpool.h"

#include <cstdint>
#include <string>

#include "common.h"

namespace qkv {

#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
static constexpr bool kHaveThreads = false;
#else
static constexpr bool kHaveThreads = true;
#endif

// Workers spin this many rounds for the next job before sleeping: decode runs ~100 short
// parallel sections per token, and a futex wake-up for each would cost more than the work.
static constexpr int kSpinRounds = 20000;
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

void ThreadPool::run_chunks(uint64_t gen, int thread_index) {
  uint64_t s = state_.load(std::memory_order_acquire);
  for (;;) {
    if (gen_of(s) != gen) return;
    const uint64_t next = s & kMask20, total = (s >> 20) & kMask20;
    if (next >= total) return;
    if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // Claimed chunk `next` of this generation: the job fields cannot change until it is done.
    const int b = (int)next * job_chunk_;
    const int e = b + job_chunk_ < job_n_ ? b + job_chunk_ : job_n_;
    (*job_)(b, e, thread_index);
    done_.fetch_add(1, std::memory_order_acq_rel);
    s = state_.load(std::memory_order_acquire);
  }
}

// A few chunks per thread: enough to rebalance around a slow thread, few enough to be cheap. Of
// the sizes near blocks / (4 threads), the one whose chunks share out most evenly when the
// threads run at the same speed: 36 blocks on 2 threads as 12 chunks of 3 (18 blocks each), not
// 8 of 5 (20 against 16).
int ThreadPool::chunk_blocks(int blocks, int threads) {
  const int first = (blocks + threads * 4 - 1) / (threads * 4);
  int best = first;
  int64_t best_span = INT64_MAX;
  for (int c = first; c >= 1 && c * 2 >= first; c--) {
    const int64_t chunks = (blocks + c - 1) / c;
    const int64_t rounds = (chunks + threads - 1) / threads;
    // The busiest thread: every round a full chunk, except that the short last chunk (if any)
    // falls in the last round of the thread that takes it.
    const int64_t last = blocks - (chunks - 1) * c;
    const int64_t span = (rounds - 1) * c + (chunks % threads == 1 ? last : c);
    if (span < best_span) best_span = span, best = c;
  }
  return best;
}

void ThreadPool::parallel_for(int n, int grain, const std::function<void(int, int, int)>& fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  const int blocks = (n + grain - 1) / grain;
  if (n_threads_ == 1 || blocks == 1) {
    fn(0, n, 0);
    return;
  }
  const int chunk = chunk_blocks(blocks, n_threads_) * grain;
  const int total = (n + chunk - 1) / chunk;
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = chunk;
  done_.store(0, std::memory_order_relaxed);
  generation_ = (generation_ + 1) & ((1ull << 24) - 1);
  {
    std::lock_guard<std::mutex> lk(mu_);
    state_.store((generation_ << 40) | ((uint64_t)total << 20), std::memory_order_release);
  }
  cv_work_.notify_all();
  run_chunks(generation_, 0);
  for (int spin = 0; done_.load(std::memory_order_acquire) != total; spin++) {
    if (spin < kSpinRounds) cpu_relax();
    else std::this_thread::yield();
  }
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    int spin = 0;
    uint64_t s;
    while (gen_of(s = state_.load(std::memory_order_acquire)) == seen && !stop_.load(std::memory_order_relaxed)) {
      if (++spin < kSpinRounds) {
        cpu_relax();
        continue;
      }
      std::unique_lock<std::mutex> lk(mu_);
      cv_work_.wait(lk, [&] { return stop_ || gen_of(state_.load()) != seen; });
    }
    if (stop_) return;
    seen = gen_of(s);
    run_chunks(seen, index);
  }
}

}  // namespace qkv
