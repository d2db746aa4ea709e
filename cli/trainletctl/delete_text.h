// What `trainletctl delete --wait` says when the job is not gone by its timeout. Pure; any
// thread.
//
// A job still Terminating because its ranks are stopping is the usual case. But the job may also
// have no rank running at all (a coordinator that cannot write its store, on a full disk, keeps
// the job): "still stopping its ranks" then sent the operator looking for processes that do not
// exist (issue 19, messages that mislead).
#pragma once

#include <string>

#include "trainlet/v1/operator.pb.h"

namespace trainlet::cli {

// `wait` is the answer to the Deleted wait, not met; `timeout` as the user gave it ("60s").
std::string DeleteNotDoneMessage(const std::string& name, const std::string& timeout,
                                 const v1::WaitJobResult& wait);

}  // namespace trainlet::cli
