// LogWorkers: the workers `trainletctl logs JOB` reads when no --rank is given, of the current
// attempt or of an earlier one (--attempt N, --previous), each with the label its lines are
// prefixed with ("rank 3", "dataset-initializer 0").
//
// An earlier attempt is listed as it ran: its rank count from AttemptRecord.rank_nodes and its
// replicated jobs' workers from JobStatus.attempt_steps (a main world of another size numbers the
// steps differently; coordinator/log_target.h). Attempts placed before attempt_steps existed, and
// the current one, are listed from the current ranks. Pure; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::cli {

struct LogWorker {
  uint32_t rank = 0;  // global, in the attempt read
  std::string label;
};

// The workers of attempt `attempt` (0: the current one) of `job`, of step `step` only when it is
// not "", in rank order. Unavailable, naming the job, when there are none ("has no ranks yet",
// "has no workers of step S"); an attempt the job does not record is listed from the current
// ranks, and the coordinator refuses it when asked for its log.
Result<std::vector<LogWorker>> LogWorkers(const v1::JobStatus& job, uint32_t attempt,
                                          const std::string& step);

// The attempt `--previous` names: the one before the current. Invalid when there is none:
// "--previous: trainjob/x has only attempt 1".
Result<uint32_t> PreviousAttempt(const v1::JobStatus& job, const std::string& shown);

}  // namespace trainlet::cli
