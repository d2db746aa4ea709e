// ExponentialBackoff: how long to wait before the next attempt after consecutive failures, so a
// refused peer retries at growing intervals instead of in a loop (a refused registration).
//
// The n-th consecutive failure waits initial * 2^(n-1), capped at `max`, then scaled by a random
// factor in [1 - jitter, 1 + jitter] so that many clients refused together do not retry together.
// Success (Reset) starts again from `initial`. The random source is seeded: a fixed seed gives
// the same delays every run (tests); no seed draws one from std::random_device.
//
// Not thread-safe: owned by one loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>

namespace trainlet {

class ExponentialBackoff {
 public:
  struct Options {
    std::chrono::milliseconds initial{250};
    std::chrono::milliseconds max{30000};
    double jitter = 0.2;           // fraction, 0 to 1 (clamped)
    std::optional<uint64_t> seed;  // none: seeded from std::random_device
  };

  explicit ExponentialBackoff(Options options);

  // Records one more failure and returns the delay before the next attempt.
  std::chrono::milliseconds Fail();
  // An attempt succeeded: the next failure waits `initial` again.
  void Reset() { failures_ = 0; }
  // Consecutive failures since construction or the last Reset.
  uint32_t failures() const { return failures_; }

 private:
  // Constant after construction.
  Options options_;
  // Owned by the caller's loop.
  std::mt19937_64 random_;
  uint32_t failures_ = 0;
};

}  // namespace trainlet
