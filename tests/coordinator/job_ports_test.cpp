// The reserve-then-launch step (coordinator/attempt_launcher.cpp) and the start timeout, driven
// through JobController with a fake runtime plugin that asks for ports.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <climits>

#include "controller_fixture.h"

namespace trainlet::coordinator::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Asks node rank 0 for `first` ports and every other node for `others`; each worker's env carries
// MASTER_PORT (node 0's first port) and NODE_PORTS (its node's ports, comma-separated). Like the
// real plugins, it refuses to render without the ports it asked for. Written against the public
// headers only, as a plugin outside trainlet would be.
class FakePortsPlugin : public RuntimePlugin {
 public:
  std::string_view name() const override { return "fake-ports"; }
  PluginResult<uint32_t> ProcsPerNode(std::string_view n, const v1::Topology*) const override {
    return n.empty() ? 1u : static_cast<uint32_t>(std::stoul(std::string(n)));
  }
  uint32_t PortsPerNode(uint32_t node_rank) const { return node_rank == 0 ? first : others; }
  PluginResult<AttemptLayout> Layout(const PlanRequest& req) const override {
    layouts.push_back(req);
    const uint32_t procs = *ProcsPerNode(req.num_proc_per_node, nullptr);
    AttemptLayout layout;
    for (uint32_t n = 0; n < req.nodes.size(); ++n) {
      NodeLayout& node = layout.nodes.emplace_back();
      for (uint32_t l = 0; l < procs; ++l) node.ranks.push_back({n * procs + l, l});
      node.ports = PortsPerNode(n);
    }
    return layout;
  }
  PluginResult<std::vector<v1::LaunchPlan>> Render(const PlanRequest& req,
                                                   const AttemptLayout& layout) const override {
    renders.push_back(req);
    for (uint32_t n = 0; n < req.nodes.size(); ++n) {
      if (req.nodes[n].ports.size() < PortsPerNode(n)) {
        return PluginStatus(PluginErrorCode::kInvalid,
                            "fake: node rank " + std::to_string(n) + " has no ports");
      }
    }
    if (fail_with_ports) {
      return PluginStatus(PluginErrorCode::kInvalid, "fake: no good with ports");
    }
    std::vector<v1::LaunchPlan> plans;
    for (uint32_t n = 0; n < req.nodes.size(); ++n) {
      v1::LaunchPlan plan;
      plan.set_job(req.job);
      plan.set_attempt(req.attempt);
      plan.set_node_rank(n);
      std::string ports;
      for (uint32_t p : req.nodes[n].ports) ports += (ports.empty() ? "" : ",") + std::to_string(p);
      for (const LaidOutRank& r : layout.nodes[n].ranks) {
        auto* w = plan.add_workers();
        w->set_rank(r.rank);
        w->set_local_rank(r.local_rank);
        w->add_argv("/bin/true");
        if (!req.nodes[0].ports.empty()) {
          (*w->mutable_env())["MASTER_PORT"] = std::to_string(req.nodes[0].ports[0]);
        }
        (*w->mutable_env())["NODE_PORTS"] = ports;
      }
      plans.push_back(std::move(plan));
    }
    return plans;
  }
  std::string LaunchMode(const PlanRequest&) const override { return "fake"; }

  uint32_t first = 2;
  uint32_t others = 1;
  bool fail_with_ports = false;
  mutable std::vector<PlanRequest> layouts;  // every Layout() call's input
  mutable std::vector<PlanRequest> renders;  // every Render() call's input
};

class JobPortsTest : public ControllerFixture {
 protected:
  static constexpr int64_t kTimeout = 5000;

  void SetUp() override {
    ControllerFixture::SetUp();
    options_.select_plugin = [this](std::string_view, const std::map<std::string, std::string>&) {
      return &plugin_;
    };
    options_.start_timeout = std::chrono::milliseconds(kTimeout);
    options_.restart_backoff = std::chrono::milliseconds(100);
    MakeController();
    ApplyOk(RuntimeYaml("rt", "", /*max_restarts=*/3));
  }

  std::vector<std::pair<std::string, v1::ReservePorts>> Reserves() const {
    std::vector<std::pair<std::string, v1::ReservePorts>> out;
    for (const auto& [node, env] : sink_.sent) {
      if (env.has_reserve_ports()) out.emplace_back(node, env.reserve_ports());
    }
    return out;
  }

  static v1::PortsReserved Answer(const std::string& job, uint32_t attempt,
                                  std::vector<uint32_t> ports, const std::string& error = "") {
    v1::PortsReserved r;
    r.set_job(job);
    r.set_attempt(attempt);
    for (uint32_t p : ports) r.add_ports(p);
    r.set_error(error);
    return r;
  }

  // Places a 2-node x 2-rank job of runtime "rt"; returns its nodes in placement order.
  std::vector<std::string> PlaceTwoNodes(const std::string& job = "train") {
    ApplyOk(JobYaml(job, 2, 2, "rt"));
    const auto& st = JobOrDie(job);
    EXPECT_EQ(PhaseName(st), "Starting");
    EXPECT_EQ(st.placement_size(), 2);
    return {st.placement().begin(), st.placement().end()};
  }

  FakePortsPlugin plugin_;
};

TEST_F(JobPortsTest, ReservesFirstThenPlansWithThePortsAndLaunches) {
  const auto nodes = PlaceTwoNodes();
  // Laid out once without ports (checks the request, lays out the ranks), stored, then the
  // nodes are asked: node rank 0 for 2 ports, node rank 1 for 1. Nothing is rendered or sent yet.
  ASSERT_EQ(plugin_.layouts.size(), 1u);
  EXPECT_TRUE(plugin_.layouts[0].nodes[0].ports.empty());
  EXPECT_TRUE(plugin_.layouts[0].nodes[1].ports.empty());
  EXPECT_TRUE(plugin_.renders.empty());
  EXPECT_TRUE(sink_.Plans().empty());
  const auto reserves = Reserves();
  ASSERT_EQ(reserves.size(), 2u);
  EXPECT_EQ(reserves[0].first, nodes[0]);
  EXPECT_EQ(reserves[0].second.job(), "train");
  EXPECT_EQ(reserves[0].second.attempt(), 1u);
  EXPECT_EQ(reserves[0].second.count(), 2u);
  EXPECT_EQ(reserves[1].first, nodes[1]);
  EXPECT_EQ(reserves[1].second.count(), 1u);
  auto stored = Stored("train");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->status.attempt(), 1u) << "the attempt is durable before any agent hears of it";
  for (const auto& r : JobOrDie("train").ranks()) EXPECT_EQ(StateName(r), "Pending");

  // Out of order: node rank 1 answers first. Still nothing is sent.
  controller_->OnPortsReserved(nodes[1], Answer("train", 1, {20007}), kT0 + 10);
  EXPECT_TRUE(sink_.Plans().empty());
  EXPECT_TRUE(plugin_.renders.empty());
  controller_->OnPortsReserved(nodes[0], Answer("train", 1, {20001, 20002}), kT0 + 20);

  EXPECT_EQ(plugin_.layouts.size(), 1u) << "the layout is not made again";
  ASSERT_EQ(plugin_.renders.size(), 1u);
  EXPECT_EQ(plugin_.renders[0].nodes[0].ports, (std::vector<uint32_t>{20001, 20002}));
  EXPECT_EQ(plugin_.renders[0].nodes[1].ports, (std::vector<uint32_t>{20007}));
  const auto plans = sink_.Plans();
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans[0].first, nodes[0]);
  EXPECT_EQ(plans[1].first, nodes[1]);
  EXPECT_EQ(plans[0].second.workers(0).env().at("MASTER_PORT"), "20001");
  EXPECT_EQ(plans[0].second.workers(1).env().at("NODE_PORTS"), "20001,20002");
  EXPECT_EQ(plans[1].second.workers(0).env().at("MASTER_PORT"), "20001");
  EXPECT_EQ(plans[1].second.workers(0).env().at("NODE_PORTS"), "20007");

  ReportAll("train", v1::WorkerEvent::KIND_STARTED, kT0 + 30);
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Running");
  // A late duplicate answer (the node was asked again after re-registering) changes nothing and
  // sends nothing: above all no StopWorkers, which would stop the running attempt's ranks.
  const size_t sent = sink_.sent.size();
  controller_->OnPortsReserved(nodes[0], Answer("train", 1, {20001, 20002}), kT0 + 40);
  EXPECT_EQ(sink_.Plans().size(), 2u);
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Running");
  EXPECT_EQ(sink_.sent.size(), sent);
}

// An agent that restarts (or re-registers for any reason) before answering ReservePorts is asked
// again when it registers; nodes that answered already, and jobs not waiting, are not.
TEST_F(JobPortsTest, ANodeThatReRegistersWhileReservingIsAskedAgain) {
  const auto nodes = PlaceTwoNodes();
  controller_->OnPortsReserved(nodes[1], Answer("train", 1, {20007}), kT0 + 10);
  sink_.sent.clear();
  controller_->ReconcileNode(nodes[1], {}, kT0 + 20);
  EXPECT_TRUE(Reserves().empty()) << "node rank 1 has answered";
  controller_->ReconcileNode(nodes[0], {}, kT0 + 30);
  auto again = Reserves();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].first, nodes[0]);
  EXPECT_EQ(again[0].second.attempt(), 1u);
  EXPECT_EQ(again[0].second.count(), 2u);
  // Its answer launches the attempt as usual.
  controller_->OnPortsReserved(nodes[0], Answer("train", 1, {20001, 20002}), kT0 + 40);
  ASSERT_EQ(sink_.Plans().size(), 2u);
  sink_.sent.clear();
  controller_->ReconcileNode(nodes[0], {}, kT0 + 50);
  EXPECT_TRUE(Reserves().empty()) << "nothing waits for ports any more";
}

TEST_F(JobPortsTest, RuntimeWithoutPortsLaunchesAtOnce) {
  plugin_.first = 0;
  plugin_.others = 0;
  PlaceTwoNodes();
  EXPECT_TRUE(Reserves().empty());
  EXPECT_EQ(sink_.Plans().size(), 2u);
  EXPECT_EQ(plugin_.layouts.size(), 1u) << "laid out once";
  EXPECT_EQ(plugin_.renders.size(), 1u) << "and rendered at once, with no ports";
  EXPECT_TRUE(plugin_.renders[0].nodes[0].ports.empty());
}

TEST_F(JobPortsTest, OnlyNodesThatNeedPortsAreAsked) {
  plugin_.others = 0;
  const auto nodes = PlaceTwoNodes();
  ASSERT_EQ(Reserves().size(), 1u);
  EXPECT_EQ(Reserves()[0].first, nodes[0]);
  controller_->OnPortsReserved(nodes[0], Answer("train", 1, {21000, 21001}), kT0 + 1);
  EXPECT_EQ(sink_.Plans().size(), 2u);
}

TEST_F(JobPortsTest, AnErrorFailsTheAttemptNamingTheNodeAndItRestarts) {
  const auto nodes = PlaceTwoNodes();
  controller_->OnPortsReserved(nodes[0], Answer("train", 1, {20001, 20002}), kT0 + 1);
  controller_->OnPortsReserved(
      nodes[1], Answer("train", 1, {}, "no free port in 20000-29999 on 127.0.0.2"), kT0 + 2);
  const auto& st = JobOrDie("train");
  EXPECT_EQ(PhaseName(st), "Restarting");
  ASSERT_EQ(st.attempts_size(), 1);
  EXPECT_EQ(ResultName(st.attempts(0)), "Failed");
  EXPECT_EQ(st.attempts(0).cause(), nodes[1] + ": no free port in 20000-29999 on 127.0.0.2");
  EXPECT_TRUE(sink_.Plans().empty());
  // Both nodes are told to stop the attempt, which gives back what they hold.
  EXPECT_EQ(sink_.StopNodes(), (std::vector<std::string>{nodes[0], nodes[1]}));
  // No plan ever went out, so no rank exists: none is left Pending to block the restart.
  for (const auto& r : st.ranks()) EXPECT_EQ(StateName(r), "Stopped") << r.rank();
  ASSERT_TRUE(controller_->Flush().ok());
  EXPECT_EQ(Stored("train")->status.attempts(0).cause(), st.attempts(0).cause());

  controller_->Schedule(kT0 + 200);
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Starting");
  EXPECT_EQ(JobOrDie("train").attempt(), 2u);
  const auto reserves = Reserves();
  ASSERT_EQ(reserves.size(), 4u);
  EXPECT_EQ(reserves[2].second.attempt(), 2u);
  EXPECT_EQ(reserves[3].second.attempt(), 2u);
}

TEST_F(JobPortsTest, AStaleAnswerIsDroppedAndItsPortsGivenBack) {
  const auto nodes = PlaceTwoNodes();
  controller_->OnPortsReserved(nodes[0], Answer("train", 1, {}, "no free port"), kT0 + 1);
  controller_->Schedule(kT0 + 200);
  ASSERT_EQ(JobOrDie("train").attempt(), 2u);
  sink_.sent.clear();
  // Attempt 1's answer from the other node comes late.
  controller_->OnPortsReserved(nodes[1], Answer("train", 1, {20009}), kT0 + 300);
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_EQ(sink_.sent[0].first, nodes[1]);
  ASSERT_TRUE(sink_.sent[0].second.has_stop_workers());
  EXPECT_EQ(sink_.sent[0].second.stop_workers().attempt(), 1u);
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Starting");
  EXPECT_EQ(ResultName(JobOrDie("train").attempts(1)), "");
  // Unknown jobs, nodes outside the placement and error answers of stale attempts send nothing
  // back that could matter, and fail nothing.
  sink_.sent.clear();
  controller_->OnPortsReserved("n-unknown", Answer("train", 2, {20010}), kT0 + 301);
  controller_->OnPortsReserved(nodes[0], Answer("nope", 1, {}, "whatever"), kT0 + 302);
  controller_->OnPortsReserved(nodes[0], Answer("train", 1, {}, "late error"), kT0 + 303);
  EXPECT_TRUE(sink_.Plans().empty());
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Starting");
  EXPECT_EQ(ResultName(JobOrDie("train").attempts(1)), "");
  // The current attempt still launches once both answer.
  controller_->OnPortsReserved(nodes[0], Answer("train", 2, {20011, 20012}), kT0 + 304);
  controller_->OnPortsReserved(nodes[1], Answer("train", 2, {20013}), kT0 + 305);
  ASSERT_EQ(sink_.Plans().size(), 2u);
  EXPECT_EQ(sink_.Plans()[0].second.attempt(), 2u);
}

TEST_F(JobPortsTest, AWrongNumberOfPortsFailsTheAttempt) {
  const auto nodes = PlaceTwoNodes();
  controller_->OnPortsReserved(nodes[0], Answer("train", 1, {20001}), kT0 + 1);
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Restarting");
  EXPECT_EQ(JobOrDie("train").attempts(0).cause(),
            nodes[0] + ": reserved 1 ports, 2 were asked for");
}

TEST_F(JobPortsTest, PlanningWithPortsFailingFailsTheAttempt) {
  plugin_.fail_with_ports = true;
  const auto nodes = PlaceTwoNodes();
  controller_->OnPortsReserved(nodes[0], Answer("train", 1, {20001, 20002}), kT0 + 1);
  controller_->OnPortsReserved(nodes[1], Answer("train", 1, {20003}), kT0 + 2);
  EXPECT_TRUE(sink_.Plans().empty());
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Restarting");
  EXPECT_THAT(JobOrDie("train").attempts(0).cause(),
              HasSubstr("planning with the reserved ports failed: fake: no good with ports"));
}

TEST_F(JobPortsTest, ANodeLostWhileReservingFailsTheAttemptAsToday) {
  const auto nodes = PlaceTwoNodes();
  controller_->OnPortsReserved(nodes[0], Answer("train", 1, {20001, 20002}), kT0 + 1);
  controller_->OnNodeLost(nodes[1], kT0 + 2);
  const auto& st = JobOrDie("train");
  EXPECT_EQ(PhaseName(st), "Restarting");
  EXPECT_EQ(st.attempts(0).cause(), "node " + nodes[1] + " lost");
  for (const auto& r : st.ranks()) {
    EXPECT_EQ(StateName(r), r.node() == nodes[1] ? "Lost" : "Stopped") << r.rank();
  }
  // Its answer, should it still come, launches nothing.
  controller_->OnPortsReserved(nodes[1], Answer("train", 1, {20003}), kT0 + 3);
  EXPECT_TRUE(sink_.Plans().empty());
}

TEST_F(JobPortsTest, DeletingWhileReservingFinishesTheDelete) {
  const auto nodes = PlaceTwoNodes();
  auto del = controller_->Delete("train", kT0 + 1);
  ASSERT_TRUE(del.ok()) << del.status().ToString();
  EXPECT_EQ(controller_->Find("train"), nullptr) << "no rank exists, so nothing to wait for";
  EXPECT_EQ(sink_.StopNodes(), (std::vector<std::string>{nodes[0], nodes[1]}));
}

TEST_F(JobPortsTest, StartTimeoutNamesTheNodesWhosePortsNeverCame) {
  const auto nodes = PlaceTwoNodes();
  controller_->OnPortsReserved(nodes[0], Answer("train", 1, {20001, 20002}), kT0 + 1);
  EXPECT_EQ(controller_->NextWakeMs(), kT0 + kTimeout);
  controller_->Schedule(kT0 + kTimeout - 1);
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Starting");
  controller_->Schedule(kT0 + kTimeout);
  const auto& st = JobOrDie("train");
  EXPECT_EQ(PhaseName(st), "Restarting");
  EXPECT_EQ(st.attempts(0).cause(),
            "StartTimeout: ranks not started 5000 ms after the attempt was placed, on " + nodes[1] +
                " (its ports never arrived)")
      << "only the silent node is named";
  EXPECT_THAT(st.attempts(0).cause(), Not(HasSubstr(nodes[0])));
  EXPECT_TRUE(sink_.Plans().empty());
  // Restarted after the backoff, as any failed attempt.
  controller_->Schedule(kT0 + kTimeout + 200);
  EXPECT_EQ(JobOrDie("train").attempt(), 2u);
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Starting");
}

TEST_F(JobPortsTest, StartTimeoutAlsoCoversPlansThatNeverReported) {
  plugin_.first = 0;
  plugin_.others = 0;
  const auto nodes = PlaceTwoNodes();
  // Node 0's ranks start; node 1 never says anything (its plan was lost).
  for (uint32_t rank : {0u, 1u}) Report("train", rank, v1::WorkerEvent::KIND_STARTED, kT0 + 5);
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Starting");
  EXPECT_EQ(controller_->NextWakeMs(), kT0 + kTimeout);
  controller_->Schedule(kT0 + kTimeout);
  const auto& st = JobOrDie("train");
  EXPECT_EQ(PhaseName(st), "Restarting");
  EXPECT_EQ(st.attempts(0).cause(),
            "StartTimeout: ranks not started 5000 ms after the attempt was placed, on " + nodes[1] +
                " (no rank reported started)");
  EXPECT_EQ(StateName(*Rank(st, 2)), "Lost");
  EXPECT_EQ(StateName(*Rank(st, 0)), "Running") << "stopped by StopWorkers, it reports its exit";
  EXPECT_EQ(sink_.StopNodes(), (std::vector<std::string>{nodes[0], nodes[1]}));
  // Once node 0's ranks have exited, the gang is placed again.
  for (uint32_t rank : {0u, 1u}) {
    Report("train", rank, v1::WorkerEvent::KIND_EXITED, kT0 + kTimeout + 10, 0, 15);
  }
  controller_->Schedule(kT0 + kTimeout + 200);
  EXPECT_EQ(JobOrDie("train").attempt(), 2u);
}

TEST_F(JobPortsTest, NoStartTimeoutOnceRunning) {
  plugin_.first = 0;
  plugin_.others = 0;
  PlaceTwoNodes();
  ReportAll("train", v1::WorkerEvent::KIND_STARTED, kT0 + 5);
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Running");
  EXPECT_EQ(controller_->NextWakeMs(), INT64_MAX);
  controller_->Schedule(kT0 + 10 * kTimeout);
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Running");
}

TEST_F(JobPortsTest, ManyConcurrentJobsEachWaitForTheirOwnPorts) {
  AddNode("n4");
  AddNode("n5");
  plugin_.first = 1;
  plugin_.others = 1;
  for (int j = 0; j < 5; ++j) ApplyOk(JobYaml("job-" + std::to_string(j), 1, 1, "rt"));
  auto reserves = Reserves();
  ASSERT_EQ(reserves.size(), 5u);
  // Answer in reverse order: each job launches when its own node answers, with its own port.
  for (int j = 4; j >= 0; --j) {
    const auto& [node, ask] = reserves[static_cast<size_t>(j)];
    controller_->OnPortsReserved(node, Answer(ask.job(), 1, {20000u + static_cast<uint32_t>(j)}),
                                 kT0 + 1);
  }
  const auto plans = sink_.Plans();
  ASSERT_EQ(plans.size(), 5u);
  for (const auto& [node, plan] : plans) {
    const int j = std::stoi(plan.job().substr(4));
    EXPECT_EQ(plan.workers(0).env().at("MASTER_PORT"), std::to_string(20000 + j));
  }
}

}  // namespace
}  // namespace trainlet::coordinator::testing

namespace trainlet::coordinator::testing {
namespace {

// Issue 18: a restart of a job that names its checkpoint, with per-node work dirs, asks every
// node what its work dir holds (a node that needs no ports too); when they differ the job fails
// at once, with no restart, and no plan goes out. pytorch/examples' DDP tutorial resumed at epoch
// 10 on one node and at epoch 0 on the other, and hung until its deadline.
TEST_F(JobPortsTest, ARestartWhoseNodesHoldDifferentCheckpointsFailsTheJobBeforeAnyPlan) {
  plugin_.first = 1;  // like torch: MASTER_PORT on node rank 0 only
  plugin_.others = 0;
  std::string yaml = JobYaml("train", 2, 1, "rt");
  yaml.insert(yaml.find("spec:\n"), "  annotations: {trainlet.io/checkpoint-path: snapshot.pt}\n");
  ApplyOk(yaml);
  const v1::JobStatus first = JobOrDie("train");
  const std::vector<std::string> nodes(first.placement().begin(), first.placement().end());
  ASSERT_EQ(nodes.size(), 2u);
  // Attempt 1 has nothing to resume: only node rank 0 is asked, for its port.
  ASSERT_EQ(Reserves().size(), 1u);
  EXPECT_EQ(Reserves()[0].second.checkpoint_path(), "");
  controller_->OnPortsReserved(nodes[0], Answer("train", 1, {20001}), kT0 + 1);
  ReportAll("train", v1::WorkerEvent::KIND_STARTED, kT0 + 2);
  Report("train", 1, v1::WorkerEvent::KIND_EXITED, kT0 + 3, 0, /*signal=*/9);
  Report("train", 0, v1::WorkerEvent::KIND_EXITED, kT0 + 4, 0, /*signal=*/15);
  ASSERT_EQ(PhaseName(JobOrDie("train")), "Restarting");

  sink_.sent.clear();
  controller_->Schedule(kT0 + 1000);
  const v1::JobStatus& st = JobOrDie("train");
  ASSERT_EQ(st.attempt(), 2u);
  const auto reserves = Reserves();
  ASSERT_EQ(reserves.size(), 2u) << "every node reports its work dir";
  std::vector<std::string> placed(st.placement().begin(), st.placement().end());
  for (const auto& [node, ask] : reserves) EXPECT_EQ(ask.checkpoint_path(), "snapshot.pt") << node;

  v1::PortsReserved holds = Answer("train", 2, {20002});
  holds.mutable_work_dir()->set_last_attempt(1);
  holds.mutable_work_dir()->set_checkpoint_exists(true);
  holds.mutable_work_dir()->set_checkpoint_bytes(4096);
  holds.mutable_work_dir()->set_checkpoint_sha256("0123456789abcdef");
  v1::PortsReserved lacks = Answer("train", 2, {});
  lacks.mutable_work_dir()->set_last_attempt(1);
  controller_->OnPortsReserved(placed[0], holds, kT0 + 1001);
  controller_->OnPortsReserved(placed[1], lacks, kT0 + 1002);

  EXPECT_EQ(PhaseName(st), "Failed");
  EXPECT_THAT(st.reason(), HasSubstr("DivergentWorkDirs"));
  EXPECT_THAT(
      st.attempts(1).cause(),
      HasSubstr("snapshot.pt is 4096 bytes (sha256 01234567), in a work dir last run by "
                "attempt 1 on " +
                placed[0] + "; missing, in a work dir last run by attempt 1 on " + placed[1]));
  EXPECT_THAT(st.attempts(1).cause(), HasSubstr("trainlet.io/working-dir: shared"));
  EXPECT_TRUE(sink_.Plans().empty()) << "no rank of the restart starts";
  controller_->Schedule(kT0 + 5000);
  EXPECT_EQ(JobOrDie("train").attempt(), 2u) << "and none is tried again";
}

// The same reports, agreeing: the plans go out as usual.
TEST_F(JobPortsTest, ARestartWhoseNodesAgreeLaunches) {
  plugin_.first = 0;  // no ports at all: the nodes are still asked, for the report alone
  plugin_.others = 0;
  std::string yaml = JobYaml("train", 2, 1, "rt");
  yaml.insert(yaml.find("spec:\n"), "  annotations: {trainlet.io/checkpoint-path: snapshot.pt}\n");
  ApplyOk(yaml);
  EXPECT_TRUE(Reserves().empty());
  ReportAll("train", v1::WorkerEvent::KIND_STARTED, kT0 + 2);
  ReportAll("train", v1::WorkerEvent::KIND_EXITED, kT0 + 3, 1);
  ASSERT_EQ(PhaseName(JobOrDie("train")), "Restarting");
  sink_.sent.clear();
  controller_->Schedule(kT0 + 1000);
  const v1::JobStatus& st = JobOrDie("train");
  ASSERT_EQ(st.attempt(), 2u);
  EXPECT_TRUE(sink_.Plans().empty()) << "the reports come first";
  for (const auto& node : st.placement()) {
    controller_->OnPortsReserved(node, Answer("train", 2, {}), kT0 + 1001);  // both: no file
  }
  EXPECT_EQ(sink_.Plans().size(), 2u);
  EXPECT_EQ(PhaseName(st), "Starting");
}

// Issue 18: a coordinator restarted while it held a runtime-with-ports job's main ranks for every
// node's initializer (step_release.h) asks every node for the ports it holds for the attempt, then
// holds the main ranks again, sending nothing; they go out, with those ports, once every
// initializer completed. On main nothing held them after the restart.
TEST_F(JobPortsTest, HeldRanksMadeAgainAfterARestartAskForThePortsFirstAndGoOutOnce) {
  std::string runtime = RuntimeYaml("rt-steps", "", /*max_restarts=*/0);
  runtime.replace(runtime.find("        - name: node\n"), 0,
                  "        - name: dataset-initializer\n"
                  "          template: {spec: {template: {spec: {containers: "
                  "[{name: dataset-initializer, command: [/bin/true]}]}}}}\n");
  runtime.replace(runtime.find("        - name: node\n") + 21, 0,
                  "          dependsOn: [{name: dataset-initializer, status: Complete}]\n");
  ApplyOk(runtime);
  ApplyOk(JobYaml("train", 2, 1, "rt-steps"));
  const std::vector<std::string> nodes{JobOrDie("train").placement().begin(),
                                       JobOrDie("train").placement().end()};
  ASSERT_EQ(nodes.size(), 2u);
  controller_->OnPortsReserved(nodes[0], Answer("train", 1, {20001, 20002}), kT0 + 10);
  controller_->OnPortsReserved(nodes[1], Answer("train", 1, {20007}), kT0 + 10);
  ASSERT_EQ(sink_.Plans().size(), 2u);  // the initializers only
  std::vector<uint32_t> inits;
  for (const auto& r : JobOrDie("train").ranks()) {
    if (!r.step().empty()) inits.push_back(r.rank());
  }
  ASSERT_EQ(inits.size(), 2u);
  for (uint32_t r : inits) Report("train", r, v1::WorkerEvent::KIND_STARTED, kT0 + 20);

  ASSERT_TRUE(controller_->Flush().ok());
  MakeController();
  sink_.sent.clear();
  for (const char* n : {"n1", "n2", "n3"}) {
    ASSERT_NE(registry_.Heartbeat(std::string("key-") + n, std::string("rid-") + n,
                                  NodeRegistry::Clock::now(), kT0 + 3100),
              nullptr);
  }
  controller_->Schedule(kT0 + 3100);
  ASSERT_EQ(Reserves().size(), 2u) << "the held ranks were not made again";
  controller_->OnPortsReserved(nodes[0], Answer("train", 1, {20001, 20002}), kT0 + 3110);
  controller_->OnPortsReserved(nodes[1], Answer("train", 1, {20007}), kT0 + 3110);
  EXPECT_TRUE(sink_.Plans().empty()) << "nothing goes out while the initializers run";
  for (uint32_t r : inits) Report("train", r, v1::WorkerEvent::KIND_EXITED, kT0 + 3200, 0);
  const auto plans = sink_.Plans();
  ASSERT_EQ(plans.size(), 2u);
  for (const auto& [node, plan] : plans) {
    ASSERT_EQ(plan.workers_size(), 1) << node;
    EXPECT_EQ(plan.workers(0).step(), "");
    EXPECT_EQ(plan.workers(0).env().at("MASTER_PORT"), "20001");
  }
  controller_->Schedule(kT0 + 3300);
  EXPECT_EQ(sink_.Plans().size(), 2u);
  EXPECT_EQ(Reserves().size(), 2u);
  EXPECT_EQ(JobOrDie("train").attempt(), 1u);
}

}  // namespace
}  // namespace trainlet::coordinator::testing
