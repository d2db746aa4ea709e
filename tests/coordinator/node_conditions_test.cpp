// `get nodes` conditions through the OperatorService (Ready, Healthy, SchedulingDisabled with the
// cordon or drain reason, Draining while ranks remain), and a cordon that outlives a coordinator
// restart: stored before the operator's answer, applied at re-registration, honoured by placement.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "controller_fixture.h"
#include "coordinator/operator_service.h"

namespace trainlet::coordinator {
namespace {

using std::chrono::milliseconds;
using testing::ControllerFixture;
using ::testing::HasSubstr;
using testing::JobYaml;

class NodeConditionsTest : public ControllerFixture {
 protected:
  void SetUp() override {
    ControllerFixture::SetUp();
    ASSERT_TRUE(registry_.LoadCordons(store_.get()).ok());
    MakeService();
  }
  void MakeService() {
    service_ = std::make_unique<OperatorService>(
        controller_.get(), &registry_, &sink_,
        [this](const std::string&, v1::Envelope env) { replies_.push_back(std::move(env)); });
  }
  v1::OperatorResponse Call(v1::OperatorRequest req, int64_t at_ms = 0) {
    replies_.clear();
    service_->Handle("op", req, Clock::now(), kT0 + at_ms);
    EXPECT_EQ(replies_.size(), 1u);
    return replies_.empty() ? v1::OperatorResponse{} : replies_.back().operator_response();
  }
  v1::OperatorResponse Cordon(const std::string& node, bool cordon, const std::string& reason) {
    v1::OperatorRequest req;
    req.mutable_cordon_node()->set_node(node);
    req.mutable_cordon_node()->set_cordon(cordon);
    req.mutable_cordon_node()->set_reason(reason);
    return Call(req, 5);
  }
  v1::NodeStatus Node(const std::string& name) {
    v1::OperatorRequest req;
    req.mutable_get_nodes();
    const v1::OperatorResponse r = Call(req);
    for (const auto& n : r.nodes().nodes()) {
      if (n.info().name() == name) return n;
    }
    ADD_FAILURE() << "node " << name << " not listed";
    return {};
  }
  static const v1::Condition* Cond(const v1::NodeStatus& n, const std::string& type) {
    for (const auto& c : n.conditions()) {
      if (c.type() == type) return &c;
    }
    return nullptr;
  }
  // A coordinator restart: everything in memory rebuilt from the state dir.
  void Restart() {
    service_.reset();
    controller_.reset();
    store_.reset();
    auto store = JobStore::Open(state_dir_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    registry_ = NodeRegistry(milliseconds(1000), milliseconds(3000));
    ASSERT_TRUE(registry_.LoadCordons(store_.get()).ok());
    for (const char* n : {"n1", "n2", "n3"}) AddNode(n);
    MakeController();
    MakeService();
  }

  std::vector<v1::Envelope> replies_;
  std::unique_ptr<OperatorService> service_;
};

TEST_F(NodeConditionsTest, ReadyHealthyAndCordoned) {
  v1::NodeStatus n = Node("n1");
  ASSERT_NE(Cond(n, "Ready"), nullptr);
  EXPECT_EQ(Cond(n, "Ready")->status(), "True");
  ASSERT_NE(Cond(n, "Healthy"), nullptr);
  EXPECT_EQ(Cond(n, "Healthy")->status(), "True");
  EXPECT_EQ(Cond(n, "SchedulingDisabled"), nullptr);

  registry_.SetHealth("n1", false, "health check program exited 3: ECC errors");
  v1::OperatorResponse r = Cordon("n1", true, "replace DIMM");
  EXPECT_EQ(r.error(), "");
  EXPECT_TRUE(r.cordon_node().changed());
  n = Node("n1");
  EXPECT_FALSE(n.schedulable());
  EXPECT_EQ(Cond(n, "Healthy")->status(), "False");
  EXPECT_EQ(Cond(n, "Healthy")->reason(), "HealthCheckFailed");
  EXPECT_THAT(Cond(n, "Healthy")->message(), HasSubstr("ECC errors"));
  const v1::Condition* cordoned = Cond(n, "SchedulingDisabled");
  ASSERT_NE(cordoned, nullptr);
  EXPECT_EQ(cordoned->status(), "True");
  EXPECT_EQ(cordoned->reason(), "Cordoned");
  EXPECT_EQ(cordoned->message(), "replace DIMM");
  EXPECT_GT(cordoned->unix_ms(), 0);        // the service's cordon takes the wall clock's time
  EXPECT_EQ(Cond(n, "Draining"), nullptr);  // a cordon is not a drain
}

TEST_F(NodeConditionsTest, DrainingWhileRanksRunThenDrained) {
  ApplyOk(JobYaml("hello", 2, 2));  // ranks on n1 and n2
  ReportAll("hello", v1::WorkerEvent::KIND_STARTED, kT0 + 1);
  v1::OperatorRequest req;
  req.mutable_drain_node()->set_node("n1");
  v1::OperatorResponse r = Call(req, 2);
  ASSERT_EQ(r.error(), "");
  EXPECT_EQ(r.drain_node().running_ranks(), 2u);
  v1::NodeStatus n = Node("n1");
  ASSERT_NE(Cond(n, "SchedulingDisabled"), nullptr);
  EXPECT_EQ(Cond(n, "SchedulingDisabled")->reason(), "Drained");
  const v1::Condition* draining = Cond(n, "Draining");
  ASSERT_NE(draining, nullptr);
  EXPECT_EQ(draining->status(), "True");
  EXPECT_EQ(draining->message(), "2 ranks running (jobs: hello)");

  ReportAll("hello", v1::WorkerEvent::KIND_EXITED, kT0 + 3);
  draining = nullptr;
  n = Node("n1");
  draining = Cond(n, "Draining");
  ASSERT_NE(draining, nullptr);
  EXPECT_EQ(draining->status(), "False");
  EXPECT_EQ(draining->reason(), "Drained");
}

TEST_F(NodeConditionsTest, CordonSurvivesRestartAndKeepsNewJobsOff) {
  ASSERT_EQ(Cordon("n1", true, "maintenance").error(), "");
  Restart();
  v1::NodeStatus n = Node("n1");
  EXPECT_FALSE(n.schedulable());
  ASSERT_NE(Cond(n, "SchedulingDisabled"), nullptr);
  EXPECT_EQ(Cond(n, "SchedulingDisabled")->message(), "maintenance");
  EXPECT_EQ(n.cordon_reason(), "maintenance");

  ApplyOk(JobYaml("after", 2, 1));
  const v1::JobStatus& job = JobOrDie("after");
  ASSERT_EQ(job.placement_size(), 2);
  for (const auto& node : job.placement()) EXPECT_NE(node, "n1");

  // Uncordoned, and restarted again: schedulable.
  ASSERT_EQ(Cordon("n1", false, "").error(), "");
  Restart();
  EXPECT_TRUE(Node("n1").schedulable());
}

}  // namespace
}  // namespace trainlet::coordinator
