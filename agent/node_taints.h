// The agent's `taints` key: node taints in kubectl taint's form, sent in NodeInfo.taints.
// Pure functions, safe from any thread.
#pragma once

#include <string_view>
#include <vector>

#include "common/status.h"
#include "trainlet/v1/node.pb.h"

namespace trainlet::agent {

// "key=value:Effect" or "key:Effect", Effect one of NoSchedule, PreferNoSchedule, NoExecute.
// The key follows Kubernetes' label key rules loosely: non-empty, no '=', ':' or ','.
// Errors (kInvalid) quote the text and say what is wrong.
Result<v1::Taint> ParseTaint(std::string_view text);

// A comma-separated list of taints ("" for none); errors say which entry.
Result<std::vector<v1::Taint>> ParseTaintList(std::string_view text);

}  // namespace trainlet::agent
