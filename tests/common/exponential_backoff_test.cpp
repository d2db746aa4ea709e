#include "common/exponential_backoff.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace trainlet {
namespace {

using std::chrono::milliseconds;

TEST(ExponentialBackoffTest, DoublesUpToTheCapWithoutJitter) {
  ExponentialBackoff backoff({milliseconds(250), milliseconds(30000), 0.0, 1});
  std::vector<milliseconds> got;
  for (int i = 0; i < 10; ++i) got.push_back(backoff.Fail());
  const std::vector<milliseconds> want = {
      milliseconds(250),   milliseconds(500),  milliseconds(1000),  milliseconds(2000),
      milliseconds(4000),  milliseconds(8000), milliseconds(16000), milliseconds(30000),
      milliseconds(30000), milliseconds(30000)};
  EXPECT_EQ(got, want);
  EXPECT_EQ(backoff.failures(), 10u);
  backoff.Reset();
  EXPECT_EQ(backoff.failures(), 0u);
  EXPECT_EQ(backoff.Fail(), milliseconds(250));
}

TEST(ExponentialBackoffTest, JitterStaysWithinItsFractionAndVaries) {
  ExponentialBackoff backoff({milliseconds(1000), milliseconds(1000), 0.2, 42});
  milliseconds lo = milliseconds::max(), hi = milliseconds::zero();
  for (int i = 0; i < 1000; ++i) {
    const milliseconds d = backoff.Fail();
    ASSERT_GE(d, milliseconds(800));
    ASSERT_LE(d, milliseconds(1200));
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  EXPECT_LT(lo, milliseconds(850));  // spread over the range, not one value
  EXPECT_GT(hi, milliseconds(1150));
}

TEST(ExponentialBackoffTest, TheSameSeedGivesTheSameDelays) {
  ExponentialBackoff a({milliseconds(250), milliseconds(30000), 0.2, 7});
  ExponentialBackoff b({milliseconds(250), milliseconds(30000), 0.2, 7});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(a.Fail(), b.Fail());
}

TEST(ExponentialBackoffTest, LongFailureRunsStayAtTheCap) {
  ExponentialBackoff backoff({milliseconds(250), milliseconds(30000), 0.0, 1});
  for (int i = 0; i < 100000; ++i) backoff.Fail();
  EXPECT_EQ(backoff.Fail(), milliseconds(30000));
}

}  // namespace
}  // namespace trainlet
