// Kubernetes' taint and toleration rules, written once for both places that apply them: the
// planner (trainjob::Toleration against a node's NodeTaint, gang_planner.h) and admission (a
// ResourceFlavor's taints, admission_flavors.h), whose model keeps types of its own with the same
// fields. Pure functions, any thread.
#pragma once

#include <string>

namespace trainlet::coordinator {

// Kubernetes' ToleratesTaint: a toleration with an effect matches only that effect; with a key,
// only that key (an empty key with Exists matches every taint); Exists matches any value, Equal
// (or "") the same value.
template <class Toleration, class Taint>
bool TolerationMatches(const Toleration& t, const Taint& taint) {
  if (!t.effect.empty() && t.effect != taint.effect) return false;
  if (!t.key.empty() && t.key != taint.key) return false;
  return t.op == "Exists" || t.value == taint.value;
}

// NoSchedule and NoExecute keep untolerating work off; PreferNoSchedule never blocks.
template <class Taint>
bool TaintBlocks(const Taint& taint) {
  return taint.effect == "NoSchedule" || taint.effect == "NoExecute";
}

// "key=value:Effect", or "key:Effect" without a value (kubectl taint's form).
template <class Taint>
std::string TaintText(const Taint& taint) {
  return taint.key + (taint.value.empty() ? "" : "=" + taint.value) + ":" + taint.effect;
}

}  // namespace trainlet::coordinator
