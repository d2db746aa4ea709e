// trainlet-planner-bench: how long GangPlanner::PlaceGang takes for gangs of 8, 128 and 1,000
// nodes on clusters of 1,000 and 10,000 mixed nodes, and how much coordinator memory a registered
// node costs (a NodeRegistry filled with NodeInfos built from the 8-GPU server fixture).
//
//   trainlet-planner-bench                       # both, markdown table of RSS first
//   trainlet-planner-bench --benchmark_filter=Place
#include <benchmark/benchmark.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>

#include "agent/topology.h"
#include "coordinator/gang_planner.h"
#include "coordinator/node_registry.h"

namespace trainlet::coordinator {
namespace {

// The cluster the planner sees: 60% NVIDIA 8-GPU servers, 20% AMD 8-GPU servers, 20% CPU-only;
// 80% labelled node-type=training; zones of 500 nodes, racks of 20; 5% tainted; 30% of the GPU
// nodes partly used by earlier jobs.
std::vector<NodeCapacity> MakeCluster(int n) {
  std::mt19937 rng(42);
  std::vector<NodeCapacity> nodes;
  nodes.reserve(n);
  for (int i = 0; i < n; ++i) {
    NodeCapacity c;
    c.name = "node-" + std::to_string(i);
    c.ready = c.schedulable = c.healthy = true;
    const int kind = i % 10;
    c.allocatable[ResourceKind::kCpu] = kind >= 8 ? 64000 : 224000;
    c.allocatable[ResourceKind::kMemory] = kind >= 8 ? int64_t{256} << 30 : int64_t{2} << 40;
    if (kind < 6) c.allocatable[ResourceKind::kNvidiaGpu] = 8;
    if (kind == 6 || kind == 7) c.allocatable[ResourceKind::kAmdGpu] = 8;
    c.total_slots = kind >= 8 ? 64 : 8;
    c.free_slots = c.total_slots;
    c.free_resources = c.allocatable;
    if (kind < 8 && rng() % 10 < 3) {
      const int64_t used = 1 + static_cast<int64_t>(rng() % 7);
      c.free_slots -= static_cast<uint32_t>(used);
      c.free_resources[kind < 6 ? ResourceKind::kNvidiaGpu : ResourceKind::kAmdGpu] -= used;
    }
    c.labels["topology.kubernetes.io/zone"] = "zone-" + std::to_string(i / 500);
    c.labels["trainlet.io/rack"] = "rack-" + std::to_string(i / 20);
    c.labels["kubernetes.io/hostname"] = c.name;
    if (rng() % 10 < 8) c.labels["node-type"] = "training";
    if (kind < 6) c.labels["trainlet.io/gpu-model"] = "NVIDIA-H100-80GB-HBM3";
    if (rng() % 20 == 0) c.taints.push_back({"dedicated", "inference", "NoSchedule"});
    nodes.push_back(std::move(c));
  }
  return nodes;
}

// args: gang size, cluster size. Asks 8 NVIDIA GPUs and 8 slots per node on training nodes.
void BM_PlaceGang(benchmark::State& state) {
  const auto nodes = MakeCluster(static_cast<int>(state.range(1)));
  GangRequest req;
  req.num_nodes = static_cast<uint32_t>(state.range(0));
  req.slots_per_node = 8;
  req.resources[ResourceKind::kNvidiaGpu] = 8;
  req.node_selector = {{"node-type", "training"}};
  bool placed = false;
  for (auto _ : state) {
    auto p = PlaceGang(req, nodes);
    placed = p.ok();
    benchmark::DoNotOptimize(p);
  }
  state.SetLabel(placed ? "placed" : "does not fit (reason path)");
}
BENCHMARK(BM_PlaceGang)
    ->ArgNames({"gang", "cluster"})
    ->Args({8, 1000})
    ->Args({128, 1000})
    ->Args({1000, 1000})
    ->Args({8, 10000})
    ->Args({128, 10000})
    ->Args({1000, 10000})
    ->Unit(benchmark::kMillisecond);

// A CPU job with no constraints on the same clusters: the planner's floor.
void BM_PlaceGangSlotsOnly(benchmark::State& state) {
  const auto nodes = MakeCluster(static_cast<int>(state.range(1)));
  GangRequest req;
  req.num_nodes = static_cast<uint32_t>(state.range(0));
  req.slots_per_node = 1;
  for (auto _ : state) benchmark::DoNotOptimize(PlaceGang(req, nodes));
}
BENCHMARK(BM_PlaceGangSlotsOnly)
    ->ArgNames({"gang", "cluster"})
    ->Args({1000, 10000})
    ->Unit(benchmark::kMillisecond);

int64_t RssKiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

// Registers `n` nodes whose NodeInfo is what an agent on the 8-GPU server fixture sends.
void ReportRssPerNode(int n) {
  auto topo = agent::DiscoverTopology(std::string(TRAINLET_FIXTURES_DIR) + "/dgx-2socket-8gpu.xml");
  if (!topo.ok()) {
    std::fprintf(stderr, "rss: %s\n", topo.status().message().c_str());
    return;
  }
  v1::NodeInfo base;
  *base.mutable_topology() = *topo;
  base.set_slots(8);
  base.set_agent_version("0.1.0");
  for (int g = 0; g < 8; ++g) {
    auto* a = base.add_accelerators();
    a->set_vendor("nvidia");
    a->set_model("NVIDIA H100 80GB HBM3");
    a->set_uuid("GPU-8e2c1f0a-5b7d-4c3e-9a61-0000000000" + std::to_string(10 + g));
    a->set_pci_bus_id(topo->gpus_size() > g ? topo->gpus(g).pci_bus_id() : "0000:18:00.0");
    a->set_memory_bytes(uint64_t{80} << 30);
    a->set_local_cpuset("0-55,112-167");
    a->set_health("unknown");
    a->set_index(static_cast<uint32_t>(g));
  }
  auto& alloc = *base.mutable_allocatable();
  alloc["cpu"] = topo->pus();
  alloc["memory"] = static_cast<int64_t>(topo->memory_bytes());
  alloc["nvidia.com/gpu"] = 8;
  (*base.mutable_labels())["trainlet.io/gpu-model"] = "NVIDIA-H100-80GB-HBM3";
  (*base.mutable_labels())["nvidia.com/gpu.present"] = "true";
  (*base.mutable_labels())["node-type"] = "training";

  NodeRegistry registry(std::chrono::milliseconds(1000), std::chrono::milliseconds(3000));
  const int64_t before = RssKiB();
  const auto now = NodeRegistry::Clock::now();
  for (int i = 0; i < n; ++i) {
    v1::NodeInfo info = base;
    info.set_name("node-" + std::to_string(i));
    info.set_hostname(info.name());
    info.set_address("10." + std::to_string(i / 65536) + "." + std::to_string((i / 256) % 256) +
                     "." + std::to_string(i % 256));
    (*info.mutable_labels())["topology.kubernetes.io/zone"] = "zone-" + std::to_string(i / 500);
    (*info.mutable_labels())["trainlet.io/rack"] = "rack-" + std::to_string(i / 20);
    // A 40-character key stands in for a CURVE public key (z85).
    char key[41];
    std::snprintf(key, sizeof key, "%040d", i);
    Status s = registry.Register(info, "rid-" + std::to_string(i), key, now, 0);
    if (!s.ok()) std::fprintf(stderr, "register: %s\n", s.message().c_str());
  }
  const int64_t after = RssKiB();
  std::printf(
      "| registered nodes | NodeInfo wire size | RSS before | RSS after | RSS per node |\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: |\n");
  std::printf("| %d | %zu B | %.1f MiB | %.1f MiB | %.1f KiB |\n\n", n, base.ByteSizeLong(),
              before / 1024.0, after / 1024.0, static_cast<double>(after - before) / n);
  std::fflush(stdout);
}

}  // namespace
}  // namespace trainlet::coordinator

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  trainlet::coordinator::ReportRssPerNode(10000);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
