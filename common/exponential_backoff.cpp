#include "common/exponential_backoff.h"

#include <algorithm>

namespace trainlet {

namespace {
uint64_t SeedOf(const std::optional<uint64_t>& seed) {
  if (seed) return *seed;
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}
}  // namespace

ExponentialBackoff::ExponentialBackoff(Options options)
    : options_(options), random_(SeedOf(options.seed)) {
  options_.jitter = std::clamp(options_.jitter, 0.0, 1.0);
  options_.initial = std::max(options_.initial, std::chrono::milliseconds(1));
  options_.max = std::max(options_.max, options_.initial);
}

std::chrono::milliseconds ExponentialBackoff::Fail() {
  if (failures_ < UINT32_MAX) ++failures_;
  // Doubling stops at the cap, so the shift never overflows however long the failures last.
  double base = static_cast<double>(options_.initial.count());
  const double cap = static_cast<double>(options_.max.count());
  for (uint32_t i = 1; i < failures_ && base < cap; ++i) base *= 2;
  base = std::min(base, cap);
  double delay = base;
  if (options_.jitter > 0) {
    std::uniform_real_distribution<double> factor(1.0 - options_.jitter, 1.0 + options_.jitter);
    delay *= factor(random_);
  }
  return std::chrono::milliseconds(std::max<int64_t>(1, static_cast<int64_t>(delay)));
}

}  // namespace trainlet
