// OperatorService over a real JobController (SQLite store in a temp dir) and NodeRegistry, with a
// reply function and an agent sink that record what would go out. Time is passed in.
#include "coordinator/operator_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "common/envelope.h"
#include "controller_fixture.h"
#include "coordinator/apply_parser.h"

namespace trainlet::coordinator {
namespace {

using testing::ControllerFixture;
using testing::Event;
using ::testing::HasSubstr;
using testing::JobYaml;
using testing::RuntimeYaml;

constexpr auto kStarted = v1::WorkerEvent::KIND_STARTED;
constexpr auto kExited = v1::WorkerEvent::KIND_EXITED;
using std::chrono::milliseconds;

class OperatorServiceTest : public ControllerFixture {
 protected:
  void SetUp() override {
    ControllerFixture::SetUp();
    MakeService();
  }
  // A service over the current controller_, replying into replies_.
  void MakeService() {
    auto reply = [this](const std::string& routing_id, v1::Envelope env) {
      replies_.emplace_back(routing_id, std::move(env));
    };
    service_ = std::make_unique<OperatorService>(controller_.get(), &registry_, &sink_, reply);
  }

  void Send(const std::string& who, v1::OperatorRequest req, int64_t at_ms = 0) {
    service_->Handle(who, req, now_ + milliseconds(at_ms), kT0 + at_ms);
  }
  // The only reply so far, which is then forgotten.
  v1::OperatorResponse TakeReply(const std::string& who) {
    EXPECT_EQ(replies_.size(), 1u);
    if (replies_.empty()) return {};
    auto [rid, env] = std::move(replies_.front());
    replies_.clear();
    EXPECT_EQ(rid, who);
    EXPECT_TRUE(env.has_operator_response());
    return env.operator_response();
  }

  static v1::OperatorRequest GetJobs(uint64_t id, const std::string& name = "") {
    v1::OperatorRequest r;
    r.set_request_id(id);
    r.mutable_get_jobs()->set_name(name);
    return r;
  }
  static v1::OperatorRequest Wait(uint64_t id, const std::string& name, const std::string& cond,
                                  uint32_t timeout_ms = 0) {
    v1::OperatorRequest r;
    r.set_request_id(id);
    r.mutable_wait_job()->set_name(name);
    r.mutable_wait_job()->set_condition(cond);
    r.mutable_wait_job()->set_timeout_ms(timeout_ms);
    return r;
  }
  static v1::OperatorRequest Logs(uint64_t id, const std::string& job, uint32_t rank,
                                  uint64_t offset = 0, uint32_t max_bytes = 0) {
    v1::OperatorRequest r;
    r.set_request_id(id);
    r.mutable_logs()->set_job(job);
    r.mutable_logs()->set_rank(rank);
    r.mutable_logs()->set_offset(offset);
    r.mutable_logs()->set_max_bytes(max_bytes);
    return r;
  }
  std::vector<v1::LogRead> LogReads(std::vector<std::string>* nodes = nullptr) const {
    std::vector<v1::LogRead> out;
    for (const auto& [node, env] : sink_.sent) {
      if (!env.has_log_read()) continue;
      out.push_back(env.log_read());
      if (nodes != nullptr) nodes->push_back(node);
    }
    return out;
  }

  // hello (2 nodes x 2) applied and every rank started.
  void RunningHello() {
    ApplyOk(JobYaml("hello", 2, 2));
    ReportAll("hello", kStarted, kT0 + 1);
    ASSERT_EQ(PhaseName(JobOrDie("hello")), "Running");
  }

  const Clock::time_point now_ = Clock::now();
  std::vector<std::pair<std::string, v1::Envelope>> replies_;
  std::unique_ptr<OperatorService> service_;
};

TEST_F(OperatorServiceTest, GetNodes) {
  ApplyOk(JobYaml("hello", 2, 2));  // ranks 0,1 on n1 and 2,3 on n2
  v1::OperatorRequest req;
  req.set_request_id(7);
  req.mutable_get_nodes();
  Send("op", req);
  v1::OperatorResponse r = TakeReply("op");
  EXPECT_EQ(r.request_id(), 7u);
  EXPECT_EQ(r.error(), "");
  ASSERT_TRUE(r.has_nodes());
  ASSERT_EQ(r.nodes().nodes_size(), 3);
  std::map<std::string, v1::NodeStatus> by_name;
  for (const auto& n : r.nodes().nodes()) by_name[n.info().name()] = n;
  ASSERT_EQ(by_name.size(), 3u);
  for (const char* n : {"n1", "n2", "n3"}) {
    EXPECT_EQ(by_name[n].state(), "Ready") << n;
    EXPECT_EQ(by_name[n].info().slots(), 4u) << n;
    EXPECT_EQ(by_name[n].registered_unix_ms(), kT0) << n;
    EXPECT_TRUE(by_name[n].schedulable()) << n;
  }
  EXPECT_EQ(by_name["n1"].used_slots(), 2u);
  EXPECT_EQ(by_name["n2"].used_slots(), 2u);
  EXPECT_EQ(by_name["n3"].used_slots(), 0u);

  // Liveness shows through, and ended ranks free their slots.
  registry_.Tick(now_ + std::chrono::seconds(2));
  ReportAll("hello", kStarted, kT0 + 1);
  ReportAll("hello", kExited, kT0 + 2);
  Send("op", req);
  r = TakeReply("op");
  for (const auto& n : r.nodes().nodes()) {
    EXPECT_EQ(n.state(), "Suspect") << n.info().name();
    EXPECT_EQ(n.used_slots(), 0u) << n.info().name();
  }
}

TEST_F(OperatorServiceTest, GetJobs) {
  ApplyOk(JobYaml("hello", 2, 2));
  ApplyOk(JobYaml("big", 5, 1));

  Send("op", GetJobs(1, "hello"));
  v1::OperatorResponse r = TakeReply("op");
  EXPECT_EQ(r.request_id(), 1u);
  ASSERT_EQ(r.jobs().jobs_size(), 1);
  EXPECT_EQ(r.jobs().jobs(0).name(), "hello");
  EXPECT_EQ(PhaseName(r.jobs().jobs(0)), "Starting");
  EXPECT_EQ(r.jobs().jobs(0).ranks_size(), 4);

  Send("op", GetJobs(2));
  r = TakeReply("op");
  EXPECT_EQ(r.request_id(), 2u);
  ASSERT_EQ(r.jobs().jobs_size(), 2);
  EXPECT_EQ(r.jobs().jobs(0).name(), "hello");
  EXPECT_EQ(r.jobs().jobs(1).name(), "big");
  EXPECT_EQ(PhaseName(r.jobs().jobs(1)), "Pending");

  Send("op", GetJobs(3, "nope"));
  r = TakeReply("op");
  EXPECT_EQ(r.request_id(), 3u);
  EXPECT_EQ(r.error(), "trainjob/nope not found");
  EXPECT_EQ(r.error_code(), "NotFound");
  EXPECT_FALSE(r.has_jobs());
}

TEST_F(OperatorServiceTest, ApplyAndDeleteThroughTheService) {
  v1::OperatorRequest apply;
  apply.set_request_id(1);
  apply.mutable_apply()->set_yaml(JobYaml("hello", 1, 1));
  apply.mutable_apply()->set_source_name("hello.yaml");
  Send("op", apply);
  v1::OperatorResponse r = TakeReply("op");
  EXPECT_EQ(r.error(), "");
  ASSERT_EQ(r.apply().created_size(), 1);
  EXPECT_EQ(r.apply().created(0), "trainjob/hello");
  EXPECT_EQ(StoredNames(), std::vector<std::string>{"hello"});

  apply.set_request_id(2);
  apply.mutable_apply()->set_yaml("kind: [");
  Send("op", apply);
  r = TakeReply("op");
  EXPECT_EQ(r.request_id(), 2u);
  EXPECT_THAT(r.error(), HasSubstr("hello.yaml"));
  EXPECT_EQ(r.error_code(), "Invalid");

  v1::OperatorRequest del;
  del.set_request_id(3);
  del.mutable_delete_job()->set_name("missing");
  Send("op", del);
  r = TakeReply("op");
  EXPECT_EQ(r.error_code(), "NotFound");

  v1::OperatorRequest empty;
  empty.set_request_id(4);
  Send("op", empty);
  r = TakeReply("op");
  EXPECT_EQ(r.request_id(), 4u);
  EXPECT_EQ(r.error_code(), "Invalid");
  EXPECT_FALSE(r.error().empty());
}

// With a parser thread: a small file that nothing is ahead of is parsed and answered at once, on
// the loop (no thread hand-off on a launch's path); a large one goes to the parser, and a small
// one sent behind it waits its turn, so applies still finish in the order they came.
TEST_F(OperatorServiceTest, ASmallApplyIsAnsweredAtOnceUnlessAnApplyIsAheadOfIt) {
  zmq::context_t ctx;
  ApplyParser parser(ctx);
  service_->ParseAppliesOn(&parser);
  auto apply = [](uint64_t id, const std::string& yaml) {
    v1::OperatorRequest r;
    r.set_request_id(id);
    r.mutable_apply()->set_yaml(yaml);
    r.mutable_apply()->set_source_name("job.yaml");
    return r;
  };
  Send("op", apply(1, JobYaml("small", 1, 1)));
  v1::OperatorResponse r = TakeReply("op");
  EXPECT_EQ(r.request_id(), 1u);
  ASSERT_EQ(r.apply().created_size(), 1);
  EXPECT_EQ(r.apply().created(0), "trainjob/small");

  std::string large = JobYaml("large", 1, 1);
  while (large.size() <= OperatorService::kParseOnLoopBytes) large += "# padding\n";
  Send("op", apply(2, large));
  Send("op", apply(3, JobYaml("behind", 1, 1)));
  EXPECT_TRUE(replies_.empty()) << "the small file was answered before the large one ahead of it";
  for (int i = 0; i < 500 && replies_.size() < 2; ++i) {
    service_->OnApplyParsed(kT0);
    if (replies_.size() < 2) std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_EQ(replies_.size(), 2u);
  EXPECT_EQ(replies_[0].second.operator_response().request_id(), 2u);
  EXPECT_EQ(replies_[1].second.operator_response().request_id(), 3u);
  EXPECT_EQ(replies_[1].second.operator_response().apply().created(0), "trainjob/behind");
  replies_.clear();
  service_->ParseAppliesOn(nullptr);
}

TEST_F(OperatorServiceTest, WaitAnsweredAtOnceWhenAlreadyComplete) {
  RunningHello();
  ReportAll("hello", kExited, kT0 + 2);
  ASSERT_EQ(PhaseName(JobOrDie("hello")), "Succeeded");
  Send("ctl", Wait(9, "hello", "Complete", 1000));
  v1::OperatorResponse r = TakeReply("ctl");
  EXPECT_EQ(r.request_id(), 9u);
  ASSERT_TRUE(r.has_wait_job());
  EXPECT_TRUE(r.wait_job().met());
  EXPECT_FALSE(r.wait_job().impossible());
  EXPECT_EQ(PhaseName(r.wait_job().job()), "Succeeded");

  // A phase name works as a condition too.
  Send("ctl", Wait(10, "hello", "Succeeded", 1000));
  EXPECT_TRUE(TakeReply("ctl").wait_job().met());
}

TEST_F(OperatorServiceTest, WaitHeldWhileRunningThenAnsweredByTick) {
  RunningHello();
  Send("ctl", Wait(11, "hello", "Complete", 60000));
  EXPECT_TRUE(replies_.empty());
  service_->Tick(now_ + milliseconds(10));
  EXPECT_TRUE(replies_.empty());

  ReportAll("hello", kExited, kT0 + 100);
  ASSERT_EQ(PhaseName(JobOrDie("hello")), "Succeeded");
  EXPECT_TRUE(replies_.empty());  // answered from the loop's Tick, not from the event
  service_->Tick(now_ + milliseconds(100));
  v1::OperatorResponse r = TakeReply("ctl");
  EXPECT_EQ(r.request_id(), 11u);
  EXPECT_TRUE(r.wait_job().met());
  EXPECT_EQ(PhaseName(r.wait_job().job()), "Succeeded");
  ASSERT_GE(r.wait_job().job().conditions_size(), 1);

  // Answered once.
  service_->Tick(now_ + milliseconds(120000));
  EXPECT_TRUE(replies_.empty());
}

TEST_F(OperatorServiceTest, WaitForCompleteIsImpossibleOnceFailed) {
  RunningHello();
  Send("ctl", Wait(12, "hello", "Complete", 60000));
  ASSERT_TRUE(replies_.empty());
  Report("hello", 1, kExited, kT0 + 50, 3);
  ASSERT_EQ(PhaseName(JobOrDie("hello")), "Failed");
  service_->Tick(now_ + milliseconds(50));
  v1::OperatorResponse r = TakeReply("ctl");
  EXPECT_EQ(r.request_id(), 12u);
  EXPECT_FALSE(r.wait_job().met());
  EXPECT_TRUE(r.wait_job().impossible());
  EXPECT_THAT(r.wait_job().message(), HasSubstr("Failed"));
  EXPECT_THAT(r.wait_job().message(), HasSubstr("rank 1"));

  // Asked again after the fact: answered at once, same verdict.
  Send("ctl", Wait(13, "hello", "Complete", 60000));
  r = TakeReply("ctl");
  EXPECT_TRUE(r.wait_job().impossible());
  // ... while waiting for Failed is met.
  Send("ctl", Wait(14, "hello", "Failed", 60000));
  EXPECT_TRUE(TakeReply("ctl").wait_job().met());
}

TEST_F(OperatorServiceTest, WaitForUnknownJob) {
  Send("ctl", Wait(15, "ghost", "Complete", 1000));
  v1::OperatorResponse r = TakeReply("ctl");
  EXPECT_TRUE(r.wait_job().impossible());
  EXPECT_THAT(r.wait_job().message(), HasSubstr("trainjob/ghost not found"));
  Send("ctl", Wait(16, "ghost", "Deleted", 1000));
  EXPECT_TRUE(TakeReply("ctl").wait_job().met());
}

TEST_F(OperatorServiceTest, WaitTimesOut) {
  RunningHello();
  Send("ctl", Wait(17, "hello", "Complete", 500));
  EXPECT_EQ(service_->NextDeadline(now_), now_ + milliseconds(500));
  service_->Tick(now_ + milliseconds(499));
  EXPECT_TRUE(replies_.empty());
  service_->Tick(now_ + milliseconds(500));
  v1::OperatorResponse r = TakeReply("ctl");
  EXPECT_EQ(r.request_id(), 17u);
  EXPECT_FALSE(r.wait_job().met());
  EXPECT_FALSE(r.wait_job().impossible());
  EXPECT_THAT(r.wait_job().message(), HasSubstr("timed out"));
  EXPECT_EQ(PhaseName(r.wait_job().job()), "Running");
  service_->Tick(now_ + milliseconds(5000));
  EXPECT_TRUE(replies_.empty());
}

TEST_F(OperatorServiceTest, WaitForDeleted) {
  RunningHello();
  ASSERT_TRUE(controller_->Delete("hello", kT0 + 10).ok());
  Send("ctl", Wait(18, "hello", "Deleted", 60000));
  EXPECT_TRUE(replies_.empty());
  ReportAll("hello", kExited, kT0 + 20, 0, 15);
  ASSERT_EQ(controller_->Find("hello"), nullptr);
  service_->Tick(now_ + milliseconds(20));
  v1::OperatorResponse r = TakeReply("ctl");
  EXPECT_EQ(r.request_id(), 18u);
  EXPECT_TRUE(r.wait_job().met());
}

TEST_F(OperatorServiceTest, TwoWaitersOnDifferentJobs) {
  RunningHello();
  ApplyOk(JobYaml("solo", 1, 1));
  Send("a", Wait(1, "hello", "Complete", 60000));
  Send("b", Wait(2, "solo", "Complete", 60000));
  ReportAll("solo", kStarted, kT0 + 5);
  ReportAll("solo", kExited, kT0 + 6);
  service_->Tick(now_ + milliseconds(6));
  v1::OperatorResponse r = TakeReply("b");
  EXPECT_EQ(r.request_id(), 2u);
  EXPECT_TRUE(r.wait_job().met());
  ReportAll("hello", kExited, kT0 + 7);
  service_->Tick(now_ + milliseconds(7));
  r = TakeReply("a");
  EXPECT_EQ(r.request_id(), 1u);
  EXPECT_TRUE(r.wait_job().met());
}

TEST_F(OperatorServiceTest, LogsRelayedThroughTheRanksNode) {
  RunningHello();
  sink_.sent.clear();
  Send("ctl", Logs(21, "hello", 3, 100, 4096));
  EXPECT_TRUE(replies_.empty());
  std::vector<std::string> nodes;
  auto reads = LogReads(&nodes);
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_EQ(nodes[0], "n2");  // rank 3 runs on n2
  EXPECT_EQ(reads[0].job(), "hello");
  EXPECT_EQ(reads[0].rank(), 3u);
  EXPECT_EQ(reads[0].attempt(), 1u);
  EXPECT_EQ(reads[0].offset(), 100u);
  EXPECT_EQ(reads[0].max_bytes(), 4096u);
  EXPECT_EQ(service_->NextDeadline(now_), now_ + std::chrono::seconds(1));

  // An answer to some other relay is not ours.
  v1::LogChunk stray;
  stray.set_request_id(reads[0].request_id() + 1000);
  service_->OnLogChunk(stray);
  EXPECT_TRUE(replies_.empty());

  v1::LogChunk chunk;
  chunk.set_request_id(reads[0].request_id());
  chunk.set_data("hello from rank 3\n");
  chunk.set_next_offset(118);
  chunk.set_eof(true);
  service_->OnLogChunk(chunk);
  v1::OperatorResponse r = TakeReply("ctl");
  EXPECT_EQ(r.request_id(), 21u);
  EXPECT_EQ(r.error(), "");
  ASSERT_TRUE(r.has_logs());
  EXPECT_EQ(r.logs().data(), "hello from rank 3\n");
  EXPECT_EQ(r.logs().next_offset(), 118u);
  EXPECT_TRUE(r.logs().eof());
  EXPECT_FALSE(r.logs().rank_done());  // still running
  EXPECT_EQ(r.logs().attempt(), 1u);

  // A duplicate answer is dropped.
  service_->OnLogChunk(chunk);
  EXPECT_TRUE(replies_.empty());

  // Once the rank exited, the answer says no more output will come.
  Report("hello", 0, kExited, kT0 + 50, 0);
  sink_.sent.clear();
  Send("ctl2", Logs(22, "hello", 0));
  nodes.clear();
  reads = LogReads(&nodes);
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_EQ(nodes[0], "n1");
  chunk.set_request_id(reads[0].request_id());
  service_->OnLogChunk(chunk);
  r = TakeReply("ctl2");
  EXPECT_EQ(r.request_id(), 22u);
  EXPECT_TRUE(r.logs().rank_done());
}

TEST_F(OperatorServiceTest, LogRelayErrorsAndTimeout) {
  RunningHello();
  sink_.sent.clear();
  Send("ctl", Logs(31, "hello", 1));
  auto reads = LogReads();
  ASSERT_EQ(reads.size(), 1u);
  v1::LogChunk chunk;
  chunk.set_request_id(reads[0].request_id());
  chunk.set_error("no log for rank 1");
  service_->OnLogChunk(chunk);
  v1::OperatorResponse r = TakeReply("ctl");
  EXPECT_EQ(r.request_id(), 31u);
  EXPECT_EQ(r.error(), "no log for rank 1");
  EXPECT_FALSE(r.error_code().empty());

  // The agent never answers: the operator hears so after the relay timeout.
  sink_.sent.clear();
  Send("ctl", Logs(32, "hello", 2));
  ASSERT_EQ(LogReads().size(), 1u);
  service_->Tick(now_ + std::chrono::seconds(9));
  EXPECT_TRUE(replies_.empty());
  service_->Tick(now_ + std::chrono::seconds(10));
  r = TakeReply("ctl");
  EXPECT_EQ(r.request_id(), 32u);
  EXPECT_EQ(r.error_code(), "Unavailable");
  EXPECT_THAT(r.error(), HasSubstr("did not answer"));
  // Its late answer goes nowhere.
  chunk.set_request_id(LogReads()[0].request_id());
  chunk.clear_error();
  service_->OnLogChunk(chunk);
  EXPECT_TRUE(replies_.empty());
}

TEST_F(OperatorServiceTest, LogRequestsRefusedUpFront) {
  RunningHello();
  ApplyOk(JobYaml("big", 5, 1));
  sink_.sent.clear();

  Send("ctl", Logs(41, "hello", 4));
  v1::OperatorResponse r = TakeReply("ctl");
  EXPECT_EQ(r.request_id(), 41u);
  EXPECT_THAT(r.error(), HasSubstr("--rank"));
  EXPECT_THAT(r.error(), HasSubstr("0-3"));
  EXPECT_EQ(r.error_code(), "NotFound");

  Send("ctl", Logs(42, "nope", 0));
  r = TakeReply("ctl");
  EXPECT_EQ(r.error_code(), "NotFound");
  EXPECT_THAT(r.error(), HasSubstr("trainjob/nope"));

  Send("ctl", Logs(43, "big", 0));
  r = TakeReply("ctl");
  EXPECT_EQ(r.error_code(), "Unavailable");
  EXPECT_THAT(r.error(), HasSubstr("not started"));

  v1::OperatorRequest old = Logs(45, "hello", 0);
  old.mutable_logs()->set_attempt(5);
  Send("ctl", old);
  r = TakeReply("ctl");
  EXPECT_EQ(r.error_code(), "NotFound");
  EXPECT_THAT(r.error(), HasSubstr("--attempt 5"));

  // The node holding the rank is lost.
  registry_.Tick(now_ + std::chrono::seconds(10));
  Send("ctl", Logs(44, "hello", 0));
  r = TakeReply("ctl");
  EXPECT_EQ(r.error_code(), "Unavailable");
  EXPECT_THAT(r.error(), HasSubstr("n1"));

  EXPECT_TRUE(LogReads().empty());
}

// Logs of an earlier attempt must be read where that attempt ran, which may not be the node
// holding the rank now.
TEST_F(OperatorServiceTest, LogsOfEarlierAttemptGoToTheNodeThatRanIt) {
  options_.restart_backoff = milliseconds(1);
  MakeController();
  MakeService();
  ApplyOk(RuntimeYaml("plain-retry", "", 1) + "---\n" + JobYaml("retry", 2, 2, "plain-retry"));
  ReportAll("retry", kStarted, kT0 + 1);
  ASSERT_EQ(JobOrDie("retry").ranks(3).node(), "n2");
  // n2 is lost: attempt 1 fails, and attempt 2 goes to n1 and n3.
  for (const std::string n : {"n1", "n3"}) {
    ASSERT_NE(
        registry_.Heartbeat("key-" + n, "rid-" + n, now_ + std::chrono::seconds(3), kT0 + 3000),
        nullptr);
  }
  ASSERT_EQ(registry_.Tick(now_ + std::chrono::seconds(4)), std::vector<std::string>{"n2"});
  controller_->OnNodeLost("n2", kT0 + 4000);
  Report("retry", 0, kExited, kT0 + 4001, 0, 15);
  Report("retry", 1, kExited, kT0 + 4001, 0, 15);
  controller_->Schedule(kT0 + 5000);
  ASSERT_EQ(JobOrDie("retry").attempt(), 2u);
  ASSERT_EQ(JobOrDie("retry").ranks(3).node(), "n3");
  sink_.sent.clear();

  v1::OperatorRequest req = Logs(51, "retry", 3);
  req.mutable_logs()->set_attempt(1);
  Send("ctl", req, 5000);
  // Attempt 1's rank 3 ran on n2, which is lost: the answer is that its node is unreachable,
  // not a LogRead to n3, which never ran it.
  EXPECT_TRUE(LogReads().empty());
  v1::OperatorResponse r = TakeReply("ctl");
  EXPECT_EQ(r.error_code(), "Unavailable");
  EXPECT_THAT(r.error(), HasSubstr("n2"));
}

// Issue 19, defect 8: about 32,500 jobs made the answer to `get trainjobs` larger than a message
// may be, and every client got "did not answer within 15 s". 40,000 tiny jobs (suspended, so the
// planner has nothing to do) are listed in pages, each of which fits, without their specs.
TEST_F(OperatorServiceTest, FortyThousandJobsAreListedInPages) {
  constexpr int kJobs = 40000;
  constexpr int kPerFile = 2000;
  for (int f = 0; f < kJobs / kPerFile; ++f) {
    std::string file;
    for (int i = 0; i < kPerFile; ++i) {
      const std::string name = "j" + std::to_string(f * kPerFile + i);
      file += (i == 0 ? "" : "---\n") + JobYaml(name, 1, 1) + "  suspend: true\n";
    }
    ApplyOk(file, kT0 + f);
  }
  ASSERT_EQ(controller_->List().size(), static_cast<size_t>(kJobs));

  // Everything in one answer does not fit: it is refused as too large, not sent to be dropped.
  Send("ctl", GetJobs(1));
  v1::OperatorResponse r = TakeReply("ctl");
  EXPECT_LE(r.ByteSizeLong(), kMaxMessageBytes);
  EXPECT_THAT(r.error(), HasSubstr("response too large"));

  // Pages of 500, each small enough, in creation order, without the resolved command.
  std::vector<std::string> names;
  std::string token;
  int pages = 0;
  do {
    v1::OperatorRequest req = GetJobs(100 + pages);
    req.mutable_get_jobs()->set_limit(500);
    req.mutable_get_jobs()->set_continue_token(token);
    Send("ctl", req);
    r = TakeReply("ctl");
    ASSERT_EQ(r.error(), "") << "page " << pages;
    ASSERT_LE(r.ByteSizeLong(), kJobPageBytes + (64u << 10));
    ASSERT_LE(r.jobs().jobs_size(), 500);
    for (const auto& j : r.jobs().jobs()) {
      names.push_back(j.name());
      ASSERT_EQ(j.command_size(), 0) << j.name();
    }
    token = r.jobs().continue_token();
    if (!token.empty()) {
      EXPECT_EQ(r.jobs().remaining(), static_cast<uint32_t>(kJobs) - names.size());
    }
    ++pages;
  } while (!token.empty() && pages < 1000);
  EXPECT_EQ(pages, kJobs / 500);
  ASSERT_EQ(names.size(), static_cast<size_t>(kJobs));
  for (int i = 0; i < kJobs; i += 997) EXPECT_EQ(names[i], "j" + std::to_string(i));

  // The spec stays with the job itself.
  Send("ctl", GetJobs(2, "j7"));
  r = TakeReply("ctl");
  ASSERT_EQ(r.jobs().jobs_size(), 1);
  EXPECT_GT(r.jobs().jobs(0).command_size(), 0);
}

// The other half of defect 8: three jobs with 3 MB of args each. They are refused at apply,
// naming the field, so no list or describe can grow past what one answer carries.
TEST_F(OperatorServiceTest, ATrainJobWithMegabytesOfArgsIsRefusedNamingTheField) {
  const std::string arg(100 << 10, 'x');  // 30 x 100 KiB: each string fine, the total not
  std::string args = "    args: [";
  for (int i = 0; i < 30; ++i) args += (i == 0 ? "\"" : ", \"") + arg + "\"";
  args += "]\n";
  for (int i = 0; i < 3; ++i) {
    v1::OperatorRequest req;
    req.set_request_id(10 + i);
    req.mutable_apply()->set_yaml(JobYaml("fat-" + std::to_string(i), 1, 1) + args);
    req.mutable_apply()->set_source_name("fat.yaml");
    Send("ctl", req);
    v1::OperatorResponse r = TakeReply("ctl");
    EXPECT_EQ(r.error_code(), "Invalid");
    EXPECT_THAT(r.error(), HasSubstr("TrainJob/fat-" + std::to_string(i) + ": spec.trainer.args"));
  }
  EXPECT_TRUE(controller_->List().empty());
  Send("ctl", GetJobs(20));
  EXPECT_EQ(TakeReply("ctl").error(), "");
}

TEST_F(OperatorServiceTest, AListPageGoesOnAfterItsLastJobWasDeleted) {
  ApplyOk(JobYaml("a", 1, 1) + "  suspend: true\n", kT0);
  ApplyOk(JobYaml("b", 1, 1) + "  suspend: true\n", kT0 + 10);
  ApplyOk(JobYaml("c", 1, 1) + "  suspend: true\n", kT0 + 20);
  v1::OperatorRequest req = GetJobs(1);
  req.mutable_get_jobs()->set_limit(2);
  Send("ctl", req);
  v1::OperatorResponse r = TakeReply("ctl");
  ASSERT_EQ(r.jobs().jobs_size(), 2);
  ASSERT_EQ(r.jobs().remaining(), 1u);
  const std::string token = r.jobs().continue_token();
  ASSERT_FALSE(token.empty());
  ASSERT_TRUE(controller_->Delete("b", kT0 + 30).ok());
  ASSERT_EQ(controller_->Find("b"), nullptr);
  req.mutable_get_jobs()->set_continue_token(token);
  Send("ctl", req);
  r = TakeReply("ctl");
  ASSERT_EQ(r.jobs().jobs_size(), 1);
  EXPECT_EQ(r.jobs().jobs(0).name(), "c");
  EXPECT_EQ(r.jobs().continue_token(), "");

  req.mutable_get_jobs()->set_continue_token("not-a-token");
  Send("ctl", req);
  r = TakeReply("ctl");
  EXPECT_EQ(r.error_code(), "Invalid");
  EXPECT_THAT(r.error(), HasSubstr("continue token"));
}

// How the apply caps were measured (docs/operations.md, "Large applies and long lists"): the time
// of each part of an apply of n TrainJobs, with more and more jobs held. Parsing runs on
// ApplyParser's thread; the rest ("apply(loop)": resolve, store in one transaction, commit, one
// Schedule) and each later Schedule hold the loop. Not run by default:
//   build/bin/operator_service_test --gtest_also_run_disabled_tests --gtest_filter='*Measure*'
TEST_F(OperatorServiceTest, DISABLED_MeasureApply) {
  int base = 0;
  for (int n : {500, 1000, 2000, 4000, 8000}) {
    for (bool suspend : {true, false}) {
      std::string file;
      for (int i = 0; i < n; ++i) {
        file += (i == 0 ? "" : "---\n") + JobYaml("m" + std::to_string(base + i), 1, 1) +
                (suspend ? "  suspend: true\n" : "");
      }
      base += n;
      auto t0 = std::chrono::steady_clock::now();
      auto parsed = trainjob::ParseDocuments(file);
      ASSERT_TRUE(parsed.ok());
      auto t1 = std::chrono::steady_clock::now();
      auto r = controller_->Apply(std::move(parsed).value(), "m.yaml", kT0);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      auto t2 = std::chrono::steady_clock::now();
      controller_->Schedule(kT0 + 1);
      auto t3 = std::chrono::steady_clock::now();
      auto ms = [](auto d) {
        return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
      };
      std::printf(
          "MEASURE n=%d suspend=%d bytes=%zu parse=%ld ms apply(loop)=%ld ms schedule=%ld ms "
          "held=%zu\n",
          n, suspend, file.size(), ms(t1 - t0), ms(t2 - t1), ms(t3 - t2),
          controller_->List().size());
    }
  }
}

}  // namespace
}  // namespace trainlet::coordinator
