// NodeRegistry: the nodes that registered, and their liveness from application heartbeats.
//
// A node is Ready while its beats arrive, Suspect once one interval passed without a beat (it
// takes no new ranks), and Lost after `lost_timeout` (its ranks are given up). A node's name is
// bound to the CURVE key that registered it: another key cannot take the name over while the
// node is not Lost, and a key acts only for its own node. With BindNamesToKeys, a name is also
// bound by the agent allowlist: a key registers only the name its line gives it, even when that
// name is free (after a coordinator restart, before the real node is back).
//
// Full disruption (SetFullDisruptionRule, as Kubernetes' node lifecycle controller stops evicting
// when every node of a zone is NotReady at once): when two or more nodes are not Lost and every
// one of them is silent past the Suspect threshold (one interval and a half) while one of them
// passes `lost_timeout`, the silence is taken as the coordinator's (its loop stalled, its own
// network went), not the nodes'. (Beats are staggered by up to an interval, so in an outage that
// hits every node the first passes the lost timeout while the others are only Suspect; requiring
// all to be past it would declare the first Lost.) None is declared Lost: they stay
// Suspect (no new ranks go there) and their jobs keep their ranks, until one node beats again;
// from then on each node has one more lost timeout to be heard before it is Lost. A lone node
// cannot be told apart from its coordinator this way, and is declared Lost as before. The agents
// keep their own rule: past the partition grace without hearing the coordinator, they stop their
// ranks (agent/coordinator_link.h).
//
// Cordons (`trainletctl cordon`, `drain`) are kept by node name: they outlive the agent's
// re-registrations, and with a store attached (LoadCordons) they are written before they take
// effect and are read back at start, so they outlive a coordinator restart too; a stored cordon
// of a node that has not registered again yet applies when it does.
//
// Owned by the coordinator's loop; no locks. Time is passed in, so tests drive it.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/curve_keys.h"
#include "common/status.h"
#include "coordinator/job_store.h"
#include "trainlet/v1/node.pb.h"

namespace trainlet::coordinator {

enum class NodeState { kReady, kSuspect, kLost };
const char* NodeStateName(NodeState state);

struct NodeEntry {
  v1::NodeInfo info;
  std::string routing_id;  // ZeroMQ routing id of its current connection
  std::string public_key;  // the CURVE key it authenticated with
  NodeState state = NodeState::kReady;
  int64_t state_since_unix_ms = 0;  // when `state` last changed (the Ready condition's time)
  bool schedulable = true;
  std::string cordon_reason;  // why it is cordoned; kept by name across re-registration
  bool drained = false;       // cordoned by a drain
  int64_t cordoned_unix_ms = 0;
  // From the agent's heartbeats: its health checks. Unhealthy nodes take no new ranks.
  bool healthy = true;
  std::string health_reason;
  int64_t registered_unix_ms = 0;
  uint64_t applied_event_seq = 0;  // worker events of this agent applied, in order, up to here
  // Of those, the ones whose effects are stored (EventsStored, after the job statuses were
  // flushed): what its heartbeats acknowledge. The agent forgets an event once acknowledged, so
  // an event applied but not stored is acknowledged only later: a crash in between loses nothing,
  // since the agent sends it again to the next coordinator.
  uint64_t stored_event_seq = 0;
  int64_t last_beat_unix_ms = 0;
  std::chrono::steady_clock::time_point last_beat{};
  // What the agent last reported holding (HeldAttempt, in its registration and each beat): the
  // (job, attempt) whose plan it received. With reports_attempts false (an agent that predates
  // the report) nothing is known of its plans, and none is resent to it (issue 19, defect 4).
  bool reports_attempts = false;
  std::set<std::pair<std::string, uint32_t>> planned_attempts;
  std::set<std::pair<std::string, uint32_t>> held_attempts;  // with or without their plan
  int64_t attempts_reported_unix_ms = 0;                     // when that report was received
};

class NodeRegistry {
 public:
  using Clock = std::chrono::steady_clock;
  NodeRegistry(std::chrono::milliseconds heartbeat_interval, std::chrono::milliseconds lost_timeout)
      : interval_(heartbeat_interval), lost_timeout_(lost_timeout) {}

  // Binds names to keys through the agent allowlist (public key -> the name its line gives, empty
  // when the line has no name); `allowlist` is asked at each registration, so an edited file
  // applies at once, and may return nullptr (then every registration is refused).
  //   - A named key registers only that name.
  //   - A key whose line has no name registers any name that no named line gives another key:
  //     allowlists written before names were enforced keep working, and no key without a name
  //     can take a named node's name.
  //   - A key not in the list (removed while its connection stayed up) registers nothing.
  // Without a binding (unit tests) any name goes, subject to the live-key rule.
  void BindNamesToKeys(std::function<const Allowlist*()> allowlist) {
    allowlist_ = std::move(allowlist);
  }

  // Records a (re-)registration. PermissionError when the name belongs to another live key, or
  // the allowlist binds the key to another name; the message names the key and the name.
  Status Register(const v1::NodeInfo& info, const std::string& routing_id,
                  const std::string& public_key, Clock::time_point now, int64_t now_unix_ms);
  // Records a beat from the node owning `public_key`, on the connection it registered from.
  // Returns the node, or nullptr when the key has no registered node (e.g. after a coordinator
  // restart) or the beat came on another connection (a reconnect, or a second agent holding the
  // same key, whose registration the allowlist refused): it must register again, and the
  // registration is judged as any other.
  const NodeEntry* Heartbeat(const std::string& public_key, const std::string& routing_id,
                             Clock::time_point now, int64_t now_unix_ms);
  // Records the attempts a beat of node `name` reported holding (see NodeEntry); a beat of a
  // node that is not registered changes nothing.
  void RecordAttempts(const std::string& name,
                      const google::protobuf::RepeatedPtrField<v1::HeldAttempt>& attempts,
                      bool reports_attempts, int64_t now_unix_ms);
  // Turns on the full disruption rule above (the coordinator does; off by default).
  void SetFullDisruptionRule(bool on) { full_disruption_rule_ = on; }
  // Whether the last Tick held every node back from Lost under that rule.
  bool full_disruption() const { return full_disruption_; }
  // Moves nodes along Ready -> Suspect -> Lost. Returns the names that became Lost now.
  std::vector<std::string> Tick(Clock::time_point now);
  // When Tick next has something to do.
  Clock::time_point NextDeadline(Clock::time_point now) const;

  // In-order delivery of a node's numbered worker events: true when `seq` is the next one, which
  // the caller then applies. A number already applied (a resend) or beyond a gap (an earlier one
  // was lost; the agent resends it) is refused. seq 0 means unnumbered and is always accepted.
  bool AcceptEvent(const std::string& name, uint64_t seq);
  // Every node's applied events are stored: the caller flushed what they changed.
  void EventsStored();

  // Reads the cordons stored in `store` and writes every later change there before applying it.
  // `store` must outlive the registry. kIo when the store cannot be read.
  Status LoadCordons(NodeCordonStore* store);

  // Cordon (schedulable = false) or uncordon a node, by name; `drain` marks a cordon a drain
  // made. Returns whether schedulable changed. NotFound for a name that never registered and has
  // no stored cordon; kIo (and nothing changes) when the store refuses the write. `now_unix_ms`
  // 0 means the wall clock.
  Result<bool> SetSchedulable(const std::string& name, bool schedulable, const std::string& reason,
                              bool drain = false, int64_t now_unix_ms = 0);
  // Records the health a heartbeat reported. Logs each change.
  void SetHealth(const std::string& name, bool healthy, const std::string& reason);

  const NodeEntry* Find(const std::string& name) const;
  const NodeEntry* FindByKey(const std::string& public_key) const;
  // The node registered by `public_key` from the connection `routing_id`; nullptr for any other
  // connection, even one holding the same key: only what the registered agent sends speaks for
  // its node.
  const NodeEntry* FindByConnection(const std::string& public_key,
                                    const std::string& routing_id) const;
  const std::map<std::string, NodeEntry>& nodes() const { return nodes_; }
  // Stored cordons of nodes that have not registered since the coordinator started.
  const std::map<std::string, NodeCordonRecord>& pending_cordons() const { return pending_; }

 private:
  Status CheckNameBinding(const std::string& name, const std::string& public_key) const;
  // The wall-clock time of `now` for `e`, from its last beat's.
  static int64_t UnixMsAt(const NodeEntry& e, Clock::time_point now);

  std::function<const Allowlist*()> allowlist_;  // empty: names are not bound by the allowlist
  std::chrono::milliseconds interval_;
  std::chrono::milliseconds lost_timeout_;
  bool full_disruption_rule_ = false;
  bool full_disruption_ = false;
  Clock::time_point disruption_ended_{};             // when the last full disruption ended
  std::map<std::string, NodeEntry> nodes_;           // by name
  std::map<std::string, std::string> by_key_;        // public key -> name
  NodeCordonStore* store_ = nullptr;                 // not owned; null: cordons are not stored
  std::map<std::string, NodeCordonRecord> pending_;  // by name, applied at registration
};

}  // namespace trainlet::coordinator
