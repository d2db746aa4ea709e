// What `get clusterqueues|localqueues` and `describe clusterqueue` show beside the objects: per
// ClusterQueue the pending and admitted jobs and the usage against quota per flavor (as the last
// admission pass saw it, JobAdmitter::usage), and, for one named ClusterQueue, its jobs in order
// with why each waits; per LocalQueue its pending and admitted jobs.
//
// Pure function of its arguments; on the coordinator's loop (the admitter and jobs are
// JobController's).
#pragma once

#include <cstddef>
#include <vector>

#include "coordinator/job_admitter.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::coordinator {

// Entries of QueueUsage.jobs at most: the answer of one describe stays far below the message
// cap with 10,000 waiting jobs.
inline constexpr size_t kQueueEntriesShown = 500;

// Fills `usage` of every ClusterQueue and LocalQueue in `list`; with `with_jobs`, also the jobs
// of each ClusterQueue.
void FillQueueUsage(v1::QueueObjectList& list, const JobAdmitter& admitter,
                    const std::vector<const v1::JobStatus*>& jobs, bool with_jobs);

}  // namespace trainlet::coordinator
