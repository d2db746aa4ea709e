// get clustertrainingruntimes|trainingruntimes: which words name the kinds, and what the table
// and -o name print.
#include "trainletctl/runtime_commands.h"

#include <gtest/gtest.h>

namespace trainlet::cli {
namespace {

TEST(RuntimeKindOf, PluralSingularKindAndGroupNames) {
  std::string name;
  EXPECT_EQ(RuntimeKindOf("clustertrainingruntimes", name), "ClusterTrainingRuntime");
  EXPECT_EQ(RuntimeKindOf("ClusterTrainingRuntime", name), "ClusterTrainingRuntime");
  EXPECT_EQ(RuntimeKindOf("trainingruntime.trainer.kubeflow.org", name), "TrainingRuntime");
  EXPECT_EQ(name, "");
  EXPECT_EQ(RuntimeKindOf("clustertrainingruntime/torch-distributed", name),
            "ClusterTrainingRuntime");
  EXPECT_EQ(name, "torch-distributed");
  std::string other;
  EXPECT_EQ(RuntimeKindOf("trainjobs", other), "");
  EXPECT_EQ(RuntimeKindOf("runtimes", other), "");
}

v1::RuntimeList TwoRuntimes() {
  v1::RuntimeList list;
  auto* a = list.add_runtimes();
  a->set_kind("TrainingRuntime");
  a->set_name("mine");
  a->set_namespace_("team-a");
  a->set_framework("torch");
  a->set_plugin("torch");
  a->set_num_nodes(2);
  a->add_command("torchrun");
  a->add_command(std::string(80, 'x'));
  auto* b = list.add_runtimes();
  b->set_kind("TrainingRuntime");
  b->set_name("bare");
  b->set_namespace_("team-b");
  b->set_framework("plain");
  b->set_plugin("plain");
  b->set_num_nodes(1);
  return list;
}

TEST(RenderRuntimes, TableWithNamespaceColumnOnlyAcrossNamespaces) {
  const std::string one = RenderRuntimes(TwoRuntimes(), "TrainingRuntime", OutputFormat::kTable,
                                         /*all_namespaces=*/false);
  EXPECT_EQ(one.rfind("NAME", 0), 0u) << one;
  EXPECT_NE(one.find("mine   torch       torch    2       torchrun xxx"), std::string::npos) << one;
  EXPECT_NE(one.find("..."), std::string::npos) << one;  // a long command is cut
  EXPECT_NE(one.find("<none>"), std::string::npos) << one;
  const std::string all = RenderRuntimes(TwoRuntimes(), "TrainingRuntime", OutputFormat::kTable,
                                         /*all_namespaces=*/true);
  EXPECT_EQ(all.rfind("NAMESPACE", 0), 0u) << all;
  EXPECT_NE(all.find("team-b"), std::string::npos) << all;
}

TEST(RenderRuntimes, NamesAndJson) {
  EXPECT_EQ(RenderRuntimes(TwoRuntimes(), "TrainingRuntime", OutputFormat::kName, false),
            "trainingruntime/mine\ntrainingruntime/bare\n");
  const std::string json =
      RenderRuntimes(TwoRuntimes(), "TrainingRuntime", OutputFormat::kJson, false);
  EXPECT_NE(json.find("\"numNodes\": 2"), std::string::npos) << json;
}

}  // namespace
}  // namespace trainlet::cli
