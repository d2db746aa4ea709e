// Kubernetes' rules for object names and namespaces (the apimachinery validation a kubectl apply
// meets): what every parser of applied objects checks names against, TrainJobs and Kueue's kinds
// alike. Pure functions, any thread.
#pragma once

#include <string_view>

namespace trainlet::trainjob {

// RFC 1123 label: 1..63 of lowercase alphanumerics and '-', alphanumeric at both ends
// (namespaces, label values that are names).
bool IsDns1123Label(std::string_view s);
// RFC 1035 label: an RFC 1123 label that starts with a letter (TrainJob names, which become
// Service-like host names).
bool IsDns1035Label(std::string_view s);
// RFC 1123 subdomain: dot-separated RFC 1123 labels, at most 253 characters (most object names).
bool IsDns1123Subdomain(std::string_view s);

}  // namespace trainlet::trainjob
