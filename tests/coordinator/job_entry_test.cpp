#include "coordinator/job_entry.h"

#include <gtest/gtest.h>

#include "controller_fixture.h"
#include "coordinator/job_state_machine.h"

namespace trainlet::coordinator {
namespace {

using testing::JobYaml;
using testing::RuntimeYaml;

struct Parsed {
  trainjob::TrainJob job;
  trainjob::TrainingRuntime runtime;
};

Parsed Parse(const std::string& job_yaml) {
  auto docs = trainjob::ParseDocuments(RuntimeYaml("plain") + "---\n" + job_yaml);
  EXPECT_TRUE(docs.ok()) << docs.status().message();
  EXPECT_EQ(docs->jobs.size(), 1u);
  EXPECT_EQ(docs->runtimes.size(), 1u);
  return {docs->jobs[0], docs->runtimes[0]};
}

TEST(JobEntry, BuildResolvesTheSpecAgainstItsRuntime) {
  Parsed p = Parse(JobYaml("j", 2, 3));
  std::vector<std::string> warnings;
  auto entry = BuildJobEntry(p.job, p.runtime, {.stop_grace_ms = 1234}, warnings);
  ASSERT_TRUE(entry.ok()) << entry.status().message();
  const JobEntry& e = **entry;
  ASSERT_NE(e.plugin, nullptr);
  EXPECT_EQ(e.record.status.name(), "j");
  EXPECT_EQ(e.record.status.num_nodes(), 2u);
  EXPECT_EQ(e.record.status.runtime(), "ClusterTrainingRuntime/plain");
  EXPECT_EQ(e.record.status.plugin(), std::string(e.plugin->name()));
  EXPECT_EQ(e.procs_per_node, 3u);
  EXPECT_EQ(e.record.status.procs_per_node(), 3u);
  EXPECT_EQ(e.plan_template.job, "j");
  EXPECT_EQ(e.plan_template.stop_grace_ms, 1234u);
  ASSERT_EQ(e.plan_template.argv.size(), 3u);
  EXPECT_EQ(e.plan_template.argv[0], "/bin/sh");
  EXPECT_EQ(e.record.status.command_size(), 3);
  EXPECT_TRUE(e.record.status.job_phase() == v1::JOB_PHASE_UNSPECIFIED);  // NewJobEntry sets it
}

TEST(JobEntry, MissingPluginLeavesOneRankPerNode) {
  Parsed p = Parse(JobYaml("j", 1, 4));
  std::vector<std::string> warnings;
  JobEntryOptions options;
  options.select_plugin = [](std::string_view, const std::map<std::string, std::string>&) {
    return static_cast<const RuntimePlugin*>(nullptr);
  };
  auto entry = BuildJobEntry(p.job, p.runtime, options, warnings);
  ASSERT_TRUE(entry.ok()) << entry.status().message();
  EXPECT_EQ((*entry)->plugin, nullptr);
  EXPECT_EQ((*entry)->procs_per_node, 1u);
  EXPECT_FALSE((*entry)->record.status.plugin().empty());  // names the framework it needs

  auto fresh = NewJobEntry(p.job, p.runtime, options, "", 7, warnings);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ((*fresh)->record.status.reason().rfind("NoRuntimePlugin: ", 0), 0u);
}

TEST(JobEntry, FewerThanOneNodeIsInvalid) {
  Parsed p = Parse(JobYaml("j", 1, 1));
  p.job.trainer.num_nodes = 0;
  std::vector<std::string> warnings;
  auto entry = BuildJobEntry(p.job, p.runtime, {}, warnings);
  ASSERT_FALSE(entry.ok());
  EXPECT_EQ(entry.status().code(), ErrorCode::kInvalid);
  EXPECT_NE(entry.status().message().find("TrainJob/j"), std::string::npos);
}

TEST(JobEntry, NewJobIsPendingWithItsRecordAndCreatedEvent) {
  Parsed p = Parse(JobYaml("j", 1, 1));
  std::vector<std::string> warnings;
  auto entry = NewJobEntry(p.job, p.runtime, {}, "jobs.yaml", 42, warnings);
  ASSERT_TRUE(entry.ok()) << entry.status().message();
  const JobEntry& e = **entry;
  EXPECT_EQ(e.record.name, "j");
  EXPECT_EQ(e.record.spec_yaml, p.job.yaml);
  EXPECT_EQ(e.record.runtime_kind, "ClusterTrainingRuntime");
  EXPECT_EQ(e.record.runtime_name, "plain");
  EXPECT_EQ(e.record.runtime_yaml, p.runtime.yaml);
  EXPECT_EQ(e.record.status.job_phase(), v1::JOB_PHASE_PENDING);
  EXPECT_EQ(e.record.status.created_unix_ms(), 42);
  ASSERT_EQ(e.record.status.events_size(), 1);
  EXPECT_EQ(e.record.status.events(0).reason(), "Created");
  EXPECT_EQ(e.record.status.events(0).message(), "applied from jobs.yaml");
  EXPECT_TRUE(e.record.status.reason().empty());
}

// An env name the runtime sets itself is refused when the job is applied, naming it, instead of
// a job that is created and then fails at placement with PlanRefused (issue 19).
TEST(JobEntry, NewJobSettingAReservedEnvNameIsRefused) {
  auto docs = trainjob::ParseDocuments(
      RuntimeYaml("xgb", "    xgboost: {}\n") + "---\n" + JobYaml("boost", 2, 1, "xgb") +
      "    env:\n      - name: DMLC_NUM_WORKER\n        value: \"7\"\n");
  ASSERT_TRUE(docs.ok()) << docs.status().message();
  std::vector<std::string> warnings;
  auto entry = NewJobEntry(docs->jobs[0], docs->runtimes[0], {}, "boost.yaml", 1, warnings);
  ASSERT_FALSE(entry.ok());
  EXPECT_EQ(entry.status().code(), ErrorCode::kInvalid);
  EXPECT_EQ(entry.status().message(),
            "TrainJob/boost: spec.trainer.env: DMLC_NUM_WORKER is reserved for the xgboost "
            "runtime (trainlet sets it)");
  // Another name is fine.
  auto ok_docs = trainjob::ParseDocuments(
      RuntimeYaml("xgb", "    xgboost: {}\n") + "---\n" + JobYaml("boost", 2, 1, "xgb") +
      "    env:\n      - name: DMLC_VERBOSE\n        value: \"1\"\n");
  ASSERT_TRUE(ok_docs.ok());
  EXPECT_TRUE(NewJobEntry(ok_docs->jobs[0], ok_docs->runtimes[0], {}, "", 1, warnings).ok());
}

// Two replicated jobs of different users that run at once without one fsGroup share the work dir
// on every node: refused when applied, naming the field (replicated_job_users.h), instead of an
// attempt that is placed and fails when the second user's rank starts (issue 14).
TEST(JobEntry, NewJobOfTwoUsersAtOnceWithoutFsGroupIsRefused) {
  auto runtime = [](const std::string& pod) {
    std::string y = RuntimeYaml("two");
    y += "                      securityContext: {runAsUser: 65534}\n";
    y += "        - name: sidecar\n";
    y += "          template:\n";
    y += "            spec:\n";
    y += "              template:\n";
    y += "                spec:\n";
    y += pod;
    y += "                  containers:\n";
    y += "                    - name: sidecar\n";
    y += "                      command: [\"/bin/true\"]\n";
    y += "                      securityContext: {runAsUser: 1}\n";
    return y;
  };
  auto docs = trainjob::ParseDocuments(runtime("") + "---\n" + JobYaml("pair", 2, 1, "two"));
  ASSERT_TRUE(docs.ok()) << docs.status().message();
  std::vector<std::string> warnings;
  auto entry = NewJobEntry(docs->jobs[0], docs->runtimes[0], {}, "", 1, warnings);
  ASSERT_FALSE(entry.ok());
  EXPECT_EQ(entry.status().code(), ErrorCode::kInvalid);
  EXPECT_EQ(entry.status().message().rfind(
                "TrainJob/pair: ClusterTrainingRuntime/two: spec.template.spec.replicatedJobs[1]"
                ".template.spec.template.spec.securityContext.fsGroup: replicated jobs node "
                "(runAsUser 65534) and sidecar (runAsUser 1) run at the same time",
                0),
            0u)
      << entry.status().message();
  // An fsGroup in one pod only is no group they share: still refused.
  auto one = trainjob::ParseDocuments(runtime("                  securityContext: {fsGroup: 7}\n") +
                                      "---\n" + JobYaml("pair", 2, 1, "two"));
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_FALSE(NewJobEntry(one->jobs[0], one->runtimes[0], {}, "", 1, warnings).ok());
}

TEST(JobEntry, NewJobWithSuspendIsSuspendedAndStdinIsNamed) {
  Parsed p = Parse(JobYaml("j", 1, 1) + "  suspend: true\n");
  ASSERT_TRUE(p.job.suspend);
  std::vector<std::string> warnings;
  auto entry = NewJobEntry(p.job, p.runtime, {}, "", 42, warnings);
  ASSERT_TRUE(entry.ok()) << entry.status().message();
  EXPECT_EQ(PhaseOf((*entry)->record.status), JobPhase::kSuspended);
  EXPECT_EQ((*entry)->record.status.events(0).message(), "applied from stdin");
}

TEST(JobEntry, NotesKeepOnlyThisJobsWarnings) {
  Parsed p = Parse(JobYaml("j", 1, 1));
  std::vector<std::string> warnings = {"TrainJob/other: x", "TrainJob/j: y"};
  auto entry = NewJobEntry(p.job, p.runtime, {}, "", 1, warnings);
  ASSERT_TRUE(entry.ok());
  ASSERT_EQ((*entry)->record.status.notes_size(), 1);
  EXPECT_EQ((*entry)->record.status.notes(0), "TrainJob/j: y");
}

}  // namespace
}  // namespace trainlet::coordinator

namespace trainlet::coordinator {
namespace {

// Issue 18: a shared job is placed only on nodes whose agent has a shared_dir; a value of
// trainlet.io/working-dir other than node or shared is refused, naming the TrainJob.
TEST(JobEntry, ASharedJobSelectsNodesWithASharedDirAndABadValueIsRefused) {
  auto with = [](const std::string& value) {
    std::string yaml = testing::JobYaml("j", 2, 1);
    yaml.insert(yaml.find("spec:\n"), "  annotations: {trainlet.io/working-dir: " + value + "}\n");
    return Parse(yaml);
  };
  std::vector<std::string> warnings;
  Parsed shared = with("shared");
  auto entry = BuildJobEntry(shared.job, shared.runtime, {}, warnings);
  ASSERT_TRUE(entry.ok()) << entry.status().message();
  EXPECT_EQ((*entry)->gang.node_selector.at("trainlet.io/shared-dir"), "true");
  Parsed node = with("node");
  entry = BuildJobEntry(node.job, node.runtime, {}, warnings);
  ASSERT_TRUE(entry.ok()) << entry.status().message();
  EXPECT_FALSE((*entry)->gang.node_selector.contains("trainlet.io/shared-dir"));
  Parsed bad = with("nfs");
  entry = BuildJobEntry(bad.job, bad.runtime, {}, warnings);
  ASSERT_FALSE(entry.ok());
  EXPECT_EQ(entry.status().message(),
            "TrainJob/j: metadata.annotations[trainlet.io/working-dir]: must be node or shared, "
            "got \"nfs\"");
}

}  // namespace
}  // namespace trainlet::coordinator
