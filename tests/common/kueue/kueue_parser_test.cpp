#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/kueue/kueue_model.h"
#include "common/trainjob/trainjob_model.h"

namespace trainlet::kueue {
namespace {

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::filesystem::path FixtureDir() {
  return std::filesystem::path(TRAINLET_SOURCE_DIR) / "tests" / "fixtures" / "kueue";
}

QueueObject ParseOne(const std::string& yaml) {
  auto parsed = ParseQueueDocuments(yaml);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  if (!parsed.ok() || parsed->objects.size() != 1) return {};
  return parsed->objects[0];
}

std::string Refusal(const std::string& yaml) {
  auto parsed = ParseQueueDocuments(yaml);
  EXPECT_FALSE(parsed.ok()) << "accepted:\n" << yaml;
  return parsed.ok() ? std::string() : parsed.status().message();
}

constexpr const char* kTwoGroups = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: team-a
spec:
  namespaceSelector:
    matchLabels:
      team: a
    matchExpressions:
    - key: tier
      operator: In
      values: [gold, silver]
  cohort: research
  queueingStrategy: StrictFIFO
  fairSharing:
    weight: "1.5"
  preemption:
    withinClusterQueue: LowerOrNewerEqualPriority
    reclaimWithinCohort: Any
    borrowWithinCohort:
      policy: LowerPriority
      maxPriorityThreshold: 100
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - name: cpu
        nominalQuota: 9
        borrowingLimit: 500m
      - name: memory
        nominalQuota: 36Gi
        lendingLimit: 4Gi
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 8
    - name: a100
      resources:
      - name: nvidia.com/gpu
        nominalQuota: "16"
)";

TEST(KueueParserTest, ClusterQueueModelled) {
  QueueObject o = ParseOne(kTwoGroups);
  ASSERT_TRUE(o.cluster_queue.has_value());
  EXPECT_EQ(o.kind, Kind::kClusterQueue);
  EXPECT_EQ(o.Ref(), "clusterqueue/team-a");
  const ClusterQueue& cq = *o.cluster_queue;
  EXPECT_EQ(cq.cohort, "research");
  EXPECT_EQ(cq.queueing_strategy, QueueingStrategy::kStrictFifo);
  EXPECT_EQ(cq.fair_sharing_weight_milli, 1500);
  EXPECT_EQ(cq.preemption.within_cluster_queue,
            Preemption::WithinClusterQueue::kLowerOrNewerEqualPriority);
  EXPECT_EQ(cq.preemption.reclaim_within_cohort, Preemption::ReclaimWithinCohort::kAny);
  EXPECT_EQ(cq.preemption.borrow_within_cohort, Preemption::BorrowWithinCohort::kLowerPriority);
  EXPECT_EQ(cq.preemption.borrow_max_priority_threshold, 100);
  ASSERT_TRUE(cq.namespace_selector.has_value());
  EXPECT_TRUE(cq.namespace_selector->Matches({{"team", "a"}, {"tier", "gold"}}));
  EXPECT_FALSE(cq.namespace_selector->Matches({{"team", "a"}, {"tier", "bronze"}}));
  EXPECT_FALSE(cq.namespace_selector->Matches({{"team", "b"}, {"tier", "gold"}}));
  ASSERT_EQ(cq.resource_groups.size(), 2u);
  const auto& cpu = cq.resource_groups[0].flavors[0].resources[0];
  EXPECT_EQ(cpu.name, "cpu");
  EXPECT_EQ(cpu.nominal.units, 9000);  // millicores
  ASSERT_TRUE(cpu.borrowing_limit.has_value());
  EXPECT_EQ(cpu.borrowing_limit->units, 500);
  const auto& mem = cq.resource_groups[0].flavors[0].resources[1];
  EXPECT_EQ(mem.nominal.units, int64_t{36} << 30);
  EXPECT_EQ(mem.nominal.text, "36Gi");
  EXPECT_EQ(mem.lending_limit->units, int64_t{4} << 30);
  EXPECT_EQ(cq.resource_groups[1].flavors[1].name, "a100");
  EXPECT_EQ(cq.resource_groups[1].flavors[1].resources[0].nominal.units, 16);
  // What is stored parses back to the same object.
  QueueObject again = ParseOne(o.yaml);
  EXPECT_EQ(again.cluster_queue->resource_groups[1].flavors[1].resources[0].nominal.units, 16);
}

TEST(KueueParserTest, DefaultsOfAClusterQueue) {
  QueueObject o = ParseOne(R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: plain}
spec: {}
)");
  ASSERT_TRUE(o.cluster_queue.has_value());
  EXPECT_FALSE(o.cluster_queue->namespace_selector.has_value());
  EXPECT_EQ(o.cluster_queue->queueing_strategy, QueueingStrategy::kBestEffortFifo);
  EXPECT_EQ(o.cluster_queue->fair_sharing_weight_milli, 1000);
  EXPECT_EQ(o.cluster_queue->preemption.within_cluster_queue,
            Preemption::WithinClusterQueue::kNever);
}

TEST(KueueParserTest, OtherKindsModelled) {
  auto parsed = ParseQueueDocuments(R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: h100}
spec:
  nodeLabels: {gpu: h100}
  nodeTaints: [{key: k, effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: user-queue, namespace: team-a}
spec: {clusterQueue: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: user-queue}
spec: {clusterQueue: cq}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: -5
description: urgent
)");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->objects.size(), 4u);
  EXPECT_EQ(parsed->objects[0].flavor->node_labels.at("gpu"), "h100");
  // nodeTaints is enforced now (admission_flavors.h): modelled, no longer a warning.
  EXPECT_TRUE(parsed->warnings.empty());
  ASSERT_EQ(parsed->objects[0].flavor->node_taints.size(), 1u);
  EXPECT_EQ(parsed->objects[0].flavor->node_taints[0], (Taint{"k", "", "NoSchedule"}));
  EXPECT_EQ(parsed->objects[1].local_queue->namespace_, "team-a");
  EXPECT_EQ(parsed->objects[1].local_queue->cluster_queue, "team-a");
  EXPECT_EQ(parsed->objects[1].Ref(), "localqueue/team-a/user-queue");
  EXPECT_EQ(parsed->objects[2].namespace_, "default");  // as kubectl's default namespace
  EXPECT_EQ(parsed->objects[3].priority_class->value, -5);
  EXPECT_EQ(parsed->objects[3].priority_class->description, "urgent");
}

// Each bad input is refused naming the object and the path of what is wrong.
struct BadInput {
  const char* what;
  std::string yaml;
  std::string message;  // a part of the refusal
};

std::string Cq(const std::string& spec) {
  return "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n" +
         spec;
}

const std::string kCpuGroup =
    "  resourceGroups:\n"
    "  - coveredResources: [cpu]\n"
    "    flavors:\n"
    "    - name: f\n"
    "      resources:\n"
    "      - name: cpu\n";

class KueueRefusalTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(KueueRefusalTest, RefusedByPath) {
  const std::string message = Refusal(GetParam().yaml);
  EXPECT_NE(message.find(GetParam().message), std::string::npos)
      << GetParam().what << ": got " << message;
}

std::string SixteenPlusOneGroups() {
  std::string spec = "  resourceGroups:\n";
  for (int i = 0; i < 17; ++i) {
    spec += "  - coveredResources: [r" + std::to_string(i) + "]\n    flavors:\n    - name: f" +
            std::to_string(i) + "\n      resources:\n      - name: r" + std::to_string(i) +
            "\n        nominalQuota: 1\n";
  }
  return Cq(spec);
}

INSTANTIATE_TEST_SUITE_P(
    Bad, KueueRefusalTest,
    ::testing::Values(
        BadInput{"unknown strategy", Cq("  queueingStrategy: Fifo\n"),
                 "ClusterQueue/cq: spec.queueingStrategy"},
        BadInput{
            "flavor misses a covered resource",
            Cq("  resourceGroups:\n  - coveredResources: [cpu, memory]\n    flavors:\n"
               "    - name: f\n      resources:\n      - name: cpu\n        nominalQuota: 1\n"),
            "ClusterQueue/cq: spec.resourceGroups[0].flavors[0].resources: must list the "
            "group's 2 coveredResources, got 1"},
        BadInput{"resource out of order",
                 Cq("  resourceGroups:\n  - coveredResources: [cpu, memory]\n    flavors:\n"
                    "    - name: f\n      resources:\n      - name: memory\n        nominalQuota: "
                    "1\n      - name: cpu\n        nominalQuota: 1\n"),
                 "spec.resourceGroups[0].flavors[0].resources[0].name: must be \"cpu\""},
        BadInput{"lendingLimit without cohort",
                 Cq(kCpuGroup + "        nominalQuota: 4\n        lendingLimit: 1\n"),
                 "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: must not be set "
                 "without a cohort"},
        BadInput{"borrowingLimit without cohort",
                 Cq(kCpuGroup + "        nominalQuota: 4\n        borrowingLimit: 1\n"),
                 "resources[0].borrowingLimit: must not be set without a cohort"},
        BadInput{
            "lendingLimit over nominal",
            Cq("  cohort: c\n" + kCpuGroup + "        nominalQuota: 4\n        lendingLimit: 5\n"),
            "lendingLimit: must be at most the nominalQuota (4), got 5"},
        BadInput{"quantity not one", Cq(kCpuGroup + "        nominalQuota: 4GB\n"),
                 "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"},
        BadInput{"negative quota", Cq(kCpuGroup + "        nominalQuota: \"-1\"\n"),
                 "nominalQuota: \"-1\": must not be negative"},
        BadInput{"more than 16 groups", SixteenPlusOneGroups(), "spec.resourceGroups"},
        BadInput{"resource in two groups",
                 Cq(kCpuGroup + "        nominalQuota: 1\n  - coveredResources: [cpu]\n"
                                "    flavors:\n    - name: g\n      resources:\n"
                                "      - name: cpu\n        nominalQuota: 1\n"),
                 "spec.resourceGroups[1].coveredResources[0]: \"cpu\" is covered by more than "
                 "one resource group"},
        BadInput{"flavor in two groups",
                 Cq(kCpuGroup + "        nominalQuota: 1\n  - coveredResources: [memory]\n"
                                "    flavors:\n    - name: f\n      resources:\n"
                                "      - name: memory\n        nominalQuota: 1\n"),
                 "spec.resourceGroups[1].flavors[0].name: \"f\" is listed more than once"},
        BadInput{"borrowWithinCohort without reclaim",
                 Cq("  preemption:\n    borrowWithinCohort: {policy: LowerPriority}\n"),
                 "spec.preemption.borrowWithinCohort.policy: must be Never while "
                 "reclaimWithinCohort is Never"},
        BadInput{"bad preemption enum", Cq("  preemption:\n    withinClusterQueue: Always\n"),
                 "spec.preemption.withinClusterQueue"},
        BadInput{"bad selector operator",
                 Cq("  namespaceSelector:\n    matchExpressions:\n    - {key: a, operator: Is}\n"),
                 "spec.namespaceSelector.matchExpressions[0].operator"},
        BadInput{"bad cohort name", Cq("  cohort: Team_A\n"), "ClusterQueue/cq: spec.cohort"},
        BadInput{"negative fair-sharing weight", Cq("  fairSharing: {weight: \"-1\"}\n"),
                 "spec.fairSharing.weight"},
        BadInput{"flavor node labels not strings",
                 "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: f}\n"
                 "spec: {nodeLabels: {a: [1]}}\n",
                 "ResourceFlavor/f: spec.nodeLabels"},
        BadInput{"taint effect Kueue's CEL rule refuses",
                 "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: f}\n"
                 "spec: {nodeTaints: [{key: a, effect: Never}]}\n",
                 "ResourceFlavor/f: spec.nodeTaints[0].effect: supported taint effect values"},
        BadInput{"toleration without key must be Exists",
                 "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: f}\n"
                 "spec: {tolerations: [{operator: Equal, value: x}]}\n",
                 "ResourceFlavor/f: spec.tolerations[0].operator: operator must be Exists"},
        BadInput{"toleration Exists with a value",
                 "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: f}\n"
                 "spec: {tolerations: [{key: a, operator: Exists, value: x}]}\n",
                 "ResourceFlavor/f: spec.tolerations[0].value: a value must be empty"},
        BadInput{"bad fungibility enum", Cq("  flavorFungibility: {whenCanBorrow: Always}\n"),
                 "ClusterQueue/cq: spec.flavorFungibility.whenCanBorrow"},
        BadInput{"admissionChecks and admissionChecksStrategy both",
                 Cq("  admissionChecks: [a]\n  admissionChecksStrategy:\n    admissionChecks:\n"
                    "    - {name: b}\n"),
                 "ClusterQueue/cq: spec.admissionChecks: must not be set together with "
                 "spec.admissionChecksStrategy"},
        BadInput{"admission check twice", Cq("  admissionChecks: [a, a]\n"),
                 "ClusterQueue/cq: spec.admissionChecks[1]: \"a\" is listed more than once"},
        BadInput{"local queue without cluster queue",
                 "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: q}\n"
                 "spec: {}\n",
                 "LocalQueue/q: spec.clusterQueue: required field missing"},
        BadInput{"local queue bad namespace",
                 "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: q, "
                 "namespace: Team}\nspec: {clusterQueue: c}\n",
                 "LocalQueue/q: metadata.namespace"},
        BadInput{"priority class value missing",
                 "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\nmetadata: "
                 "{name: p}\n",
                 "WorkloadPriorityClass/p: value"},
        BadInput{"priority class value past int32",
                 "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\nmetadata: "
                 "{name: p}\nvalue: 3000000000\n",
                 "WorkloadPriorityClass/p: value"},
        BadInput{"wrong version",
                 "apiVersion: kueue.x-k8s.io/v1alpha1\nkind: ClusterQueue\nmetadata: {name: c}\n",
                 "document 1: apiVersion: must be kueue.x-k8s.io/v1beta1"},
        BadInput{"kind trainlet does not take",
                 "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w}\n",
                 "document 1: kind: \"Workload\" is not a Kueue kind trainlet accepts"},
        BadInput{"bad name",
                 "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: "
                 "Big_Q}\n",
                 "document 1: metadata.name: must be a lowercase RFC 1123 subdomain"},
        BadInput{"defined twice",
                 "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: f}\n"
                 "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: "
                 "{name: f}\n",
                 "ResourceFlavor/f: defined twice in this file (documents 1 and 2)"}));

TEST(KueueParserTest, TaintsTolerationsFungibilityAndChecksModelled) {
  auto parsed = ParseQueueDocuments(R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: spot}
spec:
  nodeTaints: [{key: spot, value: "true", effect: NoExecute}]
  tolerations: [{key: spot, operator: Exists, effect: NoExecute}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: a}
spec:
  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: Preempt}
  admissionChecks: [budget, security]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: b}
spec:
  admissionChecksStrategy:
    admissionChecks:
    - {name: prov, onFlavors: [spot]}
)");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_TRUE(parsed->warnings.empty()) << parsed->warnings[0];
  const ResourceFlavor& f = *parsed->objects[0].flavor;
  EXPECT_EQ(f.node_taints, (std::vector<Taint>{{"spot", "true", "NoExecute"}}));
  EXPECT_EQ(f.tolerations, (std::vector<Toleration>{{"spot", "Exists", "", "NoExecute"}}));
  const ClusterQueue& a = *parsed->objects[1].cluster_queue;
  EXPECT_EQ(a.flavor_fungibility.when_can_borrow, FlavorFungibility::WhenCanBorrow::kTryNextFlavor);
  EXPECT_EQ(a.flavor_fungibility.when_can_preempt, FlavorFungibility::WhenCanPreempt::kPreempt);
  ASSERT_EQ(a.admission_checks.size(), 2u);
  EXPECT_EQ(a.admission_checks[1].name, "security");
  EXPECT_TRUE(a.admission_checks[1].on_flavors.empty());
  const ClusterQueue& b = *parsed->objects[2].cluster_queue;
  EXPECT_EQ(b.flavor_fungibility.when_can_borrow, FlavorFungibility::WhenCanBorrow::kBorrow);
  EXPECT_EQ(b.flavor_fungibility.when_can_preempt,
            FlavorFungibility::WhenCanPreempt::kTryNextFlavor);
  ASSERT_EQ(b.admission_checks.size(), 1u);
  EXPECT_EQ(b.admission_checks[0].on_flavors, std::vector<std::string>{"spot"});
}

TEST(KueueParserTest, UnknownFieldIsAWarningByPath) {
  auto parsed = ParseQueueDocuments(Cq("  cohortt: x\n"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_FALSE(parsed->warnings.empty());
  EXPECT_NE(parsed->warnings[0].find("ClusterQueue/cq: spec.cohortt"), std::string::npos)
      << parsed->warnings[0];
}

// Kueue's own samples, copied unchanged, parse; each TrainJob file's Kueue documents are set
// aside by the TrainJob parser and parse here.
TEST(KueueParserTest, KueueSamplesParseUnchanged) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(FixtureDir())) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    auto file = trainjob::ParseDocuments(ReadFile(entry.path()));
    ASSERT_TRUE(file.ok()) << entry.path() << ": " << file.status().ToString();
    auto queues = ParseQueueDocuments(file->queue_documents);
    ASSERT_TRUE(queues.ok()) << entry.path() << ": " << queues.status().ToString();
    EXPECT_EQ(queues->objects.size(), file->queue_documents.size());
    EXPECT_FALSE(queues->objects.empty() && file->jobs.empty()) << entry.path();
  }
  EXPECT_GE(files, 15);
}

TEST(KueueParserTest, SingleClusterQueueSetup) {
  auto parsed = ParseQueueDocuments(ReadFile(FixtureDir() / "single-clusterqueue-setup.yaml"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->objects.size(), 3u);
  EXPECT_EQ(parsed->objects[0].Ref(), "resourceflavor/default-flavor");
  const ClusterQueue& cq = *parsed->objects[1].cluster_queue;
  ASSERT_TRUE(cq.namespace_selector.has_value());
  EXPECT_TRUE(cq.namespace_selector->Matches({}));
  EXPECT_EQ(cq.resource_groups[0].flavors[0].resources[0].nominal.units, 9000);
  EXPECT_EQ(cq.resource_groups[0].flavors[0].resources[1].nominal.units, int64_t{36} << 30);
  EXPECT_EQ(parsed->objects[2].local_queue->cluster_queue, "cluster-queue");
}

TEST(KueueParserTest, TrainJobQueueLabels) {
  auto file = trainjob::ParseDocuments(R"(
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: j
  labels:
    kueue.x-k8s.io/queue-name: user-queue
    kueue.x-k8s.io/priority-class: high
spec:
  runtimeRef: {name: torch-distributed}
)");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->jobs[0].queue_name, "user-queue");
  EXPECT_EQ(file->jobs[0].priority_class, "high");
  for (const auto& w : file->warnings) EXPECT_EQ(w.find("kueue"), std::string::npos) << w;
  auto bad = trainjob::ParseDocuments(R"(
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: j
  labels: {kueue.x-k8s.io/queue-name: User_Queue}
spec:
  runtimeRef: {name: torch-distributed}
)");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(
                "TrainJob/j: metadata.labels[kueue.x-k8s.io/queue-name]: must name a Kueue object"),
            std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace trainlet::kueue

namespace trainlet::kueue {
namespace {

// Found by kueue_parser_fuzz: what is stored must parse again to the same object.
TEST(KueueParserTest, StoredDocumentParsesAgain) {
  for (const char* text : {
           "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\nmetadata:\n  name: "
           "p\nvalue: !10000\ndescript-ion: \"x\"\n",
           "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\nmetadata:\n  name: "
           "p\nvalue: 3\nspec: !tagged\n",
       }) {
    auto parsed = ParseQueueDocuments(text);
    if (!parsed.ok()) {  // refusing it is fine too, by path
      EXPECT_NE(parsed.status().message().find("WorkloadPriorityClass/p: value: must be an "
                                               "integer"),
                std::string::npos)
          << parsed.status().message();
      continue;
    }
    for (const auto& o : parsed->objects) {
      auto again = ParseQueueDocuments(o.yaml);
      ASSERT_TRUE(again.ok()) << o.yaml << "\n" << again.status().ToString();
      ASSERT_EQ(again->objects.size(), 1u);
      EXPECT_EQ(again->objects[0].yaml, o.yaml);
      EXPECT_EQ(again->objects[0].priority_class->value, o.priority_class->value);
    }
  }
}

}  // namespace
}  // namespace trainlet::kueue
