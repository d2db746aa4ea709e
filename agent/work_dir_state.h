// What a job's work dir on this node holds, for the coordinator's check that the ranks of a
// restart would resume from the same state (coordinator/work_dir_agreement.h).
//
// StampAttempt records, when an attempt's ranks are about to start, which attempt last ran in the
// work dir; ReadWorkDirState answers a ReservePorts that names a checkpoint. Both touch the file
// system and are called from the agent's loop; neither keeps state.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "trainlet/v1/launch.pb.h"

namespace trainlet::agent {

// <work dir>/.trainlet-attempt holds "<job> <attempt> <node>\n".
inline constexpr const char* kAttemptStampFile = ".trainlet-attempt";

// Writes the stamp. Errors: Io.
Status StampAttempt(const std::string& work_dir, const std::string& job, uint32_t attempt,
                    const std::string& node);

// What `work_dir` holds: its stamp, and the checkpoint at `checkpoint_path` (relative to
// `work_dir`, or absolute): whether it exists, its size, newest mtime, and a SHA-256 of its size
// and its first and last MiB (of each regular file, with its name, in name order, for a directory
// of at most 10000 files). The digest is a sample so that a checkpoint of many GiB costs the
// agent's loop two MiB of reading per file, not the whole file: two checkpoints of one size that
// differ only in their middle look the same. Never fails: what cannot be read is in `error`.
v1::WorkDirState ReadWorkDirState(const std::string& work_dir, const std::string& checkpoint_path);

}  // namespace trainlet::agent
