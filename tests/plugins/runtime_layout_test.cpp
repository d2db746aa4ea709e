// The two planning steps of every built-in runtime: Layout checks the request and lays out the
// ranks with no port reserved, refusing what the one-step Plan refused, with the same message;
// Render, given the ports the layout asked for, makes plans whose workers are the laid-out ranks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "plugins/runtime/mlx/mlx_runtime.h"
#include "plugins/runtime/mpi/mpi_runtime.h"
#include "plugins/runtime/worker_env.h"
#include "runtime_test_util.h"

namespace trainlet {
namespace {

using ::testing::HasSubstr;
using testing_util::LayoutAndRender;
using testing_util::MakeRequest;
using testing_util::WithoutPorts;

const char* const kRuntimes[] = {"plain", "torch", "mpi", "jax", "xgboost", "mlx"};

struct Refusal {
  const char* runtime;
  const char* case_name;
  std::function<void(PlanRequest&)> spoil;
  const char* message;  // a part of the refusal
};

std::vector<Refusal> Refusals() {
  std::vector<Refusal> out;
  for (const char* rt : kRuntimes) {
    out.push_back({rt, "no command", [](PlanRequest& r) { r.argv.clear(); },
                   "spec.trainer.command: no command to run"});
  }
  for (const char* rt : {"torch", "jax", "xgboost", "mlx"}) {
    out.push_back({rt, "no nodes", [](PlanRequest& r) { r.nodes.clear(); }, "no nodes placed"});
  }
  out.push_back({"plain", "auto", [](PlanRequest& r) { r.num_proc_per_node = "auto"; },
                 "spec.trainer.numProcPerNode: \"auto\" needs a framework runtime"});
  for (const char* rt : {"plain", "torch", "jax", "xgboost", "mlx"}) {
    out.push_back({rt, "bad count", [](PlanRequest& r) { r.num_proc_per_node = "two"; },
                   "spec.trainer.numProcPerNode: must be an integer from 1 to 4096"});
  }
  out.push_back({"mpi", "bad count", [](PlanRequest& r) { r.num_proc_per_node = "0"; },
                 "spec.mlPolicy.mpi.numProcPerNode: must be an integer"});
  out.push_back(
      {"mpi", "unknown implementation",
       [](PlanRequest& r) { r.annotations[std::string(kMpiImplementationAnnotation)] = "MVAPICH"; },
       "metadata.annotations[trainlet.io/mpi-implementation]: must be OpenMPI, MPICH "
       "or Intel"});
  out.push_back({"xgboost", "reserved env",
                 [](PlanRequest& r) {
                   r.env = {{"DMLC_TASK_ID", "3"}};
                 },
                 "spec.trainer.env: DMLC_TASK_ID is reserved for the xgboost runtime"});
  out.push_back({"mlx", "unknown backend",
                 [](PlanRequest& r) { r.annotations[std::string(kMlxBackendAnnotation)] = "gloo"; },
                 "metadata.annotations[trainlet.io/mlx-backend]: must be ring, jaccl, jaccl-ring, "
                 "nccl or auto"});
  out.push_back(
      {"mlx", "jaccl without RDMA",
       [](PlanRequest& r) { r.annotations[std::string(kMlxBackendAnnotation)] = "jaccl"; },
       "jaccl needs RDMA devices, and node node-1 reports none"});
  out.push_back(
      {"mlx", "too many ring connections",
       [](PlanRequest& r) { r.annotations[std::string(kMlxRingConnectionsAnnotation)] = "17"; },
       "metadata.annotations[trainlet.io/mlx-ring-connections]: must be an integer"});
  return out;
}

TEST(RuntimeLayoutTest, LayoutNeedsNoPortsAndRefusesWhatPlanRefused) {
  for (const Refusal& c : Refusals()) {
    SCOPED_TRACE(std::string(c.runtime) + ": " + c.case_name);
    const RuntimePlugin* plugin = FindRuntimePlugin(c.runtime);
    ASSERT_NE(plugin, nullptr);
    PlanRequest req = MakeRequest(2, "1", {"python3", "t.py"}, /*ports_per_node=*/0);
    c.spoil(req);
    auto layout = plugin->Layout(req);
    ASSERT_FALSE(layout.ok());
    EXPECT_EQ(layout.status().code(), PluginErrorCode::kInvalid);
    EXPECT_THAT(layout.status().message(), HasSubstr(c.message));
    // Both steps together refuse it with the same message, as the one Plan() did.
    auto both = LayoutAndRender(*plugin, req);
    ASSERT_FALSE(both.ok());
    EXPECT_EQ(both.status().message(), layout.status().message());
  }
}

// The shapes each runtime is laid out and rendered in below.
struct Shape {
  uint32_t nodes;
  const char* per_node;
  std::vector<std::string> argv;
};

TEST(RuntimeLayoutTest, RenderWithTheLaidOutPortsMakesThePlansOfTheLayout) {
  const std::vector<Shape> shapes = {{1, "", {"python3", "t.py"}},
                                     {3, "2", {"python3", "t.py"}},
                                     {2, "4", {"torchrun", "t.py"}},
                                     {4, "1", {"mpirun", "./a"}}};
  for (const char* rt : kRuntimes) {
    const RuntimePlugin* plugin = FindRuntimePlugin(rt);
    ASSERT_NE(plugin, nullptr);
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(std::string(rt) + ": " + std::to_string(shape.nodes) + " nodes x \"" +
                   shape.per_node + "\", " + shape.argv[0]);
      PlanRequest req = MakeRequest(shape.nodes, shape.per_node, shape.argv, 0);
      auto layout = plugin->Layout(req);
      ASSERT_TRUE(layout.ok()) << layout.status().ToString();
      ASSERT_EQ(layout->nodes.size(), shape.nodes);
      // mpi: a launcher rank only for a command that needs mpirun; the program itself is started
      // directly (PMIx), with no launcher (issue 16).
      EXPECT_EQ(layout->exec_launcher_rank.has_value(),
                std::string(rt) == "mpi" && shape.argv[0] == "mpirun");
      // Ports as an agent would reserve them: exactly as many as asked, distinct per node.
      for (uint32_t n = 0; n < shape.nodes; ++n) {
        for (uint32_t p = 0; p < layout->nodes[n].ports; ++p) {
          req.nodes[n].ports.push_back(40000 + 100 * n + p);
        }
      }
      auto plans = plugin->Render(req, *layout);
      ASSERT_TRUE(plans.ok()) << plans.status().ToString();
      ASSERT_EQ(plans->size(), shape.nodes);
      uint32_t world = 0;
      for (uint32_t n = 0; n < shape.nodes; ++n) {
        const auto& ranks = layout->nodes[n].ranks;
        const v1::LaunchPlan& plan = (*plans)[n];
        EXPECT_EQ(plan.node_rank(), n);
        ASSERT_EQ(static_cast<size_t>(plan.workers_size()), ranks.size()) << "node rank " << n;
        for (size_t i = 0; i < ranks.size(); ++i) {
          EXPECT_EQ(plan.workers(static_cast<int>(i)).rank(), ranks[i].rank);
          EXPECT_EQ(plan.workers(static_cast<int>(i)).local_rank(), ranks[i].local_rank);
        }
        world += static_cast<uint32_t>(ranks.size());
      }
      EXPECT_EQ(world, WorldSize(*layout));
      // Without the ports it asked for, the runtime refuses to render (never makes one up).
      if (WorldSize(*layout) > 0 && layout->nodes[0].ports > 0) {
        auto early = plugin->Render(WithoutPorts(req), *layout);
        ASSERT_FALSE(early.ok());
        EXPECT_EQ(early.status().code(), PluginErrorCode::kInvalid);
        EXPECT_THAT(early.status().message(), HasSubstr("no port reserved on node rank 0"));
      }
    }
  }
}

TEST(RuntimeLayoutTest, RenderRefusesALayoutOfAnotherPlacement) {
  const RuntimePlugin* plugin = FindRuntimePlugin("plain");
  PlanRequest req = MakeRequest(2, "1", {"x"}, 0);
  auto layout = plugin->Layout(req);
  ASSERT_TRUE(layout.ok());
  req.nodes.pop_back();
  auto plans = plugin->Render(req, *layout);
  ASSERT_FALSE(plans.ok());
  EXPECT_EQ(plans.status().code(), PluginErrorCode::kInternal);
}

TEST(WorkerEnvTest, RanksInNodeOrder) {
  const AttemptLayout layout = RanksInNodeOrder({2, 0, 3});
  ASSERT_EQ(layout.nodes.size(), 3u);
  ASSERT_EQ(layout.nodes[0].ranks.size(), 2u);
  EXPECT_EQ(layout.nodes[0].ranks[1].rank, 1u);
  EXPECT_EQ(layout.nodes[0].ranks[1].local_rank, 1u);
  EXPECT_TRUE(layout.nodes[1].ranks.empty());
  ASSERT_EQ(layout.nodes[2].ranks.size(), 3u);
  EXPECT_EQ(layout.nodes[2].ranks[0].rank, 2u);
  EXPECT_EQ(layout.nodes[2].ranks[2].rank, 4u);
  EXPECT_EQ(layout.nodes[2].ranks[2].local_rank, 2u);
  for (const NodeLayout& n : layout.nodes) EXPECT_EQ(n.ports, 0u);
  EXPECT_FALSE(layout.exec_launcher_rank.has_value());
  EXPECT_EQ(WorldSize(layout), 5u);
  EXPECT_EQ(WorldSize(AttemptLayout()), 0u);
}

}  // namespace
}  // namespace trainlet
