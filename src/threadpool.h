// A small fork-join pool: parallel_for cuts [0, n) into chunks that the calling thread and the
// workers claim from an atomic counter, so a worker the OS has descheduled delays nothing: the
// others take its share. Chunks shrink as the section goes (guided scheduling), so the threads
// finish together with few claims. With one thread (or WASM without pthreads) it runs inline.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace qkv {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // fn(begin, end, thread_index) over chunks of [0, n); chunk bounds are multiples of `grain`.
  // Which thread runs which chunk varies; each index is visited exactly once.
  void parallel_for(int n, int grain, const std::function<void(int, int, int)>& fn);

  static int hardware_threads();
  // Blocks (of `grain` indices) the next claim takes when `remaining` are unclaimed.
  static int claim_size(int64_t remaining, int threads);

 private:
  void worker(int index);
  void run_chunks(uint64_t gen, int thread_index);

  int n_threads_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_work_;
  // The current job. Its fields are written before the state word publishes a new generation
  // and stay fixed until every chunk of that generation is done.
  const std::function<void(int, int, int)>* job_ = nullptr;
  int job_n_ = 0, job_grain_ = 1;
  // (generation << 40) | (block count << 20) | next block to claim
  std::atomic<uint64_t> state_{0};
  std::atomic<int> done_{0};
  uint64_t generation_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};  // workers waiting on cv_work_
};

}  // namespace qkv
