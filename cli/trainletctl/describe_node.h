// `trainletctl describe node NAME`: a node's conditions (Ready, Healthy, SchedulingDisabled,
// Draining), its hardware as a readable tree (packages, the NUMA nodes in each with their memory
// and CPUs, and the GPUs and NICs local to each), its accelerators, labels and allocatable
// resources; and the GPUS column of `get nodes`. Pure formatting of what the
// coordinator answered, so any thread may call it.
#pragma once

#include <cstdint>
#include <string>

#include "trainlet/v1/operator.pb.h"

namespace trainlet::cli {

std::string DescribeNode(const v1::NodeStatus& node, int64_t now_ms);

// The hardware tree alone, each line indented by two spaces:
//   Machine: 2 packages, 112 cores, 224 PUs, 2.0Ti, <cpu model>
//   ├─ Package 0: <model>, 56 cores, 112 PUs (CPUs 0-55,112-167), 1007Gi
//   │  └─ NUMA 0: 1007Gi, CPUs 0-55,112-167
//   │     ├─ GPU 0000:18:00.0 nvidia ...
// A device sits under its NUMA node, else under its package, else under a last branch "not
// local to one package". Topologies without cpu_packages (older agents) start at the NUMA nodes.
std::string TopologyTree(const v1::NodeInfo& info);

// The Conditions section: one row per condition (type, status, age, reason, message).
std::string NodeConditions(const v1::NodeStatus& node, int64_t now_ms);

// The GPUS column: the accelerators the node reports ("8", "8 (1 unhealthy)"); "0" for none.
std::string GpuColumn(const v1::NodeInfo& info);

}  // namespace trainlet::cli
