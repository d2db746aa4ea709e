// trainlet-admission-bench: the time of one queue admission pass (RunAdmissionPass) with
// 10,000 pending workloads and 1,000 admitted ones on 20 ClusterQueues (4 cohorts of 5, two
// GPU flavors, cpu/memory/nvidia.com/gpu in one resource group, preemption and fair sharing
// on). The target for the whole scheduling pass is 20 ms.
//
//   trainlet-admission-bench
//   trainlet-admission-bench --benchmark_filter=Full --benchmark_repetitions=10
#include <benchmark/benchmark.h>

#include <random>
#include <string>

#include "coordinator/admission_model.h"
#include "coordinator/queue_admission.h"

namespace trainlet::coordinator::admission {
namespace {

constexpr char kGpu[] = "nvidia.com/gpu";
constexpr int64_t kGi = int64_t{1} << 30;

// `room`: quota per ClusterQueue and flavor, in 8-GPU nodes.
AdmissionInputs MakeInputs(int pending, int admitted, int queues, int64_t room) {
  std::mt19937 rng(7);
  AdmissionInputs in;
  in.config.fair_sharing = true;
  in.config.usage_half_life_ms = 3'600'000;
  in.config.default_local_queue = "default";
  in.flavors = {{"h100", {{"gpu-model", "h100"}}}, {"a100", {{"gpu-model", "a100"}}}};
  for (int i = 0; i < queues; ++i) {
    ClusterQueue q;
    q.name = "team-" + std::to_string(i);
    q.cohort = "cohort-" + std::to_string(i % 4);
    q.strategy = i % 3 == 0 ? QueueingStrategy::kStrictFifo : QueueingStrategy::kBestEffortFifo;
    q.preemption.within_cluster_queue = WithinClusterQueuePolicy::kLowerPriority;
    q.preemption.reclaim_within_cohort = ReclaimWithinCohortPolicy::kLowerPriority;
    q.preemption.borrow_within_cohort = BorrowWithinCohortPolicy::kLowerPriority;
    q.fair_weight = 1 + i % 2;
    ResourceGroup g{{kCpu, kMemory, kGpu}, {}};
    for (const char* flavor : {"h100", "a100"}) {
      g.flavors.push_back({flavor,
                           {{kCpu, room * 224'000, {}, {}},
                            {kMemory, room * 2048 * kGi, {}, {}},
                            {kGpu, room * 8, room * 4, room * 4}}});
    }
    q.resource_groups.push_back(std::move(g));
    in.local_queues.push_back({q.name, "default", q.name});
    in.history.push_back({q.name, {{kGpu, 1000.0 * (i % 5)}}, 0});
    in.cluster_queues.push_back(std::move(q));
  }
  auto make = [&](int i) {
    Workload w;
    const int team = static_cast<int>(rng() % queues);
    w.namespace_ = "team-" + std::to_string(team);
    w.key = w.namespace_ + ".job-" + std::to_string(i);
    w.priority = static_cast<int32_t>(rng() % 4) * 100;
    w.creation_ms = i;
    w.pod_count = 1 + static_cast<int64_t>(rng() % 4);
    const int64_t gpus = 1 + static_cast<int64_t>(rng() % 8);
    w.per_pod = {{kCpu, gpus * 16'000}, {kMemory, gpus * 128 * kGi}, {kGpu, gpus}};
    return w;
  };
  // Admitted ones: each in the h100 flavor of its team, as far as nominal quota goes.
  std::vector<int64_t> used(queues, 0);
  for (int i = 0; i < admitted; ++i) {
    Workload w = make(i);
    w.pod_count = 1;
    w.per_pod = {{kCpu, 16'000}, {kMemory, 128 * kGi}, {kGpu, 1}};
    const int team = std::stoi(w.namespace_.substr(5));
    if (used[team] + 1 > room * 8) continue;
    used[team] += 1;
    w.admission =
        Admission{w.namespace_,
                  {{kCpu, "h100", 16'000}, {kMemory, "h100", 128 * kGi}, {kGpu, "h100", 1}},
                  false,
                  false};
    w.admitted_ms = i;
    in.workloads.push_back(std::move(w));
  }
  for (int i = 0; i < pending; ++i) in.workloads.push_back(make(admitted + i));
  return in;
}

// args: pending, admitted, ClusterQueues, quota per queue and flavor in 8-GPU nodes.
void BM_AdmissionPass(benchmark::State& state) {
  const AdmissionInputs in =
      MakeInputs(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
                 static_cast<int>(state.range(2)), state.range(3));
  size_t admitted = 0, preempted = 0;
  for (auto _ : state) {
    AdmissionResult r = RunAdmissionPass(in, 3'600'000);
    admitted = r.admitted.size();
    preempted = r.preemptions.size();
    benchmark::DoNotOptimize(r);
  }
  state.counters["admitted"] = static_cast<double>(admitted);
  state.counters["preempted"] = static_cast<double>(preempted);
}
// Full: 1,000 admitted fill most of the nominal GPU quota (20 queues x 2 flavors x 48 GPUs).
BENCHMARK(BM_AdmissionPass)
    ->Name("BM_AdmissionPass/Full")
    ->Args({10'000, 1'000, 20, 6})
    ->Unit(benchmark::kMillisecond);
// Roomy: quota for a few thousand of the pending ones, so the pass admits many.
BENCHMARK(BM_AdmissionPass)
    ->Name("BM_AdmissionPass/Roomy")
    ->Args({10'000, 1'000, 20, 200})
    ->Unit(benchmark::kMillisecond);

// The part of a pass that interns names and charges admitted usage (BuildAdmissionModel).
void BM_BuildModel(benchmark::State& state) {
  const AdmissionInputs in = MakeInputs(10'000, 1'000, 20, 6);
  for (auto _ : state) {
    AdmissionModel m = BuildAdmissionModel(in);
    benchmark::DoNotOptimize(m);
  }
}
BENCHMARK(BM_BuildModel)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace trainlet::coordinator::admission

BENCHMARK_MAIN();
