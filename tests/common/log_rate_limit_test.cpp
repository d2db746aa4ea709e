#include "common/log_rate_limit.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace trainlet {
namespace {

using Clock = LogRateLimiter::Clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

const Clock::time_point kStart = Clock::time_point{} + std::chrono::hours(1);

TEST(LogRateLimiterTest, FirstLogsThenOnePerIntervalWithTheCount) {
  LogRateLimiter limiter(seconds(10));
  auto first = limiter.Admit("node-1", kStart);
  EXPECT_TRUE(first.log);
  EXPECT_EQ(first.suppressed, 0u);
  EXPECT_EQ(LogRateLimiter::Suffix(first), "");
  for (int i = 1; i <= 37; ++i) {
    EXPECT_FALSE(limiter.Admit("node-1", kStart + milliseconds(100 * i)).log) << i;
  }
  EXPECT_FALSE(limiter.Admit("node-1", kStart + milliseconds(9999)).log);
  auto next = limiter.Admit("node-1", kStart + seconds(10));
  EXPECT_TRUE(next.log);
  EXPECT_EQ(next.suppressed, 38u);
  EXPECT_EQ(next.since, seconds(10));
  EXPECT_EQ(LogRateLimiter::Suffix(next), " (and 38 more in the last 10.0 s)");
  // The window starts again at the line just written.
  EXPECT_FALSE(limiter.Admit("node-1", kStart + seconds(19)).log);
  auto third = limiter.Admit("node-1", kStart + seconds(20));
  EXPECT_TRUE(third.log);
  EXPECT_EQ(third.suppressed, 1u);
}

TEST(LogRateLimiterTest, KeysAreLimitedApart) {
  LogRateLimiter limiter(seconds(10));
  EXPECT_TRUE(limiter.Admit("node-1", kStart).log);
  EXPECT_TRUE(limiter.Admit("node-2", kStart).log);
  EXPECT_FALSE(limiter.Admit("node-1", kStart + seconds(1)).log);
  EXPECT_FALSE(limiter.Admit("node-2", kStart + seconds(1)).log);
  EXPECT_EQ(limiter.keys(), 2u);
}

TEST(LogRateLimiterTest, AFloodOfKeysSharesOneLinePerInterval) {
  LogRateLimiter limiter(seconds(10), 2);
  EXPECT_TRUE(limiter.Admit("a", kStart).log);
  EXPECT_TRUE(limiter.Admit("b", kStart).log);
  EXPECT_TRUE(limiter.Admit("c", kStart).log);  // the first overflow is written
  for (int i = 0; i < 100; ++i) {
    EXPECT_FALSE(limiter.Admit("x" + std::to_string(i), kStart + seconds(1)).log);
  }
  EXPECT_LE(limiter.keys(), 3u);  // two keys and the overflow entry
  // Once the interval passed, expired keys make room again.
  EXPECT_TRUE(limiter.Admit("d", kStart + seconds(10)).log);
  EXPECT_LE(limiter.keys(), 3u);
}

}  // namespace
}  // namespace trainlet
