// The CRD schemas of Kubeflow Trainer v1alpha1 and of the Training Operator's v1 job kinds (with
// mpi-operator's v2beta1 MPIJob), compiled into the binary so that daemons validate
// TrainJob files without reading the CRD files at run time. The JSON comes from
// common/trainjob/schemas/<kind>.json (written by scripts/gen-crd-schemas) and is turned into a
// source file when CMake configures the build.
#pragma once

#include <string>
#include <string_view>

namespace trainlet::trainjob {

// The openAPIV3Schema of `kind` ("TrainJob", "TrainingRuntime", "ClusterTrainingRuntime",
// "PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob") as compact JSON; empty for
// any other kind.
std::string EmbeddedCrdSchemaJson(std::string_view kind);

}  // namespace trainlet::trainjob
