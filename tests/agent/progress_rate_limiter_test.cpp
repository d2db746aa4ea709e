// The per-job progress rate: a burst of two seconds' worth, then the rate, per rank on the node.
#include "agent/progress_rate_limiter.h"

#include <gtest/gtest.h>

namespace trainlet::agent {
namespace {

using namespace std::chrono_literals;
using Clock = ProgressRateLimiter::Clock;

size_t Allowed(ProgressRateLimiter& l, const std::string& job, size_t ranks, size_t tries,
               Clock::time_point now) {
  size_t n = 0;
  for (size_t i = 0; i < tries; ++i) n += l.Allow(job, ranks, now);
  return n;
}

TEST(ProgressRateLimiter, ABurstThenTheRate) {
  ProgressRateLimiter l(10);
  const Clock::time_point t0{};
  EXPECT_EQ(Allowed(l, "a", 1, 100, t0), 20u);  // burst: 2 s at 10/s
  EXPECT_EQ(Allowed(l, "a", 1, 100, t0 + 500ms), 5u);
  EXPECT_EQ(Allowed(l, "a", 1, 100, t0 + 500ms), 0u);
  // Another job has its own bucket.
  EXPECT_EQ(Allowed(l, "b", 1, 100, t0 + 500ms), 20u);
  // A long pause refills only up to the burst.
  EXPECT_EQ(Allowed(l, "a", 1, 100, t0 + 1h), 20u);
}

TEST(ProgressRateLimiter, ScalesWithTheJobsRanksHere) {
  ProgressRateLimiter l(10);
  const Clock::time_point t0{};
  EXPECT_EQ(Allowed(l, "a", 4, 1000, t0), 80u);
  EXPECT_EQ(Allowed(l, "a", 4, 1000, t0 + 1s), 40u);
  EXPECT_EQ(Allowed(l, "z", 0, 1000, t0), 20u);  // no rank counted: as one
  // A clock that goes back takes nothing and gives nothing.
  EXPECT_EQ(Allowed(l, "a", 4, 1000, t0), 0u);
  l.Forget("a");
  EXPECT_EQ(l.size(), 1u);
  EXPECT_EQ(Allowed(l, "a", 4, 1000, t0 + 1s), 80u);
}

}  // namespace
}  // namespace trainlet::agent
