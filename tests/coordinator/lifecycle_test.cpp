// JobController's lifecycle rules: activeDeadlineSeconds, suspend and resume (by apply and by
// SetSuspend), the trainlet.io/max-restarts annotation, and a store that refuses writes (full or
// read-only disk), over the real SQLite store of controller_fixture.h. Time is passed in.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>

#include <climits>
#include <filesystem>

#include "controller_fixture.h"
#include "coordinator/job_controller.h"
#include "coordinator/job_state_machine.h"
#include "tests/coordinator/full_disk.h"

namespace trainlet::coordinator {
namespace {

using testing::ControllerFixture;
using ::testing::HasSubstr;
using testing::JobYaml;
using testing::RuntimeYaml;

constexpr auto kStarted = v1::WorkerEvent::KIND_STARTED;
constexpr auto kExited = v1::WorkerEvent::KIND_EXITED;

// `line` (e.g. "  suspend: true\n") inserted into the job's spec, before its trainer.
std::string WithSpecLine(std::string yaml, const std::string& line) {
  yaml.insert(yaml.find("  trainer:"), line);
  return yaml;
}

// The job with metadata.annotations[trainlet.io/max-restarts] = `value` (written as given).
std::string WithMaxRestarts(std::string yaml, const std::string& value) {
  const std::string anchor = "metadata:\n";
  yaml.insert(yaml.find(anchor) + anchor.size(),
              "  annotations:\n    trainlet.io/max-restarts: " + value + "\n");
  return yaml;
}

class LifecycleTest : public ControllerFixture {
 protected:
  // PRAGMA integrity_check of the database, through a connection of its own.
  std::string IntegrityCheck() {
    sqlite3* db = nullptr;
    const std::string path = state_dir_ + "/" + JobStore::kFileName;
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    std::string result;
    sqlite3_exec(
        db, "PRAGMA integrity_check",
        [](void* out, int, char** values, char**) {
          *static_cast<std::string*>(out) += values[0] != nullptr ? values[0] : "";
          return 0;
        },
        &result, nullptr);
    sqlite3_close(db);
    return result;
  }
  size_t StopsFor(const std::string& job, uint32_t attempt) {
    size_t n = 0;
    for (const auto& [node, stop] : sink_.Stops())
      n += stop.job() == job && stop.attempt() == attempt;
    return n;
  }
};

// ---- activeDeadlineSeconds ----

TEST_F(LifecycleTest, DeadlineFailsTheJobStopsEveryRankAndItStaysFailed) {
  // The deadline alone: its warning (on by default) is preemption_test's.
  options_.deadline_warning = false;
  MakeController();
  ApplyOk(WithSpecLine(JobYaml("dl", 2, 1), "  activeDeadlineSeconds: 30\n"));
  ReportAll("dl", kStarted, kT0 + 100);
  ASSERT_EQ(PhaseName(JobOrDie("dl")), "Running");
  // The loop is woken for the deadline, counted from creation.
  EXPECT_EQ(controller_->NextWakeMs(), kT0 + 30'000);

  controller_->Schedule(kT0 + 29'999);
  EXPECT_EQ(PhaseName(JobOrDie("dl")), "Running");
  controller_->Schedule(kT0 + 30'000);
  const v1::JobStatus& st = JobOrDie("dl");
  EXPECT_EQ(PhaseName(st), "Failed");
  EXPECT_EQ(st.reason(), "DeadlineExceeded");
  const v1::Condition* failed = Cond(st, "Failed");
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ(failed->status(), "True");
  EXPECT_EQ(failed->reason(), "DeadlineExceeded");
  ASSERT_EQ(st.attempts_size(), 1);
  EXPECT_EQ(ResultName(st.attempts(0)), "Failed");
  EXPECT_THAT(st.attempts(0).cause(), HasSubstr("activeDeadlineSeconds (30 s"));
  EXPECT_THAT(sink_.StopNodes(), ::testing::ElementsAre("n1", "n2"));
  EXPECT_EQ(controller_->NextWakeMs(), INT64_MAX);

  // The stopped ranks report their exit; nothing restarts, ever.
  ReportAll("dl", kExited, kT0 + 30'100, 0, 15);
  for (int64_t t : {kT0 + 31'000, kT0 + 100'000, kT0 + 10'000'000}) controller_->Schedule(t);
  EXPECT_EQ(PhaseName(JobOrDie("dl")), "Failed");
  EXPECT_EQ(JobOrDie("dl").attempt(), 1u);
  EXPECT_EQ(sink_.Plans().size(), 2u);  // only attempt 1's
  ASSERT_TRUE(controller_->Flush().ok());
  EXPECT_EQ(PhaseName(Stored("dl")->status), "Failed");
  EXPECT_EQ(Stored("dl")->status.reason(), "DeadlineExceeded");

  // A restarted coordinator loads it Failed and leaves it so.
  MakeController();
  controller_->Schedule(kT0 + 20'000'000);
  EXPECT_EQ(PhaseName(JobOrDie("dl")), "Failed");
  EXPECT_EQ(JobOrDie("dl").attempt(), 1u);
}

TEST_F(LifecycleTest, DeadlineRunsWhileSuspendedAndPending) {
  ApplyOk(WithSpecLine(JobYaml("sus", 1, 1), "  suspend: true\n  activeDeadlineSeconds: 10\n"));
  ApplyOk(WithSpecLine(JobYaml("big", 3, 5), "  activeDeadlineSeconds: 20\n"));  // never fits
  EXPECT_EQ(PhaseName(JobOrDie("sus")), "Suspended");
  EXPECT_EQ(PhaseName(JobOrDie("big")), "Pending");
  EXPECT_EQ(controller_->NextWakeMs(), kT0 + 10'000);
  controller_->Schedule(kT0 + 10'000);
  EXPECT_EQ(PhaseName(JobOrDie("sus")), "Failed");
  EXPECT_EQ(PhaseName(JobOrDie("big")), "Pending");
  EXPECT_EQ(controller_->NextWakeMs(), kT0 + 20'000);
  controller_->Schedule(kT0 + 20'000);
  EXPECT_EQ(PhaseName(JobOrDie("big")), "Failed");
  EXPECT_EQ(JobOrDie("big").reason(), "DeadlineExceeded");
  EXPECT_TRUE(sink_.Stops().empty());  // nothing ran, nothing to stop
}

// ---- suspend and resume ----

TEST_F(LifecycleTest, SuspendStopsTheRanksAndResumeStartsANewAttempt) {
  ApplyOk(JobYaml("s", 2, 1));
  ReportAll("s", kStarted, kT0 + 100);

  auto r = controller_->SetSuspend("s", true, kT0 + 1000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->changed());
  EXPECT_EQ(PhaseName(*r), "Suspended");
  const v1::JobStatus& st = JobOrDie("s");
  EXPECT_EQ(PhaseName(st), "Suspended");
  ASSERT_NE(Cond(st, "Suspended"), nullptr);
  EXPECT_EQ(Cond(st, "Suspended")->status(), "True");
  EXPECT_EQ(ResultName(st.attempts(0)), "Stopped");
  EXPECT_EQ(StopsFor("s", 1), 2u);
  // Stored before the answer, spec included.
  auto stored = Stored("s");
  ASSERT_TRUE(stored);
  EXPECT_EQ(PhaseName(stored->status), "Suspended");
  EXPECT_THAT(stored->spec_yaml, HasSubstr("suspend: true"));

  // Asking again changes nothing.
  auto again = controller_->SetSuspend("s", true, kT0 + 1100);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->changed());

  controller_->Schedule(kT0 + 5000);
  EXPECT_EQ(sink_.Plans().size(), 2u);  // nothing placed while suspended

  // Resumed before the old ranks are gone: the next attempt waits for them.
  auto resumed = controller_->SetSuspend("s", false, kT0 + 6000);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(PhaseName(JobOrDie("s")), "Pending");
  EXPECT_EQ(Cond(JobOrDie("s"), "Suspended")->status(), "False");
  EXPECT_EQ(Cond(JobOrDie("s"), "Suspended")->reason(), "Resumed");
  EXPECT_EQ(sink_.Plans().size(), 2u);
  ReportAll("s", kExited, kT0 + 6100, 0, 15);
  EXPECT_EQ(PhaseName(JobOrDie("s")), "Pending");
  controller_->Schedule(kT0 + 6200);
  EXPECT_EQ(PhaseName(JobOrDie("s")), "Starting");
  EXPECT_EQ(JobOrDie("s").attempt(), 2u);
  EXPECT_EQ(sink_.Plans().size(), 4u);
  EXPECT_THAT(Stored("s")->spec_yaml, HasSubstr("suspend: false"));
}

TEST_F(LifecycleTest, ASuspendIsNotCountedAgainstMaxRestarts) {
  ApplyOk(RuntimeYaml("once", "", 1) + "---\n" + JobYaml("m", 1, 1, "once"));
  ReportAll("m", kStarted, kT0 + 100);
  ASSERT_TRUE(controller_->SetSuspend("m", true, kT0 + 200).ok());
  ReportAll("m", kExited, kT0 + 300, 0, 15);
  ASSERT_TRUE(controller_->SetSuspend("m", false, kT0 + 400).ok());
  ASSERT_EQ(JobOrDie("m").attempt(), 2u);

  // Attempt 2 fails: the one restart is still there.
  ReportAll("m", kStarted, kT0 + 500);
  ReportAll("m", kExited, kT0 + 600, 3);
  EXPECT_EQ(PhaseName(JobOrDie("m")), "Restarting");
  controller_->Schedule(kT0 + 600 + 1000);
  ASSERT_EQ(JobOrDie("m").attempt(), 3u);
  ReportAll("m", kStarted, kT0 + 1700);
  ReportAll("m", kExited, kT0 + 1800, 3);
  EXPECT_EQ(PhaseName(JobOrDie("m")), "Failed");
  EXPECT_EQ(JobOrDie("m").reason(), "BackoffLimitExceeded");
}

TEST_F(LifecycleTest, ApplyMayFlipSuspendAndNothingElse) {
  const std::string plain = JobYaml("a", 1, 1);
  ApplyOk(plain);
  ASSERT_EQ(PhaseName(JobOrDie("a")), "Starting");

  v1::ApplyResult suspended = ApplyOk(WithSpecLine(plain, "  suspend: true\n"));
  EXPECT_THAT(suspended.configured(), ::testing::ElementsAre("trainjob/a"));
  EXPECT_EQ(PhaseName(JobOrDie("a")), "Suspended");
  EXPECT_EQ(StopsFor("a", 1), 1u);
  EXPECT_THAT(Stored("a")->spec_yaml, HasSubstr("suspend: true"));

  v1::ApplyResult same = ApplyOk(WithSpecLine(plain, "  suspend: true\n"));
  EXPECT_THAT(same.unchanged(), ::testing::ElementsAre("trainjob/a"));

  // Any other change is refused, and the job is left as it was.
  auto other = controller_->Apply(
      WithSpecLine(JobYaml("a", 1, 1, "plain", "other"), "  suspend: false\n"), "x.yaml", kT0);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), ErrorCode::kExists);
  EXPECT_THAT(other.status().message(), HasSubstr("only spec.suspend may change"));
  EXPECT_EQ(PhaseName(JobOrDie("a")), "Suspended");

  ReportAll("a", kExited, kT0 + 100, 0, 15);
  v1::ApplyResult resumed = ApplyOk(plain, kT0 + 200);
  EXPECT_THAT(resumed.configured(), ::testing::ElementsAre("trainjob/a"));
  EXPECT_EQ(PhaseName(JobOrDie("a")), "Starting");
  EXPECT_EQ(JobOrDie("a").attempt(), 2u);
  EXPECT_THAT(Stored("a")->spec_yaml, ::testing::Not(HasSubstr("suspend: true")));
}

TEST_F(LifecycleTest, FinishedOrUnknownJobsCannotBeSuspended) {
  ApplyOk(JobYaml("done", 1, 1));
  ReportAll("done", kStarted, kT0 + 1);
  ReportAll("done", kExited, kT0 + 2);
  ASSERT_EQ(PhaseName(JobOrDie("done")), "Succeeded");
  auto r = controller_->SetSuspend("done", true, kT0 + 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalid);
  EXPECT_THAT(r.status().message(), HasSubstr("finished"));
  EXPECT_EQ(controller_->SetSuspend("nope", true, kT0).status().code(), ErrorCode::kNotFound);
}

// ---- trainlet.io/max-restarts ----

TEST_F(LifecycleTest, AnnotationOverridesTheRuntimesMaxRestarts) {
  ApplyOk(RuntimeYaml("thrice", "", 3));
  ApplyOk(JobYaml("dflt", 1, 1, "thrice"));
  ApplyOk(WithMaxRestarts(JobYaml("zero", 1, 1, "thrice"), "\"0\""));
  ApplyOk(WithMaxRestarts(JobYaml("many", 1, 1, "thrice"), "\"1000\""));
  EXPECT_EQ(JobOrDie("dflt").max_restarts(), 3u);
  EXPECT_EQ(JobOrDie("zero").max_restarts(), 0u);
  EXPECT_EQ(JobOrDie("many").max_restarts(), 1000u);

  // Zero restarts: the first failure is final.
  ReportAll("zero", kStarted, kT0 + 1);
  ReportAll("zero", kExited, kT0 + 2, 1);
  EXPECT_EQ(PhaseName(JobOrDie("zero")), "Failed");

  // And it survives a coordinator restart (the override is read from the stored spec).
  MakeController();
  EXPECT_EQ(JobOrDie("many").max_restarts(), 1000u);
}

TEST_F(LifecycleTest, AnnotationMustBeAnIntegerFrom0To1000) {
  for (const std::string bad : {"\"-1\"", "\"1001\"", "\"abc\"", "\"1.5\"", "\"\"", "\"99999\""}) {
    auto r = controller_->Apply(WithMaxRestarts(JobYaml("bad", 1, 1), bad), "bad.yaml", kT0);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalid) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("trainlet.io/max-restarts")) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("from 0 to 1000")) << bad;
  }
  EXPECT_TRUE(StoredNames().empty());
  EXPECT_EQ(controller_->Find("bad"), nullptr);
}

// ---- a store that refuses writes ----

TEST_F(LifecycleTest, FailedFlushKeepsTheChangesAndRetries) {
  ApplyOk(JobYaml("f", 1, 2));
  ASSERT_TRUE(controller_->Flush().ok());
  {
    FullDisk full(state_dir_);
    ReportAll("f", kStarted, kT0 + 100);
    EXPECT_EQ(PhaseName(JobOrDie("f")), "Running");
    Status s = controller_->Flush();
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), ErrorCode::kIo);
    EXPECT_THAT(s.message(), HasSubstr(state_dir_));
    Status again = controller_->Flush();  // the next loop iteration fails too, losing nothing
    EXPECT_FALSE(again.ok());
    EXPECT_EQ(PhaseName(JobOrDie("f")), "Running");
  }
  EXPECT_EQ(PhaseName(Stored("f")->status), "Starting");
  ASSERT_TRUE(controller_->Flush().ok());
  EXPECT_EQ(PhaseName(Stored("f")->status), "Running");
  EXPECT_EQ(IntegrityCheck(), "ok");
}

TEST_F(LifecycleTest, ApplyOnAFullDiskStoresNothingAndSaysSo) {
  ApplyOk(JobYaml("old", 1, 1));
  {
    FullDisk full(state_dir_);
    auto r = controller_->Apply(JobYaml("new", 1, 1), "new.yaml", kT0 + 10);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kIo);
    EXPECT_THAT(r.status().message(), HasSubstr("state dir " + state_dir_));
    EXPECT_THAT(r.status().message(), HasSubstr("nothing of new.yaml was stored"));
    EXPECT_EQ(controller_->Find("new"), nullptr);

    // A suspend or a delete that cannot be stored leaves the job as it was and sends nothing.
    const size_t sent = sink_.sent.size();
    EXPECT_FALSE(controller_->SetSuspend("old", true, kT0 + 20).ok());
    EXPECT_EQ(PhaseName(JobOrDie("old")), "Starting");
    EXPECT_FALSE(controller_->Delete("old", kT0 + 30).ok());
    EXPECT_FALSE(JobOrDie("old").deleting());
    EXPECT_EQ(sink_.sent.size(), sent);
  }
  EXPECT_THAT(StoredNames(), ::testing::ElementsAre("old"));
  EXPECT_EQ(IntegrityCheck(), "ok");
  ApplyOk(JobYaml("new", 1, 1), kT0 + 40);
  EXPECT_THAT(StoredNames(), ::testing::ElementsAre("old", "new"));
}

TEST_F(LifecycleTest, PlacementThatCannotBeStoredIsNotSent) {
  ApplyOk(JobYaml("wide", 4, 1));  // three nodes: waits for a fourth
  ASSERT_EQ(PhaseName(JobOrDie("wide")), "Pending");
  ASSERT_TRUE(controller_->Flush().ok());
  AddNode("n4");
  {
    FullDisk full(state_dir_);
    controller_->Schedule(kT0 + 100);
    EXPECT_EQ(PhaseName(JobOrDie("wide")), "Pending");
    EXPECT_EQ(JobOrDie("wide").attempt(), 0u);
    EXPECT_TRUE(sink_.Plans().empty());
  }
  controller_->Schedule(kT0 + 200);
  EXPECT_EQ(PhaseName(JobOrDie("wide")), "Starting");
  EXPECT_EQ(JobOrDie("wide").attempt(), 1u);
  EXPECT_EQ(sink_.Plans().size(), 4u);
  EXPECT_EQ(Stored("wide")->status.attempt(), 1u);
}

TEST_F(LifecycleTest, ApplyIsRefusedBelowTheFreeSpaceFloor) {
  ApplyOk(JobYaml("kept", 1, 1));
  options_.min_free_bytes = uint64_t{1} << 62;  // more than any disk has
  MakeController();
  // Re-applying what is stored writes nothing, so it still answers.
  EXPECT_THAT(ApplyOk(JobYaml("kept", 1, 1)).unchanged(), ::testing::ElementsAre("trainjob/kept"));
  auto r = controller_->Apply(JobYaml("more", 1, 1), "more.yaml", kT0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kIo);
  EXPECT_THAT(r.status().message(), HasSubstr("state dir " + state_dir_));
  EXPECT_THAT(r.status().message(), HasSubstr("no space left"));
  EXPECT_THAT(StoredNames(), ::testing::ElementsAre("kept"));
}

}  // namespace
}  // namespace trainlet::coordinator
