// ProgressLiveAttempts: what the loop publishes is what the endpoint's thread finds; an
// unchanged table is not published again; readers on another thread see whole tables.
#include "agent/progress_live_attempts.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace trainlet::agent {
namespace {

TEST(ProgressLiveAttemptsTest, FindsOnlyThePublishedAttempt) {
  ProgressLiveAttempts live;
  EXPECT_FALSE(live.Find("train", 1).has_value()) << "nothing published";
  EXPECT_TRUE(live.Publish({{"train", {2, 4}}, {"other", {1, 0}}}));
  EXPECT_EQ(live.Find("train", 2), std::optional<size_t>(4));
  EXPECT_FALSE(live.Find("train", 1).has_value()) << "an older attempt";
  EXPECT_FALSE(live.Find("train", 3).has_value()) << "a newer attempt not launched here";
  EXPECT_EQ(live.Find("other", 1), std::optional<size_t>(0)) << "no rank started yet";
  EXPECT_FALSE(live.Find("missing", 1).has_value());
  EXPECT_FALSE(live.Publish({{"train", {2, 4}}, {"other", {1, 0}}})) << "unchanged";
  EXPECT_TRUE(live.Publish({{"train", {2, 3}}}));
  EXPECT_EQ(live.Find("train", 2), std::optional<size_t>(3));
  EXPECT_FALSE(live.Find("other", 1).has_value()) << "gone from the table";
}

TEST(ProgressLiveAttemptsTest, AReaderOnAnotherThreadSeesWholeTables) {
  ProgressLiveAttempts live;
  live.Publish({{"a", {1, 1}}, {"b", {1, 1}}});
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0};
  std::thread reader([&] {
    while (!stop) {
      // Every table published holds "a" at attempt 1: it is always found.
      if (!live.Find("a", 1)) ++torn;
    }
  });
  for (uint32_t i = 0; i < 20000; ++i) {
    ProgressLiveAttempts::Table table = {{"a", {1, i}}};
    if (i % 2 == 0) table.emplace("b", ProgressLiveAttempts::Live{1, i});
    live.Publish(std::move(table));
  }
  stop = true;
  reader.join();
  EXPECT_EQ(torn, 0);
}

}  // namespace
}  // namespace trainlet::agent
