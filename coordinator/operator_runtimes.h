// The operator request that lists runtimes (GetRuntimesRequest, operator.proto): `trainletctl get
// clustertrainingruntimes|trainingruntimes` and the SDK's list_runtimes / get_runtime. What a
// runtime is shown as (framework, plugin, nodes, command) is decided here, once, for both.
//
// Pure over the catalog; called on the coordinator's loop, which owns the catalog.
#pragma once

#include "common/status.h"
#include "coordinator/runtime_catalog.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::coordinator {

// The runtimes `request` selects: ClusterTrainingRuntimes, then TrainingRuntimes of its namespace
// ("" = "default") or of every namespace, by namespace then name. Invalid naming the field for a
// kind that is neither; NotFound naming the runtime and where it was looked for when `name` is
// given and matches none.
Result<v1::RuntimeList> ListRuntimes(const RuntimeCatalog& catalog,
                                     const v1::GetRuntimesRequest& request);

// One runtime as the operator API shows it.
v1::RuntimeInfo DescribeRuntime(const trainjob::TrainingRuntime& runtime);

}  // namespace trainlet::coordinator
