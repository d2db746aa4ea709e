// The env each replica of a Training Operator job gets, to the letter of the operator
// (pkg/controller.v1/<framework>/ of kubeflow/training-operator release-1.9, and mpi-operator's
// v2beta1 controller), with trainlet's node addresses and reserved ports where the operator
// writes pod DNS names and container ports. Nodes are 10.0.0.(i+1); node i's ports are
// 30000 + 100 * i (runtime_test_util.h).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "common/trainjob/trainjob_model.h"
#include "common/trainjob/v1_job.h"
#include "tests/common/trainjob/test_util.h"
#include "tests/plugins/runtime_test_util.h"
#include "trainlet/runtime_plugin.h"

namespace trainlet {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsSupersetOf;
using ::testing::Key;
using ::testing::Not;
using ::testing::Pair;
using testing_util::Argv;
using testing_util::Env;
using testing_util::LayoutAndRender;
using testing_util::MakeRequest;

using EnvMap = std::map<std::string, std::string>;

std::string Fixture(const std::string& relative) {
  return trainjob::testing::ReadFile(std::filesystem::path(TRAINLET_SOURCE_DIR) / "tests" /
                                     "fixtures" / "kubeflow-v1" / relative);
}

// A v1 document converted and planned as the coordinator plans it: the plugin its runtime
// selects, one node per replica, the TrainJob's annotations in the request.
struct Planned {
  const RuntimePlugin* plugin = nullptr;
  std::vector<v1::LaunchPlan> plans;
  const v1::WorkerSpec& Rank(uint32_t r) const { return plans.at(r).workers(0); }
};

Planned Plan(const std::string& yaml) {
  auto parsed = trainjob::ParseDocuments(yaml);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  Planned out;
  if (!parsed.ok() || parsed->converted.size() != 1) return out;
  const trainjob::ConvertedJob& c = parsed->converted[0];
  out.plugin =
      SelectRuntimePlugin(trainjob::FrameworkName(c.runtime.ml_policy.framework), c.runtime.labels);
  EXPECT_NE(out.plugin, nullptr);
  if (out.plugin == nullptr) return out;
  PlanRequest req =
      MakeRequest(static_cast<uint32_t>(*c.job.trainer.num_nodes), "1", c.job.trainer.command);
  req.job = c.job.name;
  req.annotations = c.job.annotations;
  if (c.runtime.ml_policy.num_proc_per_node) {
    req.num_proc_per_node = *c.runtime.ml_policy.num_proc_per_node;
  }
  auto plans = LayoutAndRender(*out.plugin, req);
  EXPECT_TRUE(plans.ok()) << plans.status().ToString();
  if (plans.ok()) out.plans = *plans;
  return out;
}

TEST(PyTorchJobEnv, MasterAndWorker) {
  Planned p = Plan(Fixture("training-operator/pytorch_simple.yaml"));
  ASSERT_EQ(p.plans.size(), 2u);
  EXPECT_EQ(p.plugin->name(), "torch");
  const EnvMap common = {{"PYTHONUNBUFFERED", "1"},       {"MASTER_PORT", "30000"},
                         {"PET_MASTER_PORT", "30000"},    {"MASTER_ADDR", "10.0.0.1"},
                         {"PET_MASTER_ADDR", "10.0.0.1"}, {"WORLD_SIZE", "2"},
                         {"PET_NPROC_PER_NODE", "auto"},  {"PET_NNODES", "2"}};
  for (uint32_t r = 0; r < 2; ++r) {
    ASSERT_EQ(p.plans[r].workers_size(), 1);
    EnvMap want = common;
    want["RANK"] = want["PET_NODE_RANK"] = std::to_string(r);
    EXPECT_THAT(Env(p.Rank(r)), IsSupersetOf(want)) << "rank " << r;
    EXPECT_THAT(Argv(p.Rank(r)),
                ElementsAre("python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"));
    // Not torchrun's direct-launch env: only what the operator sets.
    EXPECT_THAT(Env(p.Rank(r)), Not(Contains(Key("LOCAL_RANK"))));
    EXPECT_EQ(Env(p.Rank(r)).at("TRAINLET_RANK"), std::to_string(r));
  }
  EXPECT_THAT(p.plugin->LaunchMode({.annotations = {}}), Not(::testing::HasSubstr("PyTorchJob")));
}

TEST(PyTorchJobEnv, WorkersOfThreeWithNprocPerNode) {
  std::string yaml = trainjob::testing::Replace(Fixture("training-operator/pytorch_simple.yaml"),
                                                "    Worker:\n      replicas: 1",
                                                "    Worker:\n      replicas: 2");
  yaml = trainjob::testing::Replace(yaml, "spec:\n  pytorchReplicaSpecs:",
                                    "spec:\n  nprocPerNode: \"4\"\n  pytorchReplicaSpecs:");
  Planned p = Plan(yaml);
  ASSERT_EQ(p.plans.size(), 3u);
  EXPECT_THAT(Env(p.Rank(2)), IsSupersetOf(EnvMap{{"WORLD_SIZE", "12"},
                                                  {"RANK", "2"},
                                                  {"PET_NODE_RANK", "2"},
                                                  {"PET_NPROC_PER_NODE", "4"},
                                                  {"PET_NNODES", "3"}}));
}

TEST(PyTorchJobEnv, Elastic) {
  Planned p = Plan(Fixture("training-operator/pytorch_elastic_echo_echo.yaml"));
  ASSERT_EQ(p.plans.size(), 2u);
  for (uint32_t r = 0; r < 2; ++r) {
    const EnvMap env = Env(p.Rank(r));
    EXPECT_THAT(env, IsSupersetOf(EnvMap{{"PYTHONUNBUFFERED", "1"},
                                         {"PET_RDZV_ENDPOINT", "10.0.0.1:30000"},
                                         {"PET_RDZV_BACKEND", "c10d"},
                                         {"PET_NNODES", "1:2"},
                                         {"PET_MAX_RESTARTS", "100"},
                                         {"PET_NPROC_PER_NODE", "auto"},
                                         {"LOGLEVEL", "DEBUG"}}));
    // No Master: the operator sets no MASTER_ADDR, RANK or WORLD_SIZE.
    EXPECT_THAT(env, Not(Contains(Key("MASTER_ADDR"))));
    EXPECT_THAT(env, Not(Contains(Key("RANK"))));
    EXPECT_THAT(Argv(p.Rank(r)), ElementsAre("python", "-m", "torch.distributed.run",
                                             "--rdzv_backend=c10d", "./echo.py"));
  }
}

constexpr const char* kTFJob = R"(apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: tf
spec:
  tfReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: tensorflow
            command: [python, worker.py]
    PS:
      replicas: 1
      template:
        spec:
          containers:
          - name: tensorflow
            command: [python, ps.py]
    Chief:
      replicas: 1
      template:
        spec:
          containers:
          - name: tensorflow
            command: [python, chief.py]
    Evaluator:
      replicas: 1
      template:
        spec:
          containers:
          - name: tensorflow
            command: [python, eval.py]
)";

TEST(TFJobEnv, ClusterAndTaskForEveryType) {
  Planned p = Plan(kTFJob);
  ASSERT_EQ(p.plans.size(), 5u);
  EXPECT_EQ(p.plugin->name(), "tensorflow");
  const std::string cluster =
      R"({"chief":["10.0.0.1:30000"],"evaluator":["10.0.0.5:30400"],"ps":["10.0.0.2:30100"],)"
      R"("worker":["10.0.0.3:30200","10.0.0.4:30300"]})";
  const std::pair<const char*, int> tasks[] = {
      {"chief", 0}, {"ps", 0}, {"worker", 0}, {"worker", 1}, {"evaluator", 0}};
  for (uint32_t r = 0; r < 5; ++r) {
    EXPECT_EQ(Env(p.Rank(r)).at("TF_CONFIG"),
              R"({"cluster":)" + cluster + R"(,"task":{"type":")" + tasks[r].first +
                  R"(","index":)" + std::to_string(tasks[r].second) + R"(},"environment":"cloud"})")
        << "rank " << r;
  }
  EXPECT_THAT(Argv(p.Rank(0)), ElementsAre("python", "chief.py"));
  EXPECT_THAT(Argv(p.Rank(1)), ElementsAre("python", "ps.py"));
  EXPECT_THAT(Argv(p.Rank(3)), ElementsAre("python", "worker.py"));
  EXPECT_THAT(Argv(p.Rank(4)), ElementsAre("python", "eval.py"));
}

TEST(TFJobEnv, SparseWithDynamicWorkers) {
  Planned p =
      Plan(trainjob::testing::Replace(kTFJob, "spec:\n", "spec:\n  enableDynamicWorker: true\n"));
  ASSERT_EQ(p.plans.size(), 5u);
  EXPECT_EQ(Env(p.Rank(3)).at("TF_CONFIG"),
            R"({"cluster":{"worker":{"1":"10.0.0.4:30300"},"ps":["10.0.0.2:30100"]},)"
            R"("task":{"type":"worker","index":1}})");
  EXPECT_EQ(Env(p.Rank(1)).at("TF_CONFIG"),
            R"({"cluster":{"worker":{},"ps":["10.0.0.2:30100"]},"task":{"type":"ps","index":0}})");
}

TEST(TFJobEnv, OneReplicaGetsNoTFConfig) {
  Planned p = Plan(trainjob::testing::Replace(Fixture("training-operator/tensorflow_simple.yaml"),
                                              "replicas: 2", "replicas: 1"));
  ASSERT_EQ(p.plans.size(), 1u);
  EXPECT_THAT(Env(p.Rank(0)), Not(Contains(Key("TF_CONFIG"))));
}

constexpr const char* kXGBoostJob = R"(apiVersion: kubeflow.org/v1
kind: XGBoostJob
metadata:
  name: xgb
spec:
  xgbReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
          - name: xgboost
            command: [python3, main.py, --job_type=Train]
            ports:
            - containerPort: 9991
              name: xgboostjob-port
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: xgboost
            command: [python3, main.py, --job_type=Train]
)";

TEST(XGBoostJobEnv, MasterAndWorkers) {
  Planned p = Plan(kXGBoostJob);
  ASSERT_EQ(p.plans.size(), 3u);
  EXPECT_EQ(p.plugin->name(), "xgboost");
  const char* worker_port[] = {"30100", "30100", "30200"};
  for (uint32_t r = 0; r < 3; ++r) {
    EXPECT_THAT(Env(p.Rank(r)), IsSupersetOf(EnvMap{{"MASTER_PORT", "30000"},
                                                    {"MASTER_ADDR", "10.0.0.1"},
                                                    {"WORLD_SIZE", "3"},
                                                    {"RANK", std::to_string(r)},
                                                    {"PYTHONUNBUFFERED", "1"},
                                                    {"WORKER_PORT", worker_port[r]},
                                                    {"WORKER_ADDRS", "10.0.0.2,10.0.0.3"}}))
        << "rank " << r;
  }
}

TEST(PaddleJobEnv, CollectiveAndPsMode) {
  Planned p = Plan(Fixture("training-operator/paddlepaddle_simple-cpu.yaml"));
  ASSERT_EQ(p.plans.size(), 2u);
  EXPECT_EQ(p.plugin->name(), "paddle");
  EXPECT_THAT(Env(p.Rank(0)), IsSupersetOf(EnvMap{{"PYTHONUNBUFFERED", "1"},
                                                  {"PADDLE_JOB_ID", "paddle-simple-cpu"},
                                                  {"PADDLE_NNODES", "2"},
                                                  {"POD_IP_DUMMY", "10.0.0.1"},
                                                  {"PADDLE_MASTER", "10.0.0.1:30000"}}));
  EXPECT_THAT(Env(p.Rank(1)),
              IsSupersetOf(EnvMap{{"PADDLE_MASTER", "10.0.0.1:30000"}, {"PADDLE_NNODES", "2"}}));
  EXPECT_THAT(Env(p.Rank(1)), Not(Contains(Key("POD_IP_DUMMY"))));
  EXPECT_THAT(Env(p.Rank(1)), Not(Contains(Key("PADDLE_TRAINER_NUM"))));
  EXPECT_THAT(Argv(p.Rank(1)),
              ElementsAre("python", "-m", "paddle.distributed.launch", "run_check"));

  std::string ps = trainjob::testing::Replace(
      Fixture("training-operator/paddlepaddle_simple-cpu.yaml"), "    Worker:\n      replicas: 2",
      "    Master:\n      replicas: 1\n      template:\n        spec:\n          containers:\n"
      "          - name: paddle\n            command: [python, server.py]\n"
      "    Worker:\n      replicas: 2");
  Planned q = Plan(ps);
  ASSERT_EQ(q.plans.size(), 3u);
  EXPECT_THAT(Env(q.Rank(0)), IsSupersetOf(EnvMap{{"PADDLE_MASTER", "10.0.0.1:30000"},
                                                  {"PADDLE_SERVER_NUM", "1"},
                                                  {"PADDLE_NNODES", "3"}}));
  EXPECT_THAT(Env(q.Rank(1)), IsSupersetOf(EnvMap{{"PADDLE_MASTER", "10.0.0.1:30000"},
                                                  {"PADDLE_TRAINER_NUM", "1"}}));
  EXPECT_THAT(Env(q.Rank(1)), Not(Contains(Key("POD_IP_DUMMY"))));  // Worker 0 is not the master
}

TEST(JAXJobEnv, Workers) {
  Planned p = Plan(Fixture("training-operator/jax_cpu-demo_demo.yaml"));
  ASSERT_EQ(p.plans.size(), 2u);
  EXPECT_EQ(p.plugin->name(), "jax");
  for (uint32_t r = 0; r < 2; ++r) {
    EXPECT_THAT(Env(p.Rank(r)), IsSupersetOf(EnvMap{{"PYTHONUNBUFFERED", "1"},
                                                    {"COORDINATOR_PORT", "30000"},
                                                    {"COORDINATOR_ADDRESS", "10.0.0.1"},
                                                    {"NUM_PROCESSES", "2"},
                                                    {"PROCESS_ID", std::to_string(r)}}));
    EXPECT_THAT(Argv(p.Rank(r)), ElementsAre("python3", "train.py"));
  }
}

TEST(MPIJobEnv, LauncherHostfileAndImplementations) {
  Planned p = Plan(Fixture("mpi-operator/pi_pi.yaml"));
  ASSERT_EQ(p.plans.size(), 2u);
  EXPECT_EQ(p.plugin->name(), "mpi");
  ASSERT_EQ(p.plans[0].workers_size(), 1);
  EXPECT_EQ(p.plans[1].workers_size(), 0);  // workers run what mpirun starts
  EXPECT_THAT(Argv(p.Rank(0)), ElementsAre("mpirun", "-n", "2", "/home/mpiuser/pi"));
  EXPECT_THAT(
      Env(p.Rank(0)),
      IsSupersetOf(EnvMap{{"K_MPI_JOB_ROLE", "launcher"},
                          {"OMPI_MCA_orte_keep_fqdn_hostnames", "true"},
                          {"OMPI_MCA_orte_default_hostfile", "$(TRAINLET_WORK_DIR)/hostfile"},
                          {"OMPI_MCA_orte_set_default_slots", "1"},
                          {"OMPI_MCA_plm_rsh_agent", "$(TRAINLET_EXEC)"}}));
  ASSERT_EQ(p.plans[0].files_size(), 1);
  EXPECT_EQ(p.plans[0].files(0).path(), "hostfile");
  EXPECT_EQ(p.plans[0].files(0).content(), "10.0.0.1 slots=1\n10.0.0.2 slots=1\n");

  // MPICH and Intel reach the mpi runtime as its trainlet.io/mpi-implementation annotation
  // (v1_job_test); the launcher's role is the same.
  Planned mpich = Plan(Fixture("mpi-operator/pi_pi-mpich.yaml"));
  ASSERT_EQ(mpich.plans.size(), 2u);
  EXPECT_EQ(Env(mpich.Rank(0)).at("K_MPI_JOB_ROLE"), "launcher");
  EXPECT_THAT(Env(mpich.Rank(0)),
              IsSupersetOf(EnvMap{{"HYDRA_HOST_FILE", "$(TRAINLET_WORK_DIR)/hostfile"},
                                  {"HYDRA_LAUNCHER_EXEC", "$(TRAINLET_EXEC)"}}));
  EXPECT_EQ(mpich.plans[0].files(0).content(), "10.0.0.1:1\n10.0.0.2:1\n");
  Planned intel = Plan(Fixture("mpi-operator/pi_pi-intel.yaml"));
  ASSERT_EQ(intel.plans.size(), 2u);
  EXPECT_THAT(Env(intel.Rank(0)),
              IsSupersetOf(EnvMap{{"I_MPI_HYDRA_HOST_FILE", "$(TRAINLET_WORK_DIR)/hostfile"},
                                  {"I_MPI_PERHOST", "1"},
                                  {"K_MPI_JOB_ROLE", "launcher"}}));
  EXPECT_THAT(Argv(mpich.Rank(0)), ElementsAre("mpirun", "-n", "2", "/home/mpiuser/pi"));
}

TEST(V1Plugins, ATrainJobCannotUseTheTFOrPaddleRuntime) {
  PlanRequest req = MakeRequest(2, "1", {"python", "x.py"});
  for (const char* name : {"tensorflow", "paddle"}) {
    const RuntimePlugin* plugin = FindRuntimePlugin(name);
    ASSERT_NE(plugin, nullptr) << name;
    auto layout = plugin->Layout(req);
    ASSERT_FALSE(layout.ok()) << name;
    EXPECT_EQ(layout.status().code(), PluginErrorCode::kInvalid);
  }
  EXPECT_EQ(
      SelectRuntimePlugin("plain", {{"trainer.kubeflow.org/framework", "tensorflow"}})->name(),
      "tensorflow");
  EXPECT_EQ(
      SelectRuntimePlugin("torch", {{"trainer.kubeflow.org/framework", "tensorflow"}})->name(),
      "torch");
}

// The conformance suite through the plugins: every example that converts (v1_job_test) is planned
// by the plugin its runtime selects, one process per replica, with each replica's own argv.
TEST(V1Plugins, EveryConvertedExamplePlans) {
  int planned = 0;
  for (const char* dir : {"training-operator", "mpi-operator"}) {
    for (const auto& entry :
         std::filesystem::directory_iterator(std::filesystem::path(TRAINLET_SOURCE_DIR) / "tests" /
                                             "fixtures" / "kubeflow-v1" / dir)) {
      if (entry.path().extension() != ".yaml") continue;
      const std::string yaml = trainjob::testing::ReadFile(entry.path());
      auto parsed = trainjob::ParseDocuments(yaml);
      if (!parsed.ok()) continue;  // an image's entrypoint: refused in v1_job_test
      SCOPED_TRACE(entry.path().string());
      Planned p = Plan(yaml);
      ASSERT_NE(p.plugin, nullptr);
      ASSERT_FALSE(p.plans.empty());
      for (const v1::LaunchPlan& plan : p.plans) {
        for (const v1::WorkerSpec& w : plan.workers()) EXPECT_FALSE(w.argv().empty());
      }
      ++planned;
    }
  }
  EXPECT_EQ(planned, 15);
}

TEST(V1Plugins, ReplicasNeedOneNodeEach) {
  auto parsed = trainjob::ParseDocuments(Fixture("training-operator/jax_cpu-demo_demo.yaml"));
  ASSERT_TRUE(parsed.ok());
  PlanRequest req = MakeRequest(3, "1", {"python3", "train.py"});
  req.annotations = parsed->converted.at(0).job.annotations;
  auto layout = FindRuntimePlugin("jax")->Layout(req);
  ASSERT_FALSE(layout.ok());
  EXPECT_THAT(layout.status().message(),
              ::testing::HasSubstr("2 replicas need one node each, 3 placed"));
}

}  // namespace
}  // namespace trainlet
