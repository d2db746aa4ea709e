#include "trainletctl/progress_text.h"

#include <time.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace trainlet::cli {
namespace {

// Go's duration form in whole seconds: "45s", "3m10s", "2h0m5s".
std::string GoSeconds(int64_t seconds) {
  seconds = std::max<int64_t>(0, seconds);
  const int64_t h = seconds / 3600, m = seconds % 3600 / 60, s = seconds % 60;
  if (h > 0) return std::to_string(h) + "h" + std::to_string(m) + "m" + std::to_string(s) + "s";
  if (m > 0) return std::to_string(m) + "m" + std::to_string(s) + "s";
  return std::to_string(s) + "s";
}

// The progress to show: only the current attempt's (a coordinator clears it on a new attempt;
// this guards against one that did not).
const v1::TrainerStatus* Shown(const v1::JobStatus& job) {
  if (!job.has_trainer_status()) return nullptr;
  const v1::TrainerStatus& t = job.trainer_status();
  if (t.attempt() != 0 && t.attempt() != job.attempt()) return nullptr;
  return &t;
}

nlohmann::ordered_json KubeflowShape(const v1::TrainerStatus& t) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (t.has_progress_percentage()) out["progressPercentage"] = t.progress_percentage();
  if (t.has_estimated_remaining_seconds()) {
    out["estimatedRemainingSeconds"] = t.estimated_remaining_seconds();
  }
  nlohmann::ordered_json metrics = nlohmann::ordered_json::array();
  for (const auto& m : t.metrics()) metrics.push_back({{"name", m.name()}, {"value", m.value()}});
  if (!metrics.empty()) out["metrics"] = std::move(metrics);
  if (t.last_updated_unix_ms() > 0) out["lastUpdatedTime"] = Rfc3339(t.last_updated_unix_ms());
  return out;
}

}  // namespace

std::string ProgressColumn(const v1::JobStatus& job) {
  const v1::TrainerStatus* t = Shown(job);
  if (t == nullptr || !t->has_progress_percentage()) return "-";
  return std::to_string(t->progress_percentage()) + "%";
}

std::string EtaColumn(const v1::JobStatus& job) {
  const v1::TrainerStatus* t = Shown(job);
  if (t == nullptr || !t->has_estimated_remaining_seconds()) return "-";
  return GoSeconds(t->estimated_remaining_seconds());
}

std::string Rfc3339(int64_t unix_ms) {
  const time_t secs = static_cast<time_t>(unix_ms / 1000);
  struct tm tm {};
  gmtime_r(&secs, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string DescribeProgress(const v1::JobStatus& job, int64_t now_ms) {
  const v1::TrainerStatus* t = Shown(job);
  if (t == nullptr) return "";
  std::string line = "Progress:      ";
  line += t->has_progress_percentage() ? std::to_string(t->progress_percentage()) + "%" : "-";
  if (t->has_estimated_remaining_seconds()) {
    line += ", " + GoSeconds(t->estimated_remaining_seconds()) + " remaining";
  }
  if (t->received_unix_ms() > 0) {
    line += " (updated " + GoSeconds((now_ms - t->received_unix_ms()) / 1000) + " ago";
    if (t->last_updated_unix_ms() > 0)
      line += ", lastUpdatedTime " + Rfc3339(t->last_updated_unix_ms());
    line += ")";
  }
  line += "\n";
  if (t->metrics_size() > 0) {
    size_t width = 6;
    for (const auto& m : t->metrics()) width = std::max(width, m.name().size());
    line += "Metrics:\n  " + std::string("NAME") + std::string(width - 4 + 3, ' ') + "VALUE\n";
    for (const auto& m : t->metrics()) {
      line += "  " + m.name() + std::string(width - m.name().size() + 3, ' ') + m.value() + "\n";
    }
  }
  return line;
}

std::string WithKubeflowTrainerStatus(const std::string& json, const v1::JobList& jobs) {
  const bool any = std::any_of(jobs.jobs().begin(), jobs.jobs().end(),
                               [](const v1::JobStatus& j) { return j.has_trainer_status(); });
  if (!any) return json;
  auto doc = nlohmann::ordered_json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.contains("jobs") || !doc["jobs"].is_array()) return json;
  auto& out = doc["jobs"];
  for (int i = 0; i < jobs.jobs_size() && i < static_cast<int>(out.size()); ++i) {
    if (!out[i].contains("trainerStatus")) continue;
    const v1::TrainerStatus* t = Shown(jobs.jobs(i));
    if (t == nullptr) {
      out[i].erase("trainerStatus");
    } else {
      out[i]["trainerStatus"] = KubeflowShape(*t);
    }
  }
  return doc.dump(2) + "\n";
}

}  // namespace trainlet::cli
