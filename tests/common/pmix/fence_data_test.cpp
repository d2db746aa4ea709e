// A PMIx fence's data in the rendezvous store (common/pmix/fence_data.h): split into chunks under
// per-node keys, joined back in node order.
#include "common/pmix/fence_data.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace trainlet::pmix {
namespace {

using Pairs = std::vector<std::pair<std::string_view, std::string_view>>;

TEST(FenceDataTest, ChunksStayUnderTheCap) {
  auto puts = FenceDataPuts(3, 7, "abcdefghij", 4);
  ASSERT_EQ(puts.size(), 3u);
  EXPECT_EQ(puts[0], (std::pair<std::string, std::string>{"pmix/fence-3/node-7/0", "abcd"}));
  EXPECT_EQ(puts[1], (std::pair<std::string, std::string>{"pmix/fence-3/node-7/1", "efgh"}));
  EXPECT_EQ(puts[2], (std::pair<std::string, std::string>{"pmix/fence-3/node-7/2", "ij"}));
  EXPECT_TRUE(FenceDataPuts(1, 0, "").empty());  // a node with nothing to say puts nothing
}

TEST(FenceDataTest, JoinsEveryNodeInNodeOrderThenChunkOrder) {
  // Published in the store's (sorted, textual) order: node-10 before node-2, chunk 10 before 2.
  std::vector<std::pair<std::string, std::string>> all;
  for (uint32_t node : {10u, 2u, 9u}) {
    std::string data;
    for (int c = 0; c < 11; ++c) data += static_cast<char>('a' + node % 26);
    for (auto& p : FenceDataPuts(4, node, data, 1)) all.push_back(p);
  }
  std::sort(all.begin(), all.end());
  Pairs pairs(all.begin(), all.end());
  EXPECT_EQ(JoinFenceData(4, pairs),
            std::string(11, 'c') + std::string(11, 'j') + std::string(11, 'k'));
}

TEST(FenceDataTest, OtherFencesAndLookalikeKeysAreSkipped) {
  const Pairs pairs = {{"pmix/fence-1/node-0/0", "old"},  {"pmix/fence-2/node-1/0", "B"},
                       {"pmix/fence-2/node-0/0", "A"},    {"pmix/fence-22/node-0/0", "x"},
                       {"pmix/fence-2/node-x/0", "bad"},  {"pmix/fence-2/node-0/", "bad"},
                       {"pmix/fence-2/node-0/1z", "bad"}, {"addr/3", "10.0.0.1:5"},
                       {"pmix/fence-2/node-0", "bad"}};
  EXPECT_EQ(JoinFenceData(2, pairs), "AB");
  EXPECT_EQ(JoinFenceData(5, pairs), "");
}

}  // namespace
}  // namespace trainlet::pmix
