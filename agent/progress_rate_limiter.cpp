#include "agent/progress_rate_limiter.h"

#include <algorithm>

namespace trainlet::agent {

bool ProgressRateLimiter::Allow(const std::string& job, size_t ranks, Clock::time_point now) {
  const double rate = rate_ * static_cast<double>(std::max<size_t>(ranks, 1));
  const double burst = 2 * rate;
  auto [it, fresh] = buckets_.try_emplace(job);
  Bucket& b = it->second;
  if (fresh) {
    b.tokens = burst;
  } else if (now > b.last) {
    const double elapsed = std::chrono::duration<double>(now - b.last).count();
    b.tokens = std::min(burst, b.tokens + elapsed * rate);
  }
  b.last = std::max(b.last, now);
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

}  // namespace trainlet::agent
