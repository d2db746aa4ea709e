#include "common/trainjob/apply_merge.h"

#include "common/trainjob/yaml_support.h"

namespace trainlet::trainjob {

YAML::Node MergeApplied(const YAML::Node& stored, const YAML::Node& applied) {
  if (!stored.IsMap() || !applied.IsMap()) return YAML::Clone(applied);
  YAML::Node out = YAML::Clone(stored);
  for (auto it = applied.begin(); it != applied.end(); ++it) {
    const std::string key = it->first.Scalar();
    if (!IsSet(it->second)) {
      out.remove(key);
      continue;
    }
    YAML::Node before = MapGet(out, key);
    // Assigning through operator[] on a key that exists replaces its value in place, so the
    // stored order of keys is kept and a re-emitted merge of an unchanged document is identical.
    out[key] = IsSet(before) ? MergeApplied(before, it->second) : YAML::Clone(it->second);
  }
  return out;
}

}  // namespace trainlet::trainjob
