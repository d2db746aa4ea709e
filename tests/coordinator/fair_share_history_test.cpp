// Fair sharing's usage history as stored (coordinator/fair_share_history.h): what is encoded
// decodes the same, and a damaged value is refused naming what is wrong, never half-read.
#include "coordinator/fair_share_history.h"

#include <gtest/gtest.h>

namespace trainlet::coordinator {
namespace {

TEST(FairShareHistoryTest, RoundTrips) {
  std::vector<admission::UsageHistory> h(2);
  h[0].cluster_queue = "team-a";
  h[0].as_of_ms = 1'764'000'000'123;
  h[0].usage = {{"cpu", 1.5e6}, {"nvidia.com/gpu", 0.25}};
  h[1].cluster_queue = "team-b";
  h[1].as_of_ms = 7;
  auto back = DecodeUsageHistory(EncodeUsageHistory(h));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].cluster_queue, "team-a");
  EXPECT_EQ((*back)[0].as_of_ms, 1'764'000'000'123);
  EXPECT_EQ((*back)[0].usage, h[0].usage);
  EXPECT_EQ((*back)[1].cluster_queue, "team-b");
  EXPECT_TRUE((*back)[1].usage.empty());
}

TEST(FairShareHistoryTest, NothingStoredIsAnEmptyHistory) {
  auto none = DecodeUsageHistory("");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(FairShareHistoryTest, DamagedValuesAreRefusedNamingWhatIsWrong) {
  const std::pair<const char*, const char*> cases[] = {
      {"{not json", "not a JSON object"},
      {"[1]", "not a JSON object"},
      {R"({"version":2,"queues":[]})", "version is not 1"},
      {R"({"version":1})", "queues is not a list"},
      {R"({"version":1,"queues":[{"clusterQueue":"a","asOfMs":"x","usage":{}}]})", "queues[0]"},
      {R"({"version":1,"queues":[{"clusterQueue":"a","asOfMs":1,"usage":{"cpu":-1}}]})",
       "queues[0].usage.cpu"},
      {R"({"version":1,"queues":[{"clusterQueue":"a","asOfMs":1,"usage":{"cpu":"1"}}]})",
       "queues[0].usage.cpu"},
  };
  for (const auto& [bytes, want] : cases) {
    auto r = DecodeUsageHistory(bytes);
    ASSERT_FALSE(r.ok()) << bytes;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalid) << bytes;
    EXPECT_NE(r.status().message().find(want), std::string::npos)
        << bytes << " -> " << r.status().message();
  }
}

}  // namespace
}  // namespace trainlet::coordinator
