// A small fork-join pool: parallel_for splits [0, n) into contiguous chunks, one per thread.
// With one thread (or a WASM build without pthreads) it runs inline and creates nothing.
#pragma once
#include <atomic>
#include <condition_variable>
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
  // fn(begin, end, thread_index) for each chunk; chunks are multiples of `grain` except the last.
  void parallel_for(int n, int grain, const std::function<void(int, int, int)>& fn);

  static int hardware_threads();

 private:
  void worker(int index);
  int n_threads_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  const std::function<void(int, int, int)>* job_ = nullptr;
  int job_n_ = 0, job_grain_ = 1;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace qkv
