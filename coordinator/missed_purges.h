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
// accept it) does not know the jobs created since, and must not delete their data. The cost is
// that the memory is this process's only: a coordinator restarted between the delete and the
// node's return forgets it, and the data stays until an operator removes it (docs/operations.md,
// "Job data on the nodes"). At most kMaxEntries (job, node) pairs are kept, for kRetention; the
// oldest go first.
//
// The shared directory (issue 18). A job that ran in the agents' shared_dir (trainlet.io/
// working-dir: shared) has one directory that every node sees, so exactly one node removes it:
// the first node that ran the job, in name order, that is connected at the delete gets
// PurgeJob.shared_dir. When none is, the first of them to register gets it, and the others never
// do. (The agent checks the directory's UID stamp first: agent/job_data_purge.h.)
//
// Owned by JobController, on the coordinator's loop; no locks. `nodes` and `agents` outlive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/agent_commands.h"
#include "coordinator/node_registry.h"

namespace trainlet::coordinator {

class MissedPurges {
 public:
  static constexpr size_t kMaxEntries = 100000;
  static constexpr int64_t kRetentionMs = int64_t{7} * 24 * 3600 * 1000;

  MissedPurges(const NodeRegistry* nodes, AgentCommands* agents) : nodes_(nodes), agents_(agents) {}

  // `job` (incarnation `uid`) was deleted at `now_ms`: PurgeJob to each of `ran` (the nodes
  // that ran it) that is registered and not Lost; the others are remembered for their
  // registration. `shared`: the job ran in the shared directory, which one node purges (above).
  void Purge(const std::string& job, const std::string& uid, const std::vector<std::string>& ran,
             int64_t now_ms, bool shared = false);
  // `node` registered: PurgeJob again for every job it missed. Returns those jobs.
  std::vector<std::string> OnRegistered(const std::string& node, int64_t now_ms);
  size_t size() const { return missed_.size(); }

 private:
  void Expire(int64_t now_ms);

  // Constant after construction.
  const NodeRegistry* nodes_;
  AgentCommands* agents_;
  struct Missed {
    std::string uid;
    int64_t deleted_unix_ms = 0;
    bool shared = false;  // the first of the job's entries to register purges the shared dir
  };
  // Owned by the loop: by (node, job).
  std::map<std::pair<std::string, std::string>, Missed> missed_;
};

}  // namespace trainlet::coordinator
