// The public plugin headers stand alone: this file is compiled with include/ and the generated
// trainlet/v1/ headers on its include path and nothing else of trainlet (tests/plugins/
// CMakeLists.txt), so a public header that includes an internal one (common/status.h) fails to
// build here. It also holds a plugin written the way one outside trainlet would be.
#include "trainlet/accelerator_plugin.h"
#include "trainlet/plugin_result.h"
#include "trainlet/runtime_plugin.h"

#ifdef TRAINLET_CHECK
#error "a public header pulled in common/status.h"
#endif

#include <gtest/gtest.h>

#include <concepts>

namespace trainlet {
namespace {

// Secrets do not travel in PlanRequest: the coordinator adds the launcher's key after Render.
template <typename R>
concept CarriesLauncherSecret = requires(R r) {
  r.launcher_secret_key;
};
struct OldPlanRequest {  // what PlanRequest was: the concept does see such a field
  std::string launcher_secret_key;
};
static_assert(CarriesLauncherSecret<OldPlanRequest>);
static_assert(!CarriesLauncherSecret<PlanRequest>);
// The public key fields stay: they are not secret.
static_assert(std::same_as<decltype(PlanRequest::launcher_public_key), std::string>);

// One rank per node, port 1 of its own node in its env; refuses an empty command in Layout.
class OutsidePlugin final : public RuntimePlugin {
 public:
  std::string_view name() const override { return "outside"; }
  PluginResult<uint32_t> ProcsPerNode(std::string_view, const v1::Topology*) const override {
    return 1u;
  }
  PluginResult<AttemptLayout> Layout(const PlanRequest& request) const override {
    if (request.argv.empty()) {
      return PluginStatus(PluginErrorCode::kInvalid, "spec.trainer.command: no command to run");
    }
    AttemptLayout layout;
    for (uint32_t n = 0; n < request.nodes.size(); ++n) {
      layout.nodes.push_back({{{n, 0}}, 1});
    }
    return layout;
  }
  PluginResult<std::vector<v1::LaunchPlan>> Render(const PlanRequest& request,
                                                   const AttemptLayout& layout) const override {
    std::vector<v1::LaunchPlan> plans;
    for (uint32_t n = 0; n < request.nodes.size(); ++n) {
      if (request.nodes[n].ports.empty()) {
        return PluginStatus(PluginErrorCode::kInvalid,
                            "PORT: none reserved on " + request.nodes[n].name);
      }
      v1::LaunchPlan& plan = plans.emplace_back();
      plan.set_node_rank(n);
      auto* w = plan.add_workers();
      w->set_rank(layout.nodes[n].ranks[0].rank);
      (*w->mutable_env())["PORT"] = std::to_string(request.nodes[n].ports[0]);
    }
    return plans;
  }
  std::string LaunchMode(const PlanRequest&) const override { return "outside"; }
};

PlanRequest TwoNodes() {
  PlanRequest req;
  req.argv = {"run"};
  req.nodes.resize(2);
  req.nodes[0].name = "a";
  req.nodes[1].name = "b";
  return req;
}

TEST(PublicHeadersTest, APluginBuiltOnThePublicHeadersAlonePlansInTwoSteps) {
  OutsidePlugin plugin;
  PlanRequest req = TwoNodes();
  auto layout = plugin.Layout(req);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  ASSERT_EQ(layout->nodes.size(), 2u);
  EXPECT_EQ(layout->nodes[1].ranks[0].rank, 1u);
  EXPECT_EQ(layout->nodes[1].ports, 1u);
  EXPECT_FALSE(layout->exec_launcher_rank.has_value());

  auto early = plugin.Render(req, *layout);  // no port reserved yet
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.status().code(), PluginErrorCode::kInvalid);
  EXPECT_EQ(early.status().ToString(), "Invalid: PORT: none reserved on a");

  req.nodes[0].ports = {20001};
  req.nodes[1].ports = {20002};
  auto plans = plugin.Render(req, *layout);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  EXPECT_EQ((*plans)[1].workers(0).env().at("PORT"), "20002");
}

TEST(PublicHeadersTest, PluginResultHoldsAValueOrAStatus) {
  PluginResult<int> value = 7;
  EXPECT_TRUE(value.ok());
  EXPECT_TRUE(value.status().ok());
  EXPECT_EQ(value.status().ToString(), "OK");
  EXPECT_EQ(*value, 7);

  PluginResult<int> error = PluginStatus(PluginErrorCode::kUnavailable, "NVML: not loaded");
  EXPECT_FALSE(error.ok());
  EXPECT_EQ(error.status().code(), PluginErrorCode::kUnavailable);
  EXPECT_EQ(error.status().message(), "NVML: not loaded");
  EXPECT_EQ(error.status().ToString(), "Unavailable: NVML: not loaded");

  OutsidePlugin plugin;
  PlanRequest empty = TwoNodes();
  empty.argv.clear();
  auto refused = plugin.Layout(empty);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().ToString(), "Invalid: spec.trainer.command: no command to run");
}

TEST(PublicHeadersTest, AnOkStatusWithoutAValueIsABug) {
  EXPECT_DEATH({ PluginResult<int> r = PluginStatus(); }, "");
}

}  // namespace
}  // namespace trainlet
