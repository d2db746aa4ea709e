// When an ended attempt's env sweep runs (agent/leftover_sweeps.h): at once when a step of it
// had no cgroup or died, never when every step contained its ranks, and after the patience when
// a step hangs before it is done.
#include "agent/leftover_sweeps.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace trainlet::agent {
namespace {

using Leftovers = WorkerSupervisor::Leftovers;
using Clock = LeftoverSweeps::Clock;
using namespace std::chrono_literals;

class LeftoverSweepsTest : public ::testing::Test {
 protected:
  LeftoverSweeps sweeps_{
      [this](const std::string& job, uint32_t attempt) {
        return state_.at({job, attempt});
      },
      [this](const std::string& job, uint32_t attempt) { swept_.emplace_back(job, attempt); }, 10s};
  std::map<std::pair<std::string, uint32_t>, Leftovers> state_;
  std::vector<std::pair<std::string, uint32_t>> swept_;
  Clock::time_point t0_ = Clock::now();
};

TEST_F(LeftoverSweepsTest, ContainedAttemptsAreNotSweptAndUncontainedOnesAre) {
  state_[{"a", 1}] = Leftovers::kContained;
  state_[{"b", 1}] = Leftovers::kSweep;
  sweeps_.Ended("a", 1, t0_);
  sweeps_.Ended("b", 1, t0_);
  EXPECT_EQ(sweeps_.Run(t0_), std::nullopt);
  EXPECT_EQ(swept_, (std::vector<std::pair<std::string, uint32_t>>{{"b", 1}}));
  EXPECT_FALSE(sweeps_.Waiting("a"));
  EXPECT_FALSE(sweeps_.Waiting("b"));
  EXPECT_EQ(sweeps_.Run(t0_ + 1s), std::nullopt);
  EXPECT_EQ(swept_.size(), 1u) << "each attempt is swept once";
}

TEST_F(LeftoverSweepsTest, AWindingStepIsWaitedForThenDecides) {
  state_[{"a", 2}] = Leftovers::kWinding;
  sweeps_.Ended("a", 2, t0_);
  EXPECT_EQ(sweeps_.Run(t0_ + 1s), t0_ + 10s);
  EXPECT_TRUE(sweeps_.Waiting("a")) << "its data is not purged while its strays may run";
  EXPECT_FALSE(sweeps_.Waiting("ab"));
  EXPECT_TRUE(swept_.empty());
  state_[{"a", 2}] = Leftovers::kSweep;  // its step died before it was done
  EXPECT_EQ(sweeps_.Run(t0_ + 2s), std::nullopt);
  EXPECT_EQ(swept_, (std::vector<std::pair<std::string, uint32_t>>{{"a", 2}}));
}

TEST_F(LeftoverSweepsTest, AStepThatHangsPastThePatienceIsSweptAnyway) {
  state_[{"a", 1}] = Leftovers::kWinding;
  state_[{"z", 1}] = Leftovers::kWinding;
  sweeps_.Ended("a", 1, t0_);
  sweeps_.Ended("z", 1, t0_ + 5s);
  sweeps_.Ended("a", 1, t0_ + 5s);  // again: the first end keeps its time
  EXPECT_EQ(sweeps_.Run(t0_ + 9s), t0_ + 10s);
  EXPECT_TRUE(swept_.empty());
  EXPECT_EQ(sweeps_.Run(t0_ + 10s), t0_ + 15s);
  EXPECT_EQ(swept_, (std::vector<std::pair<std::string, uint32_t>>{{"a", 1}}));
  EXPECT_EQ(sweeps_.Run(t0_ + 15s), std::nullopt);
  EXPECT_EQ(swept_.size(), 2u);
}

}  // namespace
}  // namespace trainlet::agent
