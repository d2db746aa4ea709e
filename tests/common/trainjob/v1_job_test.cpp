// The Training Operator's v1 kinds (and mpi-operator's v2beta1 MPIJob): Kubeflow's own examples
// parse unchanged, invalid documents are refused by path, and each becomes the TrainJob and
// runtime the coordinator runs, carrying the replica contract the plugins read.

#include "common/trainjob/v1_job.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "common/trainjob/trainjob_model.h"
#include "common/trainjob/v1_conversion.h"
#include "tests/common/trainjob/test_util.h"

namespace trainlet::trainjob {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ReadFile;
using testing::Replace;

std::filesystem::path FixtureDir() {
  return std::filesystem::path(TRAINLET_SOURCE_DIR) / "tests" / "fixtures" / "kubeflow-v1";
}

bool HasWarning(const ParsedFile& f, const std::string& needle) {
  return std::any_of(f.warnings.begin(), f.warnings.end(),
                     [&](const std::string& w) { return w.find(needle) != std::string::npos; });
}

ConvertedJob ParseOneConverted(const std::string& yaml, ParsedFile* file = nullptr) {
  auto parsed = ParseDocuments(yaml);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  if (!parsed.ok() || parsed->converted.size() != 1) {
    ADD_FAILURE() << "expected one converted job";
    return {};
  }
  if (file != nullptr) *file = *parsed;
  return parsed->converted[0];
}

V1JobContract ContractOfJob(const ConvertedJob& c) {
  auto contract = V1ContractOf(c.job.annotations);
  EXPECT_TRUE(contract.ok()) << contract.status().ToString();
  EXPECT_TRUE(contract.ok() && contract->has_value());
  return contract.ok() && contract->has_value() ? **contract : V1JobContract{};
}

// Every example of the Training Operator (release-1.9) and of mpi-operator's v2beta1 parses as
// written. The ones whose containers give only args (the image's entrypoint runs them) are
// refused by path: trainlet runs a command, not an image.
TEST(V1Conformance, EveryExampleParsesUnchanged) {
  int converted = 0, refused = 0;
  for (const char* dir : {"training-operator", "mpi-operator"}) {
    for (const auto& entry : std::filesystem::directory_iterator(FixtureDir() / dir)) {
      if (entry.path().extension() != ".yaml") continue;
      auto parsed = ParseDocuments(ReadFile(entry.path()));
      if (!parsed.ok()) {
        EXPECT_THAT(parsed.status().message(),
                    HasSubstr(".command: required on trainlet: it runs the command on the node"))
            << entry.path();
        ++refused;
        continue;
      }
      ASSERT_EQ(parsed->converted.size(), 1u) << entry.path();
      ++converted;
      // What is stored parses back to the same documents.
      for (const std::string* yaml :
           {&parsed->converted[0].job.yaml, &parsed->converted[0].runtime.yaml}) {
        auto again = ParseDocuments(*yaml);
        ASSERT_TRUE(again.ok()) << entry.path() << ": " << again.status().ToString() << "\n"
                                << *yaml;
      }
      auto again = ParseDocuments(parsed->converted[0].job.yaml);
      EXPECT_EQ(again->jobs.at(0).yaml, parsed->converted[0].job.yaml);
    }
  }
  EXPECT_EQ(converted, 15);
  // The XGBoostJob examples, jaxjob_dist_spmd_mnist_gloo, multi_worker_tfjob, the mnist v1
  // PyTorchJobs, pytorch_job_sendrecv and dist-mnist's TFJob run their image's entrypoint (no
  // command, or args that are only options).
  EXPECT_EQ(refused, 15);
}

// restartPolicy: ExitCode on a replica becomes the gang's exit-code rule (the annotation
// trainlet.io/restart-policy), and runPolicy.ttlSecondsAfterFinished the runtime's TTL.
TEST(V1Job, ExitCodeRestartPolicyAndTtlAreMapped) {
  std::string yaml = ReadFile(FixtureDir() / "training-operator" / "pytorch_simple.yaml");
  const std::string worker = "    Worker:\n      replicas: 1\n      restartPolicy: OnFailure";
  yaml.replace(yaml.find(worker), worker.size(),
               "    Worker:\n      replicas: 1\n      restartPolicy: ExitCode");
  yaml.replace(yaml.find("spec:\n"), 6, "spec:\n  runPolicy:\n    ttlSecondsAfterFinished: 5\n");
  ParsedFile file;
  ConvertedJob c = ParseOneConverted(yaml, &file);
  EXPECT_EQ(c.job.annotations.at("trainlet.io/restart-policy"), "ExitCode");
  EXPECT_EQ(c.runtime.ttl_seconds_after_finished, 5);
  EXPECT_TRUE(HasWarning(file,
                         "spec.pytorchReplicaSpecs.Worker.restartPolicy: ExitCode: as "
                         "trainlet.io/restart-policy: ExitCode"));
  // Without ExitCode anywhere, no annotation.
  ConvertedJob plain =
      ParseOneConverted(ReadFile(FixtureDir() / "training-operator" / "pytorch_simple.yaml"));
  EXPECT_FALSE(plain.job.annotations.contains("trainlet.io/restart-policy"));
  EXPECT_FALSE(plain.runtime.ttl_seconds_after_finished.has_value());
}

TEST(V1Job, PyTorchJobBecomesATorchTrainJob) {
  ParsedFile file;
  ConvertedJob c = ParseOneConverted(
      ReadFile(FixtureDir() / "training-operator" / "pytorch_simple.yaml"), &file);
  EXPECT_EQ(c.kind, "PyTorchJob");
  EXPECT_EQ(c.api_version, "kubeflow.org/v1");
  EXPECT_EQ(c.job.name, "pytorch-simple");
  EXPECT_EQ(c.job.namespace_, "kubeflow");
  EXPECT_EQ(c.job.trainer.num_nodes, 2);
  EXPECT_EQ(c.job.trainer.num_proc_per_node, "1");
  EXPECT_EQ(c.job.runtime_ref.kind, "TrainingRuntime");
  EXPECT_EQ(c.job.runtime_ref.name, "pytorchjob.kubeflow.org");
  EXPECT_EQ(c.runtime.name, "pytorchjob.kubeflow.org");
  EXPECT_EQ(c.runtime.namespace_, "kubeflow");
  EXPECT_EQ(c.runtime.ml_policy.framework, Framework::kTorch);
  EXPECT_EQ(c.runtime.max_restarts, 0);
  const V1JobContract contract = ContractOfJob(c);
  ASSERT_EQ(contract.replicas.size(), 2u);
  EXPECT_EQ(contract.replicas[0].type, "Master");
  EXPECT_EQ(contract.replicas[1].type, "Worker");
  EXPECT_THAT(contract.replicas[1].argv,
              ElementsAre("python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"));
  EXPECT_EQ(contract.nproc_per_node, "auto");  // the operator's default
  EXPECT_TRUE(HasWarning(file,
                         "PyTorchJob/pytorch-simple: became TrainJob pytorch-simple on "
                         "runtime TrainingRuntime/pytorchjob.kubeflow.org (plugin torch)"));
  EXPECT_TRUE(HasWarning(file,
                         "PyTorchJob/pytorch-simple: spec.pytorchReplicaSpecs.Master."
                         "template.spec.containers[0].image: ignored"));
}

// Issue 18: a replica's workingDir is honoured, as a v2 container's (main reported it ignored):
// each replica keeps its own in the contract, and the runtime's container has the first's.
TEST(V1Job, EachReplicaKeepsItsContainersWorkingDir) {
  std::string yaml = ReadFile(FixtureDir() / "training-operator" / "pytorch_simple.yaml");
  const std::string command = "              command:\n";
  const size_t master = yaml.find(command);
  ASSERT_NE(master, std::string::npos);
  yaml.insert(master, "              workingDir: master-run\n");
  const size_t worker = yaml.find(command, yaml.find("    Worker:"));
  ASSERT_NE(worker, std::string::npos);
  yaml.insert(worker, "              workingDir: /srv/worker-run\n");
  ParsedFile file;
  ConvertedJob c = ParseOneConverted(yaml, &file);
  EXPECT_FALSE(HasWarning(file, "workingDir"));
  const V1JobContract contract = ContractOfJob(c);
  ASSERT_EQ(contract.replicas.size(), 2u);
  EXPECT_EQ(contract.replicas[0].working_dir, "master-run");
  EXPECT_EQ(contract.replicas[1].working_dir, "/srv/worker-run");
  EXPECT_EQ(contract.ReplicaOfRank(0), &contract.replicas[0]);
  EXPECT_EQ(contract.ReplicaOfRank(1), &contract.replicas[1]);
  EXPECT_EQ(contract.ReplicaOfRank(2), nullptr);
  ASSERT_TRUE(c.runtime.node.has_value());
  EXPECT_EQ(c.runtime.node->working_dir, "master-run");
  // An MPIJob's workers run where mpirun starts them: another workingDir is reported.
  const std::string pi = ReadFile(FixtureDir() / "mpi-operator" / "pi_pi.yaml");
  const std::string mpi =
      Replace(pi, "name: mpi-worker\n", "name: mpi-worker\n            workingDir: /elsewhere\n");
  ASSERT_NE(mpi, pi);
  ParsedFile mpi_file;
  ParseOneConverted(mpi, &mpi_file);
  EXPECT_TRUE(HasWarning(mpi_file,
                         "MPIJob/pi: spec.mpiReplicaSpecs.Worker: workingDir "
                         "\"/elsewhere\" ignored"));
  // Without one, the annotation is as before (no workingDir key).
  ConvertedJob plain =
      ParseOneConverted(ReadFile(FixtureDir() / "training-operator" / "pytorch_simple.yaml"));
  EXPECT_EQ(plain.job.annotations.at(std::string(kV1JobAnnotation)).find("workingDir"),
            std::string::npos);
}

TEST(V1Job, ElasticPolicyDefaultsAsTheOperatorDoes) {
  ConvertedJob c = ParseOneConverted(
      ReadFile(FixtureDir() / "training-operator" / "pytorch_elastic_echo_echo.yaml"));
  const V1JobContract contract = ContractOfJob(c);
  ASSERT_TRUE(contract.elastic.has_value());
  EXPECT_EQ(contract.elastic->min_replicas, 1);
  EXPECT_EQ(contract.elastic->max_replicas, 2);
  EXPECT_EQ(contract.elastic->rdzv_backend, "c10d");
  EXPECT_EQ(contract.elastic->max_restarts, 100);
  EXPECT_THAT(contract.replicas[0].env, ElementsAre(EnvVar{"LOGLEVEL", "DEBUG"}));

  // Without min and max both are the Worker replicas.
  const std::string text = Replace(
      Replace(ReadFile(FixtureDir() / "training-operator" / "pytorch_elastic_echo_echo.yaml"),
              "    minReplicas: 1\n", ""),
      "    maxReplicas: 2\n", "");
  const V1JobContract defaulted = ContractOfJob(ParseOneConverted(text));
  EXPECT_EQ(defaulted.elastic->min_replicas, 2);
  EXPECT_EQ(defaulted.elastic->max_replicas, 2);
}

TEST(V1Job, TFJobAndPaddleJobPickTheirPluginsByLabel) {
  ConvertedJob tf =
      ParseOneConverted(ReadFile(FixtureDir() / "training-operator" / "tensorflow_simple.yaml"));
  EXPECT_EQ(tf.runtime.ml_policy.framework, Framework::kPlain);
  EXPECT_EQ(tf.runtime.labels.at("trainer.kubeflow.org/framework"), "tensorflow");
  EXPECT_EQ(tf.job.trainer.num_nodes, 2);
  ConvertedJob paddle = ParseOneConverted(
      ReadFile(FixtureDir() / "training-operator" / "paddlepaddle_simple-cpu.yaml"));
  EXPECT_EQ(paddle.runtime.labels.at("trainer.kubeflow.org/framework"), "paddle");
  const V1JobContract contract = ContractOfJob(paddle);
  EXPECT_EQ(contract.replicas[0].port, 37777);  // the named "master" port, kept
}

TEST(V1Job, MPIJobBecomesAnMpiTrainJob) {
  ParsedFile file;
  ConvertedJob c = ParseOneConverted(ReadFile(FixtureDir() / "mpi-operator" / "pi_pi.yaml"), &file);
  EXPECT_EQ(c.kind, "MPIJob");
  EXPECT_EQ(c.api_version, "kubeflow.org/v2beta1");
  EXPECT_EQ(c.job.trainer.num_nodes, 2);  // the workers; the launcher runs on worker 0's node
  EXPECT_THAT(c.job.trainer.command, ElementsAre("mpirun", "-n", "2", "/home/mpiuser/pi"));
  EXPECT_EQ(c.runtime.ml_policy.framework, Framework::kMpi);
  EXPECT_EQ(c.runtime.ml_policy.num_proc_per_node, "1");  // slotsPerWorker
  const V1JobContract contract = ContractOfJob(c);
  EXPECT_EQ(contract.replicas[0].type, "Launcher");
  EXPECT_EQ(contract.slots_per_worker, 1);
  // runPolicy.ttlSecondsAfterFinished: 60 is the runtime's JobSet ttlSecondsAfterFinished.
  EXPECT_TRUE(HasWarning(file, "MPIJob/pi: spec.runPolicy.ttlSecondsAfterFinished: 60 s: the job"));
  EXPECT_EQ(c.runtime.ttl_seconds_after_finished, 60);
  EXPECT_FALSE(c.job.annotations.contains("trainlet.io/restart-policy"));
  EXPECT_TRUE(HasWarning(file, "MPIJob/pi: spec.runPolicy.cleanPodPolicy: ignored"));
  EXPECT_TRUE(HasWarning(file, "MPIJob/pi: spec.sshAuthMountPath: ignored"));

  const std::string mpich = ReadFile(FixtureDir() / "mpi-operator" / "pi_pi-mpich.yaml");
  ConvertedJob m = ParseOneConverted(mpich);
  EXPECT_EQ(ContractOfJob(m).mpi_implementation, "MPICH");
  EXPECT_EQ(m.job.annotations.at("trainlet.io/mpi-implementation"), "MPICH");
  EXPECT_FALSE(c.job.annotations.contains("trainlet.io/mpi-implementation"));  // OpenMPI
  const std::string as_worker =
      Replace(mpich, "  slotsPerWorker: 1\n", "  slotsPerWorker: 4\n  runLauncherAsWorker: true\n");
  ConvertedJob w = ParseOneConverted(as_worker);
  EXPECT_EQ(w.job.trainer.num_nodes, 3);
  EXPECT_EQ(w.runtime.ml_policy.num_proc_per_node, "4");
}

TEST(V1Job, RunPolicyMapsOntoTrainlet) {
  const std::string text =
      Replace(ReadFile(FixtureDir() / "training-operator" / "jax_cpu-demo_demo.yaml"), "spec:\n",
              "spec:\n  runPolicy:\n    backoffLimit: 3\n    activeDeadlineSeconds: 600\n"
              "    suspend: true\n");
  ConvertedJob c = ParseOneConverted(text);
  EXPECT_EQ(c.runtime.max_restarts, 3);
  EXPECT_TRUE(c.job.suspend);
  EXPECT_EQ(c.job.active_deadline_seconds, 600);
  EXPECT_EQ(c.runtime.ml_policy.framework, Framework::kJax);
}

// ---- refusals, by path ----

std::string Refusal(const std::string& yaml) {
  auto parsed = ParseDocuments(yaml);
  EXPECT_FALSE(parsed.ok());
  return parsed.ok() ? std::string() : parsed.status().message();
}

TEST(V1Refusals, ByPath) {
  const std::string pytorch = ReadFile(FixtureDir() / "training-operator" / "pytorch_simple.yaml");
  // The CRD schema: a string where an integer belongs.
  EXPECT_EQ(Refusal(Replace(pytorch, "replicas: 1", "replicas: one")),
            "PyTorchJob/pytorch-simple: spec.pytorchReplicaSpecs.Master.replicas: must be an "
            "integer, got \"one\"");
  EXPECT_THAT(Refusal(Replace(pytorch, "    Worker:", "    Driver:")),
              HasSubstr("PyTorchJob/pytorch-simple: spec.pytorchReplicaSpecs.Driver: unknown "
                        "replica type: a PyTorchJob has Master, Worker"));
  EXPECT_THAT(Refusal(Replace(pytorch, "replicas: 1", "replicas: 2")),
              HasSubstr("spec.pytorchReplicaSpecs.Master.replicas: must be 1"));
  EXPECT_THAT(Refusal(Replace(pytorch, "kubeflow.org/v1", "kubeflow.org/v2beta1")),
              HasSubstr("document 1: apiVersion: must be kubeflow.org/v1 for a PyTorchJob"));
  EXPECT_THAT(Refusal(Replace(pytorch, "name: pytorch-simple", "name: Pytorch_Simple")),
              HasSubstr("metadata.name: must be a lowercase RFC 1035 label"));
  const std::string jax = ReadFile(FixtureDir() / "training-operator" / "jax_cpu-demo_demo.yaml");
  EXPECT_THAT(Refusal(Replace(jax, "    Worker:", "    worker2:")),
              HasSubstr("spec.jaxReplicaSpecs.worker2: unknown replica type"));
  const std::string pi = ReadFile(FixtureDir() / "mpi-operator" / "pi_pi.yaml");
  EXPECT_THAT(Refusal(Replace(pi, "kubeflow.org/v2beta1", "kubeflow.org/v1")),
              HasSubstr("apiVersion: must be kubeflow.org/v2beta1 for a MPIJob"));
  EXPECT_THAT(Refusal(Replace(pi, "    Launcher:", "    Boss:")),
              HasSubstr("MPIJob/pi: spec.mpiReplicaSpecs"));
  EXPECT_THAT(Refusal(Replace(pi, "slotsPerWorker: 1", "slotsPerWorker: many")),
              HasSubstr("MPIJob/pi: spec.slotsPerWorker: must be an integer"));
  EXPECT_THAT(
      Refusal(Replace(jax, "spec:\n", "spec:\n  runPolicy:\n    backoffLimit: 5000\n")),
      HasSubstr("JAXJob/jaxjob-simple: spec.runPolicy.backoffLimit: must be from 0 to 1000"));
  EXPECT_THAT(Refusal(Replace(pytorch, "              command:\n",
                              "              env:\n"
                              "              - name: A=B\n"
                              "              command:\n")),
              HasSubstr(".env[0].name: must not contain '='"));
  // A file cannot hold a TrainJob and a converted job of one name.
  EXPECT_THAT(Refusal(pytorch + "\n---\n" + pytorch), HasSubstr("defined twice in this file"));
  // An MPIJob's launcher is one, never zero (0-replica types are dropped, so this was accepted
  // and gave workers with no command: trainjob_parser_fuzz found it).
  const std::string mpi = ReadFile(FixtureDir() / "mpi-operator" / "pi_pi.yaml");
  const std::string no_launcher =
      Replace(mpi, "    Launcher:\n      replicas: 1\n", "    Launcher:\n      replicas: 0\n");
  ASSERT_NE(no_launcher, mpi);
  EXPECT_THAT(Refusal(no_launcher),
              HasSubstr("spec.mpiReplicaSpecs.Launcher.replicas: must be 1 (one launcher runs "
                        "mpirun), got 0"));
}

TEST(V1Contract, RoundTripsThroughTheAnnotation) {
  V1JobContract c;
  c.kind = V1Kind::kTFJob;
  c.name = "t";
  c.replicas.push_back({"PS", 2, {"python", "ps.py"}, {{"A", "1"}}, 2222, "OnFailure"});
  c.replicas.push_back({"Worker", 3, {"python", "w.py"}, {}, std::nullopt, "", "run/here"});
  c.enable_dynamic_worker = true;
  auto back = V1ContractOf({{std::string(kV1JobAnnotation), EncodeV1Contract(c)}});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->has_value());
  EXPECT_EQ(**back, c);
  EXPECT_EQ((*back)->TotalReplicas(), 5);
  EXPECT_FALSE(V1ContractOf({})->has_value());
  auto bad = V1ContractOf({{std::string(kV1JobAnnotation), "{\"kind\":\"Pod\"}"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("trainlet.io/v1-job"));
}

TEST(V1Kinds, ResourceNames) {
  EXPECT_EQ(V1KindOfResource("pytorchjobs"), V1Kind::kPyTorchJob);
  EXPECT_EQ(V1KindOfResource("TFJob"), V1Kind::kTFJob);
  EXPECT_EQ(V1KindOfResource("mpijob"), V1Kind::kMPIJob);
  EXPECT_EQ(V1KindOfResource("trainjobs"), std::nullopt);
  EXPECT_EQ(V1RuntimeName(V1Kind::kXGBoostJob), "xgboostjob.kubeflow.org");
}

}  // namespace
}  // namespace trainlet::trainjob
