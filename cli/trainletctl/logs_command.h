// trainletctl logs: one worker's log, or every worker's of an attempt with each line labelled,
// read in chunks through the coordinator (which relays them from the node that holds them).
//
// With -f it follows, as `kubectl logs -f` does, until the ranks read have exited, and it waits
// for what is not there yet: a job that has not started (queued, waiting for nodes, suspended:
// what it waits for goes to stderr, once per change) and a rank that is placed but that its agent
// has not started yet (no log on its node). Once the job has ended, such a rank is read once
// more, since it may have started, run and ended between two reads, before it counts as never
// started.
#pragma once

#include <cstdint>
#include <string>

#include "trainletctl/commands.h"

namespace trainlet::cli {

// `step` "" reads global ranks (every rank of every replicated job without --rank); otherwise
// that replicated job's workers, `rank` being the index among them. `attempt` 0 reads the current
// attempt; an earlier one is read as it ran (coordinator/log_target.h). `previous` reads the
// attempt before the current one (kubectl logs --previous).
int CmdLogs(const CommonFlags& f, const std::string& job, int rank, bool follow, uint32_t attempt,
            const std::string& step = "", bool previous = false);

}  // namespace trainlet::cli
