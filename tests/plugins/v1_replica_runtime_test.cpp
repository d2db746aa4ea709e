// V1ReplicaRuntime (plugins/runtime/v1_replica_runtime.h) on a made-up spec: it runs only the
// spec's kind, asks each node for the ports the spec names, and gives each replica its argv,
// container env and the spec's env (which wins). The real specs (tensorflow, paddle) are checked
// to the letter in v1_kinds_runtime_test.

#include "plugins/runtime/v1_replica_runtime.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "plugins/runtime/worker_env.h"
#include "tests/plugins/runtime_test_util.h"

namespace trainlet {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;
using testing_util::Argv;
using testing_util::Env;
using testing_util::LayoutAndRender;
using testing_util::MakeRequest;
using testing_util::WithoutPorts;

using EnvMap = std::map<std::string, std::string>;

// Two ports on node rank 0, one on the last node.
std::vector<uint32_t> TestPorts(const PlanRequest& request, const trainjob::V1JobContract&) {
  std::vector<uint32_t> ports(request.nodes.size(), 0);
  ports[0] = 2;
  ports.back() += 1;
  return ports;
}

// Each replica's type and index, the second port of node rank 0, and an override of the
// container's FROM.
Result<EnvList> TestEnv(const ReplicaContext& at) {
  TRAINLET_ASSIGN_OR_RETURN(const uint32_t port, ReservedPort(at.request, 0, 1, "TEST_PORT"));
  return EnvList{{"TEST_TYPE", at.me.replica->type},
                 {"TEST_INDEX", std::to_string(at.me.index)},
                 {"TEST_PORT", std::to_string(port)},
                 {"FROM", "plugin"}};
}

const V1ReplicaRuntimeSpec kSpec{
    .name = "test-v1",
    .kind = trainjob::V1Kind::kPaddleJob,
    .launch_mode = "one process per replica, for a test",
    .refusal = "test-v1 runs PaddleJobs only",
    .ports = &TestPorts,
    .env = &TestEnv,
};

PlanRequest RequestFor(trainjob::V1Kind kind) {
  trainjob::V1JobContract c;
  c.kind = kind;
  c.name = "job";
  trainjob::V1Replica master{.type = "Master", .replicas = 1, .argv = {"server", "--x"}};
  trainjob::V1Replica worker{.type = "Worker", .replicas = 2, .argv = {"trainer"}};
  worker.env.push_back({"FROM", "container"});
  worker.env.push_back({"ONLY_CONTAINER", "yes"});
  c.replicas = {master, worker};
  PlanRequest req = MakeRequest(3, "1", {"ignored"}, 2);
  req.annotations[std::string(trainjob::kV1JobAnnotation)] = trainjob::EncodeV1Contract(c);
  return req;
}

TEST(V1ReplicaRuntime, NameLaunchModeAndOneProcessPerReplica) {
  V1ReplicaRuntime rt(kSpec);
  EXPECT_EQ(rt.name(), "test-v1");
  EXPECT_EQ(rt.LaunchMode(RequestFor(trainjob::V1Kind::kPaddleJob)),
            "one process per replica, for a test");
  auto procs = rt.ProcsPerNode("3", nullptr);
  ASSERT_TRUE(procs.ok());
  EXPECT_EQ(*procs, 3u);
  EXPECT_FALSE(rt.ProcsPerNode("many", nullptr).ok());
}

TEST(V1ReplicaRuntime, LaysOutTheSpecsPortsAndRendersItsEnv) {
  V1ReplicaRuntime rt(kSpec);
  const PlanRequest req = RequestFor(trainjob::V1Kind::kPaddleJob);
  auto layout = rt.Layout(WithoutPorts(req));
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  ASSERT_EQ(layout->nodes.size(), 3u);
  EXPECT_EQ(layout->nodes[0].ports, 2u);
  EXPECT_EQ(layout->nodes[1].ports, 0u);
  EXPECT_EQ(layout->nodes[2].ports, 1u);

  auto plans = LayoutAndRender(rt, req);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  ASSERT_EQ(plans->size(), 3u);
  for (uint32_t r = 0; r < 3; ++r) ASSERT_EQ((*plans)[r].workers_size(), 1) << r;
  const v1::WorkerSpec& master = (*plans)[0].workers(0);
  EXPECT_THAT(Argv(master), ElementsAre("server", "--x"));
  EXPECT_THAT(Env(master), IsSupersetOf(EnvMap{{"TEST_TYPE", "Master"},
                                               {"TEST_INDEX", "0"},
                                               {"TEST_PORT", "30001"},
                                               {"TRAINLET_RANK", "0"}}));
  const v1::WorkerSpec& worker1 = (*plans)[2].workers(0);
  EXPECT_THAT(Argv(worker1), ElementsAre("trainer"));
  EXPECT_THAT(Env(worker1), IsSupersetOf(EnvMap{{"TEST_TYPE", "Worker"},
                                                {"TEST_INDEX", "1"},
                                                {"FROM", "plugin"},
                                                {"ONLY_CONTAINER", "yes"},
                                                {"TRAINLET_RANK", "2"}}));
}

TEST(V1ReplicaRuntime, RefusesATrainJobAndAnotherKind) {
  V1ReplicaRuntime rt(kSpec);
  auto plain = rt.Layout(WithoutPorts(MakeRequest(2, "1", {"python", "x.py"})));
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().code(), PluginErrorCode::kInvalid);
  EXPECT_EQ(plain.status().message(), "test-v1 runs PaddleJobs only");

  auto other = rt.Layout(WithoutPorts(RequestFor(trainjob::V1Kind::kTFJob)));
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(other.status().message(), HasSubstr("a TFJob cannot run on the PaddleJob's runtime"));
}

TEST(V1ReplicaRuntime, AMissingPortIsNamed) {
  V1ReplicaRuntime rt(kSpec);
  PlanRequest req = RequestFor(trainjob::V1Kind::kPaddleJob);
  req.nodes[0].ports.resize(1);  // the env needs node rank 0's second port
  auto plans = LayoutAndRender(rt, req);
  ASSERT_FALSE(plans.ok());
  EXPECT_THAT(plans.status().message(), HasSubstr("TEST_PORT"));
}

}  // namespace
}  // namespace trainlet
