#include "coordinator/apply_transaction.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "controller_fixture.h"

namespace trainlet::coordinator {
namespace {

using testing::JobYaml;
using testing::RuntimeYaml;

class ApplyTransactionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/trainlet-apply-tx-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto store = JobStore::Open(dir_ + "/state");
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(store).value();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  Result<ApplyTransaction> Prepare(const std::string& yaml, const std::string& source = "f.yaml") {
    return ApplyTransaction::Prepare(yaml, source, 5, runtimes_,
                                     [this](const std::string& name) -> const JobEntry* {
                                       auto it = held_.find(name);
                                       return it == held_.end() ? nullptr : it->second.get();
                                     },
                                     {});
  }
  std::string dir_;
  std::unique_ptr<JobStore> store_;
  RuntimeCatalog runtimes_;
  std::map<std::string, std::unique_ptr<JobEntry>> held_;
};

TEST_F(ApplyTransactionTest, ParseErrorIsInvalidAndNamesTheFile) {
  auto tx = Prepare("kind: [", "bad.yaml");
  ASSERT_FALSE(tx.ok());
  EXPECT_EQ(tx.status().code(), ErrorCode::kInvalid);
  EXPECT_EQ(tx.status().message().rfind("bad.yaml: ", 0), 0u);
}

TEST_F(ApplyTransactionTest, NewJobWithItsRuntimeIsStoredTogether) {
  auto tx = Prepare(RuntimeYaml("mine") + "---\n" + JobYaml("j", 1, 1, "mine"));
  ASSERT_TRUE(tx.ok()) << tx.status().message();
  ASSERT_EQ(tx->new_jobs.size(), 1u);
  EXPECT_EQ(tx->new_jobs[0]->record.name, "j");
  EXPECT_TRUE(tx->flips.empty());
  EXPECT_EQ(tx->result.unchanged_size(), 0);
  // Nothing stored before Store.
  EXPECT_TRUE(store_->ListJobs()->empty());
  ASSERT_TRUE(tx->Store(*store_, 0).ok());
  EXPECT_EQ(store_->ListJobs()->size(), 1u);
  EXPECT_EQ(store_->ListRuntimes()->size(), 1u);
}

// A runtime whose two users would share the work dir at once without one fsGroup is stored, with
// a warning that says why every TrainJob on it is refused (replicated_job_users.h).
TEST_F(ApplyTransactionTest, ARuntimeOfTwoUsersAtOnceWarnsAndIsStored) {
  std::string rt = RuntimeYaml("two");
  rt += "                      securityContext: {runAsUser: 65534}\n";
  rt +=
      "        - name: sidecar\n          template:\n            spec:\n              template:\n";
  rt +=
      "                spec:\n                  containers:\n                    - name: sidecar\n";
  rt += "                      command: [\"/bin/true\"]\n";
  rt += "                      securityContext: {runAsUser: 1}\n";
  auto tx = Prepare(rt);
  ASSERT_TRUE(tx.ok()) << tx.status().message();
  EXPECT_EQ(tx->staged.runtimes.size(), 1u);
  bool warned = false;
  for (const auto& w : tx->warnings) {
    warned |= w.rfind(
                  "ClusterTrainingRuntime/two: spec.template.spec.replicatedJobs[1].template"
                  ".spec.template.spec.securityContext.fsGroup: replicated jobs node",
                  0) == 0 &&
              w.find("(every TrainJob on this runtime is refused at apply)") != std::string::npos;
  }
  EXPECT_TRUE(warned) << ::testing::PrintToString(tx->warnings);
  // A job on it, in the same file, refuses the whole file.
  EXPECT_FALSE(Prepare(rt + "---\n" + JobYaml("j", 1, 1, "two")).ok());
}

TEST_F(ApplyTransactionTest, UnknownRuntimeRefusesTheWholeFile) {
  auto tx = Prepare(JobYaml("j", 1, 1, "nowhere"));
  EXPECT_FALSE(tx.ok());
}

TEST_F(ApplyTransactionTest, HeldJobAppliedAgainIsUnchangedAndNothingIsWritten) {
  const std::string yaml = RuntimeYaml("mine") + "---\n" + JobYaml("j", 1, 1, "mine");
  auto first = Prepare(yaml);
  ASSERT_TRUE(first.ok()) << first.status().message();
  held_["j"] = std::move(first->new_jobs[0]);
  auto again = Prepare(JobYaml("j", 1, 1, "mine"));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(again->new_jobs.empty());
  EXPECT_TRUE(again->flips.empty());
  ASSERT_EQ(again->result.unchanged_size(), 1);
  EXPECT_EQ(again->result.unchanged(0), "trainjob/j");
}

TEST_F(ApplyTransactionTest, HeldJobWithAnotherSpecIsRefused) {
  auto first = Prepare(RuntimeYaml("mine") + "---\n" + JobYaml("j", 1, 1, "mine"));
  ASSERT_TRUE(first.ok());
  held_["j"] = std::move(first->new_jobs[0]);
  auto changed = Prepare(JobYaml("j", 1, 1, "mine", "bye"));
  ASSERT_FALSE(changed.ok());
  EXPECT_EQ(changed.status().code(), ErrorCode::kExists);
}

TEST_F(ApplyTransactionTest, SuspendChangeIsAFlip) {
  auto first = Prepare(RuntimeYaml("mine") + "---\n" + JobYaml("j", 1, 1, "mine"));
  ASSERT_TRUE(first.ok());
  held_["j"] = std::move(first->new_jobs[0]);
  ASSERT_TRUE(store_->CreateJob(held_["j"]->record).ok());
  auto flip = Prepare(JobYaml("j", 1, 1, "mine") + "  suspend: true\n");
  ASSERT_TRUE(flip.ok()) << flip.status().message();
  ASSERT_EQ(flip->flips.size(), 1u);
  EXPECT_EQ(flip->flips[0].job, "j");
  EXPECT_TRUE(flip->Store(*store_, 0).ok());
}

}  // namespace
}  // namespace trainlet::coordinator
