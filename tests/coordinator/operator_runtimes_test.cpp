// ListRuntimes: what `get clustertrainingruntimes|trainingruntimes` and the SDK's list_runtimes
// see, over the runtimes trainlet ships plus applied TrainingRuntimes in two namespaces.
#include "coordinator/operator_runtimes.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace trainlet::coordinator {
namespace {

std::string NamespacedRuntime(const std::string& ns, const std::string& name) {
  return "apiVersion: trainer.kubeflow.org/v1alpha1\n"
         "kind: TrainingRuntime\n"
         "metadata:\n"
         "  name: " +
         name + "\n  namespace: " + ns +
         "\n"
         "  labels:\n"
         "    trainer.kubeflow.org/framework: torch\n"
         "spec:\n"
         "  mlPolicy:\n"
         "    numNodes: 3\n"
         "    torch: {}\n"
         "  template:\n"
         "    spec:\n"
         "      replicatedJobs:\n"
         "        - name: node\n"
         "          template:\n"
         "            spec:\n"
         "              template:\n"
         "                spec:\n"
         "                  containers:\n"
         "                    - name: node\n"
         "                      command: [python3, train.py]\n"
         "                      args: [--epochs, \"2\"]\n";
}

class OperatorRuntimesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(catalog_.LoadShipped(std::string(TRAINLET_SOURCE_DIR) + "/deploy/runtimes").ok());
    auto parsed = trainjob::ParseDocuments(NamespacedRuntime("default", "mine") + "---\n" +
                                           NamespacedRuntime("team-a", "theirs"));
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    v1::ApplyResult applied;
    catalog_.Commit(RuntimeCatalog::StageRuntimes(parsed->runtimes), applied);
  }

  std::vector<std::string> Names(const v1::GetRuntimesRequest& request) {
    auto list = ListRuntimes(catalog_, request);
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    std::vector<std::string> names;
    if (!list.ok()) return names;
    for (const auto& r : list->runtimes()) {
      names.push_back(r.namespace_().empty() ? r.name() : r.namespace_() + "/" + r.name());
    }
    return names;
  }

  RuntimeCatalog catalog_;
};

TEST_F(OperatorRuntimesTest, ClusterRuntimesFirstThenTheRequestsNamespace) {
  const auto names = Names({});
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(names.back(), "default/mine");
  EXPECT_NE(std::find(names.begin(), names.end(), "torch-distributed"), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "team-a/theirs"), names.end());

  v1::GetRuntimesRequest team_a;
  team_a.set_namespace_("team-a");
  team_a.set_kind("TrainingRuntime");
  EXPECT_EQ(Names(team_a), std::vector<std::string>{"team-a/theirs"});

  v1::GetRuntimesRequest every;
  every.set_all_namespaces(true);
  every.set_kind("TrainingRuntime");
  EXPECT_EQ(Names(every), (std::vector<std::string>{"default/mine", "team-a/theirs"}));
}

TEST_F(OperatorRuntimesTest, DescribesFrameworkPluginNodesAndCommand) {
  v1::GetRuntimesRequest one;
  one.set_name("mine");
  auto list = ListRuntimes(catalog_, one);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->runtimes_size(), 1);
  const v1::RuntimeInfo& r = list->runtimes(0);
  EXPECT_EQ(r.kind(), "TrainingRuntime");
  EXPECT_EQ(r.namespace_(), "default");
  EXPECT_EQ(r.framework(), "torch");
  EXPECT_EQ(r.plugin(), "torch");
  EXPECT_EQ(r.num_nodes(), 3u);
  EXPECT_EQ(std::vector<std::string>(r.command().begin(), r.command().end()),
            (std::vector<std::string>{"python3", "train.py", "--epochs", "2"}));
  EXPECT_NE(r.yaml().find("name: mine"), std::string::npos);

  // mlx-distributed: its framework label says mlx, and its mlPolicy.mpi has the mpi plugin run
  // it (mlx.launch --backend mpi); mlx-ring, with no mlPolicy, runs on the mlx plugin.
  one.set_name("mlx-distributed");
  list = ListRuntimes(catalog_, one);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->runtimes_size(), 1);
  EXPECT_EQ(list->runtimes(0).kind(), "ClusterTrainingRuntime");
  EXPECT_EQ(list->runtimes(0).namespace_(), "");
  EXPECT_EQ(list->runtimes(0).framework(), "mlx");
  EXPECT_EQ(list->runtimes(0).plugin(), "mpi");
  one.set_name("mlx-ring");
  list = ListRuntimes(catalog_, one);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->runtimes_size(), 1);
  EXPECT_EQ(list->runtimes(0).framework(), "mlx");
  EXPECT_EQ(list->runtimes(0).plugin(), "mlx");
}

TEST_F(OperatorRuntimesTest, UnknownNameAndKindAreRefusedSayingWhere) {
  v1::GetRuntimesRequest missing;
  missing.set_name("theirs");  // exists, but in team-a
  auto list = ListRuntimes(catalog_, missing);
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(list.status().message(),
            "runtime \"theirs\" not found: no ClusterTrainingRuntime, nor TrainingRuntime in "
            "namespace default, has that name");

  v1::GetRuntimesRequest bad_kind;
  bad_kind.set_kind("Pod");
  list = ListRuntimes(catalog_, bad_kind);
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), ErrorCode::kInvalid);
  EXPECT_NE(list.status().message().find("kind: \"Pod\""), std::string::npos);
}

}  // namespace
}  // namespace trainlet::coordinator
