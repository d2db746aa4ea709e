// The v1beta1 CRD schemas of Kueue's queue kinds (Kueue v0.10.6), compiled into the binary so that
// the coordinator validates applied queue objects without reading CRD files at run time. The JSON
// comes from common/kueue/schemas/<kind>.json (scripts/gen-kueue-schemas) and is turned into a
// source file when CMake configures the build.
#pragma once

#include <string>
#include <string_view>

namespace trainlet::kueue {

// The openAPIV3Schema of `kind` ("ResourceFlavor", "ClusterQueue", "LocalQueue",
// "WorkloadPriorityClass") as compact JSON; empty for any other kind.
std::string EmbeddedCrdSchemaJson(std::string_view kind);

}  // namespace trainlet::kueue
