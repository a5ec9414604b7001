// Choosing between two implementations that give the same results bit for bit (two register
// tiles of one kernel, say) by timing the calls they serve, for engines whose code generation
// cannot be known when the module is built: WebAssembly's speed depends on the engine's
// register allocator (one V8 runs a tile 7% faster than another; an older one spills it and runs
// it at half speed).
//
// While undecided, pick() alternates the two and report() adds up each call's work and seconds;
// the first kWarm calls of each are left out (engines compile hot code in tiers, the first calls
// run baseline code). Once each has kMin counted calls and kMinSeconds counted time (browser
// timers are coarse: 5-100 us), or kMax calls whatever the time, the one with fewer seconds
// per unit of work is kept for good. Thread-safe: callers on several threads share one Trial.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>

namespace qkv {

class Trial {
 public:
  static constexpr int kWarm = 8;
  static constexpr int kMin = 16;
  static constexpr int kMax = 2000;
  static constexpr double kMinSeconds = 0.02;

  // `fixed` >= 0: decided from the start (builds with nothing to choose); -1: try both.
  explicit Trial(int fixed = -1) { reset(fixed); }

  // The kept choice (0 or 1), or -1 while trying.
  int decided() const { return decided_.load(std::memory_order_acquire); }

  // The choice for the next call: the kept one, or the two in turn while trying.
  int pick() {
    const int d = decided();
    return d >= 0 ? d : (int)(turn_.fetch_add(1, std::memory_order_relaxed) & 1);
  }

  // A call of choice `which` did `work` (any unit, the same for both: flops) in `seconds`.
  void report(int which, double work, double seconds) {
    if (decided() >= 0 || which < 0 || which > 1) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (decided() >= 0) return;
    Side& s = side_[which];
    if (++s.calls <= kWarm) return;
    s.work += work;
    s.seconds += seconds;
    const Side& a = side_[0];
    const Side& b = side_[1];
    const bool enough = a.calls >= kWarm + kMin && b.calls >= kWarm + kMin && a.seconds >= kMinSeconds &&
                        b.seconds >= kMinSeconds;
    const bool most = a.calls >= kMax && b.calls >= kMax;
    if (!enough && !most) return;
    // Seconds per unit of work, compared without dividing: a.s / a.w <= b.s / b.w.
    decided_.store(a.seconds * b.work <= b.seconds * a.work ? 0 : 1, std::memory_order_release);
  }

  // Starts over (`fixed` < 0) or keeps `fixed` from now on.
  void reset(int fixed = -1) {
    std::lock_guard<std::mutex> lock(mu_);
    side_[0] = side_[1] = Side{};
    turn_.store(0, std::memory_order_relaxed);
    decided_.store(fixed >= 0 && fixed <= 1 ? fixed : -1, std::memory_order_release);
  }

 private:
  struct Side {
    int64_t calls = 0;
    double work = 0, seconds = 0;
  };
  std::mutex mu_;
  Side side_[2];
  std::atomic<uint32_t> turn_{0};
  std::atomic<int> decided_{-1};
};

}  // namespace qkv
