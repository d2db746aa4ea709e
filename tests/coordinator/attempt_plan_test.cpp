// coordinator/attempt_plan.h: the layout and render steps as the coordinator calls them, the
// checks it makes of a plugin's answers, and the exec launcher's secret, which the coordinator
// adds after rendering (PlanRequest has no field for it).
#include "coordinator/attempt_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

namespace trainlet::coordinator {
namespace {

using ::testing::HasSubstr;

PlanRequest Placed(uint32_t nodes, const std::string& per_node, std::vector<std::string> argv) {
  PlanRequest req;
  req.job = "job";
  req.attempt = 1;
  req.argv = std::move(argv);
  req.num_proc_per_node = per_node;
  for (uint32_t i = 0; i < nodes; ++i) {
    PlacedNode& n = req.nodes.emplace_back();
    n.name = "node-" + std::to_string(i + 1);
    n.address = "10.0.0." + std::to_string(i + 1);
  }
  return req;
}

// A plugin whose answers a test shapes: `layout` and `render` edit what a sound plugin would say.
class ShapedPlugin final : public RuntimePlugin {
 public:
  std::string_view name() const override { return "shaped"; }
  PluginResult<uint32_t> ProcsPerNode(std::string_view, const v1::Topology*) const override {
    return 1u;
  }
  PluginResult<AttemptLayout> Layout(const PlanRequest& request) const override {
    AttemptLayout out;
    for (uint32_t n = 0; n < request.nodes.size(); ++n) out.nodes.push_back({{{n, 0}}, 1});
    if (layout) layout(out);
    return out;
  }
  PluginResult<std::vector<v1::LaunchPlan>> Render(const PlanRequest& request,
                                                   const AttemptLayout& l) const override {
    std::vector<v1::LaunchPlan> plans(request.nodes.size());
    for (uint32_t n = 0; n < plans.size(); ++n) {
      for (const LaidOutRank& r : l.nodes[n].ranks) {
        auto* w = plans[n].add_workers();
        w->set_rank(r.rank);
        w->set_local_rank(r.local_rank);
      }
    }
    if (render) render(plans);
    return plans;
  }
  std::string LaunchMode(const PlanRequest&) const override { return "shaped"; }

  std::function<void(AttemptLayout&)> layout;
  std::function<void(std::vector<v1::LaunchPlan>&)> render;
};

// The request with the ports `layout` asked for, as the agents would reserve them.
PlanRequest WithPorts(PlanRequest req, const AttemptLayout& layout) {
  for (size_t n = 0; n < req.nodes.size(); ++n) {
    for (uint32_t p = 0; p < layout.nodes[n].ports; ++p) {
      req.nodes[n].ports.push_back(static_cast<uint32_t>(20000 + 10 * n + p));
    }
  }
  return req;
}

TEST(AttemptPlanTest, TheMpiLauncherGetsItsSecretFromTheCoordinator) {
  const RuntimePlugin* mpi = FindRuntimePlugin("mpi");
  ASSERT_NE(mpi, nullptr);
  PlanRequest req = Placed(3, "2", {"mpirun", "./allreduce"});
  auto layout = LayoutAttempt(*mpi, req);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  ASSERT_EQ(layout->exec_launcher_rank, std::optional<uint32_t>(0));
  EXPECT_FALSE(WantsPorts(*layout));
  req.exec_endpoint = "tcp://10.0.0.100:4000";
  req.exec_server_key = "server";
  req.launcher_public_key = "public";
  auto plans = RenderAttempt(*mpi, req, *layout, LauncherSecret{"secret"});
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  ASSERT_EQ(plans->size(), 3u);
  ASSERT_EQ((*plans)[0].workers_size(), 1);
  const auto& env = (*plans)[0].workers(0).env();
  // What trainlet-exec reads (cli/trainlet-exec/main.cpp).
  EXPECT_EQ(env.at("TRAINLET_EXEC_KEY"), "secret");
  EXPECT_EQ(env.at("TRAINLET_EXEC_PUBLIC_KEY"), "public");
  EXPECT_EQ(env.at("TRAINLET_EXEC_SERVER_KEY"), "server");
  EXPECT_EQ(env.at("TRAINLET_EXEC_ENDPOINT"), "tcp://10.0.0.100:4000");
  EXPECT_EQ(env.at("OMPI_MCA_plm_rsh_agent"), "$(TRAINLET_EXEC)");  // the plugin's own env stays
  // Every node's plan says the slots the job holds there (2 per node), though only the
  // launcher's names a worker: the agents size the job's CPU share from it (cpu_allotment.h).
  for (const auto& plan : *plans) EXPECT_EQ(plan.slots(), 2u);
}

// Issue 19: the runtime container's securityContext user and group reach every worker of the
// main replicated job (the other steps carry their own container's, attempt_steps.h).
TEST(AttemptPlanTest, TheRuntimesRunAsReachesTheMainWorkers) {
  ShapedPlugin plugin;
  PlanRequest req = Placed(2, "1", {"/bin/true"});
  auto layout = LayoutAttempt(plugin, req);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  req = WithPorts(req, *layout);
  auto plans = RenderAttempt(plugin, req, *layout, LauncherSecret{});
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  EXPECT_FALSE((*plans)[0].workers(0).has_run_as_user());  // unset stays unset

  req.run_as_user = 65534;
  req.run_as_group = 0;
  plans = RenderAttempt(plugin, req, *layout, LauncherSecret{});
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  for (const auto& plan : *plans) {
    for (const auto& w : plan.workers()) {
      EXPECT_EQ(w.run_as_user(), 65534);
      ASSERT_TRUE(w.has_run_as_group());
      EXPECT_EQ(w.run_as_group(), 0);
      EXPECT_FALSE(w.has_allow_privilege_escalation());
    }
  }
  // securityContext.allowPrivilegeEscalation travels the same way (no_new_privs opt-out).
  req.allow_privilege_escalation = true;
  plans = RenderAttempt(plugin, req, *layout, LauncherSecret{});
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  for (const auto& plan : *plans) {
    for (const auto& w : plan.workers()) EXPECT_TRUE(w.allow_privilege_escalation());
  }
}

TEST(AttemptPlanTest, AnExecLauncherWithoutItsSecretFails) {
  const RuntimePlugin* mpi = FindRuntimePlugin("mpi");
  PlanRequest req = Placed(2, "1", {"mpirun"});
  auto layout = LayoutAttempt(*mpi, req);
  ASSERT_TRUE(layout.ok());
  req.exec_endpoint = "tcp://10.0.0.100:4000";
  req.launcher_public_key = "public";
  auto plans = RenderAttempt(*mpi, req, *layout, LauncherSecret{});
  ASSERT_FALSE(plans.ok());
  EXPECT_EQ(plans.status().code(), ErrorCode::kInternal);
}

TEST(AttemptPlanTest, NoSecretForARuntimeWithoutExec) {
  const RuntimePlugin* plain = FindRuntimePlugin("plain");
  PlanRequest req = Placed(2, "2", {"/bin/true"});
  auto layout = LayoutAttempt(*plain, req);
  ASSERT_TRUE(layout.ok());
  EXPECT_FALSE(layout->exec_launcher_rank.has_value());
  auto plans = RenderAttempt(*plain, req, *layout, LauncherSecret{"unused"});
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  for (const auto& plan : *plans) {
    for (const auto& w : plan.workers()) EXPECT_EQ(w.env().count("TRAINLET_EXEC_KEY"), 0u);
  }
}

TEST(AttemptPlanTest, RefusalsKeepThePluginsCodeAndMessage) {
  const RuntimePlugin* torch = FindRuntimePlugin("torch");
  auto layout = LayoutAttempt(*torch, Placed(2, "two", {"python3", "t.py"}));
  ASSERT_FALSE(layout.ok());
  EXPECT_EQ(layout.status().code(), ErrorCode::kInvalid);
  EXPECT_THAT(layout.status().message(), HasSubstr("spec.trainer.numProcPerNode"));
}

TEST(AttemptPlanTest, TorchIsLaidOutWithoutPortsThenRenderedWithThem) {
  const RuntimePlugin* torch = FindRuntimePlugin("torch");
  PlanRequest req = Placed(2, "2", {"python3", "t.py"});
  auto layout = LayoutAttempt(*torch, req);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_TRUE(WantsPorts(*layout));
  EXPECT_EQ(layout->nodes[0].ports, 1u);
  EXPECT_EQ(layout->nodes[1].ports, 0u);
  auto plans = RenderAttempt(*torch, WithPorts(req, *layout), *layout, LauncherSecret{});
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  EXPECT_EQ((*plans)[1].workers(1).env().at("MASTER_PORT"), "20000");
  EXPECT_EQ((*plans)[1].workers(1).env().at("RANK"), "3");
}

TEST(AttemptPlanTest, PortsOtherThanTheLayoutAskedForAreABug) {
  const RuntimePlugin* torch = FindRuntimePlugin("torch");
  PlanRequest req = Placed(2, "1", {"python3", "t.py"});
  auto layout = LayoutAttempt(*torch, req);
  ASSERT_TRUE(layout.ok());
  auto plans = RenderAttempt(*torch, req, *layout, LauncherSecret{});  // none reserved
  ASSERT_FALSE(plans.ok());
  EXPECT_EQ(plans.status().code(), ErrorCode::kInternal);
  EXPECT_THAT(plans.status().message(), HasSubstr("node-1"));
}

TEST(AttemptPlanTest, TheBindingAnnotationReachesEveryPlan) {
  const RuntimePlugin* plain = FindRuntimePlugin("plain");
  PlanRequest req = Placed(2, "1", {"/bin/true"});
  req.annotations["trainlet.io/binding"] = "none";
  auto layout = LayoutAttempt(*plain, req);
  ASSERT_TRUE(layout.ok());
  auto plans = RenderAttempt(*plain, req, *layout, LauncherSecret{});
  ASSERT_TRUE(plans.ok());
  for (const auto& plan : *plans) EXPECT_EQ(plan.binding(), "none");
  req.annotations.clear();
  plans = RenderAttempt(*plain, req, *layout, LauncherSecret{});
  ASSERT_TRUE(plans.ok());
  for (const auto& plan : *plans) EXPECT_EQ(plan.binding(), "");
}

TEST(AttemptPlanTest, ABrokenLayoutIsAnInternalErrorNamingThePlugin) {
  const std::vector<std::function<void(AttemptLayout&)>> broken = {
      [](AttemptLayout& l) { l.nodes.pop_back(); },            // a node missing
      [](AttemptLayout& l) { l.nodes[1].ranks[0].rank = 0; },  // rank 0 twice
      [](AttemptLayout& l) { l.nodes[1].ranks[0].rank = 7; },  // out of range
      [](AttemptLayout& l) { l.exec_launcher_rank = 2; },      // a launcher not laid out
  };
  for (size_t i = 0; i < broken.size(); ++i) {
    ShapedPlugin plugin;
    plugin.layout = broken[i];
    auto layout = LayoutAttempt(plugin, Placed(2, "1", {"x"}));
    ASSERT_FALSE(layout.ok()) << i;
    EXPECT_EQ(layout.status().code(), ErrorCode::kInternal) << i;
    EXPECT_THAT(layout.status().message(), HasSubstr("the shaped runtime plugin")) << i;
  }
}

TEST(AttemptPlanTest, PlansThatLeaveTheLayoutAreAnInternalError) {
  const std::vector<std::function<void(std::vector<v1::LaunchPlan>&)>> broken = {
      [](auto& plans) { plans.pop_back(); },                                // a plan missing
      [](auto& plans) { plans[1].mutable_workers(0)->set_rank(0); },        // a rank moved
      [](auto& plans) { plans[0].add_workers()->set_rank(1); },             // an extra worker
      [](auto& plans) { plans[1].mutable_workers(0)->set_local_rank(3); },  // local rank
  };
  for (size_t i = 0; i < broken.size(); ++i) {
    ShapedPlugin plugin;
    plugin.render = broken[i];
    const PlanRequest req = Placed(2, "1", {"x"});
    auto layout = LayoutAttempt(plugin, req);
    ASSERT_TRUE(layout.ok()) << i;
    auto plans = RenderAttempt(plugin, WithPorts(req, *layout), *layout, LauncherSecret{});
    ASSERT_FALSE(plans.ok()) << i;
    EXPECT_EQ(plans.status().code(), ErrorCode::kInternal) << i;
  }
  ShapedPlugin sound;
  const PlanRequest req = Placed(2, "1", {"x"});
  auto layout = LayoutAttempt(sound, req);
  ASSERT_TRUE(layout.ok());
  EXPECT_TRUE(RenderAttempt(sound, WithPorts(req, *layout), *layout, LauncherSecret{}).ok());
}

}  // namespace
}  // namespace trainlet::coordinator
