// `trainletctl describe node NAME`: a node's hardware as a readable tree (NUMA nodes with their
// memory and CPUs, and the GPUs and NICs local to each), its accelerators, labels and
// allocatable resources; and the GPUS column of `get nodes`. Pure formatting of what the
// coordinator answered, so any thread may call it.
#pragma once

#include <cstdint>
#include <string>

#include "trainlet/v1/operator.pb.h"

namespace trainlet::cli {

std::string DescribeNode(const v1::NodeStatus& node, int64_t now_ms);

// The GPUS column: the accelerators the node reports ("8", "8 (1 unhealthy)"); "0" for none.
std::string GpuColumn(const v1::NodeInfo& info);

}  // namespace trainlet::cli
