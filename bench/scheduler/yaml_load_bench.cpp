// trainlet-yaml-load-bench: what reading an applied file costs the coordinator, in one run: loading
// it (LoadDocuments: libyaml's events into yaml-cpp nodes, one pass) against the two yaml-cpp
// passes it replaced (a counting pass for the caps, then LoadAll), and writing each document back
// as the text stored with the object (EmitYaml's direct writer) against yaml-cpp's Emitter.
// Files: N one-rank TrainJobs in bench/scheduler/run.py's form (one JSON document each, with the
// queue label) and the same jobs as block YAML.
//
//   trainlet-yaml-load-bench [--jobs 200] [--reps 41]
//
// Prints the median CPU time of each (thread CPU clock, so the shared host's other work counts
// less) and the ratio of before to now.
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "common/trainjob/yaml_support.h"

namespace {

std::string JsonJobs(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    if (i > 0) out += "---\n";
    out += R"({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": )"
           R"({"name": "s1-)" +
           std::to_string(i) +
           R"(", "labels": {"kueue.x-k8s.io/queue-name": "bench-q"}}, "spec": {"runtimeRef": )"
           R"({"name": "plain"}, "trainer": {"numNodes": 1, "numProcPerNode": 1, "command": )"
           R"(["true"], "resourcesPerNode": {"requests": {"cpu": "100m"}}}}})"
           "\n";
  }
  return out;
}

std::string BlockJobs(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    out +=
        "---\napiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: s1-" +
        std::to_string(i) +
        "\n  labels:\n    kueue.x-k8s.io/queue-name: bench-q\nspec:\n  runtimeRef:\n"
        "    name: plain\n  trainer:\n    numNodes: 1\n    numProcPerNode: 1\n"
        "    command: [\"true\"]\n    resourcesPerNode:\n      requests:\n        cpu: 100m\n";
  }
  return out;
}

// The caps pass of the code before libyaml: every event, nothing kept.
class CountingHandler : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override { ++documents; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    ++depth;
  }
  void OnSequenceEnd() override { --depth; }
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    ++depth;
  }
  void OnMapEnd() override { --depth; }
  int documents = 0;
  int depth = 0;
};

double CpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double MedianMs(int reps, const std::function<size_t()>& load, size_t want) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    double start = CpuMs();
    size_t got = load();
    t.push_back(CpuMs() - start);
    if (got != want) {
      std::fprintf(stderr, "yaml-load-bench: %zu documents, not %zu\n", got, want);
      std::exit(1);
    }
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int jobs = 200;
  int reps = 41;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--jobs")
      jobs = std::stoi(argv[i + 1]);
    else if (flag == "--reps")
      reps = std::stoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: trainlet-yaml-load-bench [--jobs N] [--reps N]\n");
      return 2;
    }
  }
  std::printf(
      "| %d TrainJobs in one file, median CPU of %d reps | load: LoadDocuments "
      "(libyaml, now) | load: yaml-cpp caps pass + LoadAll (before) | write each: EmitYaml "
      "(now) | write each: yaml-cpp's Emitter (before) | load + write, before / now |\n",
      jobs, reps);
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
  for (const auto& [form, text] :
       {std::pair<const char*, std::string>{"JSON documents (run.py's)", JsonJobs(jobs)},
        {"block YAML", BlockJobs(jobs)}}) {
    const size_t want = static_cast<size_t>(jobs);
    const double load_now = MedianMs(
        reps,
        [&] {
          auto docs = trainlet::trainjob::LoadDocuments(text);
          return docs.ok() ? docs->size() : 0;
        },
        want);
    const double load_before = MedianMs(
        reps,
        [&] {
          std::istringstream in(text);
          YAML::Parser parser(in);
          CountingHandler counter;
          while (parser.HandleNextDocument(counter)) {
          }
          return YAML::LoadAll(text).size();
        },
        want);
    auto docs = trainlet::trainjob::LoadDocuments(text);
    const auto write = [&docs](std::string (*emit)(const YAML::Node&)) {
      return [&docs, emit] {
        size_t n = 0;
        for (const auto& d : *docs) n += emit(d.node).empty() ? 0 : 1;
        return n;
      };
    };
    const double write_now = MedianMs(reps, write(&trainlet::trainjob::EmitYaml), want);
    const double write_before =
        MedianMs(reps, write(&trainlet::trainjob::EmitYamlWithYamlCpp), want);
    std::printf("| %s, %zu bytes | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %.2f |\n", form,
                text.size(), load_now, load_before, write_now, write_before,
                (load_before + write_before) / (load_now + write_now));
  }
  return 0;
}
