// The words trainletctl shows for the typed states of the operator API: a job's phase, a rank's
// state and an attempt's result ("Running", "StartFailed", ...). The coordinator sends enums; the
// display strings live here.
//
// Pure functions: safe from any thread.
#pragma once

#include <string>

#include "trainlet/v1/operator.pb.h"

namespace trainlet::cli {

// "Pending", "Starting", ... . An unset phase is a job just created: "Pending". A coordinator
// older than the enums sends only the old string field (JobStatus.phase), which is shown as it is.
std::string PhaseText(const v1::JobStatus& job);
std::string PhaseText(const v1::SuspendJobResult& result);
// The job's reason with its message: "Unschedulable: needs 5 nodes ...", or the reason alone.
std::string ReasonText(const v1::JobStatus& job);
// "Pending", "Running", "Succeeded", "Failed", "StartFailed", "Lost", "Stopped".
std::string StateText(const v1::RankStatus& rank);
// "Succeeded", "Failed", "Stopped", and "Running" for an attempt that has not ended.
std::string ResultText(const v1::AttemptRecord& attempt);

// Sets the deprecated string fields (phase, ranks' state, attempts' result) from the enums, so
// -o json|yaml still carry the keys and values scripts read ("phase": "Running"), beside the
// enums' own keys ("jobPhase": "JOB_PHASE_RUNNING"). An attempt still running keeps result "",
// as before.
void FillStateStrings(v1::JobStatus& job);
void FillStateStrings(v1::JobList& jobs);

}  // namespace trainlet::cli
