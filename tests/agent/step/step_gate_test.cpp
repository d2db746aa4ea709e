// StepGate: which workers of a step process start, by their replicated jobs' dependsOn; and the
// launch file carrying each worker's replicated job and the waits.

#include "agent/step/step_gate.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "agent/step/step_launch.h"

namespace trainlet::step {
namespace {

using Doomed = std::vector<std::pair<size_t, std::string>>;

// Workers 0, 1: the main job ("") waiting for the initializer to complete; 2: the initializer.
StepGate InitializerThenNode() {
  return StepGate({"", "", "init"}, {{"", {{"init", "Complete"}}}});
}

TEST(StepGateTest, MainWorkersStartOnlyOnceTheInitializerCompleted) {
  StepGate gate = InitializerThenNode();
  EXPECT_EQ(gate.TakeStartable(), (std::vector<size_t>{2}));
  EXPECT_TRUE(gate.holding());
  gate.Started(2);
  EXPECT_TRUE(gate.TakeStartable().empty());  // started is not complete
  EXPECT_TRUE(gate.TakeDoomed().empty());
  gate.Exited(2, true);
  EXPECT_EQ(gate.TakeStartable(), (std::vector<size_t>{0, 1}));
  EXPECT_FALSE(gate.holding());
  EXPECT_TRUE(gate.TakeStartable().empty());  // handed out once
}

TEST(StepGateTest, AFailedDependencyDoomsItsWaitersForGood) {
  StepGate gate = InitializerThenNode();
  gate.TakeStartable();
  gate.Started(2);
  gate.Exited(2, false);
  EXPECT_TRUE(gate.TakeStartable().empty());
  EXPECT_EQ(gate.TakeDoomed(), (Doomed{{0, "not started: dependency init failed"},
                                       {1, "not started: dependency init failed"}}));
  EXPECT_FALSE(gate.holding());
  EXPECT_TRUE(gate.TakeDoomed().empty());
}

TEST(StepGateTest, ReadyIsMetOnceEveryWorkerOfTheJobStartedAndDoomIsPassedOn) {
  // 0, 1: node; 2: a watcher ready after node; 3: a reporter after the watcher completes.
  StepGate gate({"", "", "watch", "report"},
                {{"watch", {{"", "Ready"}}}, {"report", {{"watch", "Complete"}}}});
  EXPECT_EQ(gate.TakeStartable(), (std::vector<size_t>{0, 1}));
  gate.Started(0);
  EXPECT_TRUE(gate.TakeStartable().empty());  // node worker 1 has not started yet
  gate.Started(1);
  EXPECT_EQ(gate.TakeStartable(), (std::vector<size_t>{2}));
  gate.StartFailed(2);
  // The watcher never starts, so the reporter never will either.
  EXPECT_EQ(gate.TakeDoomed(), (Doomed{{3, "not started: dependency watch failed"}}));
}

TEST(StepGateTest, AJobWithNoWorkerHereIsMetAndAStopReleasesTheHeld) {
  // The main job waits for an initializer that has no worker in this step process.
  StepGate elsewhere({""}, {{"", {{"init", "Complete"}}}});
  EXPECT_EQ(elsewhere.TakeStartable(), (std::vector<size_t>{0}));

  StepGate gate = InitializerThenNode();
  gate.TakeStartable();
  gate.Started(2);
  EXPECT_EQ(gate.ReleaseHeld("stopped before its dependencies were met"),
            (Doomed{{0, "stopped before its dependencies were met"},
                    {1, "stopped before its dependencies were met"}}));
  EXPECT_FALSE(gate.holding());
  gate.Exited(2, true);
  EXPECT_TRUE(gate.TakeStartable().empty());  // released workers never start
}

TEST(StepGateTest, NothingWaitsWithoutSteps) {
  StepGate gate({"", "", ""}, {});
  EXPECT_EQ(gate.TakeStartable(), (std::vector<size_t>{0, 1, 2}));
  EXPECT_FALSE(gate.holding());
}

TEST(StepLaunchStepsTest, WorkersStepsAndWaitsSurviveTheLaunchFile) {
  StepLaunch launch;
  launch.job = "j";
  launch.attempt = 1;
  StepRank main;
  main.rank = 0;
  main.argv = {"train"};
  StepRank init;
  init.rank = 1;
  init.argv = {"trainlet-initializer", "dataset"};
  init.step = "dataset-initializer";
  launch.ranks = {main, init};
  launch.steps = {{"", {{"dataset-initializer", "Complete"}}}};
  auto back = DecodeLaunch(EncodeLaunch(launch));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->ranks[0].step, "");
  EXPECT_EQ(back->ranks[1].step, "dataset-initializer");
  EXPECT_EQ(back->steps, launch.steps);

  // A launch file of an older agent (no steps, no step per rank) still reads: nothing waits.
  nlohmann::json doc = nlohmann::json::parse(EncodeLaunch(launch));
  ASSERT_TRUE(doc.contains("steps"));
  doc.erase("steps");
  for (auto& r : doc["ranks"]) r.erase("step");
  const std::string old = doc.dump();
  auto older = DecodeLaunch(old);
  ASSERT_TRUE(older.ok()) << older.status().message() << "\n" << old;
  EXPECT_TRUE(older->steps.empty());
  EXPECT_EQ(older->ranks[1].step, "");

  // A status other than Ready or Complete is refused by path.
  std::string bad = EncodeLaunch(launch);
  bad.replace(bad.find("\"Complete\""), 10, "\"Done\"");
  auto refused = DecodeLaunch(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("steps[0].depends_on[0].status"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace trainlet::step
