// PortReservationWaits: who is asked for ports, when an attempt has all of them, and what
// happens to answers nobody waits for.
#include "coordinator/port_reservation_waits.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "recording_sink.h"

namespace trainlet::coordinator {
namespace {

using testing::EnvelopeRecorder;
using Outcome = PortReservationWaits::Outcome;

PlanRequest Request(uint32_t attempt, const std::vector<std::string>& nodes) {
  PlanRequest req;
  req.job = "job";
  req.attempt = attempt;
  for (const auto& n : nodes) req.nodes.emplace_back().name = n;
  return req;
}

// A layout whose node rank i reserves ports[i] ports (its ranks do not matter here).
AttemptLayout Wanting(const std::vector<uint32_t>& ports) {
  AttemptLayout layout;
  for (uint32_t n : ports) layout.nodes.emplace_back().ports = n;
  return layout;
}

v1::PortsReserved Answer(uint32_t attempt, std::vector<uint32_t> ports, std::string error = "") {
  v1::PortsReserved r;
  r.set_job("job");
  r.set_attempt(attempt);
  for (uint32_t p : ports) r.add_ports(p);
  r.set_error(error);
  return r;
}

class PortReservationWaitsTest : public ::testing::Test {
 protected:
  // Reserve-port asks sent, as (node, count).
  std::vector<std::pair<std::string, uint32_t>> Asks() const {
    std::vector<std::pair<std::string, uint32_t>> out;
    for (const auto& [node, env] : sink_.sent) {
      if (env.has_reserve_ports()) out.emplace_back(node, env.reserve_ports().count());
    }
    return out;
  }
  size_t Stops() const {
    size_t n = 0;
    for (const auto& [node, env] : sink_.sent) n += env.has_stop_workers();
    return n;
  }

  EnvelopeRecorder sink_;
  AgentCommands agents_{&sink_};
  std::set<std::pair<std::string, uint32_t>> active_{{"job", 1}};
  PortReservationWaits waits_{&agents_, [this](const std::string& job, uint32_t attempt) {
                                return active_.count({job, attempt}) != 0;
                              }};
};

TEST_F(PortReservationWaitsTest, NoPortsWantedMeansNoWait) {
  EXPECT_FALSE(waits_.Begin("job", Request(1, {"n1", "n2"}), Wanting({0, 0})));
  EXPECT_TRUE(sink_.sent.empty());
  EXPECT_EQ(waits_.Request("job", 1), nullptr);
  EXPECT_EQ(waits_.Layout("job", 1), nullptr);
}

TEST_F(PortReservationWaitsTest, AsksOnlyNodesThatWantPortsAndCompletesWhenAllAnswer) {
  ASSERT_TRUE(waits_.Begin("job", Request(1, {"n1", "n2", "n3"}), Wanting({2, 0, 1})));
  EXPECT_EQ(Asks(), (std::vector<std::pair<std::string, uint32_t>>{{"n1", 2}, {"n3", 1}}));
  EXPECT_EQ(waits_.Unanswered("job", 1), (std::vector<std::string>{"n1", "n3"}));

  std::string why;
  EXPECT_EQ(waits_.Record("n3", Answer(1, {7000}), &why), Outcome::kWaiting);
  EXPECT_EQ(waits_.Unanswered("job", 1), std::vector<std::string>{"n1"});
  EXPECT_EQ(waits_.Record("n1", Answer(1, {6000, 6001}), &why), Outcome::kComplete);

  const PlanRequest* req = waits_.Request("job", 1);
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(req->nodes[0].ports, (std::vector<uint32_t>{6000, 6001}));
  EXPECT_TRUE(req->nodes[1].ports.empty());
  EXPECT_EQ(req->nodes[2].ports, std::vector<uint32_t>{7000});
  // The layout is kept as given, for the render once every port is held.
  const AttemptLayout* layout = waits_.Layout("job", 1);
  ASSERT_NE(layout, nullptr);
  ASSERT_EQ(layout->nodes.size(), 3u);
  EXPECT_EQ(layout->nodes[0].ports, 2u);
  EXPECT_EQ(layout->nodes[2].ports, 1u);
  EXPECT_TRUE(waits_.End("job", 1));
  EXPECT_EQ(waits_.Request("job", 1), nullptr);
  EXPECT_EQ(waits_.Layout("job", 1), nullptr);
  EXPECT_FALSE(waits_.End("job", 1));
}

TEST_F(PortReservationWaitsTest, AnErrorOrAWrongCountIsRefusedNamingTheNode) {
  ASSERT_TRUE(waits_.Begin("job", Request(1, {"n1", "n2"}), Wanting({1, 2})));
  std::string why;
  EXPECT_EQ(waits_.Record("n1", Answer(1, {}, "no free port"), &why), Outcome::kRefused);
  EXPECT_EQ(why, "n1: no free port");
  EXPECT_EQ(waits_.Record("n2", Answer(1, {5}), &why), Outcome::kRefused);
  EXPECT_EQ(why, "n2: reserved 1 ports, 2 were asked for");
}

TEST_F(PortReservationWaitsTest, DuplicateAnswerIsDroppedWithoutStoppingAnything) {
  ASSERT_TRUE(waits_.Begin("job", Request(1, {"n1", "n2"}), Wanting({1, 1})));
  std::string why;
  EXPECT_EQ(waits_.Record("n1", Answer(1, {9}), &why), Outcome::kWaiting);
  EXPECT_EQ(waits_.Record("n1", Answer(1, {9}), &why), Outcome::kDropped);
  EXPECT_EQ(Stops(), 0u);  // the attempt is active: its ranks must not be stopped
}

TEST_F(PortReservationWaitsTest, StaleAnswerGivesItsPortsBack) {
  std::string why;
  EXPECT_EQ(waits_.Record("n1", Answer(7, {9}), &why), Outcome::kDropped);
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_EQ(sink_.sent[0].first, "n1");
  ASSERT_TRUE(sink_.sent[0].second.has_stop_workers());
  EXPECT_EQ(sink_.sent[0].second.stop_workers().attempt(), 7u);
  EXPECT_EQ(sink_.sent[0].second.stop_workers().reason(), "stale port reservation");
  // A stale answer that holds no ports has nothing to give back.
  EXPECT_EQ(waits_.Record("n1", Answer(7, {}), &why), Outcome::kDropped);
  EXPECT_EQ(sink_.sent.size(), 1u);
}

TEST_F(PortReservationWaitsTest, AnswerForAnAttemptNoLongerActiveIsDropped) {
  ASSERT_TRUE(waits_.Begin("job", Request(1, {"n1"}), Wanting({1})));
  active_.clear();
  std::string why;
  EXPECT_EQ(waits_.Record("n1", Answer(1, {9}), &why), Outcome::kDropped);
  EXPECT_EQ(Stops(), 1u);
}

TEST_F(PortReservationWaitsTest, ResendAsksOnlyUnansweredNodesOfActiveAttempts) {
  ASSERT_TRUE(waits_.Begin("job", Request(1, {"n1", "n2"}), Wanting({1, 3}), "", "uid-7"));
  EXPECT_EQ(sink_.sent.at(0).second.reserve_ports().job_uid(), "uid-7");  // the incarnation
  std::string why;
  ASSERT_EQ(waits_.Record("n1", Answer(1, {9}), &why), Outcome::kWaiting);
  sink_.sent.clear();
  waits_.Resend("n1");  // answered already
  EXPECT_TRUE(sink_.sent.empty());
  waits_.Resend("n2");
  EXPECT_EQ(Asks(), (std::vector<std::pair<std::string, uint32_t>>{{"n2", 3}}));
  EXPECT_EQ(sink_.sent.at(0).second.reserve_ports().job_uid(), "uid-7");
  sink_.sent.clear();
  active_.clear();
  waits_.Resend("n2");
  EXPECT_TRUE(sink_.sent.empty());
}

TEST_F(PortReservationWaitsTest, ANewAttemptReplacesTheOldWait) {
  ASSERT_TRUE(waits_.Begin("job", Request(1, {"n1"}), Wanting({1})));
  active_.insert({"job", 2});
  ASSERT_TRUE(waits_.Begin("job", Request(2, {"n2"}), Wanting({1})));
  EXPECT_EQ(waits_.Request("job", 1), nullptr);
  EXPECT_FALSE(waits_.End("job", 1));
  EXPECT_EQ(waits_.Unanswered("job", 2), std::vector<std::string>{"n2"});
  waits_.Forget("job");
  EXPECT_EQ(waits_.Request("job", 2), nullptr);
}

}  // namespace
}  // namespace trainlet::coordinator
