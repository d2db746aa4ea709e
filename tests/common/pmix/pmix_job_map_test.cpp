// The PMIx job map and rank env stream (common/pmix/pmix_job_map.h): what the mpi plugin writes,
// trainlet-pmix reads, and trainlet-step reads back from trainlet-pmix.
#include "common/pmix/pmix_job_map.h"

#include <gtest/gtest.h>

namespace trainlet::pmix {
namespace {

PmixJobMap TwoByTwo() {
  PmixJobMap map;
  map.nspace = "trainlet.train.3";
  map.nodes = {{"host1", {0, 1}}, {"host2", {2, 3}}};
  return map;
}

TEST(PmixJobMapTest, RoundTrips) {
  const std::string text = EncodeJobMap(TwoByTwo());
  EXPECT_EQ(text,
            "trainlet-pmix-job-map 1\nnspace trainlet.train.3\nnode host1 0,1\nnode host2 2,3\n");
  auto map = DecodeJobMap(text);
  ASSERT_TRUE(map.ok()) << map.status().message();
  EXPECT_EQ(map->nspace, "trainlet.train.3");
  ASSERT_EQ(map->nodes.size(), 2u);
  EXPECT_EQ(map->nodes[1].hostname, "host2");
  EXPECT_EQ(map->nodes[1].ranks, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(map->Size(), 4u);
}

TEST(PmixJobMapTest, TextsForPmixRegexes) {
  EXPECT_EQ(NodeListText(TwoByTwo()), "host1,host2");
  EXPECT_EQ(ProcMapText(TwoByTwo()), "0,1;2,3");
  EXPECT_EQ(RankListText({4, 5, 6}), "4,5,6");
}

TEST(PmixJobMapTest, RefusesMapsThatMissOrRepeatARank) {
  const std::string head = "trainlet-pmix-job-map 1\nnspace ns\n";
  EXPECT_FALSE(DecodeJobMap(head + "node a 0,2\n").ok());            // 1 missing
  EXPECT_FALSE(DecodeJobMap(head + "node a 0,1\nnode b 1\n").ok());  // 1 twice
  EXPECT_FALSE(DecodeJobMap(head + "node a 1,0\n").ok());            // not ascending
  EXPECT_FALSE(DecodeJobMap(head + "node a x\n").ok());
  EXPECT_FALSE(DecodeJobMap(head).ok());  // no nodes
  EXPECT_FALSE(DecodeJobMap("trainlet-pmix-job-map 2\nnspace ns\nnode a 0\n").ok());
  auto bad = DecodeJobMap(head + "hello\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 3"), std::string::npos) << bad.status().message();
}

TEST(PmixJobMapTest, NamespaceIsPrintableAndFitsPmix) {
  EXPECT_EQ(NamespaceFor("train", 2), "trainlet.train.2");
  EXPECT_EQ(NamespaceFor("a b\tc", 1), "trainlet.a_b_c.1");
  const std::string long_ns = NamespaceFor(std::string(400, 'j'), 17);
  EXPECT_EQ(long_ns.size(), 255u);
  EXPECT_EQ(long_ns.substr(long_ns.size() - 3), ".17");
}

TEST(RankEnvStreamTest, ParsesEachRanksEnvUpToReady) {
  auto a = EncodeRankEnvLine(0, "PMIX_RANK=0");
  auto b = EncodeRankEnvLine(1, "PMIX_SERVER_URI41=ns.0;tcp4://127.0.0.1:4000");
  ASSERT_TRUE(a.ok() && b.ok());
  auto envs = ParseRankEnvStream(*a + *b + "ready\n");
  ASSERT_TRUE(envs.ok()) << envs.status().message();
  EXPECT_EQ((*envs)[0]["PMIX_RANK"], "0");
  EXPECT_EQ((*envs)[1]["PMIX_SERVER_URI41"], "ns.0;tcp4://127.0.0.1:4000");
}

TEST(RankEnvStreamTest, ErrorsAndCutStreamsAreRefused) {
  auto error = ParseRankEnvStream("error PMIx server: PMIx_server_init: boom\n");
  ASSERT_FALSE(error.ok());
  EXPECT_EQ(error.status().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(error.status().message(), "PMIx server: PMIx_server_init: boom");
  EXPECT_FALSE(ParseRankEnvStream("env 0 A=1\n").ok());       // no ready: the server died
  EXPECT_FALSE(ParseRankEnvStream("env 0 A=1\nready").ok());  // ready not finished
  EXPECT_FALSE(ParseRankEnvStream("env x A=1\nready\n").ok());
  EXPECT_FALSE(ParseRankEnvStream("env 0 =1\nready\n").ok());
  EXPECT_FALSE(EncodeRankEnvLine(0, "A=1\n2").ok());
  EXPECT_FALSE(EncodeRankEnvLine(0, "NOEQUALS").ok());
}

}  // namespace
}  // namespace trainlet::pmix
