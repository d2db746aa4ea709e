// RuntimeCatalog: the shipped runtimes dir, the stored runtimes, lookup, and Apply's staging.
#include "coordinator/runtime_catalog.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

namespace trainlet::coordinator {
namespace {

// A ClusterTrainingRuntime named `name` whose command is `command`.
std::string RuntimeYaml(const std::string& name, const std::string& command = "/bin/true") {
  return "apiVersion: trainer.kubeflow.org/v1alpha1\n"
         "kind: ClusterTrainingRuntime\n"
         "metadata:\n"
         "  name: " +
         name +
         "\n"
         "spec:\n"
         "  mlPolicy:\n"
         "    numNodes: 1\n"
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
         "                      command: [\"" +
         command + "\"]\n";
}

trainjob::TrainingRuntime Parse(const std::string& yaml) {
  auto parsed = trainjob::ParseDocuments(yaml);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->runtimes.size(), 1u);
  return parsed->runtimes.at(0);
}

trainjob::TrainJob::RuntimeRef Ref(const std::string& name) {
  trainjob::TrainJob::RuntimeRef ref;
  ref.name = name;
  return ref;
}

class RuntimeCatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/trainlet-runtime-catalog-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    shipped_ = root_ + "/runtimes";
    std::filesystem::create_directories(shipped_);
    auto store = JobStore::Open(root_ + "/state");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
  }
  void TearDown() override {
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  void Write(const std::string& file, const std::string& text) {
    std::ofstream(shipped_ + "/" + file) << text;
  }

  std::string root_, shipped_;
  std::unique_ptr<JobStore> store_;
  RuntimeCatalog catalog_;
};

TEST_F(RuntimeCatalogTest, NoDirMeansNoShippedRuntimes) {
  ASSERT_TRUE(catalog_.LoadShipped("").ok());
  EXPECT_EQ(catalog_.size(), 0u);
}

TEST_F(RuntimeCatalogTest, LoadsEveryYamlOfTheDirAndNothingElse) {
  Write("a.yaml", RuntimeYaml("alpha"));
  Write("b.yaml", RuntimeYaml("beta"));
  Write("notes.txt", "not a runtime");
  ASSERT_TRUE(catalog_.LoadShipped(shipped_).ok());
  EXPECT_EQ(catalog_.size(), 2u);
  ASSERT_NE(catalog_.Find("ClusterTrainingRuntime", "alpha"), nullptr);
  EXPECT_EQ(catalog_.Find("ClusterTrainingRuntime", "alpha")->name, "alpha");
  EXPECT_NE(catalog_.Find("ClusterTrainingRuntime", "beta"), nullptr);
  EXPECT_EQ(catalog_.Find("TrainingRuntime", "alpha"), nullptr);  // kind is part of the key
}

TEST_F(RuntimeCatalogTest, ErrorsNameTheDirOrTheFile) {
  Status missing = catalog_.LoadShipped(root_ + "/absent");
  EXPECT_EQ(missing.code(), ErrorCode::kIo);
  EXPECT_NE(missing.message().find("--runtimes-dir " + root_ + "/absent"), std::string::npos);

  Write("broken.yaml", "kind: [unclosed\n");
  Status broken = catalog_.LoadShipped(shipped_);
  EXPECT_EQ(broken.code(), ErrorCode::kInvalid);
  EXPECT_NE(broken.message().find(shipped_ + "/broken.yaml"), std::string::npos);
}

TEST_F(RuntimeCatalogTest, StoredRuntimesWinAndCorruptOnesAreSkipped) {
  Write("a.yaml", RuntimeYaml("alpha", "/bin/shipped"));
  ASSERT_TRUE(catalog_.LoadShipped(shipped_).ok());
  const auto stored = Parse(RuntimeYaml("alpha", "/bin/stored"));
  ASSERT_TRUE(store_->PutRuntime({stored.kind, stored.name, stored.yaml}).ok());
  ASSERT_TRUE(store_->PutRuntime({"ClusterTrainingRuntime", "corrupt", "kind: [unclosed"}).ok());
  ASSERT_TRUE(catalog_.LoadStored(*store_).ok());
  EXPECT_EQ(catalog_.size(), 1u);
  EXPECT_EQ(catalog_.Find("ClusterTrainingRuntime", "alpha")->yaml, stored.yaml);
  EXPECT_EQ(catalog_.Find("ClusterTrainingRuntime", "corrupt"), nullptr);
}

TEST_F(RuntimeCatalogTest, ResolveLooksInTheStageFirstThenTheCatalog) {
  Write("a.yaml", RuntimeYaml("alpha", "/bin/shipped"));
  ASSERT_TRUE(catalog_.LoadShipped(shipped_).ok());
  const auto staged_alpha = Parse(RuntimeYaml("alpha", "/bin/applied"));
  const auto stage = RuntimeCatalog::StageRuntimes({staged_alpha, Parse(RuntimeYaml("gamma"))});

  auto alpha = catalog_.Resolve(stage, "job", Ref("alpha"));
  ASSERT_TRUE(alpha.ok());
  EXPECT_EQ((*alpha)->yaml, staged_alpha.yaml);
  EXPECT_TRUE(catalog_.Resolve(stage, "job", Ref("gamma")).ok());
  auto from_catalog = catalog_.Resolve(RuntimeCatalog::Stage{}, "job", Ref("alpha"));
  ASSERT_TRUE(from_catalog.ok());
  EXPECT_EQ(*from_catalog, catalog_.Find("ClusterTrainingRuntime", "alpha"));

  auto missing = catalog_.Resolve(stage, "job", Ref("delta"));
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "TrainJob/job: spec.runtimeRef: ClusterTrainingRuntime \"delta\" not found (known: "
            "ClusterTrainingRuntime/alpha)");
}

// A TrainingRuntime named `name` in namespace `ns` ("" leaves metadata.namespace out).
std::string NamespacedRuntimeYaml(const std::string& ns, const std::string& name,
                                  const std::string& command) {
  std::string yaml = RuntimeYaml(name, command);
  yaml.replace(yaml.find("kind: ClusterTrainingRuntime"), 28, "kind: TrainingRuntime");
  if (!ns.empty()) {
    yaml.replace(yaml.find("metadata:\n"), 10, "metadata:\n  namespace: " + ns + "\n");
  }
  return yaml;
}

TEST_F(RuntimeCatalogTest, TrainingRuntimesResolveInTheJobsNamespace) {
  const auto in_a = Parse(NamespacedRuntimeYaml("team-a", "rt", "/bin/a"));
  const auto in_default = Parse(NamespacedRuntimeYaml("", "rt", "/bin/default"));
  const auto stage = RuntimeCatalog::StageRuntimes({in_a, in_default});
  trainjob::TrainJob::RuntimeRef ref = Ref("rt");
  ref.kind = "TrainingRuntime";
  auto a = catalog_.Resolve(stage, "team-a", "job", ref);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)->yaml, in_a.yaml);
  auto d = catalog_.Resolve(stage, "", "job", ref);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->yaml, in_default.yaml);
  auto b = catalog_.Resolve(stage, "team-b", "job", ref);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("TrainingRuntime \"rt\" in namespace \"team-b\" not found"),
            std::string::npos)
      << b.status().message();

  // Stored by "<namespace>/<name>" outside default (the bare name in it), and found so again.
  ASSERT_TRUE(RuntimeCatalog::Store(stage, *store_).ok());
  RuntimeCatalog reloaded;
  ASSERT_TRUE(reloaded.LoadStored(*store_).ok());
  ASSERT_NE(reloaded.Find("TrainingRuntime", "team-a/rt"), nullptr);
  EXPECT_EQ(reloaded.Find("TrainingRuntime", "team-a/rt")->yaml, in_a.yaml);
  EXPECT_EQ(reloaded.Find("TrainingRuntime", "rt")->yaml, in_default.yaml);
  EXPECT_TRUE(reloaded.Resolve(RuntimeCatalog::Stage{}, "team-a", "job", ref).ok());
  EXPECT_FALSE(reloaded.Resolve(RuntimeCatalog::Stage{}, "team-b", "job", ref).ok());
}

TEST_F(RuntimeCatalogTest, StoreThenCommitReportsCreatedAndConfigured) {
  Write("a.yaml", RuntimeYaml("alpha"));
  ASSERT_TRUE(catalog_.LoadShipped(shipped_).ok());
  auto stage = RuntimeCatalog::StageRuntimes(
      {Parse(RuntimeYaml("alpha", "/bin/new")), Parse(RuntimeYaml("beta"))});
  ASSERT_TRUE(store_->Transaction([&] { return RuntimeCatalog::Store(stage, *store_); }).ok());
  auto rows = store_->ListRuntimes();
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 2u);

  EXPECT_EQ(catalog_.Find("ClusterTrainingRuntime", "beta"), nullptr);  // not before Commit
  v1::ApplyResult result;
  catalog_.Commit(std::move(stage), result);
  ASSERT_EQ(result.configured_size(), 1);
  EXPECT_EQ(result.configured(0), "ClusterTrainingRuntime/alpha");
  ASSERT_EQ(result.created_size(), 1);
  EXPECT_EQ(result.created(0), "ClusterTrainingRuntime/beta");
  EXPECT_NE(catalog_.Find("ClusterTrainingRuntime", "beta"), nullptr);
  EXPECT_EQ(catalog_.size(), 2u);
}

}  // namespace
}  // namespace trainlet::coordinator
