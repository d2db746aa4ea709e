// PlanLaunches and its pieces: pure, so every rule is checked on values alone: env precedence
// (rendezvous > node > plan > binding), $(VAR) expansion, plan file paths, duplicate ranks, the
// default cwd and log path, and which CPU bindings are applied. WritePlanFiles on a temp dir.
#include "agent/launch_planning.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "tests/common/test_dir.h"

namespace trainlet::agent {
namespace {

v1::LaunchPlan Plan(uint32_t workers) {
  v1::LaunchPlan plan;
  plan.set_job("train");
  plan.set_attempt(3);
  for (uint32_t i = 0; i < workers; ++i) {
    auto* w = plan.add_workers();
    w->set_rank(10 + i);
    w->set_local_rank(i);
    w->add_argv("/bin/true");
  }
  return plan;
}

NodeLaunchContext Node() {
  NodeLaunchContext node;
  node.node = "n1";
  node.state_dir = "/state";
  node.exec_binary = "/bin/trainlet-exec";
  return node;
}

// Two NUMA nodes of four PUs each: two local ranks get one each.
v1::NodeInfo TwoNumaNodes() {
  v1::NodeInfo info;
  auto* topo = info.mutable_topology();
  topo->set_pus(8);
  topo->set_source("xml:test");
  auto* a = topo->add_numa_nodes();
  a->set_os_index(0);
  a->set_cpuset("0-3");
  auto* b = topo->add_numa_nodes();
  b->set_os_index(1);
  b->set_cpuset("4-7");
  return info;
}

TEST(ExpandPlanVars, ExpandsKnownNamesAndLeavesTheRest) {
  const std::map<std::string, std::string> vars = {{"A", "1"}, {"WORK", "/w"}};
  EXPECT_EQ(ExpandPlanVars("$(WORK)/x:$(A)$(A)", vars), "/w/x:11");
  EXPECT_EQ(ExpandPlanVars("$(UNKNOWN) $(A", vars), "$(UNKNOWN) $(A");
  EXPECT_EQ(ExpandPlanVars("$A ${A} $()", vars), "$A ${A} $()");
  EXPECT_EQ(ExpandPlanVars("", vars), "");
  EXPECT_EQ(ExpandPlanVars("no reference at all", vars), "no reference at all");
  EXPECT_EQ(ExpandPlanVars("$(X)$(A)", vars), "$(X)1");
  EXPECT_EQ(ExpandPlanVars("$($(A))", vars), "$(1)");
  EXPECT_EQ(ExpandPlanVars("a$(A)b$(WORK)c", vars), "a1b/wc");
}

TEST(CheckPlanFilePath, RefusesPathsOutsideTheWorkDir) {
  EXPECT_TRUE(CheckPlanFilePath("hostfile").ok());
  EXPECT_TRUE(CheckPlanFilePath("a/b/c.txt").ok());
  EXPECT_TRUE(CheckPlanFilePath("a/..b").ok());
  for (const char* bad : {"", "/etc/passwd", "../x", "a/../../x", "a/.."}) {
    const Status s = CheckPlanFilePath(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.code(), ErrorCode::kInvalid);
    EXPECT_EQ(s.message(),
              std::string("plan file ") + bad + ": must be a relative path inside the work dir");
  }
}

TEST(PlanLaunches, EnvPrecedenceIsRendezvousThenNodeThenPlanThenBinding) {
  v1::LaunchPlan plan = Plan(2);
  auto& env = *plan.mutable_workers(0)->mutable_env();
  env["MINE"] = "plan";
  env["TRAINLET_NODE"] = "plan";  // the node's own value wins
  env["TRAINLET_RENDEZVOUS_TOKEN"] = "plan";
  env["TRAINLET_CPUSET"] = "plan";  // the plan's own value wins over the binding's
  env["HOSTFILE"] = "$(TRAINLET_WORK_DIR)/hostfile";
  const v1::NodeInfo info = TwoNumaNodes();
  NodeLaunchContext node = Node();
  node.node_info = &info;
  node.rendezvous_env = {{"TRAINLET_RENDEZVOUS_TOKEN", "secret"}, {"TRAINLET_NODE", "rdv"}};
  const PlannedLaunches planned = PlanLaunches(plan, node);
  ASSERT_EQ(planned.launches.size(), 2u);
  const auto& e0 = planned.launches[0].env;
  EXPECT_EQ(e0.at("MINE"), "plan");
  EXPECT_EQ(e0.at("TRAINLET_NODE"), "rdv");
  EXPECT_EQ(e0.at("TRAINLET_RENDEZVOUS_TOKEN"), "secret");
  EXPECT_EQ(e0.at("TRAINLET_CPUSET"), "plan");
  EXPECT_EQ(e0.at("HOSTFILE"), "/state/work/train/hostfile");
  EXPECT_EQ(e0.at("TRAINLET_WORK_DIR"), "/state/work/train");
  EXPECT_EQ(e0.at("TRAINLET_EXEC"), "/bin/trainlet-exec");
  const auto& e1 = planned.launches[1].env;
  EXPECT_EQ(e1.at("TRAINLET_CPUSET"), "4-7");  // nobody else sets it: the binding's
  EXPECT_EQ(e1.at("TRAINLET_NODE"), "rdv");
}

// Issue 15: every rank gets the attempt's progress env, and a plan cannot override it (a plan
// pointing ranks at another server, or at another attempt's token, would send their progress
// elsewhere).
TEST(PlanLaunches, TheProgressEnvReachesEveryRankAndWins) {
  v1::LaunchPlan plan = Plan(2);
  (*plan.mutable_workers(0)->mutable_env())["KUBEFLOW_TRAINER_SERVER_URL"] = "https://evil/";
  NodeLaunchContext node = Node();
  node.progress_env = {{"KUBEFLOW_TRAINER_SERVER_URL", "https://127.0.0.1:4443/x/status"},
                       {"KUBEFLOW_TRAINER_SERVER_CA_CERT", "/state/progress/ca.crt"},
                       {"KUBEFLOW_TRAINER_SERVER_TOKEN", "/state/progress/tokens/train.attempt-1"}};
  const PlannedLaunches planned = PlanLaunches(plan, node);
  ASSERT_EQ(planned.launches.size(), 2u);
  for (const auto& launch : planned.launches) {
    for (const auto& [k, v] : node.progress_env) EXPECT_EQ(launch.env.at(k), v) << k;
  }
  // No progress endpoint (progress_port: -1): no such env at all.
  const PlannedLaunches off = PlanLaunches(Plan(1), Node());
  EXPECT_FALSE(off.launches[0].env.contains("KUBEFLOW_TRAINER_SERVER_TOKEN"));
}

TEST(PlanLaunches, FillsTheLaunchFromThePlanAndTheNode) {
  v1::LaunchPlan plan = Plan(2);
  plan.mutable_workers(1)->set_cwd("/elsewhere");
  plan.mutable_workers(1)->add_argv("--flag");
  const PlannedLaunches planned = PlanLaunches(plan, Node());
  ASSERT_EQ(planned.launches.size(), 2u);
  const WorkerLaunch& a = planned.launches[0];
  EXPECT_EQ(a.job, "train");
  EXPECT_EQ(a.attempt, 3u);
  EXPECT_EQ(a.rank, 10u);
  EXPECT_EQ(a.local_rank, 0u);
  EXPECT_EQ(a.cwd, "/state/work/train");  // the default
  EXPECT_EQ(a.log_path, "/state/logs/train/attempt-3/rank-10.log");
  EXPECT_TRUE(a.cpus.empty());
  EXPECT_EQ(planned.launches[1].cwd, "/elsewhere");
  EXPECT_EQ(planned.launches[1].argv, (std::vector<std::string>{"/bin/true", "--flag"}));
  // No topology: nobody is bound.
  EXPECT_FALSE(planned.bindings[0].has_value());
  EXPECT_EQ(planned.launches[0].env.count("TRAINLET_CPUSET"), 0u);
}

// Issue 19: a worker's securityContext user and group reach its launch; unset stays unset.
TEST(PlanLaunches, CarriesTheWorkersRunAs) {
  v1::LaunchPlan plan = Plan(2);
  plan.mutable_workers(0)->set_run_as_user(65534);
  plan.mutable_workers(0)->set_run_as_group(0);
  plan.mutable_workers(0)->set_allow_privilege_escalation(true);
  plan.mutable_workers(0)->set_fs_group(4242);
  const PlannedLaunches planned = PlanLaunches(plan, Node());
  ASSERT_EQ(planned.launches.size(), 2u);
  EXPECT_EQ(planned.launches[0].run_as.job_run_as_user, 65534);
  EXPECT_EQ(planned.launches[0].run_as.job_run_as_group, 0);
  EXPECT_EQ(planned.launches[0].run_as.allow_privilege_escalation, true);
  EXPECT_EQ(planned.launches[0].run_as.fs_group, 4242);
  EXPECT_FALSE(planned.launches[1].run_as.fs_group.has_value());
  EXPECT_TRUE(planned.launches[1].run_as.empty());
  EXPECT_FALSE(planned.launches[1].run_as.allow_privilege_escalation.has_value());
}

// Issue 18: a relative workingDir is under the job's work dir; a shared job's under shared_dir.
TEST(PlanLaunches, ResolvesRelativeAndSharedWorkingDirs) {
  v1::LaunchPlan plan = Plan(2);
  plan.mutable_workers(0)->set_cwd("out");
  plan.mutable_workers(1)->set_cwd("$(TRAINLET_SHARED_WORK_DIR)/out");
  NodeLaunchContext node = Node();
  node.shared_dir = "/mnt/shared";
  const PlannedLaunches planned = PlanLaunches(plan, node);
  ASSERT_EQ(planned.launches.size(), 2u);
  EXPECT_EQ(planned.launches[0].cwd, "/state/work/train/out");
  EXPECT_EQ(planned.launches[1].cwd, "/mnt/shared/train/out");
  EXPECT_EQ(planned.launches[1].env.at("TRAINLET_WORK_DIR"), "/state/work/train");
}

TEST(PlanLaunches, SkipsRanksAlreadyRunning) {
  NodeLaunchContext node = Node();
  node.running = {10, 12};
  const PlannedLaunches planned = PlanLaunches(Plan(3), node);
  ASSERT_EQ(planned.launches.size(), 1u);
  EXPECT_EQ(planned.launches[0].rank, 11u);
  EXPECT_EQ(planned.bindings.size(), 1u);
}

TEST(PlanLaunches, AppliesCpuBindingsOnlyWhereTheyCanBe) {
  const v1::NodeInfo info = TwoNumaNodes();
  NodeLaunchContext node = Node();
  node.node_info = &info;
  node.cpus_available = [](const std::vector<unsigned>& cpus) { return cpus.front() < 4; };
  PlannedLaunches planned = PlanLaunches(Plan(2), node);
  ASSERT_EQ(planned.launches.size(), 2u);
  EXPECT_EQ(planned.launches[0].cpus, (std::vector<unsigned>{0, 1, 2, 3}));
  EXPECT_TRUE(planned.launches[1].cpus.empty());  // this machine lacks 4-7: reported only
  ASSERT_TRUE(planned.bindings[1].has_value());
  EXPECT_EQ(planned.bindings[1]->CpuList(), "4-7");
  EXPECT_EQ(planned.launches[1].env.at("TRAINLET_CPUSET"), "4-7");
  EXPECT_NE(planned.cpus_unavailable.find("CPU binding 4-7 of local rank 1"), std::string::npos)
      << planned.cpus_unavailable;
  EXPECT_FALSE(planned.cpus_unsupported);

  node.cpu_affinity = false;  // macOS: nothing is applied, every binding is reported
  planned = PlanLaunches(Plan(2), node);
  EXPECT_TRUE(planned.launches[0].cpus.empty());
  EXPECT_TRUE(planned.cpus_unsupported);
  EXPECT_TRUE(planned.cpus_unavailable.empty());

  v1::LaunchPlan unbound = Plan(2);
  unbound.set_binding("none");
  node.cpu_affinity = true;
  planned = PlanLaunches(unbound, node);
  EXPECT_FALSE(planned.bindings[0].has_value());
  EXPECT_EQ(planned.launches[0].env.count("TRAINLET_CPUSET"), 0u);
}

// A replicated job's worker carries its step and what that waits for to the step process, and
// is unbound: the main ranks keep the devices and CPU sets as if it were not there.
TEST(PlanLaunches, StepWorkersCarryTheirWaitsAndAreUnbound) {
  const v1::NodeInfo info = TwoNumaNodes();
  NodeLaunchContext node = Node();
  node.node_info = &info;
  v1::LaunchPlan plan = Plan(2);
  for (uint32_t replica = 0; replica < 3; ++replica) {
    auto* init = plan.add_workers();
    init->set_rank(20 + replica);
    init->set_local_rank(replica);
    init->set_step("dataset-initializer");
    init->add_argv("trainlet-initializer");
  }
  auto* main = plan.add_steps();
  main->set_name("");
  auto* dep = main->add_depends_on();
  dep->set_step("dataset-initializer");
  dep->set_status("Complete");
  const PlannedLaunches planned = PlanLaunches(plan, node);
  ASSERT_EQ(planned.launches.size(), 5u);
  EXPECT_EQ(planned.launches[0].step, "");
  EXPECT_EQ(planned.launches[0].waits,
            (std::vector<step::StepNeed>{{"dataset-initializer", "Complete"}}));
  EXPECT_EQ(planned.launches[2].step, "dataset-initializer");
  EXPECT_TRUE(planned.launches[2].waits.empty());
  EXPECT_FALSE(planned.bindings[2].has_value());
  EXPECT_EQ(planned.launches[2].env.count("TRAINLET_CPUSET"), 0u);
  // Three initializer replicas do not split the node three ways: the two ranks keep a NUMA
  // node each.
  ASSERT_TRUE(planned.bindings[1].has_value());
  EXPECT_EQ(planned.bindings[1]->CpuList(), "4-7");
}

TEST(WritePlanFiles, WritesFilesWithTheirModesAndStopsAtABadPath) {
  testing::TempDir dir;
  v1::LaunchPlan plan = Plan(1);
  auto* f = plan.add_files();
  f->set_path("etc/hostfile");
  f->set_content("n1 slots=2\n");
  auto* g = plan.add_files();
  g->set_path("run.sh");
  g->set_content("#!/bin/sh\n");
  g->set_mode(0755);
  ASSERT_TRUE(WritePlanFiles(plan, dir.path()).ok());
  std::ifstream in(dir.path() + "/etc/hostfile");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "n1 slots=2\n");
  namespace fs = std::filesystem;
  EXPECT_EQ(fs::status(dir.path() + "/etc/hostfile").permissions() & fs::perms::all,
            static_cast<fs::perms>(0644));
  EXPECT_EQ(fs::status(dir.path() + "/run.sh").permissions() & fs::perms::all,
            static_cast<fs::perms>(0755));

  auto* bad = plan.add_files();
  bad->set_path("../escape");
  const Status s = WritePlanFiles(plan, dir.path());
  EXPECT_EQ(s.code(), ErrorCode::kInvalid);
  EXPECT_FALSE(fs::exists(dir.path() + "/../escape"));
}

// Issue 19: a work dir owned by a run_as rank may hold links the rank left; the agent (root)
// replaces a linked file and refuses a linked directory, and writes nothing through either.
TEST(WritePlanFiles, NeverWritesThroughALinkARankLeft) {
  namespace fs = std::filesystem;
  testing::TempDir dir;
  testing::TempDir outside;
  const std::string target = outside.File("victim");
  std::ofstream(target) << "precious";
  fs::create_symlink(target, dir.File("hostfile"));
  fs::create_directory_symlink(outside.path(), dir.File("etc"));
  v1::LaunchPlan plan = Plan(1);
  auto* f = plan.add_files();
  f->set_path("hostfile");
  f->set_content("n1\n");
  ASSERT_TRUE(WritePlanFiles(plan, dir.path()).ok());
  EXPECT_FALSE(fs::is_symlink(dir.File("hostfile")));
  std::ifstream victim(target);
  std::string text((std::istreambuf_iterator<char>(victim)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "precious");

  auto* g = plan.add_files();
  g->set_path("etc/hosts");
  g->set_content("x\n");
  const Status s = WritePlanFiles(plan, dir.path());
  EXPECT_EQ(s.code(), ErrorCode::kIo) << s.message();
  EXPECT_FALSE(fs::exists(outside.File("hosts")));
}

TEST(PlanLaunches, EveryWorkerGetsTheJobsWorkspaceAndTheNodesCache) {
  v1::LaunchPlan plan = Plan(2);
  (*plan.mutable_workers(0)->mutable_env())["TRAINLET_DATASET_DIR"] = "/elsewhere";
  (*plan.mutable_workers(1)->mutable_env())["DATA"] = "$(TRAINLET_DATASET_DIR)/train";
  const PlannedLaunches planned = PlanLaunches(plan, Node());
  ASSERT_EQ(planned.launches.size(), 2u);
  for (const auto& launch : planned.launches) {
    EXPECT_EQ(launch.env.at("TRAINLET_WORKSPACE"), "/state/work/train/workspace");
    // The agent's own value wins over the plan's.
    EXPECT_EQ(launch.env.at("TRAINLET_DATASET_DIR"), "/state/work/train/workspace/dataset");
    EXPECT_EQ(launch.env.at("TRAINLET_MODEL_DIR"), "/state/work/train/workspace/model");
    EXPECT_EQ(launch.env.at("TRAINLET_CACHE_DIR"), "/state/cache");
  }
  EXPECT_EQ(planned.launches[1].env.at("DATA"), "/state/work/train/workspace/dataset/train");
  // Exec sessions get the same env (NodeEnvFor).
  const auto env = NodeEnvFor("n1", "/state/work/train", "/bin/trainlet-exec", "/state");
  EXPECT_EQ(env.at("TRAINLET_WORKSPACE"), "/state/work/train/workspace");
  EXPECT_EQ(env.at("TRAINLET_CACHE_DIR"), "/state/cache");
  EXPECT_EQ(env.at("TRAINLET_NODE"), "n1");
}

// Issue 18: the initializers' cache has a size cap (agent config initializer_cache_max_gb), which
// the initializer reads from its env.
TEST(PlanLaunches, TheCacheCapReachesTheWorkers) {
  const v1::LaunchPlan plan = Plan(1);
  EXPECT_FALSE(PlanLaunches(plan, Node()).launches[0].env.contains("TRAINLET_CACHE_MAX_BYTES"));
  NodeLaunchContext node = Node();
  node.cache_max_bytes = uint64_t{100} << 30;
  EXPECT_EQ(PlanLaunches(plan, node).launches[0].env.at("TRAINLET_CACHE_MAX_BYTES"),
            "107374182400");
}

TEST(PlanLaunches, TheBuiltInInitializerResolvesBesideTheAgent) {
  v1::LaunchPlan plan = Plan(3);
  auto* init = plan.mutable_workers(0);
  init->clear_argv();
  init->add_argv("trainlet-initializer");
  init->add_argv("dataset");
  plan.mutable_workers(1)->clear_argv();
  plan.mutable_workers(1)->add_argv("trainlet-initializer-v2");  // not exactly the name
  plan.mutable_workers(2)->clear_argv();
  plan.mutable_workers(2)->add_argv("/opt/trainlet-initializer");  // a path: left alone
  NodeLaunchContext node = Node();
  node.initializer_binary = "/usr/bin/trainlet-initializer";
  const PlannedLaunches planned = PlanLaunches(plan, node);
  EXPECT_EQ(planned.launches[0].argv,
            (std::vector<std::string>{"/usr/bin/trainlet-initializer", "dataset"}));
  EXPECT_EQ(planned.launches[1].argv[0], "trainlet-initializer-v2");
  EXPECT_EQ(planned.launches[2].argv[0], "/opt/trainlet-initializer");
  // Without a known binary (tests, older callers) argv stays as written, for PATH to resolve.
  EXPECT_EQ(PlanLaunches(plan, Node()).launches[0].argv[0], "trainlet-initializer");
}

TEST(MakeJobWorkspace, CreatesThePrivateDirsAndTheCache) {
  testing::TempDir dir;
  namespace fs = std::filesystem;
  ASSERT_TRUE(MakeJobWorkspace(dir.path(), "train").ok());
  for (const std::string sub : {"/work/train/workspace", "/work/train/workspace/dataset",
                                "/work/train/workspace/model", "/cache"}) {
    ASSERT_TRUE(fs::is_directory(dir.path() + sub)) << sub;
    EXPECT_EQ(fs::status(dir.path() + sub).permissions() & fs::perms::all,
              static_cast<fs::perms>(0700))
        << sub;
  }
  ASSERT_TRUE(MakeJobWorkspace(dir.path(), "train").ok());  // again: nothing to do
  // A file where the workspace should be: the error names it.
  ASSERT_TRUE(std::ofstream(dir.path() + "/work/other").good());
  fs::create_directories(dir.path() + "/work/blocked");
  ASSERT_TRUE(std::ofstream(dir.path() + "/work/blocked/workspace").good());
  const Status s = MakeJobWorkspace(dir.path(), "blocked");
  EXPECT_EQ(s.code(), ErrorCode::kIo);
  EXPECT_NE(s.message().find("/work/blocked/workspace"), std::string::npos) << s.message();
}

// With spares, the workspace's three dirs are spare dirs renamed into place (0700 all the same);
// a file in the way is still the error naming it.
TEST(MakeJobWorkspace, TakesItsDirsFromSpares) {
  testing::TempDir dir;
  namespace fs = std::filesystem;
  const std::string spare = dir.path() + "/spare-files";
  step::SpareFileFiller filler(spare);
  filler.Want(0, 3);
  filler.WaitIdle();
  std::set<ino_t> made;
  for (const auto& e : fs::directory_iterator(spare + "/.dirs")) {
    struct stat st {};
    ASSERT_EQ(stat(e.path().c_str(), &st), 0);
    made.insert(st.st_ino);
  }
  ASSERT_EQ(made.size(), 3u);
  fs::create_directories(dir.path() + "/work/train");
  step::SpareFiles spares(spare);
  ASSERT_TRUE(MakeJobWorkspace(dir.path(), "train", &spares).ok());
  for (const std::string sub :
       {"/work/train/workspace", "/work/train/workspace/dataset", "/work/train/workspace/model"}) {
    struct stat st {};
    ASSERT_EQ(stat((dir.path() + sub).c_str(), &st), 0) << sub;
    EXPECT_TRUE(made.contains(st.st_ino)) << sub;
    EXPECT_EQ(st.st_mode & 07777, 0700u) << sub;
  }
  fs::create_directories(dir.path() + "/work/blocked");
  ASSERT_TRUE(std::ofstream(dir.path() + "/work/blocked/workspace").good());
  const Status s = MakeJobWorkspace(dir.path(), "blocked", &spares);
  EXPECT_EQ(s.code(), ErrorCode::kIo);
}

}  // namespace
}  // namespace trainlet::agent
