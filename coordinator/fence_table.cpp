#include "coordinator/fence_table.h"

#include <algorithm>

#include "common/envelope.h"
#include "common/rendezvous/fence_message.h"

namespace trainlet::coordinator {
namespace {

// Room left for the envelope around a result's pairs.
constexpr size_t kResultSlack = 64 << 10;

std::string AttemptName(const std::string& job, uint32_t attempt) {
  return "attempt " + std::to_string(attempt) + " of " + job;
}

}  // namespace

FenceTable::FenceTable(PlacementFn placement) : placement_(std::move(placement)) {}

FenceTable::Send FenceTable::Result(const std::string& node, const Key& key, uint64_t epoch,
                                    bool ok, const std::string& message) {
  Send s{node, {}};
  auto* r = s.envelope.mutable_fence_result();
  r->set_job(key.first);
  r->set_attempt(key.second);
  r->set_epoch(epoch);
  r->set_ok(ok);
  r->set_message(message);
  return s;
}

void FenceTable::Fail(const Key& key, Entry& e, const std::string& why, Outcome& out) const {
  if (!e.failure.empty()) return;
  e.failure = why;
  const uint64_t epoch = e.open != 0 ? e.open : e.completed + 1;
  for (const auto& node : e.placement) out.sends.push_back(Result(node, key, epoch, false, why));
  e.joined.clear();
  e.open = 0;
}

bool FenceTable::CheckExits(const Key& key, Entry& e, Outcome& out) const {
  if (e.open == 0) return false;
  for (const auto& x : e.exits) {
    if (x.node_epoch < e.open && !e.joined.count(x.node)) {
      Fail(key, e, rendezvous::FenceAbortMessage(x.rank, x.node, x.how, e.open), out);
      return true;
    }
  }
  return false;
}

FenceTable::Outcome FenceTable::OnContribute(const std::string& sender,
                                             const v1::FenceContribute& c, Clock::time_point now) {
  Outcome out;
  const Key key{c.job(), c.attempt()};
  const auto placement = placement_(c.job(), c.attempt());
  if (!placement) {
    // The attempt ended (or never was): its ranks must not wait for a release that cannot come.
    entries_.erase(key);
    out.sends.push_back(Result(sender, key, c.epoch(), false,
                               AttemptName(c.job(), c.attempt()) + " is not running"));
    return out;
  }
  if (std::find(placement->begin(), placement->end(), sender) == placement->end()) {
    out.rejected = PermissionError("fence contribution from node " + sender +
                                   ", which is not in the "
                                   "placement of " +
                                   AttemptName(c.job(), c.attempt()));
    return out;
  }
  Entry& e = entries_[key];
  if (e.placement.empty()) e.placement = *placement;
  if (!e.failure.empty()) {
    out.sends.push_back(Result(sender, key, c.epoch(), false, e.failure));
    return out;
  }
  if (c.resync()) {
    Resync(sender, key, e, c, now, out);
    return out;
  }
  // The node's agent was restarted and its ranks sent their fence again (the rendezvous client
  // does once it sees a new agent): a fence already released is answered again, since the old
  // agent may have died before it read the result. One still gathering keeps the contribution it
  // has (the same ranks' same puts), refuses the second as a duplicate, and answers the node
  // when it completes.
  if (c.epoch() == e.completed && c.epoch() > 0 && e.last_contributed[sender] == c.epoch()) {
    out.sends.push_back(Released(sender, key, c.epoch(), e));
    return out;
  }
  if (c.epoch() != e.completed + 1 || e.joined.count(sender)) {
    out.rejected = InvalidError("fence " + std::to_string(c.epoch()) + " of " +
                                AttemptName(c.job(), c.attempt()) + " from node " + sender +
                                ": fence " + std::to_string(e.completed) + " is the last released" +
                                (e.joined.count(sender) ? " and the node already joined" : ""));
    return out;
  }
  Join(sender, key, e, c, now, out);
  return out;
}

void FenceTable::Join(const std::string& sender, const Key& key, Entry& e,
                      const v1::FenceContribute& c, Clock::time_point now, Outcome& out) const {
  if (e.open == 0) {
    e.open = c.epoch();
    e.opened_at = now;
  }
  e.joined[sender] = c;
  e.last_contributed[sender] = c.epoch();
  if (CheckExits(key, e, out)) return;
  if (e.joined.size() == e.placement.size()) Complete(key, e, now, out);
}

void FenceTable::Resync(const std::string& sender, const Key& key, Entry& e,
                        const v1::FenceContribute& c, Clock::time_point now, Outcome& out) const {
  if (c.released() > e.completed) {
    // That node saw a later release than this table knows of (this coordinator is new, or its
    // predecessor released to some nodes only): the release's result holds every pair through it.
    e.pairs.clear();
    for (const auto& kv : c.released_pairs()) e.pairs[kv.key()] = kv.value();
    e.completed = c.released();
    if (e.open != 0 && e.open <= e.completed) {
      for (const auto& joined : e.joined)
        out.sends.push_back(Released(joined.first, key, e.open, e));
      e.joined.clear();
      e.open = 0;
    }
  }
  uint64_t& last = e.last_contributed[sender];
  last = std::max({last, c.released(), c.epoch()});
  if (c.epoch() == 0) return;
  if (c.epoch() <= e.completed) {
    // Released before, but that release never reached this node: send it again.
    out.sends.push_back(Released(sender, key, c.epoch(), e));
    return;
  }
  if (c.epoch() != e.completed + 1) {
    out.rejected = InvalidError("resync of fence " + std::to_string(c.epoch()) + " of " +
                                AttemptName(c.job(), c.attempt()) + " from node " + sender +
                                ": fence " + std::to_string(e.completed) + " is the last released");
    return;
  }
  Join(sender, key, e, c, now, out);  // a repeat of a join this table holds replaces it
}

FenceTable::Send FenceTable::Released(const std::string& node, const Key& key, uint64_t epoch,
                                      const Entry& e) {
  Send s = Result(node, key, epoch, true, "");
  auto* r = s.envelope.mutable_fence_result();
  for (const auto& [k, v] : e.pairs) {
    auto* kv = r->add_pairs();
    kv->set_key(k);
    kv->set_value(v);
  }
  return s;
}

FenceTable::Outcome FenceTable::OnPublish(const std::string& sender,
                                          const v1::RendezvousPublish& publish) {
  Outcome out;
  const Key key{publish.job(), publish.attempt()};
  const auto placement = placement_(publish.job(), publish.attempt());
  if (!placement) return out;
  if (std::find(placement->begin(), placement->end(), sender) == placement->end()) {
    out.rejected = PermissionError("rendezvous publish from node " + sender +
                                   ", which is not in the placement of " +
                                   AttemptName(publish.job(), publish.attempt()));
    return out;
  }
  Entry& e = entries_[key];
  if (e.placement.empty()) e.placement = *placement;
  if (!e.failure.empty()) return out;
  for (const auto& kv : publish.pairs()) {
    if (kv.value().empty()) {
      e.pairs.erase(kv.key());
    } else {
      e.pairs[kv.key()] = kv.value();
    }
  }
  for (const auto& node : e.placement) {
    Send s{node, {}};
    v1::RendezvousPublish* p = s.envelope.mutable_rendezvous_publish();
    *p = publish;
    p->set_node(sender);
    out.sends.push_back(std::move(s));
  }
  return out;
}

void FenceTable::Complete(const Key& key, Entry& e, Clock::time_point now, Outcome& out) const {
  // Placement order, so a key two nodes put resolves the same way every time.
  for (const auto& node : e.placement) {
    for (const auto& kv : e.joined[node].puts()) e.pairs[kv.key()] = kv.value();
  }
  Send proto = Released("", key, e.open, e);
  const auto* r = &proto.envelope.fence_result();
  if (r->ByteSizeLong() + kResultSlack > kMaxMessageBytes) {
    Fail(key, e,
         "fence " + std::to_string(e.open) + ": the attempt's pairs take " +
             std::to_string(r->ByteSizeLong()) + " bytes, more than a message may carry",
         out);
    return;
  }
  for (size_t i = 0; i < e.placement.size(); ++i) {
    Send s{e.placement[i], {}};
    if (i + 1 == e.placement.size()) {
      s.envelope = std::move(proto.envelope);
    } else {
      s.envelope = proto.envelope;
    }
    out.sends.push_back(std::move(s));
  }
  out.fence_time = now - e.opened_at;
  e.completed = e.open;
  e.open = 0;
  e.joined.clear();
}

FenceTable::Outcome FenceTable::OnWorkerEvent(const std::string& node, const v1::WorkerEvent& ev) {
  Outcome out;
  if (ev.kind() != v1::WorkerEvent::KIND_EXITED &&
      ev.kind() != v1::WorkerEvent::KIND_START_FAILED) {
    return out;
  }
  const Key key{ev.job(), ev.attempt()};
  auto placement = placement_(ev.job(), ev.attempt());
  if (!placement) return out;  // Sweep() tells the nodes
  Entry& e = entries_[key];
  if (e.placement.empty()) e.placement = std::move(*placement);
  if (!e.failure.empty()) return out;
  const auto last = e.last_contributed.find(node);
  Exit x{node, ev.rank(),
         ev.kind() == v1::WorkerEvent::KIND_START_FAILED
             ? std::string("failed to start")
             : rendezvous::DescribeRankExit(ev.exit_code(), ev.signal()),
         last == e.last_contributed.end() ? 0 : last->second};
  e.exits.push_back(std::move(x));
  CheckExits(key, e, out);
  return out;
}

FenceTable::Outcome FenceTable::Sweep() {
  Outcome out;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (placement_(it->first.first, it->first.second)) {
      ++it;
      continue;
    }
    // Only nodes that use the rendezvous hear of it; the entry of a job that never fenced holds
    // nothing but its ranks' exits.
    if (!it->second.last_contributed.empty()) {
      Fail(it->first, it->second, AttemptName(it->first.first, it->first.second) + " ended", out);
    }
    it = entries_.erase(it);
  }
  return out;
}

}  // namespace trainlet::coordinator
