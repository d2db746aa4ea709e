// JobKey: a namespaced object's identity inside trainlet.
//
// A TrainJob (or a namespaced TrainingRuntime) is keyed, in the controller's map, the store, the
// agents, paths and the ranks' environment, by its bare name in namespace "default" (so every job
// stored before namespaces existed keeps its key) and by "<namespace>.<name>" otherwise. A TrainJob
// name is an RFC 1035 label and a namespace an RFC 1123 label: neither holds a '.', so the key is
// unambiguous and one path component. (A runtime name may hold dots; a runtime key is only ever
// built, never split.) Users always see and type the namespace and the name apart ("-n team-a
// llm-7", messages "team-a/llm-7").
//
// Pure functions; any thread.
#pragma once

#include <string>
#include <string_view>

namespace trainlet::coordinator {

inline constexpr std::string_view kDefaultNamespace = "default";

// "" reads as "default" (metadata.namespace unset, or a request from a client before namespaces).
inline std::string NamespaceOrDefault(std::string_view ns) {
  return std::string(ns.empty() ? kDefaultNamespace : ns);
}

inline std::string JobKey(std::string_view ns, std::string_view name) {
  if (ns.empty() || ns == kDefaultNamespace) return std::string(name);
  std::string key;
  key.reserve(ns.size() + 1 + name.size());
  key.append(ns).append(".").append(name);
  return key;
}

struct JobRef {
  std::string namespace_;  // never empty: "default" for a bare key
  std::string name;
};

// The inverse of JobKey: JobKeyRef(JobKey(ns, n)) == {NamespaceOrDefault(ns), n}.
inline JobRef JobKeyRef(std::string_view key) {
  const size_t dot = key.find('.');
  if (dot == std::string_view::npos) return {std::string(kDefaultNamespace), std::string(key)};
  return {std::string(key.substr(0, dot)), std::string(key.substr(dot + 1))};
}

// How messages name a job: "llm-7" in namespace default, "team-a/llm-7" elsewhere.
inline std::string JobDisplayName(std::string_view key) {
  JobRef ref = JobKeyRef(key);
  if (ref.namespace_ == kDefaultNamespace) return ref.name;
  return ref.namespace_ + "/" + ref.name;
}

}  // namespace trainlet::coordinator
