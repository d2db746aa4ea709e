// The plain runtime plugin and the built-in plugin table.
#include "plugins/runtime/plain/plain_runtime.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "plugins/runtime/worker_env.h"
#include "runtime_test_util.h"
#include "trainlet/runtime_plugin.h"

namespace trainlet {
namespace {

using ::testing::HasSubstr;
using testing_util::LayoutAndRender;
using testing_util::WithoutPorts;

PlanRequest Request(uint32_t nodes, const std::string& per_node) {
  PlanRequest req;
  req.job = "hello";
  req.attempt = 3;
  req.argv = {"/bin/sh", "-c", "echo $TRAINLET_RANK"};
  req.num_proc_per_node = per_node;
  req.stop_grace_ms = 2500;
  for (uint32_t i = 0; i < nodes; ++i) {
    PlacedNode n;
    n.name = "n" + std::to_string(i + 1);
    n.address = "127.0.0." + std::to_string(i + 1);
    n.hostname = n.name;
    req.nodes.push_back(n);
  }
  return req;
}

TEST(PlainRuntimeTest, Name) {
  auto plugin = MakePlainRuntime();
  ASSERT_NE(plugin, nullptr);
  EXPECT_EQ(plugin->name(), "plain");
}

TEST(PlainRuntimeTest, ProcsPerNode) {
  auto plugin = MakePlainRuntime();
  auto one = plugin->ProcsPerNode("", nullptr);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(*one, 1u);
  auto four = plugin->ProcsPerNode("4", nullptr);
  ASSERT_TRUE(four.ok()) << four.status().ToString();
  EXPECT_EQ(*four, 4u);
  v1::Topology topo;  // a topology changes nothing for plain
  EXPECT_EQ(*plugin->ProcsPerNode("2", &topo), 2u);

  auto autop = plugin->ProcsPerNode("auto", nullptr);
  ASSERT_FALSE(autop.ok());
  EXPECT_EQ(autop.status().code(), PluginErrorCode::kInvalid);
  EXPECT_THAT(autop.status().message(), HasSubstr("spec.trainer.numProcPerNode"));
  EXPECT_THAT(autop.status().message(), HasSubstr("auto"));

  for (const char* bad : {"0", "x", "-1", "4x", " 4", "4.0", "99999999999", "4097"}) {
    auto r = plugin->ProcsPerNode(bad, nullptr);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), PluginErrorCode::kInvalid) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("spec.trainer.numProcPerNode")) << bad;
  }
  EXPECT_EQ(*plugin->ProcsPerNode("4096", nullptr), 4096u);
}

TEST(PlainRuntimeTest, PlanRankMath) {
  auto plugin = MakePlainRuntime();
  auto plans = LayoutAndRender(*plugin, Request(3, "2"));
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  ASSERT_EQ(plans->size(), 3u);
  std::set<uint32_t> ranks;
  size_t workers = 0;
  for (uint32_t n = 0; n < 3; ++n) {
    const v1::LaunchPlan& plan = (*plans)[n];
    EXPECT_EQ(plan.job(), "hello");
    EXPECT_EQ(plan.attempt(), 3u);
    EXPECT_EQ(plan.node_rank(), n);
    EXPECT_EQ(plan.stop_grace_ms(), 2500u);
    ASSERT_EQ(plan.workers_size(), 2);
    for (uint32_t l = 0; l < 2; ++l) {
      const v1::WorkerSpec& w = plan.workers(static_cast<int>(l));
      ++workers;
      const uint32_t rank = n * 2 + l;
      ranks.insert(w.rank());
      EXPECT_EQ(w.rank(), rank);
      EXPECT_EQ(w.local_rank(), l);
      EXPECT_THAT(std::vector<std::string>(w.argv().begin(), w.argv().end()),
                  ::testing::ElementsAre("/bin/sh", "-c", "echo $TRAINLET_RANK"));
      const auto& env = w.env();
      EXPECT_EQ(env.at("TRAINLET_JOB"), "hello");
      EXPECT_EQ(env.at("TRAINLET_ATTEMPT"), "3");
      EXPECT_EQ(env.at("TRAINLET_RANK"), std::to_string(rank));
      EXPECT_EQ(env.at("TRAINLET_WORLD_SIZE"), "6");
      EXPECT_EQ(env.at("TRAINLET_LOCAL_RANK"), std::to_string(l));
      EXPECT_EQ(env.at("TRAINLET_LOCAL_WORLD_SIZE"), "2");
      EXPECT_EQ(env.at("TRAINLET_NODE_RANK"), std::to_string(n));
      EXPECT_EQ(env.at("TRAINLET_NUM_NODES"), "3");
      // plain adds no framework env.
      for (const auto& [k, v] : env) {
        EXPECT_EQ(k.rfind("TRAINLET_", 0), 0u) << "unexpected variable " << k;
      }
    }
  }
  EXPECT_EQ(workers, 6u);
  EXPECT_EQ(ranks, (std::set<uint32_t>{0, 1, 2, 3, 4, 5}));
}

TEST(PlainRuntimeTest, DefaultsToOneProcPerNode) {
  auto plans = LayoutAndRender(*MakePlainRuntime(), Request(2, ""));
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  ASSERT_EQ(plans->size(), 2u);
  EXPECT_EQ((*plans)[1].workers_size(), 1);
  EXPECT_EQ((*plans)[1].workers(0).rank(), 1u);
  EXPECT_EQ((*plans)[1].workers(0).env().at("TRAINLET_WORLD_SIZE"), "2");
}

TEST(PlainRuntimeTest, UserEnvKeptButCannotOverrideTrainletEnv) {
  PlanRequest req = Request(2, "1");
  req.env = {{"FOO", "bar"},
             {"DUP", "first"},
             {"DUP", "second"},
             {"TRAINLET_RANK", "99"},
             {"TRAINLET_WORLD_SIZE", "1000"},
             {"TRAINLET_JOB", "other"}};
  auto plans = LayoutAndRender(*MakePlainRuntime(), req);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  const auto& env = (*plans)[1].workers(0).env();
  EXPECT_EQ(env.at("FOO"), "bar");
  EXPECT_EQ(env.at("DUP"), "second");  // later entries win
  EXPECT_EQ(env.at("TRAINLET_RANK"), "1");
  EXPECT_EQ(env.at("TRAINLET_WORLD_SIZE"), "2");
  EXPECT_EQ(env.at("TRAINLET_JOB"), "hello");
}

TEST(PlainRuntimeTest, PlanErrorsNameTheField) {
  auto plugin = MakePlainRuntime();
  PlanRequest req = Request(2, "2");
  req.argv.clear();
  auto r = LayoutAndRender(*plugin, req);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("spec.trainer.command"));

  r = LayoutAndRender(*plugin, Request(2, "auto"));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("spec.trainer.numProcPerNode"));
}

TEST(WorkerEnvTest, ParseProcCount) {
  EXPECT_EQ(*ParseProcCount("", "f", 7), 7u);
  EXPECT_EQ(*ParseProcCount("12", "f", 7), 12u);
  auto r = ParseProcCount("zero", "spec.x", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("spec.x"));
  EXPECT_THAT(r.status().message(), HasSubstr("zero"));
}

TEST(RuntimePluginRegistryTest, FindsBuiltins) {
  const RuntimePlugin* plain = FindRuntimePlugin("plain");
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->name(), "plain");
  EXPECT_EQ(FindRuntimePlugin("plain"), plain);  // one shared instance
  EXPECT_EQ(FindRuntimePlugin("no-such-framework"), nullptr);
  EXPECT_EQ(FindRuntimePlugin(""), nullptr);
  EXPECT_EQ(FindRuntimePlugin("Plain"), nullptr);

  auto names = RuntimePluginNames();
  // torch is not built in yet; once it is, it must be in the table too.
  const bool torch_listed = std::find(names.begin(), names.end(), "torch") != names.end();
  EXPECT_EQ(FindRuntimePlugin("torch") != nullptr, torch_listed);
  EXPECT_NE(std::find(names.begin(), names.end(), "plain"), names.end());
  // Every listed name resolves to a plugin of that name.
  for (const auto& n : names) {
    const RuntimePlugin* p = FindRuntimePlugin(n);
    ASSERT_NE(p, nullptr) << n;
    EXPECT_EQ(p->name(), n);
  }
}

}  // namespace
}  // namespace trainlet
