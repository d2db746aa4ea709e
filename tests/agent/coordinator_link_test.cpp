// CoordinatorLink against a real CURVE ROUTER on 127.0.0.1 standing in for the coordinator: the
// registration handshake, heartbeats on the link's (fake) clock, worker events held until acked,
// the outbox, and partition detection driven by the fake clock.
#include "agent/coordinator_link.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/curve_keys.h"
#include "common/envelope.h"
#include "common/zap_authenticator.h"
#include "common/zmq_sockets.h"
#include "tests/common/captured_log.h"
#include "tests/common/test_keys.h"

namespace trainlet::agent {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

using ::trainlet::testing::NewKeys;

v1::Envelope WorkerExited(uint32_t rank) {
  v1::Envelope env;
  auto* ev = env.mutable_worker_event();
  ev->set_job("train");
  ev->set_attempt(1);
  ev->set_rank(rank);
  ev->set_kind(v1::WorkerEvent::KIND_EXITED);
  return env;
}

class CoordinatorLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = NewKeys();
    const CurveKeyPair& server = server_;
    agent_keys_ = NewKeys();
    auto zap = ZapAuthenticator::Create(ctx_);
    ASSERT_TRUE(zap.ok()) << zap.status().ToString();
    zap_ = std::move(zap).value();
    zap_->SetAllowlist("agent", {{agent_keys_.public_z85, "node-1"}});
    auto router = BindCurveRouter(ctx_, "tcp://127.0.0.1:0", server, "agent", &endpoint_);
    ASSERT_TRUE(router.ok()) << router.status().ToString();
    router_.emplace(std::move(router).value());

    BindMore();
    Relink(LinkEndpoints());
  }
  // More coordinators, and the endpoints the link is given (HA tests): one link per context
  // (its handshake monitor's name), so it is made once, after them.
  virtual void BindMore() {}
  virtual std::string LinkEndpoints() { return endpoint_; }

  // The link to `endpoints` (comma-separated), with the fixture's options and hooks.
  void Relink(const std::string& endpoints) {
    CoordinatorLink::Options options;
    options.endpoint = endpoints;
    options.coordinator_public = server_.public_z85;
    options.keys = agent_keys_;
    options.heartbeat_interval = milliseconds(1000);
    options.register_retry = milliseconds(2000);
    options.now = [this] { return now_; };
    options.register_backoff.initial = milliseconds(250);
    options.register_backoff.max = milliseconds(30000);
    options.register_backoff.jitter = 0.2;
    options.register_backoff.seed = 19;  // the same delays every run
    CoordinatorLink::Hooks hooks;
    hooks.registration = [this] {
      ++registrations_built_;
      v1::Envelope env;
      env.mutable_register_()->set_name("node-1");
      env.mutable_register_()->set_cluster_id(cluster_id_);
      return env;
    };
    hooks.cluster_bound = [this](const std::string& id) { cluster_id_ = id; };
    hooks.heartbeat = [] {
      v1::Heartbeat hb;
      hb.set_node("node-1");
      return hb;
    };
    hooks.heartbeat_sent = [this] { ++heartbeats_sent_; };
    hooks.message = [this](const v1::Envelope& env) { messages_.push_back(env); };
    auto link = CoordinatorLink::Connect(ctx_, std::move(options), std::move(hooks), &drops_);
    ASSERT_TRUE(link.ok()) << link.status().ToString();
    link_ = std::move(link).value();
  }

  // Plays both event loops for up to `budget`: the coordinator's (ZAP, ROUTER) and the agent's
  // (handshake events, and reading the link when `read_link`). Returns the first message the
  // ROUTER accepts that matches `body`.
  std::optional<RouterMessage> AtCoordinator(v1::Envelope::BodyCase body,
                                             milliseconds budget = milliseconds(5000),
                                             bool read_link = true) {
    const auto deadline = Clock::now() + budget;
    while (Clock::now() < deadline) {
      zmq::socket_t& router = at_ != nullptr ? *at_ : *router_;
      zmq::pollitem_t items[] = {{zap_->socket().handle(), 0, ZMQ_POLLIN, 0},
                                 {router.handle(), 0, ZMQ_POLLIN, 0},
                                 {link_->monitor_handle(), 0, ZMQ_POLLIN, 0},
                                 {link_->socket_handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, read_link ? 4 : 3, milliseconds(10));
      if (items[0].revents & ZMQ_POLLIN) zap_->HandleRequest();
      if (items[2].revents & ZMQ_POLLIN) link_->OnHandshakeEvents();
      if (read_link && (items[3].revents & ZMQ_POLLIN)) link_->Read(64);
      if (items[1].revents & ZMQ_POLLIN) {
        auto msg = ReceiveFromRouter(router, drops_);
        if (!msg) continue;
        routing_id_ = msg->routing_id;
        if (msg->envelope.body_case() == body) return msg;
      }
    }
    return std::nullopt;
  }

  void ToAgent(v1::Envelope env) {
    ASSERT_TRUE(SendToRouterPeer(at_ != nullptr ? *at_ : *router_, routing_id_, env));
  }

  // Waits until a message the coordinator sent is readable on the link, without reading it.
  bool WaitForLink(milliseconds budget = milliseconds(5000)) {
    zmq::pollitem_t item = {link_->socket_handle(), 0, ZMQ_POLLIN, 0};
    return zmq::poll(&item, 1, budget) == 1;
  }

  // Answers a registration: `grace_ms` is the coordinator's partition grace.
  void Accept(uint32_t grace_ms) {
    v1::Envelope ack;
    ack.mutable_register_ack()->set_accepted(true);
    ack.mutable_register_ack()->set_partition_grace_ms(grace_ms);
    ToAgent(std::move(ack));
    ASSERT_TRUE(WaitForLink());
    link_->Read(64);
  }

  // Start-up as the agent does it: register once the handshake completes, then the ack.
  void Register(uint32_t grace_ms = 3000) {
    link_->Start();
    ASSERT_TRUE(AtCoordinator(v1::Envelope::kRegister)) << "no registration arrived";
    Accept(grace_ms);
    ASSERT_TRUE(link_->registered());
  }

  // Refuses the registration that just arrived, as a coordinator does for a name that is taken.
  void Refuse() {
    v1::Envelope nack;
    nack.mutable_register_ack()->set_accepted(false);
    nack.mutable_register_ack()->set_reason("node node-1 is registered with another key");
    ToAgent(std::move(nack));
    ASSERT_TRUE(WaitForLink());
    link_->Read(64);
  }

  // Plays `window` of fake time in 10 ms steps, refusing every registration the link sends (and
  // stopping after 200 of them: today's loop would never end). Returns the fake times at which
  // registrations arrived.
  std::vector<Clock::time_point> RefuseEveryRegistration(milliseconds window) {
    std::vector<Clock::time_point> at;
    const auto end = now_ + window;
    for (; now_ <= end && at.size() < 200; now_ += milliseconds(10)) {
      link_->Tick(now_);
      while (sent_ < registrations_built_ && at.size() < 200) {
        ++sent_;
        if (!AtCoordinator(v1::Envelope::kRegister)) {
          ADD_FAILURE() << "a registration was built but never arrived";
          return at;
        }
        at.push_back(now_);
        Refuse();
      }
    }
    return at;
  }

  void HeartbeatAck(uint64_t acked_event_seq) {
    v1::Envelope ack;
    ack.mutable_heartbeat_ack()->set_acked_event_seq(acked_event_seq);
    ToAgent(std::move(ack));
  }

  zmq::context_t ctx_;
  std::unique_ptr<ZapAuthenticator> zap_;
  std::optional<zmq::socket_t> router_;
  std::string endpoint_;
  zmq::socket_t* at_ = nullptr;  // the coordinator AtCoordinator and ToAgent play; null: router_
  std::string routing_id_;
  CurveKeyPair server_;
  CurveKeyPair agent_keys_;
  DropCounters drops_;
  Clock::time_point now_ = Clock::time_point{} + std::chrono::hours(1);
  int registrations_built_ = 0;
  int sent_ = 0;  // registrations RefuseEveryRegistration has seen arrive
  int heartbeats_sent_ = 0;
  std::string cluster_id_;  // what the agent keeps in its state dir (cluster_bound)
  std::vector<v1::Envelope> messages_;
  std::unique_ptr<CoordinatorLink> link_;
};

TEST_F(CoordinatorLinkTest, RegistersWhenTheHandshakeCompletesAndTakesTheGrace) {
  link_->Start();
  auto reg = AtCoordinator(v1::Envelope::kRegister);
  ASSERT_TRUE(reg);
  EXPECT_EQ(reg->user_id, agent_keys_.public_z85);
  EXPECT_EQ(reg->envelope.register_().name(), "node-1");
  EXPECT_EQ(reg->envelope.register_().events_acked_through(), 0u);
  EXPECT_FALSE(link_->registered());
  EXPECT_EQ(link_->partition_grace(), milliseconds(10000));  // until the coordinator says

  Accept(4000);
  EXPECT_TRUE(link_->registered());
  EXPECT_EQ(link_->partition_grace(), milliseconds(4000));
  ASSERT_EQ(messages_.size(), 1u);  // the owner sees the ack too
  EXPECT_TRUE(messages_[0].has_register_ack());
}

// Issue 19, defect 3: the agent keeps the cluster id of the first coordinator that accepts it,
// and refuses a coordinator of another id (its store lost and made anew): nothing it sends is
// obeyed, and the link backs off before registering again.
TEST_F(CoordinatorLinkTest, TheFirstClusterIdIsKeptAndAnotherIsRefused) {
  link_->Start();
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kRegister));
  v1::Envelope ack;
  ack.mutable_register_ack()->set_accepted(true);
  ack.mutable_register_ack()->set_cluster_id("first");
  ToAgent(ack);
  ASSERT_TRUE(WaitForLink());
  link_->Read(64);
  ASSERT_TRUE(link_->registered());
  EXPECT_EQ(cluster_id_, "first");

  // The coordinator comes back with a new store: it asks the node to register again, and
  // accepts it under another id, then tells it to stop a rank.
  v1::Envelope again;
  again.mutable_register_ack()->set_accepted(false);
  again.mutable_register_ack()->set_reason("unknown node: register again");
  ToAgent(again);
  ASSERT_TRUE(WaitForLink());
  link_->Read(64);
  auto reg = AtCoordinator(v1::Envelope::kRegister);
  ASSERT_TRUE(reg);
  EXPECT_EQ(reg->envelope.register_().cluster_id(), "first");
  messages_.clear();
  const ::trainlet::testing::CapturedLog log;
  ack.mutable_register_ack()->set_cluster_id("second");
  ToAgent(ack);
  v1::Envelope stop;
  stop.mutable_stop_workers()->set_job("train");
  stop.mutable_stop_workers()->set_attempt(1);
  ToAgent(stop);
  ASSERT_TRUE(WaitForLink());
  link_->Read(64);
  WaitForLink(milliseconds(300));  // the stop, unless the first read took it too
  link_->Read(64);
  EXPECT_FALSE(link_->registered());
  EXPECT_TRUE(messages_.empty()) << "a message of the other cluster reached the agent";
  EXPECT_EQ(cluster_id_, "first");
  EXPECT_EQ(log.Count("belongs to cluster first"), 1) << log.str();
  // Backed off: no registration goes at once.
  const int built = registrations_built_;
  link_->Tick(now_);
  EXPECT_EQ(registrations_built_, built);
}

TEST_F(CoordinatorLinkTest, ARefusedRegistrationIsSentAgainAtOnce) {
  Register();
  const int built = registrations_built_;
  v1::Envelope nack;
  nack.mutable_register_ack()->set_accepted(false);
  nack.mutable_register_ack()->set_reason("unknown node");
  ToAgent(std::move(nack));
  ASSERT_TRUE(WaitForLink());
  link_->Read(64);
  EXPECT_FALSE(link_->registered());
  EXPECT_EQ(registrations_built_, built + 1);
  EXPECT_TRUE(AtCoordinator(v1::Envelope::kRegister));
}

// Two hosts with one hostname, or a rotated key before the old registration is Lost: the
// coordinator refuses every registration. The agent must back off, not retry in a loop.
TEST_F(CoordinatorLinkTest, RefusedRegistrationsBackOffExponentially) {
  const ::trainlet::testing::CapturedLog log;
  link_->Start();
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kRegister));
  sent_ = registrations_built_;
  Refuse();
  const auto first = now_;
  auto at = RefuseEveryRegistration(std::chrono::seconds(60));
  at.insert(at.begin(), first);
  // 250 ms doubling to a 30 s cap, +-20%: about 8 in a minute, where a loop sends thousands.
  EXPECT_GE(at.size(), 6u);
  ASSERT_LE(at.size(), 10u);
  milliseconds expected(250);
  for (size_t i = 1; i < at.size(); ++i) {
    const auto gap = std::chrono::duration_cast<milliseconds>(at[i] - at[i - 1]);
    EXPECT_GE(gap, expected * 8 / 10) << "registration " << i;
    EXPECT_LE(gap, expected * 12 / 10 + milliseconds(10)) << "registration " << i;
    expected = std::min(expected * 2, milliseconds(30000));
  }
  EXPECT_FALSE(link_->registered());
  // The warning: the first refusal, then one line per 10 s with the count held back.
  const std::vector<std::string> lines = log.Lines("refused this agent's registration");
  EXPECT_GE(lines.size(), 2u) << log.str();
  EXPECT_LE(lines.size(), 4u) << log.str();
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].find("registering again in"), std::string::npos) << lines[0];
  EXPECT_NE(log.str().find("more in the last"), std::string::npos) << log.str();
}

TEST_F(CoordinatorLinkTest, AnAcceptedRegistrationResetsTheBackoff) {
  link_->Start();
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kRegister));
  sent_ = registrations_built_;
  Refuse();
  auto at = RefuseEveryRegistration(std::chrono::seconds(20));  // backoff now ~16 s
  ASSERT_GE(at.size(), 5u);
  // The next registration is accepted.
  for (int i = 0; i < 4000 && registrations_built_ == sent_; ++i) {
    now_ += milliseconds(10);
    link_->Tick(now_);
  }
  ASSERT_GT(registrations_built_, sent_);
  sent_ = registrations_built_;
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kRegister));
  Accept(3000);
  ASSERT_TRUE(link_->registered());

  // The coordinator forgets the node (it restarted): the agent registers again at once, and a
  // refusal of that waits the first step again, not the ~30 s the last run reached.
  Refuse();
  EXPECT_FALSE(link_->registered());
  ASSERT_EQ(registrations_built_, sent_ + 1);
  sent_ = registrations_built_;
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kRegister));
  Refuse();
  const auto refused = now_;
  auto again = RefuseEveryRegistration(milliseconds(400));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_LE(again[0] - refused, milliseconds(310));
}

TEST_F(CoordinatorLinkTest, AHandshakeDoesNotCutTheBackoffShort) {
  link_->Start();
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kRegister));
  sent_ = registrations_built_;
  Refuse();
  const int built = registrations_built_;
  // The coordinator restarts on the same port: the agent reconnects and its handshake succeeds
  // while the backoff (fake time stands still) has not run out.
  router_->set(zmq::sockopt::linger, 0);
  router_.reset();
  std::string rebound;
  auto router = BindCurveRouter(ctx_, endpoint_, server_, "agent", &rebound);
  // libzmq closes the old listener in its I/O thread: the port frees a moment later.
  for (int i = 0; i < 100 && !router.ok(); ++i) {
    std::this_thread::sleep_for(milliseconds(20));
    router = BindCurveRouter(ctx_, endpoint_, server_, "agent", &rebound);
  }
  ASSERT_TRUE(router.ok()) << router.status().ToString();
  router_.emplace(std::move(router).value());
  EXPECT_FALSE(AtCoordinator(v1::Envelope::kRegister, milliseconds(1500)));
  EXPECT_EQ(registrations_built_, built);
  // Once the backoff ran out the registration goes, over the new connection.
  now_ += milliseconds(400);
  link_->Tick(now_);
  EXPECT_EQ(registrations_built_, built + 1);
  EXPECT_TRUE(AtCoordinator(v1::Envelope::kRegister));
}

TEST_F(CoordinatorLinkTest, ARefusedHeartbeatDuringTheBackoffNeitherCountsNorRestartsIt) {
  link_->Start();
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kRegister));
  sent_ = registrations_built_;
  Refuse();  // backoff: 250 ms +-20%
  const int built = registrations_built_;
  now_ += milliseconds(100);
  Refuse();  // the coordinator's answer to a heartbeat from a node it does not know
  EXPECT_EQ(registrations_built_, built);
  now_ += milliseconds(200);  // 300 ms after the refusal: past the first step, short of a second
  link_->Tick(now_);
  EXPECT_EQ(registrations_built_, built + 1);
}

TEST_F(CoordinatorLinkTest, AnUnansweredRegistrationGoesAgainAfterTheRetryDelay) {
  link_->Start();
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kRegister));
  const int built = registrations_built_;
  EXPECT_EQ(link_->NextWake(now_, false), now_);  // the first heartbeat is due at once
  link_->Tick(now_);
  now_ += milliseconds(1999);
  link_->Tick(now_);
  EXPECT_EQ(registrations_built_, built);
  now_ += milliseconds(1);
  link_->Tick(now_);
  EXPECT_EQ(registrations_built_, built + 1);
}

TEST_F(CoordinatorLinkTest, HeartbeatsAreNumberedAndFollowTheClock) {
  Register();
  link_->Tick(now_);  // Start made the first beat due
  auto first = AtCoordinator(v1::Envelope::kHeartbeat);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->envelope.heartbeat().seq(), 1u);
  EXPECT_EQ(first->envelope.heartbeat().node(), "node-1");
  EXPECT_EQ(link_->NextWake(now_, false), now_ + milliseconds(1000));

  now_ += milliseconds(999);
  link_->Tick(now_);
  EXPECT_EQ(heartbeats_sent_, 1);
  now_ += milliseconds(1);
  link_->Tick(now_);
  auto second = AtCoordinator(v1::Envelope::kHeartbeat);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->envelope.heartbeat().seq(), 2u);

  link_->HeartbeatNow();  // a long step start: beat now, and a full interval until the next
  auto third = AtCoordinator(v1::Envelope::kHeartbeat);
  ASSERT_TRUE(third);
  EXPECT_EQ(third->envelope.heartbeat().seq(), 3u);
  EXPECT_EQ(heartbeats_sent_, 3);
  EXPECT_EQ(link_->NextWake(now_, false), now_ + milliseconds(1000));
}

TEST_F(CoordinatorLinkTest, EventsWaitForTheRegistrationAndStayUntilAcked) {
  link_->SendEvent(WorkerExited(0));
  link_->SendEvent(WorkerExited(1));
  EXPECT_EQ(link_->last_event_seq(), 2u);
  EXPECT_FALSE(AtCoordinator(v1::Envelope::kWorkerEvent, milliseconds(300)));

  Register();  // the ack sends every unacknowledged event
  auto first = AtCoordinator(v1::Envelope::kWorkerEvent);
  auto second = AtCoordinator(v1::Envelope::kWorkerEvent);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->envelope.worker_event().seq(), 1u);
  EXPECT_EQ(second->envelope.worker_event().seq(), 2u);

  // Unacknowledged events go again once they waited long enough.
  now_ += std::chrono::seconds(3);
  link_->Tick(now_);
  auto again = AtCoordinator(v1::Envelope::kWorkerEvent);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->envelope.worker_event().seq(), 1u);

  HeartbeatAck(1);
  ASSERT_TRUE(WaitForLink());
  link_->Read(64);
  EXPECT_EQ(link_->unacked_events(), 1u);
  HeartbeatAck(2);
  ASSERT_TRUE(WaitForLink());
  link_->Read(64);
  EXPECT_EQ(link_->unacked_events(), 0u);
}

TEST_F(CoordinatorLinkTest, AckBeforeRegistrationDoesNotDropEvents) {
  link_->SendEvent(WorkerExited(0));
  link_->Start();
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kRegister));
  HeartbeatAck(5);  // a previous agent's count
  ASSERT_TRUE(WaitForLink());
  link_->Read(64);
  EXPECT_EQ(link_->unacked_events(), 1u);
}

TEST_F(CoordinatorLinkTest, TheOutboxHoldsMessagesUntilTheConnectionIsUp) {
  v1::Envelope chunk;
  chunk.mutable_log_chunk()->set_request_id(7);
  link_->Send(chunk);  // nothing is connected yet: ZMQ_IMMEDIATE refuses
  EXPECT_EQ(link_->outbox_size(), 1u);
  EXPECT_LE(link_->NextWake(now_, false), now_);  // the outbox waits to be flushed
  link_->Start();
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kRegister));
  link_->Tick(now_);
  EXPECT_EQ(link_->outbox_size(), 0u);
  auto got = AtCoordinator(v1::Envelope::kLogChunk);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->envelope.log_chunk().request_id(), 7u);
}

TEST_F(CoordinatorLinkTest, APartitionIsReportedOnceAfterTheGraceWhileRanksRun) {
  Register(3000);
  const auto heard = now_;
  EXPECT_FALSE(link_->CheckPartition(heard + milliseconds(2999), 4));
  EXPECT_FALSE(link_->CheckPartition(heard + milliseconds(3000), 0));  // nothing runs
  // The loop wakes for the grace only while something runs.
  link_->Tick(now_);
  EXPECT_EQ(link_->NextWake(now_, true), heard + milliseconds(1000));
  now_ += milliseconds(2500);
  link_->Tick(now_);
  EXPECT_EQ(link_->NextWake(now_, true), heard + milliseconds(3000));
  EXPECT_EQ(link_->NextWake(now_, false), now_ + milliseconds(1000));

  EXPECT_TRUE(link_->CheckPartition(heard + milliseconds(3000), 4));
  EXPECT_EQ(link_->SilentFor(heard + milliseconds(3000)), milliseconds(3000));
  EXPECT_FALSE(link_->CheckPartition(heard + milliseconds(9000), 4));  // once per silence

  // The coordinator speaks again: a new silence can be reported.
  now_ = heard + milliseconds(10000);
  link_->Tick(now_);  // the loop beats on (and has not been held since: see below)
  HeartbeatAck(0);
  ASSERT_TRUE(WaitForLink());
  link_->Read(64);
  EXPECT_FALSE(link_->CheckPartition(now_ + milliseconds(2999), 4));
  EXPECT_TRUE(link_->CheckPartition(now_ + milliseconds(3000), 4));
}

TEST_F(CoordinatorLinkTest, AnswersWaitingUnreadCountBeforeAPartition) {
  Register(3000);
  // The agent's loop stalled: the coordinator's ack waits unread as the grace runs out.
  now_ += milliseconds(3000);
  HeartbeatAck(0);
  ASSERT_TRUE(WaitForLink());
  EXPECT_FALSE(link_->CheckPartition(now_, 4));
  ASSERT_FALSE(messages_.empty());
  EXPECT_TRUE(messages_.back().has_heartbeat_ack());
}

// CI, 2026-11-26: a step start held node-2's loop for ten seconds on a starved machine; no
// heartbeat went meanwhile, so the coordinator answered none, and the agent took that for a
// partition and stopped the job's ranks. A coordinator gets a reply window for the first beat
// after a held loop; PastGrace says how late the stop then is.
TEST_F(CoordinatorLinkTest, AfterAHeldLoopTheCoordinatorGetsAReplyWindow) {
  Register(3000);
  const auto heard = now_;
  link_->Tick(now_);
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kHeartbeat, milliseconds(5000), false));
  now_ = heard + milliseconds(10000);  // held: nothing went, nothing was read
  link_->Tick(now_);                   // the first beat after it
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kHeartbeat, milliseconds(5000), false));
  EXPECT_FALSE(link_->CheckPartition(now_, 4));
  EXPECT_FALSE(link_->CheckPartition(now_ + milliseconds(1999), 4));
  EXPECT_EQ(link_->NextWake(now_ + milliseconds(1500), true), now_ + milliseconds(1000));
  // No answer within the window: the silence counts, 9 s past the grace.
  EXPECT_TRUE(link_->CheckPartition(now_ + milliseconds(2000), 4));
  EXPECT_EQ(link_->PastGrace(now_ + milliseconds(2000)), milliseconds(9000));
}

TEST_F(CoordinatorLinkTest, AnAnswerWithinTheReplyWindowEndsTheSilence) {
  Register(3000);
  link_->Tick(now_);
  now_ += milliseconds(10000);
  // The loop's first act after the hold is the check: it asks before it decides.
  EXPECT_FALSE(link_->CheckPartition(now_, 4));
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kHeartbeat, milliseconds(5000), false));
  now_ += milliseconds(300);
  HeartbeatAck(0);
  ASSERT_TRUE(WaitForLink());
  EXPECT_FALSE(link_->CheckPartition(now_ + milliseconds(2000), 4));
  EXPECT_EQ(link_->PastGrace(now_), milliseconds(0));
}

TEST_F(CoordinatorLinkTest, ALoopThatKeepsBeatingGetsNoReplyWindow) {
  Register(3000);
  const auto heard = now_;
  for (; now_ < heard + milliseconds(3000); now_ += milliseconds(1000)) link_->Tick(now_);
  EXPECT_TRUE(link_->CheckPartition(heard + milliseconds(3000), 4));
}

TEST_F(CoordinatorLinkTest, SilenceCountsFromStartWithAdoptedRanks) {
  EXPECT_FALSE(link_->CheckPartition(now_ + std::chrono::hours(1), 4));  // never heard: no clock
  link_->CountSilenceFrom(now_);
  EXPECT_FALSE(link_->CheckPartition(now_ + milliseconds(9999), 4));
  EXPECT_TRUE(link_->CheckPartition(now_ + milliseconds(10000), 4));
}

}  // namespace
}  // namespace trainlet::agent

namespace trainlet::agent {
namespace {

// Coordinators in high availability: a second coordinator endpoint, with the same key.
class CoordinatorLinkHaTest : public CoordinatorLinkTest {
 protected:
  void BindMore() override {
    auto router = BindCurveRouter(ctx_, "tcp://127.0.0.1:0", server_, "agent", &endpoint2_);
    ASSERT_TRUE(router.ok()) << router.status().ToString();
    router2_.emplace(std::move(router).value());
  }
  std::string LinkEndpoints() override { return endpoint_ + "," + endpoint2_; }
  std::optional<zmq::socket_t> router2_;
  std::string endpoint2_;
};

TEST_F(CoordinatorLinkHaTest, AFollowersRefusalSendsTheLinkToTheLeaderItNames) {
  link_->Start();
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kRegister));
  v1::Envelope nack;
  nack.mutable_register_ack()->set_accepted(false);
  nack.mutable_register_ack()->set_not_leader(true);
  nack.mutable_register_ack()->set_leader_endpoint(endpoint2_);
  nack.mutable_register_ack()->set_reason("this coordinator is not the leader");
  ToAgent(std::move(nack));
  ASSERT_TRUE(WaitForLink());
  link_->Read(64);
  EXPECT_EQ(link_->current_endpoint(), endpoint2_);
  at_ = &*router2_;
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kRegister)) << "no registration at the leader";
  Accept(3000);
  EXPECT_TRUE(link_->registered());
}

TEST_F(CoordinatorLinkHaTest, AFollowerWithNoLeaderIsAskedAgainAfterAPause) {
  link_->Start();
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kRegister));
  const int built = registrations_built_;
  v1::Envelope nack;
  nack.mutable_register_ack()->set_accepted(false);
  nack.mutable_register_ack()->set_not_leader(true);
  nack.mutable_register_ack()->set_reason("no leader is elected yet");
  ToAgent(std::move(nack));
  ASSERT_TRUE(WaitForLink());
  link_->Read(64);
  EXPECT_EQ(link_->current_endpoint(), endpoint_);  // it answers: stay
  link_->Tick(now_ + milliseconds(100));
  EXPECT_EQ(registrations_built_, built);  // not before the pause, and no backoff after it
  link_->Tick(now_ + milliseconds(260));
  EXPECT_EQ(registrations_built_, built + 1);
  EXPECT_TRUE(AtCoordinator(v1::Envelope::kRegister));
}

TEST_F(CoordinatorLinkHaTest, ASilentLeaderIsLeftForTheNextEndpoint) {
  Register();
  // 3 heartbeat intervals of silence (the fixture's heartbeat is 1 s).
  link_->Tick(now_ + milliseconds(2900));
  EXPECT_EQ(link_->current_endpoint(), endpoint_);
  EXPECT_TRUE(link_->registered());
  link_->Tick(now_ + milliseconds(3100));
  EXPECT_EQ(link_->current_endpoint(), endpoint2_);
  EXPECT_FALSE(link_->registered());
  at_ = &*router2_;
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kRegister)) << "no registration at the next one";
}

// A killed leader closes the connection: the link moves on at once, not after 3 heartbeats of
// silence (bench/failover --etcd: 1,000 agents re-registered only as the silence ran out).
TEST_F(CoordinatorLinkHaTest, ALeaderThatClosesTheConnectionIsLeftAtOnce) {
  link_->Start();
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kRegister));
  now_ += milliseconds(10);  // the answer comes after the connection was made
  Accept(3000);
  ASSERT_TRUE(link_->registered());
  router_.reset();  // the leader dies: its socket, and so the connection, closes
  at_ = &*router2_;
  // No Tick: the fake clock stands still, so only the closed connection can move the link.
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kRegister, milliseconds(3000)))
      << "no registration at the next endpoint";
  EXPECT_EQ(link_->current_endpoint(), endpoint2_);
}

TEST_F(CoordinatorLinkTest, WithOneEndpointASilentCoordinatorIsNeverLeft) {
  Register();
  link_->Tick(now_ + std::chrono::seconds(60));
  EXPECT_EQ(link_->current_endpoint(), endpoint_);
}

}  // namespace
}  // namespace trainlet::agent
