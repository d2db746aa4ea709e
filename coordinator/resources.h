// Node resources as the planner counts them: Kubernetes quantities ("2", "500m", "4Gi", "16G")
// parsed into whole units, and what a node can give (its allocatable).
//
// Units are fixed per resource so sums and comparisons are plain integer arithmetic:
// cpu in millicores, memory in bytes, GPUs in devices. Pure functions, safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/quantity.h"
#include "common/status.h"
#include "trainlet/v1/node.pb.h"

namespace trainlet::coordinator {

// The resources the planner tracks, in a fixed order (the index into Resources::amount).
enum class ResourceKind : int { kCpu = 0, kMemory, kNvidiaGpu, kAmdGpu, kAppleGpu };
inline constexpr int kNumResourceKinds = 5;
// "cpu", "memory", "nvidia.com/gpu", "amd.com/gpu", "apple.com/gpu".
std::string_view ResourceName(ResourceKind kind);
bool IsGpu(ResourceKind kind);

struct Resources {
  // cpu: millicores; memory: bytes; GPUs: devices. Never negative.
  std::array<int64_t, kNumResourceKinds> amount{};

  int64_t& operator[](ResourceKind k) { return amount[static_cast<int>(k)]; }
  int64_t operator[](ResourceKind k) const { return amount[static_cast<int>(k)]; }
  bool empty() const;
  // True when every amount of `request` is at most this one's.
  bool Covers(const Resources& request) const;
  Resources& operator+=(const Resources& other);
  // Saturates at 0: a node whose jobs ask more than it has (it shrank) has nothing free.
  Resources& operator-=(const Resources& other);
  bool operator==(const Resources&) const = default;
};

// ParseQuantity (common/quantity.h), here under the name the planner's callers use.
using ::trainlet::ParseQuantity;

// The short form of an amount of `kind`: cpu "2" or "500m", memory "4Gi" / "1500M" / "123",
// GPUs "8".
std::string FormatQuantity(ResourceKind kind, int64_t amount);
// "cpu: 2, nvidia.com/gpu: 8" for the non-zero amounts, in kind order; "" when empty.
std::string FormatResources(const Resources& r);

struct ParsedRequests {
  Resources resources;
  // Names the planner does not track (ephemeral-storage, hugepages-2Mi, vendor extended
  // resources): each as "<name>: ignored (...)", for the job's notes.
  std::vector<std::string> ignored;
};
// Parses trainer.resourcesPerNode (name -> quantity text). Errors (kInvalid) name the field:
// "spec.trainer.resourcesPerNode.memory: \"lots\" is not a quantity (...)".
Result<ParsedRequests> ParseResourceRequests(const std::map<std::string, std::string>& requests);

// What a node offers to ranks: its NodeInfo.allocatable map when the agent sent one (cpu in PUs,
// memory in bytes, GPUs in devices), else derived from its hwloc topology (cpu = PUs, memory =
// total memory, GPUs counted by vendor). The one place that reads a node's capacity.
Resources AllocatableOf(const v1::NodeInfo& info);

}  // namespace trainlet::coordinator
