#include "coordinator/work_dir_agreement.h"

#include <filesystem>

#include "coordinator/working_dir.h"

namespace trainlet::coordinator {
namespace {

constexpr const char* kFix =
    "each node keeps its own work dir, so a checkpoint written on one node is not seen on the "
    "others: run the job in the shared directory (annotation trainlet.io/working-dir: shared), or "
    "have every node save it";

// What one node holds, for the message: "missing", "unreadable (why)", or its size and digest.
std::string Holds(const v1::WorkDirState& s) {
  std::string what;
  if (!s.error().empty()) {
    what = "unreadable (" + s.error() + ")";
  } else if (!s.checkpoint_exists()) {
    what = "missing";
  } else {
    what = std::to_string(s.checkpoint_bytes()) + " bytes (sha256 " +
           s.checkpoint_sha256().substr(0, 8) + ")";
  }
  return what + (s.last_attempt() > 0
                     ? ", in a work dir last run by attempt " + std::to_string(s.last_attempt())
                     : ", in a work dir no attempt ran in");
}

bool Same(const v1::WorkDirState& a, const v1::WorkDirState& b) {
  if (!a.error().empty() || !b.error().empty()) return false;
  if (a.checkpoint_exists() != b.checkpoint_exists()) return false;
  return !a.checkpoint_exists() || (a.checkpoint_bytes() == b.checkpoint_bytes() &&
                                    a.checkpoint_sha256() == b.checkpoint_sha256());
}

}  // namespace

std::string CheckpointToCompare(const PlanRequest& request) {
  if (request.attempt <= 1 || request.nodes.size() < 2) return "";
  auto place = WorkDirPlaceOf(request.annotations);
  if (!place.ok() || *place == WorkDirPlace::kShared) return "";
  auto it = request.annotations.find(std::string(kCheckpointPathAnnotation));
  if (it == request.annotations.end() || it->second.empty()) return "";
  // Where the ranks run: the job's work dir, or their workingDir (relative to it, or absolute).
  return (std::filesystem::path(request.working_dir) / it->second).lexically_normal().string();
}

std::optional<std::string> DivergentWorkDirs(const std::string& checkpoint,
                                             const std::vector<std::string>& nodes,
                                             const std::vector<v1::WorkDirState>& states) {
  bool agree = true;
  for (size_t i = 1; i < states.size(); ++i) agree = agree && Same(states[0], states[i]);
  if (agree) return std::nullopt;
  std::string each;
  for (size_t i = 0; i < states.size() && i < nodes.size(); ++i) {
    each += (i == 0 ? "" : "; ") + Holds(states[i]) + " on " + nodes[i];
  }
  return "the ranks would resume from different state: " + checkpoint + " is " + each + ". " + kFix;
}

std::string MixedAttemptsWarning(const v1::JobStatus& status, const PlanRequest& request,
                                 const std::vector<std::string>& placement,
                                 const AttemptLayout& layout) {
  const uint32_t attempt = request.attempt;
  std::vector<std::string> nodes;
  for (size_t i = 0; i < placement.size() && i < layout.nodes.size(); ++i) {
    if (!layout.nodes[i].ranks.empty()) nodes.push_back(placement[i]);
  }
  if (attempt <= 1 || nodes.size() < 2) return "";
  auto place = WorkDirPlaceOf(request.annotations);
  if (!place.ok() || *place == WorkDirPlace::kShared) return "";
  std::map<std::string, uint32_t> last;  // node -> the last earlier attempt with a rank there
  for (const auto& rec : status.attempts()) {
    if (rec.attempt() >= attempt) continue;
    for (const auto& n : rec.rank_nodes()) last[n] = std::max(last[n], rec.attempt());
  }
  auto last_of = [&](const std::string& n) { return last.contains(n) ? last[n] : 0u; };
  bool mixed = false;
  for (const auto& n : nodes) mixed = mixed || last_of(n) != last_of(nodes[0]);
  if (!mixed) return "";
  std::string each;
  for (const auto& n : nodes) {
    const uint32_t a = last_of(n);
    each += std::string(each.empty() ? "" : ", ") + n +
            (a > 0 ? " last ran attempt " + std::to_string(a) : " never ran it");
  }
  return each +
         ": ranks that resume from their work dir may start from different state (annotation "
         "trainlet.io/working-dir: shared keeps one directory for every node; "
         "trainlet.io/checkpoint-path makes trainlet compare the nodes' checkpoints first)";
}

}  // namespace trainlet::coordinator
