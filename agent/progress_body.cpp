#include "agent/progress_body.h"

#include <limits>
#include <nlohmann/json.hpp>

namespace trainlet::agent {
namespace {

using nlohmann::json;

Status FieldError(const std::string& field, const std::string& why) {
  return InvalidError(field + ": " + why);
}

// An integer JSON number in [lo, hi]; 45.0 is not one, as for Go's decoder into int32.
Result<int64_t> IntegerIn(const json& v, const std::string& field, int64_t lo, int64_t hi) {
  const std::string range =
      "must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
  if (!v.is_number_integer()) return FieldError(field, range);
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) return FieldError(field, range);
    return static_cast<int64_t>(u);
  }
  const auto i = v.get<int64_t>();
  if (i < lo || i > hi) return FieldError(field, range);
  return i;
}

Result<std::string> Text(const json& m, const char* key, const std::string& field) {
  const auto it = m.find(key);
  if (it == m.end() || it->is_null()) return FieldError(field, "required");
  if (!it->is_string()) return FieldError(field, "must be a string");
  const auto& s = it->get_ref<const std::string&>();
  if (s.empty() || s.size() > kMaxMetricTextBytes) {
    return FieldError(field, "must be 1 to " + std::to_string(kMaxMetricTextBytes) + " bytes");
  }
  return s;
}

Status ParseMetrics(const json& metrics, v1::TrainerStatus* out) {
  const std::string field = "trainerStatus.metrics";
  if (!metrics.is_array()) return FieldError(field, "must be a list");
  if (metrics.size() > kMaxProgressMetrics) {
    return FieldError(field, "at most " + std::to_string(kMaxProgressMetrics) + " metrics, got " +
                                 std::to_string(metrics.size()));
  }
  for (size_t i = 0; i < metrics.size(); ++i) {
    const std::string at = field + "[" + std::to_string(i) + "]";
    if (!metrics[i].is_object()) return FieldError(at, "must be an object with name and value");
    TRAINLET_ASSIGN_OR_RETURN(auto name, Text(metrics[i], "name", at + ".name"));
    TRAINLET_ASSIGN_OR_RETURN(auto value, Text(metrics[i], "value", at + ".value"));
    auto* m = out->add_metrics();
    m->set_name(std::move(name));
    m->set_value(std::move(value));
  }
  return Status::Ok();
}

int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {  // Howard Hinnant's algorithm
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

}  // namespace

std::optional<int64_t> ParseRfc3339Ms(std::string_view t) {
  auto digits = [&](size_t at, size_t n, int* out) {
    if (at + n > t.size()) return false;
    int v = 0;
    for (size_t i = at; i < at + n; ++i) {
      if (t[i] < '0' || t[i] > '9') return false;
      v = v * 10 + (t[i] - '0');
    }
    *out = v;
    return true;
  };
  int year, month, day, hour, minute, second;
  if (!digits(0, 4, &year) || t.size() < 20 || t[4] != '-' || !digits(5, 2, &month) ||
      t[7] != '-' || !digits(8, 2, &day) || (t[10] != 'T' && t[10] != 't') ||
      !digits(11, 2, &hour) || t[13] != ':' || !digits(14, 2, &minute) || t[16] != ':' ||
      !digits(17, 2, &second)) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return std::nullopt;
  }
  size_t at = 19;
  int64_t ms = 0;
  if (t[at] == '.') {
    size_t n = 0;
    for (++at; at < t.size() && t[at] >= '0' && t[at] <= '9'; ++at, ++n) {
      if (n < 3) ms = ms * 10 + (t[at] - '0');
    }
    if (n == 0) return std::nullopt;
    for (; n < 3; ++n) ms *= 10;
  }
  int offset_minutes = 0;
  if (at < t.size() && (t[at] == 'Z' || t[at] == 'z') && at + 1 == t.size()) {
    // UTC
  } else if (at + 6 == t.size() && (t[at] == '+' || t[at] == '-') && t[at + 3] == ':') {
    int oh, om;
    if (!digits(at + 1, 2, &oh) || !digits(at + 4, 2, &om) || oh > 23 || om > 59) {
      return std::nullopt;
    }
    offset_minutes = (t[at] == '+' ? 1 : -1) * (oh * 60 + om);
  } else {
    return std::nullopt;
  }
  const int64_t days =
      DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  const int64_t seconds = days * 86400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
  return seconds * 1000 + ms;
}

Result<std::optional<v1::TrainerStatus>> ParseProgressBody(std::string_view body) {
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidError("body: not valid JSON");
  if (!doc.is_object()) return InvalidError("body: must be a JSON object");
  const auto ts = doc.find("trainerStatus");
  if (ts == doc.end() || ts->is_null()) return std::optional<v1::TrainerStatus>();
  if (!ts->is_object()) return FieldError("trainerStatus", "must be an object");
  v1::TrainerStatus out;
  if (auto p = ts->find("progressPercentage"); p != ts->end() && !p->is_null()) {
    TRAINLET_ASSIGN_OR_RETURN(auto v, IntegerIn(*p, "trainerStatus.progressPercentage", 0, 100));
    out.set_progress_percentage(static_cast<int32_t>(v));
  }
  if (auto e = ts->find("estimatedRemainingSeconds"); e != ts->end() && !e->is_null()) {
    TRAINLET_ASSIGN_OR_RETURN(auto v, IntegerIn(*e, "trainerStatus.estimatedRemainingSeconds", 0,
                                                std::numeric_limits<int32_t>::max()));
    out.set_estimated_remaining_seconds(v);
  }
  if (auto m = ts->find("metrics"); m != ts->end() && !m->is_null()) {
    TRAINLET_RETURN_IF_ERROR(ParseMetrics(*m, &out));
  }
  if (auto t = ts->find("lastUpdatedTime"); t != ts->end() && !t->is_null()) {
    std::optional<int64_t> ms;
    if (t->is_string()) ms = ParseRfc3339Ms(t->get_ref<const std::string&>());
    if (!ms) {
      return FieldError("trainerStatus.lastUpdatedTime",
                        "must be an RFC 3339 time such as \"2025-01-23T10:30:45Z\"");
    }
    out.set_last_updated_unix_ms(*ms);
  }
  return std::optional<v1::TrainerStatus>(std::move(out));
}

}  // namespace trainlet::agent
