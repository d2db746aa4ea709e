// Where ranks may run, as the TrainJob parser reads it: the runtime's node pod template and the
// TrainJob's runtimePatches.
#include <gtest/gtest.h>

#include "common/trainjob/trainjob_model.h"

namespace trainlet::trainjob {
namespace {

constexpr const char* kFile = R"(
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: gpu-rt
spec:
  template:
    spec:
      replicatedJobs:
        - name: node
          template:
            spec:
              template:
                spec:
                  nodeSelector:
                    node-type: training
                    zone: a
                  tolerations:
                    - key: gpu
                      operator: Exists
                      effect: NoSchedule
                  containers:
                    - name: node
                      command: ["/bin/true"]
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: patched
spec:
  runtimeRef:
    name: gpu-rt
  runtimePatches:
    - manager: example.com/tool
      trainingRuntimeSpec:
        template:
          spec:
            replicatedJobs:
              - name: node
                template:
                  spec:
                    template:
                      spec:
                        nodeSelector:
                          zone: b
                        tolerations:
                          - key: dedicated
                            value: infer
                            effect: NoExecute
  trainer:
    resourcesPerNode:
      requests:
        nvidia.com/gpu: "8"
      limits:
        nvidia.com/gpu: "8"
        memory: 64Gi
)";

TEST(PlacementFields, RuntimeTemplateAndRuntimePatches) {
  auto f = ParseDocuments(kFile);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->runtimes.size(), 1u);
  ASSERT_EQ(f->jobs.size(), 1u);
  const TrainingRuntime& rt = f->runtimes[0];
  EXPECT_EQ(rt.node_selector,
            (std::map<std::string, std::string>{{"node-type", "training"}, {"zone", "a"}}));
  ASSERT_EQ(rt.tolerations.size(), 1u);
  EXPECT_EQ(rt.tolerations[0], (Toleration{"gpu", "Exists", "", "NoSchedule"}));
  const TrainJob& job = f->jobs[0];
  EXPECT_EQ(job.node_selector, (std::map<std::string, std::string>{{"zone", "b"}}));
  ASSERT_EQ(job.tolerations.size(), 1u);
  EXPECT_EQ(job.tolerations[0], (Toleration{"dedicated", "", "infer", "NoExecute"}));
  EXPECT_EQ(job.trainer.resources_per_node.at("nvidia.com/gpu"), "8");
  EXPECT_EQ(job.trainer.resources_per_node.at("memory"), "64Gi");  // limit stands in for request
  for (const auto& w : f->warnings) {
    // Read, so not reported as ignored pod settings.
    EXPECT_EQ(w.find("nodeSelector: ignored"), std::string::npos) << w;
    EXPECT_EQ(w.find("tolerations: ignored"), std::string::npos) << w;
  }
}

}  // namespace
}  // namespace trainlet::trainjob
