// MissedPurges: the data of a deleted job on a node that was away when the delete completed
// (issue 19, defect 9: "Purge a node that was down at delete time").
//
// When a delete completes, PurgeJob goes to every node that ran any attempt of the job
// (lifecycle_rules.h's NodesThatRan). A node that is not registered or is Lost then misses it:
// it is remembered here, and the PurgeJob is sent again when that node registers, before any
// plan can reach it (both go, in order, on the node's one connection; the registration's own
// scheduling pass comes after ReconcileNode). So a job re-applied under the name and placed on
// that node afterwards never starts beside the old data.
//
// The rule is "purge only what this coordinator deleted", never "purge what the coordinator does
// not know": a coordinator on a store restored from an older backup (same cluster id, so agents
// accept it) does not know the jobs created since, and must not delete their data.
//
// Durable: each missed purge is a tombstone in the store (missed_purges_tombstone.h), written
// before the job's record goes (JobController::MaybeFinishDelete), read back by Load, so a
// coordinator restarted (or failed over) between the delete and the node's return still purges
// it. A tombstone carries the job's UID, and the agent keeps data stamped with another one, so a
// job applied again under the name never loses its data to an old tombstone. Retention: at most
// kMaxEntries (job, node) pairs, for kRetentionMs; the oldest go first, and then the data stays
// until an operator removes it (docs/operations.md, "Job data on the nodes").
//
// The shared directory (issue 18). A job that ran in the agents' shared_dir (trainlet.io/
// working-dir: shared) has one directory that every node sees, so exactly one node removes it:
// the first node that ran the job, in name order, that is connected at the delete gets
// PurgeJob.shared_dir. When none is, every tombstone of the job says `shared`, the first of
// them to register gets it, and the others' tombstones are rewritten without it, so a restart in
// between keeps that choice. (The agent checks the directory's UID stamp first:
// agent/job_data_purge.h.)
//
// Store errors: Purge returns them (nothing is sent or kept in memory; the caller keeps the job
// and tries again); the rewrites after a registration only log them, since a tombstone sent
// twice is harmless (the agent's UID check).
//
// Owned by JobController, on the coordinator's loop; no locks. `nodes`, `agents` and `store`
// outlive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "coordinator/agent_commands.h"
#include "coordinator/job_store.h"
#include "coordinator/missed_purges_tombstone.h"
#include "coordinator/node_registry.h"

namespace trainlet::coordinator {

class MissedPurges {
 public:
  static constexpr size_t kMaxEntries = 10000;
  static constexpr int64_t kRetentionMs = int64_t{7} * 24 * 3600 * 1000;

  // `store`: where the tombstones are kept; nullptr keeps them in memory only (tests).
  MissedPurges(const NodeRegistry* nodes, AgentCommands* agents, JobStore* store = nullptr)
      : nodes_(nodes), agents_(agents), store_(store) {}

  // Reads the stored tombstones back (a coordinator start, or a failover). One that does not
  // decode is logged and dropped; an error is the store's.
  Status Load();
  // `job` (incarnation `uid`) was deleted at `now_ms`: the nodes of `ran` (those that ran it)
  // that are not registered or are Lost get a tombstone, stored first; then PurgeJob goes to
  // the others. `shared`: the job ran in the shared directory, which one node purges (above).
  // On a store error, nothing is sent or remembered.
  Status Purge(const std::string& job, const std::string& uid, const std::vector<std::string>& ran,
               int64_t now_ms, bool shared = false);
  // `node` registered: PurgeJob again for every job it missed. Returns those jobs. `exists`,
  // when given, says whether a job of that name exists now: a tombstone without a UID (a job
  // stored before UIDs) is then dropped unsent, since the agent could not tell the new job's
  // data from the old.
  std::vector<std::string> OnRegistered(
      const std::string& node, int64_t now_ms,
      const std::function<bool(const std::string&)>& exists = nullptr);
  size_t size() const { return missed_.size(); }

 private:
  using Key = std::pair<std::string, std::string>;  // (node, job)
  struct Missed {
    std::string uid;
    int64_t deleted_unix_ms = 0;
    bool shared = false;  // the first of the job's entries to register purges the shared dir
  };
  static PurgeTombstone Tombstone(const Key& key, const Missed& m);
  void Expire(int64_t now_ms);
  void Forget(const Key& key);            // from memory and, best effort, the store
  void Rewrite(const PurgeTombstone& t);  // best effort

  // Constant after construction.
  const NodeRegistry* nodes_;
  AgentCommands* agents_;
  JobStore* store_;
  // Owned by the loop: by (node, job). The store holds the same, one tombstone each.
  std::map<Key, Missed> missed_;
};

}  // namespace trainlet::coordinator
