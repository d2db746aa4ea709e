// FenceTable: the coordinator's half of the rendezvous store (proto/trainlet/v1/rendezvous.proto).
//
// Each node of an attempt's placement sends one FenceContribute per fence, holding its local
// ranks' puts. When every node has contributed to fence e, each node gets one FenceResult with
// every pair put in the attempt so far (a clash between nodes goes to the higher node rank, as
// one between ranks goes to the higher rank on the agent).
//
// Failure: a rank that ends (any exit code) on a node that has not contributed to the open fence,
// or to one opened later, fails the attempt's rendezvous: every node gets FenceResult{ok=false}
// naming the rank, the node, how it ended and the fence, and every later contribution is answered
// the same way at once. An attempt that stops being live (failed, stopped, replaced, deleted) is
// failed the same way by Sweep() and forgotten.
//
// Restart and failover: the table lives in memory only. Every agent, on each registration, resyncs
// the attempts it holds fence state for (the last release it saw, with its pairs, and a
// contribution still unanswered); a new coordinator rebuilds each entry from them, so a fence in
// flight across a restart completes, and a release the old one sent only to some nodes reaches
// the rest (docs/rendezvous.md, "Coordinator restart and failover").
//
// Trust: a contribution counts only from a node of the live attempt's placement, under the name
// the coordinator authenticated (the node field of the message is not believed).
//
// No sockets, no clock of its own: every call returns what to send; the caller sends it. Owned by
// the coordinator's loop; no locks.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "trainlet/v1/envelope.pb.h"

namespace trainlet::coordinator {

class FenceTable {
 public:
  using Clock = std::chrono::steady_clock;
  // The placement (node names in node-rank order) of (job, attempt) while that attempt is live
  // (Starting or Running, not being deleted); nullopt otherwise.
  using PlacementFn = std::function<std::optional<std::vector<std::string>>(const std::string& job,
                                                                            uint32_t attempt)>;

  struct Send {
    std::string node;
    v1::Envelope envelope;  // holds a FenceResult
  };
  struct Outcome {
    std::vector<Send> sends;
    // A fence completed, this long after its first contribution (for CoordinatorOps::OnFence).
    std::optional<std::chrono::duration<double>> fence_time;
    // Why a contribution was not counted (not from the placement, wrong epoch); OK otherwise.
    Status rejected;
  };

  explicit FenceTable(PlacementFn placement);

  // `sender`: the node name the coordinator authenticated.
  Outcome OnContribute(const std::string& sender, const v1::FenceContribute& contribution,
                       Clock::time_point now);
  // Pairs a node's rank published outside a fence (RendezvousRequest.OP_PUBLISH): kept with the
  // attempt's pairs (an empty value removes one), so later fence results carry them, and sent at
  // once to every node of the placement, the sender too. Rejected like a contribution from a
  // node outside the placement; nothing for an attempt that is not live or whose rendezvous
  // failed.
  Outcome OnPublish(const std::string& sender, const v1::RendezvousPublish& publish);
  // Every worker event, before the job controller sees it (so the attempt is still live and the
  // reason names the rank). Only exits and failed starts matter.
  Outcome OnWorkerEvent(const std::string& node, const v1::WorkerEvent& event);
  // Fails and forgets the entries of attempts that are no longer live. Call when the jobs changed.
  Outcome Sweep();

  size_t size() const { return entries_.size(); }

 private:
  struct Exit {
    std::string node;
    uint32_t rank = 0;
    std::string how;          // "exited with signal 9"
    uint64_t node_epoch = 0;  // the last fence its node had contributed to when it ended
  };
  struct Entry {
    std::vector<std::string> placement;
    uint64_t completed = 0;  // last fence released
    uint64_t open = 0;       // fence being gathered; 0 when none
    Clock::time_point opened_at{};
    std::map<std::string, v1::FenceContribute> joined;  // node -> its contribution to `open`
    std::map<std::string, uint64_t> last_contributed;   // node -> last fence it contributed to
    std::map<std::string, std::string> pairs;           // everything released so far
    std::vector<Exit> exits;
    std::string failure;  // non-empty: the rendezvous failed, for this reason
  };
  using Key = std::pair<std::string, uint32_t>;

  // Marks the entry failed and tells every node of its placement.
  void Fail(const Key& key, Entry& e, const std::string& why, Outcome& out) const;
  // Fails the open fence when an exited rank's node has not joined it.
  bool CheckExits(const Key& key, Entry& e, Outcome& out) const;
  void Complete(const Key& key, Entry& e, Clock::time_point now, Outcome& out) const;
  // A node's resync after it registered (FenceContribute.resync): adopts a later release it saw,
  // answers contributions to fences released already, and joins its contribution to the next.
  void Resync(const std::string& sender, const Key& key, Entry& e, const v1::FenceContribute& c,
              Clock::time_point now, Outcome& out) const;
  // The released result of fence `epoch`, holding every pair through e.completed, for `node`.
  static Send Released(const std::string& node, const Key& key, uint64_t epoch, const Entry& e);
  // Counts `c` (fence e.completed + 1) as `sender`'s join; completes the fence when it is the last.
  void Join(const std::string& sender, const Key& key, Entry& e, const v1::FenceContribute& c,
            Clock::time_point now, Outcome& out) const;
  static Send Result(const std::string& node, const Key& key, uint64_t epoch, bool ok,
                     const std::string& message);

  PlacementFn placement_;
  std::map<Key, Entry> entries_;
};

}  // namespace trainlet::coordinator
