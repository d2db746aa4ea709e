// LogTarget: which worker's log file a `logs` request reads, and on which node (issue 18).
//
// A request names a worker as a global rank, or as a replicated job ("step") and the index of its
// worker (`--step S --rank I`), of the current attempt or of an earlier one (`--attempt N`). An
// earlier attempt is read as it was: its workers' numbering comes from JobStatus.attempt_steps
// (the ranks each step had in that attempt, recorded when it was placed; a main world of another
// size numbers steps differently) and its node from AttemptRecord.rank_nodes (where that attempt
// ran). For attempts placed before attempt_steps existed, the current attempt's numbering is used.
//
// Pure functions of the job's status; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::coordinator {

struct LogTarget {
  uint32_t rank = 0;     // the worker's global rank in `attempt`
  uint32_t attempt = 0;  // never 0
  std::string node;      // where that attempt ran the worker
  bool done = false;     // no more output will come (an earlier attempt, or the rank ended)
};

// The global rank of the `index`-th worker (by rank) of step `step` ("" names the main one, whose
// index is its global rank) in attempt `attempt` of `status` (0: the current one); nullopt when
// that attempt had no such worker.
std::optional<uint32_t> AttemptStepWorkerRank(const v1::JobStatus& status, const std::string& step,
                                              uint32_t index, uint32_t attempt);

// "1-3", or "1, 3, 4" when some are missing: the attempts `status` records.
std::string AttemptNumbers(const v1::JobStatus& status);

// Where `request` (job `shown` as messages name it) reads. Errors, each NotFound naming the flag:
//   "--attempt 7: trainjob/x has attempts 1-3"
//   "--step init --rank 2 (attempt 1): trainjob/x has workers 0-1 of that replicated job"
//   "--rank 9 (attempt 2): trainjob/x has ranks 0-5"
// The caller checks first that the job has started (status.attempt() != 0).
Result<LogTarget> ResolveLogTarget(const v1::JobStatus& status, const v1::LogsRequest& request,
                                   const std::string& shown);

}  // namespace trainlet::coordinator
