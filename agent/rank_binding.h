// Binding inside a node: which accelerators and which CPUs each local rank of a launch plan gets.
//
// The rule (ComputeRankBindings):
//  - GPUs: the node's splittable accelerators of one vendor (the one with the most devices; an
//    Apple SoC is not splittable) in index order. With L ranks and G GPUs, L <= G gives each rank
//    G/L GPUs of its own, in blocks (rank r: [r*G/L, (r+1)*G/L)); L > G shares them, in blocks
//    again (rank r: GPU r*G/L), so neighbours share.
//  - CPUs: a rank's home is its GPUs' NUMA node(s); a GPU of unknown NUMA node uses its local
//    cpuset; without GPUs, the NUMA nodes that have CPUs are split evenly among the ranks in
//    blocks. The ranks sharing a home split its PUs: every maximal run of consecutive PU numbers
//    is cut into equal pieces and a rank takes the same piece of every run, so with Linux's
//    hyper-thread numbering (0-55,112-167) a rank gets cores with their siblings (0-13,112-125).
//    A topology without NUMA information leaves ranks unbound.
//
// Pure functions except CpusAvailableHere (the thread's affinity); any thread may call them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "trainlet/accelerator_plugin.h"
#include "trainlet/v1/launch.pb.h"
#include "trainlet/v1/node.pb.h"

namespace trainlet::agent {

struct RankBinding {
  uint32_t local_rank = 0;
  std::string vendor;             // vendor of `devices`; "" when the rank has none
  std::vector<uint32_t> devices;  // v1::Accelerator.index values
  std::vector<unsigned> cpus;     // sorted PUs; empty: unbound

  std::string CpuList() const;     // "0-13,112-125", "" when unbound
  std::string DeviceList() const;  // "nvidia:0,1", "" when none
};

// One binding per local rank 0..local_ranks-1, by the rule above.
std::vector<RankBinding> ComputeRankBindings(const v1::Topology& topology,
                                             const std::vector<v1::Accelerator>& accelerators,
                                             uint32_t local_ranks);

// The env a rank gets from its binding: the device plugin's visible-devices env (when the rank
// has devices) and TRAINLET_CPUSET (when it is bound).
std::map<std::string, std::string> BindingEnv(
    const RankBinding& binding, const std::vector<std::unique_ptr<AcceleratorPlugin>>& plugins);

// True when every CPU of `cpus` is one this process may run on (an impersonated topology's CPUs
// may not exist on this machine; then the binding is reported but not applied). False where
// the platform has no CPU affinity (macOS): check platform::CpuAffinitySupported() first.
bool CpusAvailableHere(const std::vector<unsigned>& cpus);
// Whether every CPU of `cpus` is in `available` (sorted, as platform::ThisThreadCpus gives it):
// for a plan's ranks, against one read of this thread's CPUs.
bool CpusAvailableIn(const std::vector<unsigned>& available, const std::vector<unsigned>& cpus);

// The AcceleratorEnv an agent uses: live sources for this machine, none when it impersonates
// another through `topology_xml` (sysfs and NVML would describe this machine instead).
AcceleratorEnv AcceleratorEnvFor(const std::string& topology_xml);

// Copies what the plugins found into `info`: accelerators, allocatable, discovered_labels, and
// the discovered labels into labels where no label of that key is set already.
void AddAccelerators(const NodeAccelerators& found, v1::NodeInfo* info);

}  // namespace trainlet::agent

namespace trainlet::agent {

// The bindings of a plan's local ranks, indexed by local_rank (the plan's largest local_rank + 1
// entries), from the node's topology and accelerators; empty when plan.binding() is "none".
// With `grant` (the attempt's CPUs on this node, cpu_allotment.h), the ranks split those CPUs
// only.
std::vector<RankBinding> BindingsForPlan(const v1::LaunchPlan& plan, const v1::NodeInfo& node,
                                         const std::vector<unsigned>* grant = nullptr);

}  // namespace trainlet::agent
