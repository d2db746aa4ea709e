// trainlet-schedule-pass-bench: the CPU time of one JobController::Schedule (the loop tick's
// scheduling pass) with 10,000 pending one-rank jobs over 1,000 one-slot nodes, every slot held,
// in-process (a real JobController over SQLite in a temporary dir; the plans go nowhere):
//   - Off:        no queue objects; the 10,000 wait for room.
//   - Bound:      two ClusterQueues in one cohort (60% and 40% of the nodes' cpu, so together
//                 exactly the 1,000 running jobs) fed by four LocalQueues; the 10,000 wait for
//                 quota. Every iteration advances the clock past the idle interval, so every
//                 pass runs a full admission pass over all of them (the worst case: something
//                 changed before every tick).
//   - BoundIdle:  the same, the clock advancing 1 ms: the ticks between admission passes.
//   - Roomy:      the same queues with quota for all 11,000 jobs: every job is admitted and the
//                 10,000 wait for room, not quota; a full admission pass every iteration, over
//                 11,000 admitted workloads.
// CPU time, unlike bench/scheduler/run.py's wall-clock histogram, is not inflated when the
// machine is loaded. The target for a pass: under 20 ms at 10,000 pending.
// BM_Submit*: the coordinator's side of run.py's submissions, queues off and on (see Submit).
//
//   trainlet-schedule-pass-bench
//   trainlet-schedule-pass-bench --benchmark_repetitions=5
#include <benchmark/benchmark.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "coordinator/job_controller.h"

namespace trainlet::coordinator {
namespace {

constexpr int kNodes = 1000;
constexpr int kPending = 10000;
constexpr int64_t kT0 = 1'700'000'000'000;

class NullSink : public NodeSink {
 public:
  void SendToNode(const std::string&, v1::Envelope) override {}
};

enum class Queueing { kOff, kBound, kRoomy };

// kBound: quota for the kNodes running jobs; kRoomy: for all of them.
std::string Queues(Queueing mode) {
  std::string y = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: f}\n";
  const int total = (mode == Queueing::kRoomy ? kNodes + kPending : kNodes) * 100;
  const int a = total * 6 / 10;
  for (auto [cq, millis] : {std::pair{"bench-a", a}, std::pair{"bench-b", total - a}}) {
    y += "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: " +
         std::string(cq) +
         "}\nspec:\n  cohort: bench\n  namespaceSelector: {}\n  resourceGroups:\n"
         "  - coveredResources: [cpu]\n    flavors:\n    - name: f\n      resources:\n"
         "      - {name: cpu, nominalQuota: " +
         std::to_string(millis) + "m}\n";
    for (const char* n : {"1", "2"}) {
      y += "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: " +
           std::string(cq) + n + "}\nspec: {clusterQueue: " + cq + "}\n";
    }
  }
  return y;
}

// A cluster of kNodes one-slot nodes and kNodes + kPending jobs, after the first pass placed
// what fits.
struct Cluster {
  std::string dir;
  std::unique_ptr<JobStore> store;
  NodeRegistry registry{std::chrono::milliseconds(1000), std::chrono::milliseconds(3000)};
  NullSink sink;
  std::unique_ptr<JobController> controller;
  int64_t now = kT0;

  explicit Cluster(Queueing mode) {
    const bool queues = mode != Queueing::kOff;
    char tmpl[] = "/tmp/trainlet-schedule-pass-bench-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) abort();
    dir = tmpl;
    store = std::move(JobStore::Open(dir + "/state")).value();
    JobControllerOptions options;
    options.start_timeout = std::chrono::hours(1000);  // the plans go nowhere
    controller = std::make_unique<JobController>(store.get(), &registry, &sink, options);
    if (!controller->Load(TRAINLET_RUNTIMES_DIR).ok()) abort();
    for (int i = 0; i < kNodes; ++i) {
      v1::NodeInfo info;
      info.set_name("n" + std::to_string(i));
      info.set_address("10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250));
      info.set_hostname(info.name());
      info.set_slots(1);
      (*info.mutable_allocatable())["cpu"] = 1;
      if (!registry
               .Register(info, "rid-" + info.name(), "key-" + info.name(),
                         NodeRegistry::Clock::now(), now)
               .ok()) {
        abort();
      }
    }
    if (queues && !controller->Apply(Queues(mode), "queues.yaml", now).ok()) abort();
    const char* lqs[] = {"bench-a1", "bench-b1", "bench-a2", "bench-b2"};
    std::string file;
    for (int i = 0; i < kNodes + kPending; ++i) {
      file +=
          "---\napiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: p" +
          std::to_string(i) + "\n";
      if (queues)
        file += "  labels: {kueue.x-k8s.io/queue-name: " + std::string(lqs[i % 4]) + "}\n";
      file +=
          "spec:\n  runtimeRef: {name: plain}\n  trainer:\n    numNodes: 1\n"
          "    numProcPerNode: 1\n    command: [sleep, \"3600\"]\n"
          "    resourcesPerNode: {requests: {cpu: 100m}}\n";
      if ((i + 1) % 2000 == 0 || i + 1 == kNodes + kPending) {
        auto r = controller->Apply(file, "jobs.yaml", now);
        if (!r.ok()) {
          fprintf(stderr, "apply: %s\n", r.status().message().c_str());
          abort();
        }
        file.clear();
      }
    }
    controller->Schedule(now);  // places what fits (and admits, with queues)
    if (!controller->Flush().ok()) abort();
  }
  ~Cluster() {
    controller.reset();
    store.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

void Run(benchmark::State& state, Queueing mode, int64_t step_ms) {
  Cluster c(mode);
  for (auto _ : state) {
    c.now += step_ms;
    c.controller->Schedule(c.now);
  }
  int64_t placed = 0;
  for (const v1::JobStatus* st : c.controller->List()) placed += st->placement_size() > 0;
  state.counters["placed"] = static_cast<double>(placed);
}

// The submission figures in-process: 200 one-rank jobs (100m cpu) applied to 2 nodes of 8
// slots (as bench/scheduler/run.py's local cluster), one Apply each or one Apply of one file,
// queues off or on (one ResourceFlavor, a ClusterQueue whose quota holds every job, a
// LocalQueue). Each Apply stores the jobs, runs a Schedule (admission with queues, placement of
// what fits) and syncs, as the operator endpoint does; a fresh controller and store per
// iteration, built outside the timing.
constexpr int kSubmitJobs = 200;

std::string SubmitJob(int i, bool queues) {
  std::string y =
      "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: j" +
      std::to_string(i) + "\n";
  if (queues) y += "  labels: {kueue.x-k8s.io/queue-name: bench-q}\n";
  return y +
         "spec:\n  runtimeRef: {name: plain}\n  trainer:\n    numNodes: 1\n"
         "    numProcPerNode: 1\n    command: [\"true\"]\n"
         "    resourcesPerNode: {requests: {cpu: 100m}}\n";
}

// labels: the jobs carry the queue label even without queues (then ignored), which parts the
// cost of parsing it from the cost of admission.
void Submit(benchmark::State& state, bool queues, bool one_file, bool labels = false) {
  for (auto _ : state) {
    state.PauseTiming();
    char tmpl[] = "/tmp/trainlet-submit-bench-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) abort();
    const std::string dir = tmpl;
    {
      auto store = std::move(JobStore::Open(dir + "/state")).value();
      NodeRegistry registry{std::chrono::milliseconds(1000), std::chrono::milliseconds(3000)};
      NullSink sink;
      JobControllerOptions options;
      options.start_timeout = std::chrono::hours(1000);
      JobController controller(store.get(), &registry, &sink, options);
      if (!controller.Load(TRAINLET_RUNTIMES_DIR).ok()) abort();
      for (int n = 0; n < 2; ++n) {
        v1::NodeInfo info;
        info.set_name("node-" + std::to_string(n + 1));
        info.set_address("10.0.0." + std::to_string(n + 1));
        info.set_hostname(info.name());
        info.set_slots(8);
        (*info.mutable_allocatable())["cpu"] = 2;
        if (!registry
                 .Register(info, "rid" + info.name(), "key" + info.name(),
                           NodeRegistry::Clock::now(), kT0)
                 .ok()) {
          abort();
        }
      }
      if (queues) {
        const std::string q =
            "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: f}\n---\n"
            "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq}\n"
            "spec:\n  namespaceSelector: {}\n  resourceGroups:\n  - coveredResources: [cpu]\n"
            "    flavors:\n    - name: f\n      resources:\n      - {name: cpu, nominalQuota: "
            "100000}\n---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
            "metadata: {name: bench-q}\nspec: {clusterQueue: cq}\n";
        if (!controller.Apply(q, "queues.yaml", kT0).ok()) abort();
      }
      std::string file;
      for (int i = 0; i < kSubmitJobs; ++i) file += "---\n" + SubmitJob(i, queues || labels);
      state.ResumeTiming();
      int64_t now = kT0;
      if (one_file) {
        if (!controller.Apply(file, "jobs.yaml", ++now).ok()) abort();
      } else {
        for (int i = 0; i < kSubmitJobs; ++i) {
          if (!controller.Apply(SubmitJob(i, queues || labels), "job.yaml", ++now).ok()) abort();
        }
      }
      state.PauseTiming();
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    state.ResumeTiming();
  }
}

void BM_SubmitEachOff(benchmark::State& state) { Submit(state, false, false); }
void BM_SubmitEachLabels(benchmark::State& state) { Submit(state, false, false, true); }
void BM_SubmitEachQueues(benchmark::State& state) { Submit(state, true, false); }
void BM_SubmitFileOff(benchmark::State& state) { Submit(state, false, true); }
void BM_SubmitFileLabels(benchmark::State& state) { Submit(state, false, true, true); }
void BM_SubmitFileQueues(benchmark::State& state) { Submit(state, true, true); }
BENCHMARK(BM_SubmitEachOff)->Unit(benchmark::kMillisecond)->MinTime(1);
BENCHMARK(BM_SubmitEachLabels)->Unit(benchmark::kMillisecond)->MinTime(1);
BENCHMARK(BM_SubmitEachQueues)->Unit(benchmark::kMillisecond)->MinTime(1);
BENCHMARK(BM_SubmitFileOff)->Unit(benchmark::kMillisecond)->MinTime(1);
BENCHMARK(BM_SubmitFileLabels)->Unit(benchmark::kMillisecond)->MinTime(1);
BENCHMARK(BM_SubmitFileQueues)->Unit(benchmark::kMillisecond)->MinTime(1);

void BM_SchedulePassOff(benchmark::State& state) { Run(state, Queueing::kOff, 1); }
void BM_SchedulePassBound(benchmark::State& state) { Run(state, Queueing::kBound, 1001); }
void BM_SchedulePassBoundIdle(benchmark::State& state) { Run(state, Queueing::kBound, 1); }
void BM_SchedulePassRoomy(benchmark::State& state) { Run(state, Queueing::kRoomy, 1001); }
BENCHMARK(BM_SchedulePassOff)->Unit(benchmark::kMillisecond)->MinTime(2);
BENCHMARK(BM_SchedulePassBound)->Unit(benchmark::kMillisecond)->MinTime(2);
BENCHMARK(BM_SchedulePassBoundIdle)->Unit(benchmark::kMillisecond)->MinTime(2);
BENCHMARK(BM_SchedulePassRoomy)->Unit(benchmark::kMillisecond)->MinTime(2);

}  // namespace
}  // namespace trainlet::coordinator

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);  // a line per job placed or unplaceable otherwise
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
