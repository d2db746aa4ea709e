#include "trainletctl/progress_text.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "trainletctl/render.h"

namespace trainlet::cli {
namespace {

constexpr int64_t kNow = 1'795'000'000'000;  // 2026-11-18T...

v1::JobStatus RunningJob() {
  v1::JobStatus j;
  j.set_name("train");
  j.set_job_phase(v1::JOB_PHASE_RUNNING);
  j.set_attempt(2);
  j.set_num_nodes(2);
  j.set_procs_per_node(2);
  j.set_created_unix_ms(kNow - 600'000);
  return j;
}

void Report(v1::JobStatus& j) {
  auto* t = j.mutable_trainer_status();
  t->set_progress_percentage(42);
  t->set_estimated_remaining_seconds(190);
  auto* m = t->add_metrics();
  m->set_name("loss");
  m->set_value("0.125");
  m = t->add_metrics();
  m->set_name("accuracy");
  m->set_value("0.9");
  t->set_last_updated_unix_ms(kNow - 5'000);
  t->set_received_unix_ms(kNow - 4'000);
  t->set_attempt(2);
}

TEST(ProgressText, ColumnsShowPercentAndEtaOrADash) {
  v1::JobStatus j = RunningJob();
  EXPECT_EQ(ProgressColumn(j), "-");
  EXPECT_EQ(EtaColumn(j), "-");
  Report(j);
  EXPECT_EQ(ProgressColumn(j), "42%");
  EXPECT_EQ(EtaColumn(j), "3m10s");
  j.mutable_trainer_status()->set_estimated_remaining_seconds(7205);
  EXPECT_EQ(EtaColumn(j), "2h0m5s");
  j.mutable_trainer_status()->clear_estimated_remaining_seconds();
  EXPECT_EQ(EtaColumn(j), "-");
  // Progress of another attempt is not this attempt's progress.
  j.mutable_trainer_status()->set_attempt(1);
  EXPECT_EQ(ProgressColumn(j), "-");
}

TEST(ProgressText, GetTrainjobsTableHasProgressAndEtaAfterAttempt) {
  v1::JobList list;
  *list.add_jobs() = RunningJob();
  Report(*list.mutable_jobs(0));
  v1::JobStatus quiet = RunningJob();
  quiet.set_name("quiet");
  *list.add_jobs() = quiet;
  const std::string table = RenderJobs(list, OutputFormat::kTable, kNow);
  EXPECT_NE(table.find("ATTEMPT   PROGRESS   ETA     AGE"), std::string::npos) << table;
  EXPECT_NE(table.find("2         42%        3m10s   10m"), std::string::npos) << table;
  EXPECT_NE(table.find("2         -          -       10m"), std::string::npos) << table;
}

TEST(ProgressText, JsonUsesKubeflowFieldNames) {
  v1::JobList list;
  *list.add_jobs() = RunningJob();
  Report(*list.mutable_jobs(0));
  *list.add_jobs() = RunningJob();  // no progress: no trainerStatus key
  const auto doc = nlohmann::json::parse(RenderJobs(list, OutputFormat::kJson, kNow));
  const auto& ts = doc["jobs"][0]["trainerStatus"];
  EXPECT_EQ(ts["progressPercentage"], 42);
  EXPECT_EQ(ts["estimatedRemainingSeconds"], 190);  // a number, not proto's int64 string
  ASSERT_EQ(ts["metrics"].size(), 2u);
  EXPECT_EQ(ts["metrics"][0]["name"], "loss");
  EXPECT_EQ(ts["metrics"][0]["value"], "0.125");
  EXPECT_EQ(ts["lastUpdatedTime"], Rfc3339(kNow - 5'000));
  EXPECT_FALSE(ts.contains("receivedUnixMs"));
  EXPECT_FALSE(doc["jobs"][1].contains("trainerStatus"));
  // The rest of the document is as it was: the compat keys and the enums.
  EXPECT_EQ(doc["jobs"][0]["phase"], "Running");
  EXPECT_EQ(doc["jobs"][0]["jobPhase"], "JOB_PHASE_RUNNING");

  const std::string yaml = RenderJobs(list, OutputFormat::kYaml, kNow);
  EXPECT_NE(yaml.find("progressPercentage: 42"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("lastUpdatedTime:"), std::string::npos) << yaml;
}

TEST(ProgressText, JsonWithoutProgressIsUnchanged) {
  v1::JobList list;
  *list.add_jobs() = RunningJob();
  EXPECT_EQ(WithKubeflowTrainerStatus("{\"jobs\": []}", list), "{\"jobs\": []}");
}

TEST(ProgressText, Rfc3339IsUtc) {
  EXPECT_EQ(Rfc3339(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(Rfc3339(1'700'000'000'999), "2023-11-14T22:13:20Z");
}

TEST(ProgressText, DescribeShowsMetricsAndTheirAge) {
  v1::JobStatus j = RunningJob();
  EXPECT_EQ(DescribeProgress(j, kNow), "");
  Report(j);
  const std::string text = DescribeProgress(j, kNow);
  EXPECT_NE(text.find("42%, 3m10s remaining (updated 4s ago"), std::string::npos) << text;
  EXPECT_NE(text.find("loss       0.125"), std::string::npos) << text;
  EXPECT_NE(text.find("accuracy   0.9"), std::string::npos) << text;
  EXPECT_NE(DescribeJob(j, kNow).find("Metrics:"), std::string::npos);
}

}  // namespace
}  // namespace trainlet::cli
