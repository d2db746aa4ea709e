// How `apply` lays a document over the one already stored, as kubectl apply does for the fields a
// document gives: a map merges key by key (recursively), a list or a scalar replaces the stored
// value, and a null removes the key. A field the document leaves out keeps its stored value, so
// it is no change (Kubeflow's lifecycle guide suspends a TrainJob by applying only its
// identifying fields and spec.suspend).
//
// Pure; any thread.
#pragma once

#include <yaml-cpp/yaml.h>

namespace trainlet::trainjob {

// A new node: `stored` with `applied` laid over it. Neither input is changed.
YAML::Node MergeApplied(const YAML::Node& stored, const YAML::Node& applied);

}  // namespace trainlet::trainjob
