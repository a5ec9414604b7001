// A small deterministic random generator for training (initialisation, batch sampling): the
// same seed gives the same stream on every platform.
#pragma once
#include <cmath>
#include <cstdint>

namespace qkv {

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed ? seed : 0x9E3779B97F4A7C15ull) {}
  // xorshift64*
  uint64_t next() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return s_ * 0x2545F4914F6CDD1Dull;
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  uint64_t below(uint64_t n) { return next() % n; }
  // Standard normal (Box-Muller, one value per call).
  double normal() {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  uint64_t state() const { return s_; }
  void set_state(uint64_t s) { s_ = s ? s : 1; }

 private:
  uint64_t s_;
};

}  // namespace qkv
