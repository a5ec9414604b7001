// Choosing between two implementations that give the same results bit for bit (two register
// tiles of one kernel, say) by timing the calls they serve, for engines whose code generation
// cannot be known when the module is built: WebAssembly's speed depends on the engine's
// register allocator (in Chromium 156's V8 a 6-row tile runs 7% faster than a 4-row one; Node
// 22's older V8 spills it and runs it at half speed).
//
// While undecided, pick() alternates the two and report() adds up each call's work and seconds.
// The first calls are a warm-up, left out: engines compile hot code in tiers, and the first calls
// run baseline code until the optimised code is installed (a background compile of some
// milliseconds), so the warm-up lasts kWarm calls of each and kWarmSeconds of calls in all (or
// 2 x kMax calls, for tiny calls). Then each side's calls are summed in groups of at least
// kGroupSeconds (browser timers are coarse: 5-100 us), and once each side has kGroups groups and
// kMin calls, the one with the lower median seconds per unit of work is kept for good (a median:
// a pause of the whole thread, such as a garbage collection, lands in one group of one side). Tiny
// calls that fill no groups: kMax counted calls of each decide on their sums. Thread-safe:
// callers on several threads share one Trial.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>

namespace qkv {

class Trial {
 public:
  static constexpr int kWarm = 8;
  static constexpr double kWarmSeconds = 0.1;
  static constexpr int kMin = 16;
  static constexpr int kGroups = 9;
  static constexpr double kGroupSeconds = 0.002;
  static constexpr int kMax = 2000;

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
    if (decided() >= 0 || which < 0 || which > 1 || !(work > 0)) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (decided() >= 0) return;
    Side& s = side_[which];
    s.calls++;
    if (warming_) {
      warm_seconds_ += seconds;
      const int64_t a = side_[0].calls, b = side_[1].calls;
      if ((a >= kWarm && b >= kWarm && warm_seconds_ >= kWarmSeconds) || a + b >= 2 * kMax) {
        warming_ = false;
        side_[0] = side_[1] = Side{};  // counting starts now
      }
      return;
    }
    s.work += work;
    s.seconds += seconds;
    s.group_work += work;
    s.group_seconds += seconds;
    if (s.group_seconds >= kGroupSeconds && s.groups < kGroups) {
      s.rate[s.groups++] = s.group_seconds / s.group_work;
      s.group_work = s.group_seconds = 0;
    }
    const Side& a = side_[0];
    const Side& b = side_[1];
    const bool enough = a.groups >= kGroups && b.groups >= kGroups && a.calls >= kMin && b.calls >= kMin;
    const bool most = a.calls >= kMax && b.calls >= kMax;
    if (!enough && !most) return;
    const bool first = a.groups > 0 && b.groups > 0
                           ? median(side_[0]) <= median(side_[1])
                           : a.seconds * b.work <= b.seconds * a.work;  // a.s / a.w <= b.s / b.w
    decided_.store(first ? 0 : 1, std::memory_order_release);
  }

  // Starts over (`fixed` < 0) or keeps `fixed` from now on.
  void reset(int fixed = -1) {
    std::lock_guard<std::mutex> lock(mu_);
    side_[0] = side_[1] = Side{};
    warming_ = true;
    warm_seconds_ = 0;
    turn_.store(0, std::memory_order_relaxed);
    decided_.store(fixed >= 0 && fixed <= 1 ? fixed : -1, std::memory_order_release);
  }

 private:
  struct Side {
    int64_t calls = 0;
    double work = 0, seconds = 0;              // all counted calls
    double group_work = 0, group_seconds = 0;  // the group being filled
    int groups = 0;
    double rate[kGroups] = {};  // seconds per unit of work of each full group
  };
  static double median(Side& s) {
    std::sort(s.rate, s.rate + s.groups);
    return s.groups % 2 ? s.rate[s.groups / 2] : 0.5 * (s.rate[s.groups / 2 - 1] + s.rate[s.groups / 2]);
  }
  std::mutex mu_;
  Side side_[2];
  bool warming_ = true;
  double warm_seconds_ = 0;
  std::atomic<uint32_t> turn_{0};
  std::atomic<int> decided_{-1};
};

}  // namespace qkv
