#include "coordinator/node_registry.h"

#include <spdlog/spdlog.h>

#include "common/wall_clock.h"

namespace trainlet::coordinator {

const char* NodeStateName(NodeState state) {
  switch (state) {
    case NodeState::kReady:
      return "Ready";
    case NodeState::kSuspect:
      return "Suspect";
    case NodeState::kLost:
      return "Lost";
  }
  return "Unknown";
}

Status NodeRegistry::Register(const v1::NodeInfo& info, const std::string& routing_id,
                              const std::string& public_key, Clock::time_point now,
                              int64_t now_unix_ms) {
  if (info.name().empty()) return InvalidError("registration without a node name");
  TRAINLET_RETURN_IF_ERROR(CheckNameBinding(info.name(), public_key));
  auto key_it = by_key_.find(public_key);
  if (key_it != by_key_.end() && key_it->second != info.name()) {
    return PermissionError("key already registered node " + key_it->second + ", not " +
                           info.name());
  }
  auto it = nodes_.find(info.name());
  if (it != nodes_.end() && it->second.public_key != public_key &&
      it->second.state != NodeState::kLost) {
    return PermissionError("node name " + info.name() + " is held by another live agent key");
  }
  if (it != nodes_.end() && it->second.public_key != public_key) {
    by_key_.erase(it->second.public_key);
  }
  NodeEntry& e = nodes_[info.name()];
  if (auto cordon = pending_.find(info.name()); cordon != pending_.end()) {
    e.schedulable = false;
    e.cordon_reason = cordon->second.reason;
    e.drained = cordon->second.drain;
    e.cordoned_unix_ms = cordon->second.since_unix_ms;
    spdlog::info("node {} registered cordoned (stored{}{})", info.name(),
                 e.cordon_reason.empty() ? "" : ": ", e.cordon_reason);
    pending_.erase(cordon);
  }
  const bool fresh = e.registered_unix_ms == 0 || e.state == NodeState::kLost;
  e.info = info;
  e.routing_id = routing_id;
  e.public_key = public_key;
  if (fresh || e.state != NodeState::kReady) e.state_since_unix_ms = now_unix_ms;
  e.state = NodeState::kReady;
  if (fresh) e.registered_unix_ms = now_unix_ms;
  e.last_beat = now;
  e.last_beat_unix_ms = now_unix_ms;
  e.applied_event_seq = info.events_acked_through();  // acknowledged before: stored
  e.stored_event_seq = e.applied_event_seq;
  by_key_[public_key] = info.name();
  RecordAttempts(info.name(), info.attempts(), info.reports_attempts(), now_unix_ms);
  e.info.clear_attempts();  // kept as planned_attempts, not with the node's description
  return Status::Ok();
}

void NodeRegistry::RecordAttempts(
    const std::string& name, const google::protobuf::RepeatedPtrField<v1::HeldAttempt>& attempts,
    bool reports_attempts, int64_t now_unix_ms) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return;
  NodeEntry& e = it->second;
  e.reports_attempts = reports_attempts;
  e.planned_attempts.clear();
  e.held_attempts.clear();
  for (const auto& a : attempts) {
    if (a.plan_received()) e.planned_attempts.insert({a.job(), a.attempt()});
    e.held_attempts.insert({a.job(), a.attempt()});
  }
  e.attempts_reported_unix_ms = now_unix_ms;
}

Status NodeRegistry::CheckNameBinding(const std::string& name,
                                      const std::string& public_key) const {
  if (!allowlist_) return Status::Ok();
  const Allowlist* list = allowlist_();
  auto line = list == nullptr ? Allowlist::const_iterator{} : list->find(public_key);
  if (list == nullptr || line == list->end()) {
    return PermissionError("key " + public_key + " is not in the agent allowlist");
  }
  if (!line->second.empty()) {
    if (line->second == name) return Status::Ok();
    return PermissionError("key " + public_key + " may register only as node " + line->second +
                           ", not " + name + " (the name its agent allowlist line gives it)");
  }
  for (const auto& [other_key, other_name] : *list) {
    if (other_name == name) {
      return PermissionError("key " + public_key +
                             " has no name in the agent allowlist and may not register as node " +
                             name + ", which the allowlist gives key " + other_key);
    }
  }
  return Status::Ok();
}

bool NodeRegistry::AcceptEvent(const std::string& name, uint64_t seq) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return false;
  if (seq == 0) return true;
  if (seq != it->second.applied_event_seq + 1) return false;
  it->second.applied_event_seq = seq;
  return true;
}

void NodeRegistry::EventsStored() {
  for (auto& [name, e] : nodes_) e.stored_event_seq = e.applied_event_seq;
}

const NodeEntry* NodeRegistry::Heartbeat(const std::string& public_key,
                                         const std::string& routing_id, Clock::time_point now,
                                         int64_t now_unix_ms) {
  auto key_it = by_key_.find(public_key);
  if (key_it == by_key_.end()) return nullptr;
  NodeEntry& e = nodes_.at(key_it->second);
  if (e.state == NodeState::kLost) return nullptr;  // its ranks were given up: register afresh
  if (e.routing_id != routing_id) return nullptr;   // not the registered connection
  if (e.state == NodeState::kSuspect) {
    spdlog::info("node {} is Ready again", e.info.name());
    e.state_since_unix_ms = now_unix_ms;
  }
  e.state = NodeState::kReady;
  e.last_beat = now;
  e.last_beat_unix_ms = now_unix_ms;
  return &e;
}

std::vector<std::string> NodeRegistry::Tick(Clock::time_point now) {
  std::vector<std::string> lost;
  // One missed beat, with half an interval of slack for scheduling jitter.
  const auto suspect_after = interval_ + interval_ / 2;
  size_t live = 0, past_suspect = 0, past_lost = 0;
  for (auto& [name, e] : nodes_) {
    if (e.state == NodeState::kLost) continue;
    const auto silent = now - e.last_beat;
    ++live;
    if (silent > suspect_after) ++past_suspect;
    if (silent > lost_timeout_) ++past_lost;
    if (e.state == NodeState::kReady && silent > suspect_after) {
      e.state = NodeState::kSuspect;
      e.state_since_unix_ms = UnixMsAt(e, now);
      spdlog::warn("node {} is Suspect: no heartbeat for {} ms", name,
                   std::chrono::duration_cast<std::chrono::milliseconds>(silent).count());
    }
  }
  // Beats are staggered by up to an interval, so when the first node passes the lost timeout the
  // others of an outage that hit them all are Suspect, not yet Lost: that is the test.
  const bool disrupted =
      full_disruption_rule_ && live >= 2 && past_suspect == live && past_lost > 0;
  if (disrupted != full_disruption_) {
    if (disrupted) {
      spdlog::error(
          "every node ({}) is silent at once: taking it as the coordinator's fault (full "
          "disruption); no node is declared Lost until one is heard again",
          live);
    } else {
      spdlog::warn("full disruption over: nodes are heard again");
      disruption_ended_ = now;
    }
    full_disruption_ = disrupted;
  }
  if (disrupted) return lost;
  for (auto& [name, e] : nodes_) {
    const auto silent = now - e.last_beat;
    // After a full disruption every node has a whole lost timeout to be heard again: their beats
    // come back staggered, and a tick between two of them must not take the later for Lost.
    if (e.state == NodeState::kSuspect &&
        now - std::max(e.last_beat, disruption_ended_) > lost_timeout_) {
      e.state = NodeState::kLost;
      e.state_since_unix_ms = UnixMsAt(e, now);
      spdlog::error("node {} is Lost: no heartbeat for {} ms", name,
                    std::chrono::duration_cast<std::chrono::milliseconds>(silent).count());
      lost.push_back(name);
    }
  }
  return lost;
}

int64_t NodeRegistry::UnixMsAt(const NodeEntry& e, Clock::time_point now) {
  // The wall-clock time of `now`, from the last beat's: Tick runs on the steady clock only.
  return e.last_beat_unix_ms +
         std::chrono::duration_cast<std::chrono::milliseconds>(now - e.last_beat).count();
}

NodeRegistry::Clock::time_point NodeRegistry::NextDeadline(Clock::time_point now) const {
  auto next = now + interval_;
  for (const auto& [name, e] : nodes_) {
    if (e.state == NodeState::kReady)
      next = std::min(next, e.last_beat + interval_ + interval_ / 2);
    // In a full disruption the nodes past the lost timeout wait for a beat, not a deadline.
    const auto lost_at = std::max(e.last_beat, disruption_ended_) + lost_timeout_;
    if (e.state == NodeState::kSuspect && !(full_disruption_ && lost_at <= now))
      next = std::min(next, lost_at);
  }
  return std::max(next, now);
}

Status NodeRegistry::LoadCordons(NodeCordonStore* store) {
  TRAINLET_CHECK(store != nullptr);
  TRAINLET_ASSIGN_OR_RETURN(std::vector<NodeCordonRecord> stored, store->ListNodeCordons());
  store_ = store;
  for (auto& c : stored) {
    auto it = nodes_.find(c.node);
    if (it == nodes_.end()) {
      const std::string name = c.node;
      pending_[name] = std::move(c);
      continue;
    }
    it->second.schedulable = false;
    it->second.cordon_reason = c.reason;
    it->second.drained = c.drain;
    it->second.cordoned_unix_ms = c.since_unix_ms;
  }
  if (!stored.empty()) spdlog::info("{} stored node cordon(s) loaded", stored.size());
  return Status::Ok();
}

Result<bool> NodeRegistry::SetSchedulable(const std::string& name, bool schedulable,
                                          const std::string& reason, bool drain,
                                          int64_t now_unix_ms) {
  auto it = nodes_.find(name);
  auto pending = pending_.find(name);
  if (it == nodes_.end() && pending == pending_.end()) {
    return NotFoundError("node " + name + " is not registered");
  }
  // The state as it is now, wherever it lives.
  const bool was_schedulable = it != nodes_.end() ? it->second.schedulable : false;
  const std::string old_reason =
      it != nodes_.end() ? it->second.cordon_reason : pending->second.reason;
  const bool was_drained = it != nodes_.end() ? it->second.drained : pending->second.drain;
  const bool changed = was_schedulable != schedulable;
  const bool new_drained = !schedulable && (drain || (!changed && was_drained));
  const std::string new_reason = schedulable ? "" : reason;
  // A cordon that stays a cordon keeps its start; only its reason or drain mark changes.
  int64_t since = now_unix_ms != 0 ? now_unix_ms : NowUnixMs();
  if (!changed && !schedulable) {
    since = it != nodes_.end() ? it->second.cordoned_unix_ms : pending->second.since_unix_ms;
  }
  const bool same = !changed && new_reason == old_reason && new_drained == was_drained;
  if (store_ != nullptr && !same) {
    // Written before it takes effect, so an operator told "cordoned" finds it so after a crash.
    if (schedulable) {
      TRAINLET_RETURN_IF_ERROR(store_->DeleteNodeCordon(name));
    } else {
      TRAINLET_RETURN_IF_ERROR(store_->PutNodeCordon({name, new_reason, new_drained, since}));
    }
  }
  if (it == nodes_.end()) {
    if (schedulable) {
      pending_.erase(pending);
    } else {
      pending->second = {name, new_reason, new_drained, since};
    }
  } else {
    NodeEntry& e = it->second;
    e.schedulable = schedulable;
    e.cordon_reason = new_reason;
    e.drained = new_drained;
    e.cordoned_unix_ms = schedulable ? 0 : since;
  }
  if (changed) {
    spdlog::info("node {} {}{}{}", name,
                 schedulable ? "uncordoned" : (new_drained ? "drained" : "cordoned"),
                 reason.empty() || schedulable ? "" : ": ", schedulable ? "" : reason);
  }
  return changed;
}

void NodeRegistry::SetHealth(const std::string& name, bool healthy, const std::string& reason) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return;
  NodeEntry& e = it->second;
  if (e.healthy != healthy) {
    if (healthy) {
      spdlog::info("node {} is healthy again", name);
    } else {
      spdlog::warn("node {} is unhealthy: {}", name, reason);
    }
  }
  e.healthy = healthy;
  e.health_reason = healthy ? "" : reason;
}

const NodeEntry* NodeRegistry::Find(const std::string& name) const {
  auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : &it->second;
}

const NodeEntry* NodeRegistry::FindByKey(const std::string& public_key) const {
  auto it = by_key_.find(public_key);
  return it == by_key_.end() ? nullptr : Find(it->second);
}

const NodeEntry* NodeRegistry::FindByConnection(const std::string& public_key,
                                                const std::string& routing_id) const {
  const NodeEntry* e = FindByKey(public_key);
  return e != nullptr && e->routing_id == routing_id ? e : nullptr;
}

}  // namespace trainlet::coordinator
