// Reading a JobStatus as JobStore stored it, including records written before the job phase,
// rank states and attempt results were enums.
//
// Those older records hold them as strings (JobStatus.phase, RankStatus.state,
// AttemptRecord.result, spelled as JobPhaseName, RankStateName and AttemptResultName spell them).
// JobStore calls UpgradeStoredStatus once per record it decodes, so nothing past the store sees a
// string state, and nothing writes one.
//
// Pure function, no I/O: safe from any thread.
#pragma once

#include "common/status.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::coordinator {

// For the job phase, each rank's state and each attempt's result: when the enum is unset and the
// old string is set, the string is parsed into the enum; the old strings are then cleared. Unset
// with no string is left as it is for the phase (a job just created, read as Pending) and for an
// attempt's result (still running); a rank always has a state, so for a rank it is an error.
//
// Returns Invalid, naming the field, the rank or attempt and the value, when a string is not one
// the older trainlet wrote or an enum value is one this build does not know (a corrupt record, or
// one written by a newer trainlet): such a record must not read back as, say, a Pending job. The
// caller names the job. `status` may be partly upgraded then; the caller discards it.
Status UpgradeStoredStatus(v1::JobStatus& status);

}  // namespace trainlet::coordinator
