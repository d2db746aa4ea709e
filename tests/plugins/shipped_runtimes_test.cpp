// The ClusterTrainingRuntimes in deploy/runtimes/ pass Kubeflow's CRD schema (trainlet's parser)
// and each selects the plugin docs/runtimes.md promises; the kustomize copies are identical.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "common/trainjob/trainjob_model.h"
#include "trainlet/runtime_plugin.h"

namespace trainlet {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ShippedRuntimesTest, ParseAndSelectTheirPlugin) {
  const std::map<std::string, std::string> want = {{"torch-distributed", "torch"},
                                                   {"jax-distributed", "jax"},
                                                   {"xgboost-distributed", "xgboost"},
                                                   {"mlx-ring", "mlx"},
                                                   {"mlx-distributed", "mpi"},
                                                   {"plain", "plain"},
                                                   {"mpi-direct", "mpi"}};
  for (const auto& [name, plugin] : want) {
    const std::string path =
        std::string(TRAINLET_SOURCE_DIR) + "/deploy/runtimes/" + name + ".yaml";
    const std::string text = Read(path);
    ASSERT_FALSE(text.empty()) << path;
    EXPECT_EQ(text, Read(std::string(TRAINLET_SOURCE_DIR) + "/deploy/kubernetes/base/runtimes/" +
                         name + ".yaml"))
        << name << ": the kustomize copy differs";
    auto parsed = trainjob::ParseDocuments(text);
    ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.status().ToString();
    ASSERT_EQ(parsed->runtimes.size(), 1u) << name;
    const trainjob::TrainingRuntime& rt = parsed->runtimes[0];
    EXPECT_EQ(rt.name, name);
    const RuntimePlugin* p =
        SelectRuntimePlugin(trainjob::FrameworkName(rt.ml_policy.framework), rt.labels);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_EQ(p->name(), plugin) << name;
  }
}

}  // namespace
}  // namespace trainlet
