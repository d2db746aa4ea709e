// When an ended attempt's env sweep runs (agent/leftover_sweeps.h): once its steps are done when
// a step of it had no cgroup or died, never when every step contained its ranks, after the
// patience when a step hangs before it is done, and not while ranks of the attempt run again.
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
using Attempt = std::pair<std::string, uint32_t>;
using namespace std::chrono_literals;

constexpr Leftovers kContained{};
constexpr Leftovers kUncontained{.uncontained = true};
constexpr Leftovers kWinding{.winding = true};
constexpr Leftovers kRunningAgain{.running = true};

class LeftoverSweepsTest : public ::testing::Test {
 protected:
  LeftoverSweeps sweeps_{
      [this](const std::string& job, uint32_t attempt) {
        return state_.at({job, attempt});
      },
      [this](const std::string& job, uint32_t attempt) { swept_.emplace_back(job, attempt); }, 10s};
  std::map<Attempt, Leftovers> state_;
  std::vector<Attempt> swept_;
  Clock::time_point t0_ = Clock::now();
};

TEST_F(LeftoverSweepsTest, ContainedAttemptsAreNotSweptAndUncontainedOnesAre) {
  state_[{"a", 1}] = kContained;
  state_[{"b", 1}] = kUncontained;
  sweeps_.Ended("a", 1, t0_);
  sweeps_.Ended("b", 1, t0_);
  EXPECT_EQ(sweeps_.Run(t0_), std::nullopt);
  EXPECT_EQ(swept_, (std::vector<Attempt>{{"b", 1}}));
  EXPECT_FALSE(sweeps_.Waiting("a"));
  EXPECT_FALSE(sweeps_.Waiting("b"));
  EXPECT_EQ(sweeps_.Run(t0_ + 1s), std::nullopt);
  EXPECT_EQ(swept_.size(), 1u) << "each attempt is swept once";
}

TEST_F(LeftoverSweepsTest, AWindingStepIsWaitedForThenDecides) {
  state_[{"a", 2}] = kWinding;
  sweeps_.Ended("a", 2, t0_);
  EXPECT_EQ(sweeps_.Run(t0_ + 1s), t0_ + 10s);
  EXPECT_TRUE(sweeps_.Waiting("a")) << "its data is not purged while its strays may run";
  EXPECT_FALSE(sweeps_.Waiting("ab"));
  EXPECT_TRUE(swept_.empty());
  state_[{"a", 2}] = kUncontained;  // its step died before it was done
  EXPECT_EQ(sweeps_.Run(t0_ + 2s), std::nullopt);
  EXPECT_EQ(swept_, (std::vector<Attempt>{{"a", 2}}));
}

TEST_F(LeftoverSweepsTest, AStepThatHangsPastThePatienceIsSweptAnyway) {
  state_[{"a", 1}] = kWinding;
  state_[{"z", 1}] = kWinding;
  sweeps_.Ended("a", 1, t0_);
  sweeps_.Ended("z", 1, t0_ + 5s);
  EXPECT_EQ(sweeps_.Run(t0_ + 9s), t0_ + 10s);
  EXPECT_TRUE(swept_.empty());
  EXPECT_EQ(sweeps_.Run(t0_ + 10s), t0_ + 15s);
  EXPECT_EQ(swept_, (std::vector<Attempt>{{"a", 1}}));
  EXPECT_EQ(sweeps_.Run(t0_ + 15s), std::nullopt);
  EXPECT_EQ(swept_.size(), 2u);
}

// An initializer step of the attempt ended without a cgroup, and the trainer's ranks of the same
// attempt started before the sweep: they carry the same tags, so the sweep waits for their end,
// and then runs even though the trainer's step contained its ranks (the initializer's step, whose
// record may be gone by then, did not).
TEST_F(LeftoverSweepsTest, RanksOfTheAttemptStartingAgainPutTheSweepOff) {
  state_[{"a", 1}] = Leftovers{.winding = true, .uncontained = true};
  sweeps_.Ended("a", 1, t0_);
  state_[{"a", 1}] = Leftovers{.running = true, .uncontained = true};
  EXPECT_EQ(sweeps_.Run(t0_ + 20s), std::nullopt) << "no patience while ranks run";
  EXPECT_TRUE(swept_.empty()) << "the sweep would kill the trainer's ranks";
  EXPECT_TRUE(sweeps_.Waiting("a"));
  state_[{"a", 1}] = kRunningAgain;  // the initializer's step record went
  EXPECT_EQ(sweeps_.Run(t0_ + 21s), std::nullopt);
  EXPECT_TRUE(swept_.empty());
  state_[{"a", 1}] = kContained;
  sweeps_.Ended("a", 1, t0_ + 30s);
  EXPECT_EQ(sweeps_.Run(t0_ + 30s), std::nullopt);
  EXPECT_EQ(swept_, (std::vector<Attempt>{{"a", 1}})) << "the initializer's leftovers are owed";
}

}  // namespace
}  // namespace trainlet::agent
