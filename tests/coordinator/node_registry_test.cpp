// NodeRegistry: liveness (Ready -> Suspect -> Lost) driven by an injected clock, and the binding
// of node names to agent keys.
#include "coordinator/node_registry.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace trainlet::coordinator {
namespace {

using std::chrono::milliseconds;
using Clock = NodeRegistry::Clock;

v1::NodeInfo Info(const std::string& name, uint32_t slots = 4) {
  v1::NodeInfo info;
  info.set_name(name);
  info.set_address("10.0.0." + std::to_string(name.size()));
  info.set_hostname(name + ".example");
  info.set_slots(slots);
  return info;
}

class NodeRegistryTest : public ::testing::Test {
 protected:
  // 1 s beats, Lost after 3 s of silence: the defaults DESIGN.md names.
  NodeRegistry registry_{milliseconds(1000), milliseconds(3000)};
  const Clock::time_point t0_ = Clock::time_point{} + std::chrono::hours(1);
  static constexpr int64_t kUnix0 = 1'700'000'000'000;

  Clock::time_point At(int64_t ms) const { return t0_ + milliseconds(ms); }

  void RegisterOk(const std::string& name, const std::string& key, int64_t at_ms = 0) {
    Status s = registry_.Register(Info(name), "rid-" + key, key, At(at_ms), kUnix0 + at_ms);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  NodeState StateOf(const std::string& name) const {
    const NodeEntry* e = registry_.Find(name);
    EXPECT_NE(e, nullptr) << name;
    return e == nullptr ? NodeState::kLost : e->state;
  }
};

TEST_F(NodeRegistryTest, StateNames) {
  EXPECT_STREQ(NodeStateName(NodeState::kReady), "Ready");
  EXPECT_STREQ(NodeStateName(NodeState::kSuspect), "Suspect");
  EXPECT_STREQ(NodeStateName(NodeState::kLost), "Lost");
}

TEST_F(NodeRegistryTest, RegisterMakesReadyAndRecordsConnection) {
  RegisterOk("n1", "key1");
  const NodeEntry* e = registry_.Find("n1");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->state, NodeState::kReady);
  EXPECT_EQ(e->info.slots(), 4u);
  EXPECT_EQ(e->routing_id, "rid-key1");
  EXPECT_EQ(e->public_key, "key1");
  EXPECT_EQ(e->registered_unix_ms, kUnix0);
  EXPECT_EQ(e->last_beat_unix_ms, kUnix0);
  EXPECT_TRUE(e->schedulable);
  EXPECT_EQ(registry_.FindByKey("key1"), e);
  EXPECT_EQ(registry_.nodes().size(), 1u);
  EXPECT_EQ(registry_.Find("n2"), nullptr);
  EXPECT_EQ(registry_.FindByKey("key2"), nullptr);
}

TEST_F(NodeRegistryTest, RegisterWithoutNameIsInvalid) {
  Status s = registry_.Register(Info(""), "rid", "key1", At(0), kUnix0);
  EXPECT_EQ(s.code(), ErrorCode::kInvalid);
  EXPECT_TRUE(registry_.nodes().empty());
  EXPECT_EQ(registry_.FindByKey("key1"), nullptr);
}

TEST_F(NodeRegistryTest, HeartbeatsKeepNodeReady) {
  RegisterOk("n1", "key1");
  for (int64_t t = 1000; t <= 10000; t += 1000) {
    const NodeEntry* e = registry_.Heartbeat("key1", "rid-key1", At(t), kUnix0 + t);
    ASSERT_NE(e, nullptr) << "t=" << t;
    EXPECT_EQ(e->info.name(), "n1");
    EXPECT_TRUE(registry_.Tick(At(t + 999)).empty());
    EXPECT_EQ(StateOf("n1"), NodeState::kReady) << "t=" << t;
  }
  const NodeEntry* e = registry_.Find("n1");
  EXPECT_EQ(e->last_beat_unix_ms, kUnix0 + 10000);
  EXPECT_EQ(e->registered_unix_ms, kUnix0);
}

// A second agent holding n1's key, refused when it tried to register under another name, beats
// on its own connection: it is not heard, and n1's connection is not moved to it. A reconnect of
// n1 itself registers again and then beats on the new connection.
TEST_F(NodeRegistryTest, ABeatOnAnotherConnectionIsNotTheNodes) {
  registry_.BindNamesToKeys([] {
    static const Allowlist list{{"key1", "n1"}};
    return &list;
  });
  RegisterOk("n1", "key1");
  Status refused = registry_.Register(Info("n8"), "rid-thief", "key1", At(100), kUnix0 + 100);
  EXPECT_EQ(refused.code(), ErrorCode::kPermission) << refused.ToString();
  EXPECT_EQ(registry_.Heartbeat("key1", "rid-thief", At(500), kUnix0 + 500), nullptr);
  EXPECT_EQ(registry_.FindByConnection("key1", "rid-thief"), nullptr);
  const NodeEntry* n1 = registry_.Find("n1");
  EXPECT_EQ(n1->routing_id, "rid-key1") << "the node's traffic still goes to its own agent";
  EXPECT_EQ(n1->last_beat_unix_ms, kUnix0) << "the other connection's beat counted for nothing";
  EXPECT_EQ(registry_.FindByConnection("key1", "rid-key1"), n1);

  ASSERT_TRUE(registry_.Register(Info("n1"), "rid-again", "key1", At(900), kUnix0 + 900).ok());
  EXPECT_EQ(registry_.Heartbeat("key1", "rid-key1", At(1000), kUnix0 + 1000), nullptr)
      << "the old connection is no longer the node's";
  EXPECT_NE(registry_.Heartbeat("key1", "rid-again", At(1000), kUnix0 + 1000), nullptr);
  EXPECT_EQ(registry_.Find("n1")->routing_id, "rid-again");
}

TEST_F(NodeRegistryTest, SuspectAfterOneAndAHalfIntervalsThenLostOnce) {
  RegisterOk("n1", "key1");
  EXPECT_TRUE(registry_.Tick(At(1500)).empty());
  EXPECT_EQ(StateOf("n1"), NodeState::kReady);  // 1.5 intervals is the slack, not yet a miss
  EXPECT_TRUE(registry_.Tick(At(1501)).empty());
  EXPECT_EQ(StateOf("n1"), NodeState::kSuspect);
  EXPECT_TRUE(registry_.Tick(At(3000)).empty());
  EXPECT_EQ(StateOf("n1"), NodeState::kSuspect);
  auto lost = registry_.Tick(At(3001));
  EXPECT_EQ(lost, std::vector<std::string>{"n1"});
  EXPECT_EQ(StateOf("n1"), NodeState::kLost);
  // Reported once: later ticks do not repeat it.
  EXPECT_TRUE(registry_.Tick(At(3002)).empty());
  EXPECT_TRUE(registry_.Tick(At(60000)).empty());
  EXPECT_EQ(StateOf("n1"), NodeState::kLost);
}

// The Ready condition's time is when the state last changed, on the wall clock, so an operator
// (and bench/failover) can tell when a node was declared Lost, not only that it is.
TEST_F(NodeRegistryTest, StateSinceIsTheTransitionTime) {
  RegisterOk("n1", "key1", 100);
  EXPECT_EQ(registry_.Find("n1")->state_since_unix_ms, kUnix0 + 100);
  registry_.Heartbeat("key1", "rid-key1", At(1100), kUnix0 + 1100);
  EXPECT_EQ(registry_.Find("n1")->state_since_unix_ms, kUnix0 + 100);  // Ready stays Ready
  registry_.Tick(At(2700));
  EXPECT_EQ(StateOf("n1"), NodeState::kSuspect);
  EXPECT_EQ(registry_.Find("n1")->state_since_unix_ms, kUnix0 + 2700);
  registry_.Heartbeat("key1", "rid-key1", At(2800), kUnix0 + 2800);
  EXPECT_EQ(StateOf("n1"), NodeState::kReady);
  EXPECT_EQ(registry_.Find("n1")->state_since_unix_ms, kUnix0 + 2800);
  registry_.Tick(At(5801));
  EXPECT_EQ(StateOf("n1"), NodeState::kLost);
  EXPECT_EQ(registry_.Find("n1")->state_since_unix_ms, kUnix0 + 5801);
  RegisterOk("n1", "key1", 9000);  // back after Lost: Ready since the registration
  EXPECT_EQ(registry_.Find("n1")->state_since_unix_ms, kUnix0 + 9000);
}

TEST_F(NodeRegistryTest, LongSilenceGoesStraightToLostInOneTick) {
  RegisterOk("n1", "key1");
  EXPECT_EQ(registry_.Tick(At(10000)), std::vector<std::string>{"n1"});
  EXPECT_EQ(StateOf("n1"), NodeState::kLost);
}

TEST_F(NodeRegistryTest, SuspectNodeBecomesReadyOnBeat) {
  RegisterOk("n1", "key1");
  registry_.Tick(At(2000));
  ASSERT_EQ(StateOf("n1"), NodeState::kSuspect);
  ASSERT_NE(registry_.Heartbeat("key1", "rid-key1", At(2500), kUnix0 + 2500), nullptr);
  EXPECT_EQ(StateOf("n1"), NodeState::kReady);
  // The silence is counted from the new beat.
  EXPECT_TRUE(registry_.Tick(At(5000)).empty());
  EXPECT_EQ(StateOf("n1"), NodeState::kSuspect);
}

TEST_F(NodeRegistryTest, OnlyTheSilentNodeIsLost) {
  RegisterOk("n1", "key1");
  RegisterOk("n2", "key2");
  for (int64_t t = 1000; t <= 4000; t += 1000) {
    ASSERT_NE(registry_.Heartbeat("key2", "rid-key2", At(t), kUnix0 + t), nullptr);
    auto lost = registry_.Tick(At(t));
    if (t < 4000) EXPECT_TRUE(lost.empty()) << t;
    if (t == 4000) EXPECT_EQ(lost, std::vector<std::string>{"n1"});
  }
  EXPECT_EQ(StateOf("n2"), NodeState::kReady);
}

TEST_F(NodeRegistryTest, HeartbeatFromUnknownKeyReturnsNull) {
  RegisterOk("n1", "key1");
  EXPECT_EQ(registry_.Heartbeat("stranger", "rid-x", At(100), kUnix0 + 100), nullptr);
  // And it changed nothing about n1.
  EXPECT_EQ(registry_.Find("n1")->last_beat_unix_ms, kUnix0);
  EXPECT_EQ(registry_.Find("n1")->routing_id, "rid-key1");
}

TEST_F(NodeRegistryTest, HeartbeatAfterLostReturnsNullUntilReRegistered) {
  RegisterOk("n1", "key1");
  ASSERT_EQ(registry_.Tick(At(4000)).size(), 1u);
  EXPECT_EQ(registry_.Heartbeat("key1", "rid-key1", At(4100), kUnix0 + 4100), nullptr);
  EXPECT_EQ(StateOf("n1"), NodeState::kLost);
  RegisterOk("n1", "key1", 4200);
  EXPECT_EQ(StateOf("n1"), NodeState::kReady);
  // Registering afresh after Lost starts a new registration time.
  EXPECT_EQ(registry_.Find("n1")->registered_unix_ms, kUnix0 + 4200);
  EXPECT_NE(registry_.Heartbeat("key1", "rid-key1", At(4300), kUnix0 + 4300), nullptr);
}

TEST_F(NodeRegistryTest, ReRegisterWhileLiveKeepsRegistrationTime) {
  RegisterOk("n1", "key1");
  RegisterOk("n1", "key1", 500);
  const NodeEntry* e = registry_.Find("n1");
  EXPECT_EQ(e->registered_unix_ms, kUnix0);
  EXPECT_EQ(e->last_beat_unix_ms, kUnix0 + 500);
}

TEST_F(NodeRegistryTest, NameTakeoverRefusedWhileLive) {
  RegisterOk("n1", "key1");
  Status s = registry_.Register(Info("n1"), "rid-evil", "key2", At(100), kUnix0 + 100);
  EXPECT_EQ(s.code(), ErrorCode::kPermission);
  EXPECT_NE(s.message().find("n1"), std::string::npos) << s.message();
  EXPECT_EQ(registry_.Find("n1")->public_key, "key1");
  EXPECT_EQ(registry_.Find("n1")->routing_id, "rid-key1");
  EXPECT_EQ(registry_.FindByKey("key2"), nullptr);
  EXPECT_EQ(registry_.Heartbeat("key2", "rid-evil", At(200), kUnix0 + 200), nullptr);

  // Suspect is still live: refused too.
  registry_.Tick(At(2000));
  ASSERT_EQ(StateOf("n1"), NodeState::kSuspect);
  s = registry_.Register(Info("n1"), "rid-evil", "key2", At(2000), kUnix0 + 2000);
  EXPECT_EQ(s.code(), ErrorCode::kPermission);
  EXPECT_EQ(registry_.Find("n1")->public_key, "key1");
}

TEST_F(NodeRegistryTest, NameTakeoverAllowedAfterLost) {
  RegisterOk("n1", "key1");
  ASSERT_EQ(registry_.Tick(At(4000)), std::vector<std::string>{"n1"});
  RegisterOk("n1", "key2", 4100);
  const NodeEntry* e = registry_.Find("n1");
  EXPECT_EQ(e->public_key, "key2");
  EXPECT_EQ(e->state, NodeState::kReady);
  EXPECT_EQ(registry_.FindByKey("key2"), e);
  // The old key no longer acts for the node.
  EXPECT_EQ(registry_.FindByKey("key1"), nullptr);
  EXPECT_EQ(registry_.Heartbeat("key1", "rid-key1", At(4200), kUnix0 + 4200), nullptr);
  EXPECT_NE(registry_.Heartbeat("key2", "rid-key2", At(4200), kUnix0 + 4200), nullptr);
  // And the old key is free to register a node of its own.
  RegisterOk("n9", "key1", 4300);
}

TEST_F(NodeRegistryTest, OneKeyCannotRegisterTwoNames) {
  RegisterOk("n1", "key1");
  Status s = registry_.Register(Info("n2"), "rid-key1", "key1", At(100), kUnix0 + 100);
  EXPECT_EQ(s.code(), ErrorCode::kPermission);
  EXPECT_NE(s.message().find("n1"), std::string::npos) << s.message();
  EXPECT_EQ(registry_.Find("n2"), nullptr);
  EXPECT_EQ(registry_.FindByKey("key1")->info.name(), "n1");
  EXPECT_EQ(registry_.nodes().size(), 1u);
}

TEST_F(NodeRegistryTest, NextDeadline) {
  // No nodes: wake up once an interval anyway.
  EXPECT_EQ(registry_.NextDeadline(At(0)), At(1000));

  RegisterOk("n1", "key1");
  // Ready: the moment it would turn Suspect.
  EXPECT_EQ(registry_.NextDeadline(At(100)), At(1100));  // capped at now + interval
  EXPECT_EQ(registry_.NextDeadline(At(800)), At(1500));

  RegisterOk("n2", "key2", 200);
  EXPECT_EQ(registry_.NextDeadline(At(800)), At(1500));  // the earliest node wins

  registry_.Tick(At(1600));
  ASSERT_EQ(StateOf("n1"), NodeState::kSuspect);
  ASSERT_EQ(StateOf("n2"), NodeState::kReady);
  EXPECT_EQ(registry_.NextDeadline(At(1600)), At(1700));  // n2 turns Suspect at 200 + 1500

  registry_.Tick(At(1800));
  ASSERT_EQ(StateOf("n2"), NodeState::kSuspect);
  // Suspect: the moment it would turn Lost.
  EXPECT_EQ(registry_.NextDeadline(At(2500)), At(3000));

  // Never in the past, even when a deadline was missed.
  EXPECT_EQ(registry_.NextDeadline(At(3100)), At(3100));

  registry_.Tick(At(3500));
  ASSERT_EQ(StateOf("n1"), NodeState::kLost);
  ASSERT_EQ(StateOf("n2"), NodeState::kLost);
  // Lost nodes have nothing left to time out.
  EXPECT_EQ(registry_.NextDeadline(At(5000)), At(6000));

  for (auto now : {At(0), At(1234), At(99999)}) {
    EXPECT_GE(registry_.NextDeadline(now), now);
  }
}

// Issue 19, defect 7: the name column of agents.allow binds a key to one node name.
class NodeNameBindingTest : public NodeRegistryTest {
 protected:
  void SetUp() override {
    allowlist_ = {{"key1", "node-1"}, {"key2", "node-2"}, {"bare", ""}};
    registry_.BindNamesToKeys([this] { return &allowlist_; });
  }
  Status RegisterAs(const std::string& name, const std::string& key) {
    return registry_.Register(Info(name), "rid-" + key, key, At(0), kUnix0);
  }
  Allowlist allowlist_;
};

TEST_F(NodeNameBindingTest, NamedKeyRegistersItsName) {
  RegisterOk("node-1", "key1");
  RegisterOk("node-2", "key2");
  EXPECT_EQ(registry_.nodes().size(), 2u);
}

TEST_F(NodeNameBindingTest, NamedKeyCannotTakeAnotherNodesFreeName) {
  // node-2 has not registered yet (a coordinator restart): its name is still not node-1's to take.
  Status s = RegisterAs("node-2", "key1");
  EXPECT_EQ(s.code(), ErrorCode::kPermission) << s.ToString();
  EXPECT_NE(s.message().find("key key1 may register only as node node-1, not node-2"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(registry_.Find("node-2"), nullptr);
  RegisterOk("node-2", "key2");  // the real node-2 is not locked out
}

TEST_F(NodeNameBindingTest, NamedKeyCannotTakeAnUnknownName) {
  Status s = RegisterAs("ghost", "key1");
  EXPECT_EQ(s.code(), ErrorCode::kPermission);
  EXPECT_NE(s.message().find("key key1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("not ghost"), std::string::npos) << s.message();
  EXPECT_TRUE(registry_.nodes().empty());
}

TEST_F(NodeNameBindingTest, NamedKeyCannotTakeALiveNodesName) {
  RegisterOk("node-2", "key2");
  Status s = RegisterAs("node-2", "key1");
  EXPECT_EQ(s.code(), ErrorCode::kPermission);
  EXPECT_EQ(registry_.Find("node-2")->public_key, "key2");
}

TEST_F(NodeNameBindingTest, KeyWithoutANameTakesOnlyUnclaimedNames) {
  RegisterOk("legacy-7", "bare");  // an allowlist line with no name: any name nobody owns
  Status s = RegisterAs("node-1", "bare");
  EXPECT_EQ(s.code(), ErrorCode::kPermission);
  EXPECT_NE(s.message().find("key bare has no name in the agent allowlist"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("node-1, which the allowlist gives key key1"), std::string::npos)
      << s.message();
}

TEST_F(NodeNameBindingTest, KeyNotInTheListRegistersNothing) {
  Status s = RegisterAs("node-9", "removed");
  EXPECT_EQ(s.code(), ErrorCode::kPermission);
  EXPECT_NE(s.message().find("key removed is not in the agent allowlist"), std::string::npos)
      << s.message();
}

TEST_F(NodeNameBindingTest, EditedListAppliesAtTheNextRegistration) {
  ASSERT_FALSE(RegisterAs("node-3", "key1").ok());
  allowlist_["key1"] = "node-3";  // the operator moved the key to another name
  RegisterOk("node-3", "key1");
}

TEST_F(NodeNameBindingTest, NoListRefusesEveryone) {
  registry_.BindNamesToKeys([] { return static_cast<const Allowlist*>(nullptr); });
  EXPECT_EQ(RegisterAs("node-1", "key1").code(), ErrorCode::kPermission);
}

// Issue 19, defect 1: when every node goes silent at once, the coordinator is the likely cause
// (its loop stalled, its network went), as Kubernetes' "full disruption": no node is Lost.
TEST_F(NodeRegistryTest, FullDisruptionDeclaresNoNodeLost) {
  registry_.SetFullDisruptionRule(true);
  RegisterOk("n1", "key1");
  RegisterOk("n2", "key2", 100);
  EXPECT_TRUE(registry_.Tick(At(2000)).empty());
  EXPECT_EQ(StateOf("n1"), NodeState::kSuspect);
  EXPECT_FALSE(registry_.full_disruption());
  // Both past the lost timeout at once: both stay Suspect, however long it lasts.
  EXPECT_TRUE(registry_.Tick(At(3200)).empty());
  EXPECT_TRUE(registry_.full_disruption());
  EXPECT_TRUE(registry_.Tick(At(60000)).empty());
  EXPECT_EQ(StateOf("n1"), NodeState::kSuspect);
  EXPECT_EQ(StateOf("n2"), NodeState::kSuspect);
  // Nothing to time out while it lasts: the loop does not spin on a deadline in the past.
  EXPECT_EQ(registry_.NextDeadline(At(60000)), At(61000));
  // n1 is heard again: the disruption is over. n2 has one more lost timeout to be heard (beats
  // come back staggered), then, still silent, it is Lost.
  ASSERT_NE(registry_.Heartbeat("key1", "rid-key1", At(60100), kUnix0 + 60100), nullptr);
  EXPECT_TRUE(registry_.Tick(At(60200)).empty());
  EXPECT_FALSE(registry_.full_disruption());
  EXPECT_EQ(StateOf("n1"), NodeState::kReady);
  EXPECT_EQ(registry_.NextDeadline(At(61000)), At(61600));  // n1 Suspect at 60100 + 1500
  ASSERT_NE(registry_.Heartbeat("key1", "rid-key1", At(63000), kUnix0 + 63000), nullptr);
  EXPECT_TRUE(registry_.Tick(At(63100)).empty());
  EXPECT_EQ(registry_.Tick(At(63201)), std::vector<std::string>{"n2"});
  EXPECT_EQ(StateOf("n1"), NodeState::kReady);
}

// The beats of an outage's nodes are staggered: the first passes the lost timeout while the
// last is only Suspect. Still a full disruption.
TEST_F(NodeRegistryTest, FullDisruptionWithStaggeredLastBeats) {
  registry_.SetFullDisruptionRule(true);
  RegisterOk("n1", "key1");
  RegisterOk("n2", "key2", 900);
  EXPECT_TRUE(registry_.Tick(At(3100)).empty());  // n1 silent 3.1 s, n2 2.2 s
  EXPECT_TRUE(registry_.full_disruption());
  EXPECT_EQ(StateOf("n1"), NodeState::kSuspect);
  EXPECT_EQ(StateOf("n2"), NodeState::kSuspect);
}

TEST_F(NodeRegistryTest, FullDisruptionNeedsEveryLiveNodeSilent) {
  registry_.SetFullDisruptionRule(true);
  RegisterOk("n1", "key1");
  RegisterOk("n2", "key2");
  RegisterOk("n3", "key3");
  // n3 beats; n1 and n2 are silent: a partial disruption, judged node by node.
  ASSERT_NE(registry_.Heartbeat("key3", "rid-key3", At(2900), kUnix0 + 2900), nullptr);
  auto lost = registry_.Tick(At(3100));
  std::sort(lost.begin(), lost.end());
  EXPECT_EQ(lost, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_FALSE(registry_.full_disruption());
}

TEST_F(NodeRegistryTest, ALoneSilentNodeIsLostEvenWithTheRule) {
  registry_.SetFullDisruptionRule(true);
  RegisterOk("n1", "key1");
  EXPECT_EQ(registry_.Tick(At(3100)), std::vector<std::string>{"n1"});
}

TEST_F(NodeRegistryTest, WithoutTheRuleEverySilentNodeIsLost) {
  RegisterOk("n1", "key1");
  RegisterOk("n2", "key2");
  EXPECT_EQ(registry_.Tick(At(3100)).size(), 2u);
}

}  // namespace
}  // namespace trainlet::coordinator
