// What the Kueue parsers share (kueue_parser.cpp, cluster_queue_parser.cpp): the object's label
// for messages, and readers for values the CRD schema has already checked. Internal to
// common/kueue.
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

#include "common/kueue/kueue_model.h"
#include "common/quantity.h"
#include "common/status.h"
#include "common/trainjob/yaml_support.h"

namespace trainlet::kueue::internal {

// Names one document in messages ("ClusterQueue/team-a", "document 3") and collects warnings.
class DocLabel {
 public:
  DocLabel(std::string label, std::vector<std::string>* warnings)
      : label_(std::move(label)), warnings_(warnings) {}
  const std::string& label() const { return label_; }
  void Warn(const std::string& path, const std::string& what) const {
    warnings_->push_back(label_ + ": " + path + ": " + what);
  }
  Status Error(const std::string& path, const std::string& what) const {
    return InvalidError(label_ + ": " + path + ": " + what);
  }

 private:
  std::string label_;
  std::vector<std::string>* warnings_;
};

// A scalar's text; "" for anything else (absent, null, a map).
inline std::string Text(const YAML::Node& n) { return n.IsScalar() ? n.Scalar() : std::string(); }

// A string map the schema checked (additionalProperties: string).
std::map<std::string, std::string> StringMap(const YAML::Node& n);

// A quantity field (int or string, the schema checked its pattern) of resource `resource`:
// Invalid naming `path` when it does not parse or is negative.
Result<Quantity> ReadQuantity(const YAML::Node& n, const std::string& resource,
                              const std::string& path, const DocLabel& doc);

// ClusterQueue's spec, checked (cluster_queue_parser.cpp).
Result<ClusterQueue> ReadClusterQueue(const YAML::Node& spec, const std::string& name,
                                      const DocLabel& doc);

}  // namespace trainlet::kueue::internal
