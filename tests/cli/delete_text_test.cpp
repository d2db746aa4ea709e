#include "trainletctl/delete_text.h"

#include <gtest/gtest.h>

namespace trainlet::cli {
namespace {

v1::WaitJobResult Wait(std::initializer_list<v1::RankState> states) {
  v1::WaitJobResult w;
  for (v1::RankState s : states) w.mutable_job()->add_ranks()->set_rank_state(s);
  return w;
}

TEST(DeleteNotDoneMessage, RanksStillRunningAreCounted) {
  EXPECT_EQ(DeleteNotDoneMessage(
                "j", "30s",
                Wait({v1::RANK_STATE_RUNNING, v1::RANK_STATE_SUCCEEDED, v1::RANK_STATE_RUNNING})),
            "trainjob/j is still stopping its ranks after 30s (2 ranks run); it will be removed "
            "once they exit");
  EXPECT_NE(DeleteNotDoneMessage("j", "30s", Wait({v1::RANK_STATE_PENDING})).find("(1 rank runs)"),
            std::string::npos);
}

// A job with no rank left that still is not gone (a full disk) must not be blamed on its ranks.
TEST(DeleteNotDoneMessage, NoRunningRankIsNotCalledStopping) {
  v1::WaitJobResult none = Wait({v1::RANK_STATE_SUCCEEDED, v1::RANK_STATE_FAILED});
  none.set_message("timed out waiting for trainjob/j to be Deleted");
  const std::string m = DeleteNotDoneMessage("j", "30s", none);
  EXPECT_EQ(m.find("stopping its ranks"), std::string::npos) << m;
  EXPECT_NE(m.find("none of its ranks runs"), std::string::npos) << m;
  EXPECT_NE(m.find("timed out waiting"), std::string::npos) << m;
  EXPECT_EQ(DeleteNotDoneMessage("j", "5s", Wait({})).find("stopping"), std::string::npos);
}

// A job a Lost node keeps Terminating (coordinator/delete_gate.h) says which node it waits for.
TEST(DeleteNotDoneMessage, ALostNodeKeepingItIsNamed) {
  v1::WaitJobResult w = Wait({v1::RANK_STATE_LOST});
  auto* ev = w.mutable_job()->add_events();
  ev->set_reason("DeleteWaitsForNode");
  ev->set_message("node node-2 is Lost; its ranks are stopped once it registers again");
  EXPECT_EQ(DeleteNotDoneMessage("j", "30s", w),
            "trainjob/j is still Terminating after 30s: node node-2 is Lost; its ranks are "
            "stopped once it registers again");
}

}  // namespace
}  // namespace trainlet::cli
