// The thread pool (src/threadpool.h): every index visited once in grain-aligned chunks, sleeping
// workers woken, and guided claims that shrink so threads finish together.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "threadpool.h"

TEST(ThreadPool, VisitsEveryIndexOnceInGrainAlignedChunks) {
  for (int threads : {1, 2, 3, 5}) {
    qkv::ThreadPool pool(threads);
    for (int n : {1, 7, 16, 100, 2304, 4099})
      for (int grain : {1, 16, 64}) {
        std::vector<std::atomic<int>> seen(n);
        std::atomic<bool> aligned{true}, thread_ok{true};
        pool.parallel_for(n, grain, [&](int b, int e, int t) {
          if (b % grain != 0 || (e % grain != 0 && e != n) || b >= e) aligned = false;
          if (t < 0 || t >= pool.size()) thread_ok = false;
          for (int i = b; i < e; i++) seen[i]++;
        });
        for (int i = 0; i < n; i++) ASSERT_EQ(seen[i].load(), 1) << threads << " threads, n " << n << ", index " << i;
        EXPECT_TRUE(aligned) << threads << " threads, n " << n << ", grain " << grain;
        EXPECT_TRUE(thread_ok);
      }
  }
}

// Workers spin for a while after a section, then sleep; the next section must wake them. Each
// section here is two blocks, and the calling thread's block waits (up to 5 s) until a worker
// has started the other, so a sleeping worker that is never woken fails instead of hanging.
TEST(ThreadPool, WakesWorkersThatWentToSleep) {
  qkv::ThreadPool pool(2);
  for (int round = 0; round < 6; round++) {
    // Past the workers' spin time (2 ms) on every other round; no gap on the others.
    if (round % 2) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    std::atomic<bool> worker_ran{false}, waited_out{false};
    pool.parallel_for(2, 1, [&](int, int, int t) {
      if (t != 0) {
        worker_ran = true;
        return;
      }
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!worker_ran)
        if (std::chrono::steady_clock::now() > give_up) {
          waited_out = true;
          return;
        }
    });
    // (2 blocks on 2 threads are claimed one at a time, so while the calling thread waits in
    // its block the other is left to a worker.)
    ASSERT_FALSE(waited_out) << "round " << round << ": no worker took the second block within 5 s";
    ASSERT_TRUE(worker_ran);
  }
}

// Threads of equal speed (a block per time unit), each claiming the next chunk when it is free:
// the time the last one finishes, and the number of claims.
static std::pair<int64_t, int> guided_span(int blocks, int threads) {
  std::vector<int64_t> free_at(threads, 0);
  int claims = 0;
  for (int64_t next = 0; next < blocks; claims++) {
    const int size = qkv::ThreadPool::claim_size(blocks - next, threads);
    auto t = std::min_element(free_at.begin(), free_at.end());
    *t += std::min<int64_t>(size, blocks - next);
    next += size;
  }
  return {*std::max_element(free_at.begin(), free_at.end()), claims};
}

TEST(ThreadPool, ClaimsShrinkSoThreadsFinishTogether) {
  for (int threads = 2; threads <= 8; threads++)
    for (int blocks = 1; blocks <= 2000; blocks++) {
      const auto [span, claims] = guided_span(blocks, threads);
      const int64_t ideal = (blocks + threads - 1) / threads;
      ASSERT_LE(span, ideal + 1) << blocks << " blocks, " << threads << " threads";
      // Few claims: each takes 1/(2 threads) of what is left until single blocks remain.
      ASSERT_LE(claims, 2 * threads * (2 + std::log((double)blocks))) << blocks << " blocks, " << threads << " threads";
    }
  // q, k and v of the 110M shape are 36 heads: fixed chunks of 5 heads would keep one of 2
  // threads busy for 20 while the other does 16.
  EXPECT_EQ(guided_span(36, 2).first, 18);
}
