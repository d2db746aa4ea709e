// PurgeTombstone: one deleted job's data left on one node that was away when the delete
// completed (issue 19, defect 9; MissedPurges, missed_purges.h), as the store keeps it.
//
// Each tombstone is one cluster value (JobStore::PutClusterValue) of its own, so a delete
// touches only its own keys and a coordinator restart or a failover reads them back
// (JobStore::ListClusterValues(kPurgeTombstonePrefix)):
//   key   "missed-purge/<node>/<job>"   (job names hold no '/', so the last '/' splits them)
//   value {"version":1,"uid":"<JobStatus.uid>","deletedMs":1764000000000,"shared":false}
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace trainlet::coordinator {

inline constexpr const char* kPurgeTombstonePrefix = "missed-purge/";

struct PurgeTombstone {
  std::string node;
  std::string job;
  // The deleted incarnation (JobStatus.uid), sent in the PurgeJob: the agent keeps data
  // stamped with another UID, so a job applied again under the name keeps its own. "" for a
  // job stored before UIDs.
  std::string uid;
  int64_t deleted_unix_ms = 0;
  // This node is one that may still purge the job's shared directory: every node that ran the
  // job was away at the delete, and none has registered since (missed_purges.h).
  bool shared = false;

  // The cluster value's key and value, as above.
  std::string Key() const;
  std::string Value() const;
  bool operator==(const PurgeTombstone&) const = default;
};

// kInvalid naming the key and what is wrong (a key outside the prefix or without node and job,
// a value that is not the JSON above, or of another version).
Result<PurgeTombstone> DecodePurgeTombstone(const std::string& key, const std::string& value);

}  // namespace trainlet::coordinator
