// ExecRelay's dedup rule for one output stream (ExecRelay::TrimRelayed): output a restarted agent
// resends from the last acknowledged offset reaches trainlet-exec once, in order.
#include "coordinator/exec_relay.h"

#include <gtest/gtest.h>

#include <string>

namespace trainlet::coordinator {
namespace {

TEST(ExecRelayTrim, NewBytesPassAndAdvanceTheCount) {
  uint64_t relayed = 0;
  std::string data = "hello";
  EXPECT_TRUE(ExecRelay::TrimRelayed(0, &data, &relayed));
  EXPECT_EQ(data, "hello");
  EXPECT_EQ(relayed, 5u);
  data = " world";
  EXPECT_TRUE(ExecRelay::TrimRelayed(5, &data, &relayed));
  EXPECT_EQ(data, " world");
  EXPECT_EQ(relayed, 11u);
}

TEST(ExecRelayTrim, AResendIsDroppedAndAnOverlapCut) {
  uint64_t relayed = 11;  // "hello world" went out before the agent was killed
  std::string again = "hello";
  EXPECT_FALSE(ExecRelay::TrimRelayed(0, &again, &relayed));
  EXPECT_EQ(relayed, 11u);
  std::string tail = "world";  // bytes 6..10: all relayed
  EXPECT_FALSE(ExecRelay::TrimRelayed(6, &tail, &relayed));
  // The restarted agent resends from its acknowledged offset 8: "rld" is old, "!\n" new.
  std::string overlap = "rld!\n";
  EXPECT_TRUE(ExecRelay::TrimRelayed(8, &overlap, &relayed));
  EXPECT_EQ(overlap, "!\n");
  EXPECT_EQ(relayed, 13u);
  std::string empty;
  EXPECT_FALSE(ExecRelay::TrimRelayed(13, &empty, &relayed));
}

TEST(ExecRelayTrim, BytesAfterAGapStillPass) {
  uint64_t relayed = 4;
  std::string data = "later";
  EXPECT_TRUE(ExecRelay::TrimRelayed(10, &data, &relayed));
  EXPECT_EQ(data, "later");
  EXPECT_EQ(relayed, 15u);
}

}  // namespace
}  // namespace trainlet::coordinator
