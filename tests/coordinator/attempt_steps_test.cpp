// The replicated jobs of a runtime beside the main one: what each step runs, how its workers are
// numbered and planned, and the start timeout's clock while ranks wait for them.

#include "coordinator/attempt_steps.h"

#include <gtest/gtest.h>

namespace trainlet::coordinator {
namespace {

trainjob::ReplicatedJob Rj(const std::string& name, std::vector<std::string> command,
                           std::vector<trainjob::JobDependency> deps = {}, int32_t replicas = 1) {
  trainjob::ReplicatedJob rj;
  rj.name = name;
  rj.replicas = replicas;
  trainjob::ContainerSpec c;
  c.name = name;
  c.command = std::move(command);
  rj.container = c;
  rj.depends_on = std::move(deps);
  return rj;
}

trainjob::TrainingRuntime Runtime(std::vector<trainjob::ReplicatedJob> jobs) {
  trainjob::TrainingRuntime rt;
  rt.kind = "ClusterTrainingRuntime";
  rt.name = "rt";
  rt.jobs = std::move(jobs);
  return rt;
}

trainjob::TrainJob Job() {
  trainjob::TrainJob job;
  job.name = "j";
  job.trainer.env = {{"TRAINER_ONLY", "1"}};
  return job;
}

std::map<std::string, std::string> EnvOf(const StepSpec& s) { return {s.env.begin(), s.env.end()}; }

TEST(AttemptStepsTest, ABuiltInInitializerGetsItsArgvAndTheTrainJobsStorageUri) {
  auto init = Rj("dataset-initializer", {});
  init.container->env = {{"STORAGE_URI", "hf://default"}, {"KEEP", "k"}};
  auto rt = Runtime({init, Rj("node", {"train"}, {{"dataset-initializer", "Complete"}})});
  auto job = Job();
  job.dataset_initializer = trainjob::TrainJob::Initializer{"file:///data", {{"EXTRA", "e"}}};
  auto steps = StepsOf(job, rt);
  ASSERT_TRUE(steps.ok()) << steps.status().ToString();
  ASSERT_EQ(steps->steps.size(), 1u);
  const StepSpec& s = steps->steps[0];
  EXPECT_EQ(s.argv, (std::vector<std::string>{"trainlet-initializer", "dataset"}));
  EXPECT_EQ(EnvOf(s), (std::map<std::string, std::string>{
                          {"STORAGE_URI", "file:///data"}, {"KEEP", "k"}, {"EXTRA", "e"}}));
  ASSERT_EQ(steps->main_depends_on.size(), 1u);
  EXPECT_EQ(steps->main_depends_on[0].step(), "dataset-initializer");
  EXPECT_EQ(steps->main_depends_on[0].status(), "Complete");
}

TEST(AttemptStepsTest, AStepWithoutACommandThatIsNoInitializerIsRefused) {
  auto rt = Runtime({Rj("prep", {}), Rj("node", {"train"})});
  auto steps = StepsOf(Job(), rt);
  ASSERT_FALSE(steps.ok());
  EXPECT_NE(
      steps.status().message().find("replicatedJobs[0] (prep): its container sets no command"),
      std::string::npos)
      << steps.status().message();
}

TEST(AttemptStepsTest, StepsComeAfterTheirDependenciesAndMainNamesAreEmpty) {
  auto rt = Runtime({Rj("b", {"b"}, {{"a", "Complete"}}), Rj("a", {"a"}), Rj("node", {"train"}),
                     Rj("launcher", {"mpirun"}, {{"node", "Ready"}}),
                     Rj("watch", {"w"}, {{"node", "Ready"}})});
  auto steps = StepsOf(Job(), rt);
  ASSERT_TRUE(steps.ok()) << steps.status().ToString();
  ASSERT_EQ(steps->steps.size(), 3u);
  EXPECT_EQ(steps->steps[0].name, "a");
  EXPECT_EQ(steps->steps[1].name, "b");
  EXPECT_EQ(steps->steps[2].name, "watch");
  EXPECT_EQ(steps->steps[2].depends_on.at(0).step(), "");  // node is the main one
  // The launcher's wait for node is the plugin's business, not a step's.
  EXPECT_TRUE(steps->main_depends_on.empty());
}

AttemptLayout TwoNodesTwoRanks() {
  AttemptLayout layout;
  layout.nodes.resize(2);
  layout.nodes[0].ranks = {{0, 0}, {1, 1}};
  layout.nodes[1].ranks = {{2, 0}, {3, 1}};
  return layout;
}

std::vector<v1::LaunchPlan> PlansOf(const AttemptLayout& layout) {
  std::vector<v1::LaunchPlan> plans(layout.nodes.size());
  for (size_t n = 0; n < layout.nodes.size(); ++n) {
    for (const auto& r : layout.nodes[n].ranks) {
      auto* w = plans[n].add_workers();
      w->set_rank(r.rank);
      w->set_local_rank(r.local_rank);
      w->add_argv("train");
      (*w->mutable_env())["RANK"] = std::to_string(r.rank);
    }
  }
  return plans;
}

TEST(AttemptStepsTest, StepWorkersRunOnEveryNodeNumberedAfterTheMainWorld) {
  auto init = Rj("dataset-initializer", {"sh", "-c", "true"}, {}, 2);
  init.container->env = {{"A", "1"}};
  auto rt = Runtime(
      {init, Rj("node", {"train"}, {{"dataset-initializer", "Complete"}}), Rj("late", {"x"})});
  auto steps = StepsOf(Job(), rt);
  ASSERT_TRUE(steps.ok());
  const AttemptLayout layout = TwoNodesTwoRanks();
  auto plans = PlansOf(layout);
  AddStepsToPlans(*steps, layout, plans);

  ASSERT_EQ(plans[0].workers_size(), 2 + 2 + 1);
  const auto& w = plans[0].workers(2);
  EXPECT_EQ(w.rank(), 4u);
  EXPECT_EQ(w.local_rank(), 0u);
  EXPECT_EQ(w.step(), "dataset-initializer");
  EXPECT_EQ(std::vector<std::string>(w.argv().begin(), w.argv().end()),
            (std::vector<std::string>{"sh", "-c", "true"}));
  // Its container's env and trainlet's step variables: no trainer env, no RANK of the training.
  EXPECT_EQ(w.env().at("A"), "1");
  EXPECT_EQ(w.env().at("TRAINLET_STEP"), "dataset-initializer");
  EXPECT_EQ(w.env().at("TRAINLET_STEP_REPLICA"), "0");
  EXPECT_FALSE(w.env().contains("RANK"));
  EXPECT_FALSE(w.env().contains("TRAINLET_RANK"));
  EXPECT_EQ(plans[0].workers(3).rank(), 5u);
  EXPECT_EQ(plans[0].workers(3).local_rank(), 1u);
  EXPECT_EQ(plans[1].workers(2).rank(), 6u);
  EXPECT_EQ(plans[1].workers(3).rank(), 7u);
  // Step by step: "late"'s workers follow every initializer worker.
  EXPECT_EQ(plans[0].workers(4).rank(), 8u);
  EXPECT_EQ(plans[1].workers(4).rank(), 9u);
  EXPECT_EQ(plans[1].workers(4).step(), "late");
  EXPECT_EQ(plans[0].workers(0).step(), "");

  // Only steps that wait are listed: here the main one.
  ASSERT_EQ(plans[1].steps_size(), 1);
  EXPECT_EQ(plans[1].steps(0).name(), "");
  EXPECT_EQ(plans[1].steps(0).depends_on(0).step(), "dataset-initializer");
  EXPECT_EQ(plans[1].steps(0).depends_on(0).status(), "Complete");

  v1::JobStatus st;
  AddStepRanks(*steps, layout, {"node-a", "node-b"}, 3, st);
  ASSERT_EQ(st.ranks_size(), 6);
  EXPECT_EQ(st.ranks(2).rank(), 6u);
  EXPECT_EQ(st.ranks(2).node(), "node-b");
  EXPECT_EQ(st.ranks(2).step(), "dataset-initializer");
  EXPECT_EQ(st.ranks(2).attempt(), 3u);
  EXPECT_EQ(st.ranks(2).rank_state(), v1::RANK_STATE_PENDING);
  EXPECT_EQ(StepWorkerRank(st, "dataset-initializer", 3), 7u);
  EXPECT_EQ(StepWorkerRank(st, "late", 1), 9u);
  EXPECT_EQ(StepWorkerRank(st, "late", 2), std::nullopt);
  EXPECT_EQ(StepWorkerRank(st, "nope", 0), std::nullopt);
  // Each step's ranks in this attempt are recorded, for `logs --step S --attempt 3` later.
  ASSERT_EQ(st.attempt_steps_size(), 2);
  EXPECT_EQ(st.attempt_steps(0).attempt(), 3u);
  EXPECT_EQ(st.attempt_steps(0).step(), "dataset-initializer");
  EXPECT_EQ(st.attempt_steps(0).first_rank(), 4u);
  EXPECT_EQ(st.attempt_steps(0).count(), 4u);
  EXPECT_EQ(st.attempt_steps(1).step(), "late");
  EXPECT_EQ(st.attempt_steps(1).first_rank(), 8u);
  EXPECT_EQ(st.attempt_steps(1).count(), 2u);
  // Step workers are in no fence of the training: their exits fail none.
  EXPECT_TRUE(IsStepWorker(st, 3, 4));
  EXPECT_TRUE(IsStepWorker(st, 3, 9));
  EXPECT_FALSE(IsStepWorker(st, 3, 0));   // a main rank
  EXPECT_FALSE(IsStepWorker(st, 3, 10));  // no such worker
  EXPECT_FALSE(IsStepWorker(st, 2, 4));   // another attempt, not recorded
}

// Issue 18: a step runs in its own container's workingDir, not the main container's, and under
// the job's shared directory when the job asks for it.
TEST(AttemptStepsTest, AStepRunsInItsOwnContainersWorkingDir) {
  auto init = Rj("dataset-initializer", {"sh", "-c", "true"});
  init.container->working_dir = "prep";
  auto abs = Rj("late", {"x"});
  abs.container->working_dir = "/srv/late";
  auto rt = Runtime({init, Rj("node", {"train"}), abs, Rj("plain", {"y"})});
  auto steps = StepsOf(Job(), rt);
  ASSERT_TRUE(steps.ok()) << steps.status().ToString();
  const AttemptLayout layout = TwoNodesTwoRanks();
  auto plans = PlansOf(layout);
  AddStepsToPlans(*steps, layout, plans);
  ASSERT_EQ(plans[0].workers_size(), 2 + 3);
  EXPECT_EQ(plans[0].workers(2).cwd(), "prep");
  EXPECT_EQ(plans[0].workers(3).cwd(), "/srv/late");
  EXPECT_EQ(plans[0].workers(4).cwd(), "");  // the job's work dir

  auto shared = Job();
  shared.annotations["trainlet.io/working-dir"] = "shared";
  steps = StepsOf(shared, rt);
  ASSERT_TRUE(steps.ok()) << steps.status().ToString();
  plans = PlansOf(layout);
  AddStepsToPlans(*steps, layout, plans);
  EXPECT_EQ(plans[1].workers(2).cwd(), "$(TRAINLET_SHARED_WORK_DIR)/prep");
  EXPECT_EQ(plans[1].workers(3).cwd(), "/srv/late");
  EXPECT_EQ(plans[1].workers(4).cwd(), "$(TRAINLET_SHARED_WORK_DIR)");

  shared.annotations["trainlet.io/working-dir"] = "nfs";
  EXPECT_FALSE(StepsOf(shared, rt).ok());
}

// Issue 19: a step's workers run as its own container's securityContext user and group.
TEST(AttemptStepsTest, AStepCarriesItsContainersRunAs) {
  auto init = Rj("dataset-initializer", {"sh", "-c", "true"});
  init.container->run_as_user = 65534;
  init.container->run_as_group = 5;
  init.container->allow_privilege_escalation = true;
  auto rt = Runtime({init, Rj("node", {"train"}), Rj("late", {"x"})});
  auto steps = StepsOf(Job(), rt);
  ASSERT_TRUE(steps.ok()) << steps.status().ToString();
  const AttemptLayout layout = TwoNodesTwoRanks();
  auto plans = PlansOf(layout);
  AddStepsToPlans(*steps, layout, plans);
  ASSERT_EQ(plans[0].workers_size(), 2 + 1 + 1);
  EXPECT_EQ(plans[0].workers(2).step(), "dataset-initializer");
  EXPECT_EQ(plans[0].workers(2).run_as_user(), 65534);
  EXPECT_EQ(plans[0].workers(2).run_as_group(), 5);
  EXPECT_TRUE(plans[0].workers(2).allow_privilege_escalation());
  EXPECT_FALSE(plans[0].workers(3).has_allow_privilege_escalation());
  EXPECT_FALSE(plans[0].workers(3).has_run_as_user());  // "late" sets none
  EXPECT_FALSE(plans[0].workers(0).has_run_as_user());  // the main ones are attempt_plan's
}

TEST(AttemptStepsTest, NoStepsLeavesThePlansAlone) {
  auto steps = StepsOf(Job(), Runtime({Rj("node", {"train"})}));
  ASSERT_TRUE(steps.ok());
  EXPECT_TRUE(steps->empty());
  const AttemptLayout layout = TwoNodesTwoRanks();
  auto plans = PlansOf(layout);
  AddStepsToPlans(*steps, layout, plans);
  EXPECT_EQ(plans[0].workers_size(), 2);
  EXPECT_EQ(plans[0].steps_size(), 0);
}

v1::RankStatus* AddRank(v1::JobStatus& st, const std::string& node, const std::string& step,
                        v1::RankState state) {
  auto* r = st.add_ranks();
  r->set_rank(static_cast<uint32_t>(st.ranks_size() - 1));
  r->set_node(node);
  r->set_step(step);
  r->set_rank_state(state);
  return r;
}

TEST(AttemptStepsTest, RanksHeldBehindARunningStepDoNotCountForTheStartTimeout) {
  v1::JobStatus st;
  AddRank(st, "node-a", "", v1::RANK_STATE_PENDING);
  AddRank(st, "node-a", "dataset-initializer", v1::RANK_STATE_RUNNING);
  EXPECT_EQ(StartClockMs(st, 1000), std::nullopt);  // the initializer may run for an hour

  // Another node whose ranks never reported counts from the attempt's start.
  AddRank(st, "node-b", "", v1::RANK_STATE_PENDING);
  EXPECT_EQ(StartClockMs(st, 1000), 1000);

  // Once the step is done, the held ranks count from its progress.
  v1::JobStatus done;
  AddRank(done, "node-a", "", v1::RANK_STATE_PENDING);
  AddRank(done, "node-a", "dataset-initializer", v1::RANK_STATE_SUCCEEDED);
  done.set_step_progress_unix_ms(5000);
  EXPECT_EQ(StartClockMs(done, 1000), 5000);

  // Issue 18: on more than one node, a node whose own initializer is done waits while another
  // node's still runs (its ranks start only once every node's completed, step_release.h).
  v1::JobStatus two;
  two.add_placement("node-a");
  two.add_placement("node-b");
  AddRank(two, "node-a", "", v1::RANK_STATE_PENDING);
  AddRank(two, "node-a", "dataset-initializer", v1::RANK_STATE_SUCCEEDED);
  AddRank(two, "node-b", "", v1::RANK_STATE_PENDING);
  AddRank(two, "node-b", "dataset-initializer", v1::RANK_STATE_RUNNING);
  EXPECT_EQ(StartClockMs(two, 1000), std::nullopt);
  // A node whose plan never came (its step worker Pending too) still counts.
  AddRank(two, "node-c", "", v1::RANK_STATE_PENDING);
  AddRank(two, "node-c", "dataset-initializer", v1::RANK_STATE_PENDING);
  two.add_placement("node-c");
  EXPECT_EQ(StartClockMs(two, 1000), 1000);

  // Without steps: as before, from the attempt's start while a rank is Pending.
  v1::JobStatus plain;
  AddRank(plain, "node-a", "", v1::RANK_STATE_RUNNING);
  EXPECT_EQ(StartClockMs(plain, 1000), std::nullopt);
  AddRank(plain, "node-b", "", v1::RANK_STATE_PENDING);
  EXPECT_EQ(StartClockMs(plain, 1000), 1000);
}

TEST(AttemptStepsTest, AnInitializerWithoutItsStepIsWarnedAbout) {
  auto job = Job();
  job.model_initializer = trainjob::TrainJob::Initializer{"hf://m", {}};
  auto warnings = StepWarnings(job, Runtime({Rj("node", {"train"})}));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0],
            "TrainJob/j: spec.initializer.model: ignored (runtime ClusterTrainingRuntime/rt has "
            "no model-initializer replicated job to run it)");
  EXPECT_TRUE(StepWarnings(job, Runtime({Rj("model-initializer", {}), Rj("node", {"t"})})).empty());
}

}  // namespace
}  // namespace trainlet::coordinator
