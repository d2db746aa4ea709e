#include "coordinator/resources.h"

#include <algorithm>

namespace trainlet::coordinator {
namespace {

constexpr int64_t kMaxQuantity = kMaxQuantityUnits;

constexpr std::string_view kNames[kNumResourceKinds] = {"cpu", "memory", "nvidia.com/gpu",
                                                        "amd.com/gpu", "apple.com/gpu"};

}  // namespace

std::string_view ResourceName(ResourceKind kind) { return kNames[static_cast<int>(kind)]; }

bool IsGpu(ResourceKind kind) {
  return kind == ResourceKind::kNvidiaGpu || kind == ResourceKind::kAmdGpu ||
         kind == ResourceKind::kAppleGpu;
}

bool Resources::empty() const {
  return std::all_of(amount.begin(), amount.end(), [](int64_t v) { return v == 0; });
}

bool Resources::Covers(const Resources& request) const {
  for (int i = 0; i < kNumResourceKinds; ++i) {
    if (request.amount[i] > amount[i]) return false;
  }
  return true;
}

Resources& Resources::operator+=(const Resources& other) {
  for (int i = 0; i < kNumResourceKinds; ++i) amount[i] += other.amount[i];
  return *this;
}

Resources& Resources::operator-=(const Resources& other) {
  for (int i = 0; i < kNumResourceKinds; ++i) {
    amount[i] = std::max<int64_t>(0, amount[i] - other.amount[i]);
  }
  return *this;
}

std::string FormatQuantity(ResourceKind kind, int64_t amount) {
  if (kind == ResourceKind::kCpu) {
    if (amount % 1000 == 0) return std::to_string(amount / 1000);
    return std::to_string(amount) + "m";
  }
  if (kind == ResourceKind::kMemory && amount != 0) {
    // The shortest exact form, binary first on a tie: 4Gi, 16G, 1536Mi.
    std::string best = std::to_string(amount);
    static const std::pair<const char*, int64_t> kUnits[] = {
        {"Ei", int64_t{1} << 60}, {"Pi", int64_t{1} << 50},
        {"Ti", int64_t{1} << 40}, {"Gi", int64_t{1} << 30},
        {"Mi", int64_t{1} << 20}, {"Ki", int64_t{1} << 10},
        {"T", 1000000000000},     {"G", 1000000000},
        {"M", 1000000},           {"k", 1000}};
    for (const auto& [suffix, unit] : kUnits) {
      if (amount % unit != 0) continue;
      std::string s = std::to_string(amount / unit) + suffix;
      if (s.size() < best.size()) best = std::move(s);
    }
    return best;
  }
  return std::to_string(amount);
}

std::string FormatResources(const Resources& r) {
  std::string out;
  for (int i = 0; i < kNumResourceKinds; ++i) {
    if (r.amount[i] == 0) continue;
    const auto kind = static_cast<ResourceKind>(i);
    if (!out.empty()) out += ", ";
    out += std::string(ResourceName(kind)) + ": " + FormatQuantity(kind, r.amount[i]);
  }
  return out;
}

Result<ParsedRequests> ParseResourceRequests(const std::map<std::string, std::string>& requests) {
  ParsedRequests out;
  for (const auto& [name, text] : requests) {
    int kind = -1;
    for (int i = 0; i < kNumResourceKinds; ++i) {
      if (name == kNames[i]) kind = i;
    }
    const std::string field = "spec.trainer.resourcesPerNode." + name;
    if (kind < 0) {
      out.ignored.push_back(field +
                            ": ignored (trainlet places by cpu, memory, nvidia.com/gpu, "
                            "amd.com/gpu and apple.com/gpu)");
      continue;
    }
    const auto k = static_cast<ResourceKind>(kind);
    auto q = ParseQuantity(text, k == ResourceKind::kCpu ? 1000 : 1);
    if (!q.ok()) return InvalidError(field + ": " + q.status().message());
    out.resources[k] = *q;
  }
  return out;
}

Resources AllocatableOf(const v1::NodeInfo& info) {
  Resources r;
  if (!info.allocatable().empty()) {  // the agent's own account (its accelerator plugins)
    for (int i = 0; i < kNumResourceKinds; ++i) {
      auto it = info.allocatable().find(std::string(kNames[i]));
      if (it == info.allocatable().end()) continue;
      const int64_t v = std::clamp<int64_t>(it->second, 0, kMaxQuantity / 1000);
      r.amount[i] = i == static_cast<int>(ResourceKind::kCpu) ? v * 1000 : v;
    }
    return r;
  }
  const v1::Topology& t = info.topology();
  r[ResourceKind::kCpu] = int64_t{t.pus()} * 1000;
  r[ResourceKind::kMemory] =
      static_cast<int64_t>(std::min<uint64_t>(t.memory_bytes(), kMaxQuantity));
  for (const auto& gpu : t.gpus()) {
    if (gpu.vendor() == "nvidia") ++r[ResourceKind::kNvidiaGpu];
    if (gpu.vendor() == "amd") ++r[ResourceKind::kAmdGpu];
    if (gpu.vendor() == "apple") ++r[ResourceKind::kAppleGpu];
  }
  return r;
}

}  // namespace trainlet::coordinator
