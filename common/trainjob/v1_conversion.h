// A v1 job (v1_job.h) turned into what the coordinator already runs: a TrainJob and a
// TrainingRuntime made for it alone.
//
// - The runtime is TrainingRuntime "<kind in lower case>.kubeflow.org" (in the job's namespace),
//   whose mlPolicy picks the plugin: torch (PyTorchJob), xgboost, jax, mpi (MPIJob, with
//   numProcPerNode = slotsPerWorker), and for TFJob and PaddleJob the
//   label trainer.kubeflow.org/framework: tensorflow / paddle (plugins/runtime/registry.cpp).
//   failurePolicy.maxRestarts is runPolicy.backoffLimit (0 when unset).
// - The TrainJob keeps the name, namespace, labels and annotations, runs one process per replica
//   (numNodes = the replicas of every type; an MPIJob: its workers, plus the launcher when
//   runLauncherAsWorker; an MPIJob's mpiImplementation other than OpenMPI as the annotation
//   trainlet.io/mpi-implementation), and carries the V1JobContract in the annotation
//   kV1JobAnnotation, from which the plugin gives each replica its command and the Training
//   Operator's env. runPolicy.suspend and activeDeadlineSeconds become spec.suspend and
//   activeDeadlineSeconds.
//
// Both are ordinary documents (TrainJob::yaml, TrainingRuntime::yaml) that ParseDocuments reads
// back unchanged, so the coordinator stores and reloads a converted job like any other.
//
// Pure; any thread.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "common/trainjob/trainjob_model.h"
#include "common/trainjob/v1_job.h"

namespace trainlet::trainjob {

// The name of the runtime made for a job of `kind`: "pytorchjob.kubeflow.org", ...
std::string V1RuntimeName(V1Kind kind);

// Converts `job`; a note saying what it became ("PyTorchJob/x: became TrainJob x on runtime
// TrainingRuntime/pytorchjob.kubeflow.org (plugin torch): Master 1 + Worker 2, one process per
// replica") is appended to `warnings`, with the notes of runPolicy fields trainlet maps.
// Invalid, naming the v1 path, when a value has no TrainJob equivalent
// (spec.runPolicy.activeDeadlineSeconds below 1, backoffLimit above 1000).
Result<ConvertedJob> ConvertV1Job(const V1Job& job, std::vector<std::string>* warnings);

}  // namespace trainlet::trainjob
