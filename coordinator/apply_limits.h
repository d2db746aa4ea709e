// ApplyLimits: how much one `apply` and one TrainJob may carry, checked when a file is applied so
// that nothing stored can later make an answer too large to send (issue 19, defects 1 and 8).
//
// The per-field caps follow the limits the job meets anyway: one argv or env string longer than
// MAX_ARG_STRLEN (128 KiB) cannot be passed to execve, and Kubernetes caps an object's annotations
// at 256 KiB in all. The per-file cap comes from a measurement (docs/operations.md, "How large an
// apply may be"): the largest file the coordinator's loop takes in well under one heartbeat
// interval.
//
// Pure functions and constants; any thread.
#pragma once

#include <cstddef>

#include "common/status.h"
#include "common/trainjob/trainjob_model.h"

namespace trainlet::coordinator {

// One string of spec.trainer.command, spec.trainer.args or one env value: execve's
// MAX_ARG_STRLEN.
inline constexpr size_t kMaxTrainerStringBytes = 128u << 10;
// spec.trainer.command and spec.trainer.args together (each string counts its bytes plus one).
inline constexpr size_t kMaxTrainerArgvBytes = 256u << 10;
// spec.trainer.env: every name and value (each pair counts name, '=', value and one).
inline constexpr size_t kMaxTrainerEnvBytes = 256u << 10;
// metadata.labels and metadata.annotations together, as Kubernetes caps annotations.
inline constexpr size_t kMaxMetadataBytes = 256u << 10;
// Documents (TrainJobs and runtimes) in one applied file.
inline constexpr size_t kMaxApplyDocuments = 2000;

// OK, or Invalid naming the TrainJob, the field and both sizes, e.g.
// "TrainJob/big: spec.trainer.args: 3145728 bytes with spec.trainer.command, more than the
// 262144 a TrainJob may carry (docs/operations.md)".
Status CheckTrainJobSizes(const trainjob::TrainJob& job);
// OK, or Invalid naming the file when it holds more than kMaxApplyDocuments documents, then the
// first TrainJob CheckTrainJobSizes refuses.
Status CheckApplySizes(const trainjob::ParsedFile& file, const std::string& source);

}  // namespace trainlet::coordinator
