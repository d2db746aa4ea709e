// ApplyLimits: what one TrainJob and one apply may carry, each refusal naming the field.
#include "coordinator/apply_limits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace trainlet::coordinator {
namespace {

using ::testing::HasSubstr;

trainjob::TrainJob Job() {
  trainjob::TrainJob job;
  job.name = "big";
  job.trainer.command = {"python3", "train.py"};
  job.trainer.args = {"--epochs", "3"};
  job.trainer.env = {{"A", "1"}};
  return job;
}

TEST(ApplyLimits, AnOrdinaryJobPasses) { EXPECT_TRUE(CheckTrainJobSizes(Job()).ok()); }

TEST(ApplyLimits, ArgsOverTheCapAreRefusedByName) {
  auto job = Job();
  // Three megabytes of args in 100 KiB strings: each string is legal, the total is not.
  job.trainer.args.assign(30, std::string(100 << 10, 'x'));
  Status s = CheckTrainJobSizes(job);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::kInvalid);
  EXPECT_THAT(s.message(), HasSubstr("TrainJob/big: spec.trainer.args:"));
  EXPECT_THAT(s.message(), HasSubstr(std::to_string(kMaxTrainerArgvBytes)));
}

TEST(ApplyLimits, OneStringOverExecveLimitIsRefusedWithItsIndex) {
  auto job = Job();
  job.trainer.command.push_back(std::string(kMaxTrainerStringBytes + 1, 'x'));
  Status s = CheckTrainJobSizes(job);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("spec.trainer.command[2]"));
}

TEST(ApplyLimits, JustUnderTheCapPasses) {
  auto job = Job();
  job.trainer.command.clear();
  job.trainer.args.assign(2, std::string(kMaxTrainerStringBytes - 1, 'x'));  // 2 x (cap/2)
  EXPECT_TRUE(CheckTrainJobSizes(job).ok());
  job.trainer.args.push_back("y");  // one byte and its terminator more
  EXPECT_FALSE(CheckTrainJobSizes(job).ok());
}

TEST(ApplyLimits, EnvOverTheCapIsRefusedByName) {
  auto job = Job();
  for (int i = 0; i < 5; ++i)
    job.trainer.env.push_back({"V" + std::to_string(i), std::string(60 << 10, 'v')});
  Status s = CheckTrainJobSizes(job);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("TrainJob/big: spec.trainer.env:"));

  job = Job();
  job.trainer.env.push_back({"HUGE", std::string(kMaxTrainerStringBytes + 1, 'v')});
  s = CheckTrainJobSizes(job);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("spec.trainer.env[1].value (HUGE)"));
}

TEST(ApplyLimits, MetadataOverTheCapIsRefused) {
  auto job = Job();
  job.annotations["a"] = std::string(kMaxMetadataBytes, 'a');
  Status s = CheckTrainJobSizes(job);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("metadata.labels and metadata.annotations"));
}

TEST(ApplyLimits, TooManyDocumentsNameTheFile) {
  trainjob::ParsedFile file;
  file.jobs.assign(kMaxApplyDocuments, Job());
  EXPECT_TRUE(CheckApplySizes(file, "jobs.yaml").ok());
  file.runtimes.emplace_back();
  Status s = CheckApplySizes(file, "jobs.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(),
              HasSubstr("jobs.yaml: " + std::to_string(kMaxApplyDocuments + 1) + " documents"));
  EXPECT_THAT(CheckApplySizes(file, "").message(), HasSubstr("stdin: "));
}

TEST(ApplyLimits, TheFileCheckRefusesATooLargeJob) {
  trainjob::ParsedFile file;
  file.jobs = {Job(), Job()};
  file.jobs[1].name = "second";
  file.jobs[1].trainer.args.assign(3, std::string(100 << 10, 'x'));
  EXPECT_THAT(CheckApplySizes(file, "f").message(),
              HasSubstr("TrainJob/second: spec.trainer.args"));
}

}  // namespace
}  // namespace trainlet::coordinator
