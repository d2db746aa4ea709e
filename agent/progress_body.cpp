#include "agent/progress_body.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "agent/json_subset_scanner.h"

namespace trainlet::agent {
namespace {

using nlohmann::json;

// Errors are made only when refusing: the names and messages are not built for a good post.
Status FieldError(std::string_view field, std::string_view why) {
  return InvalidError(std::string(field) + ": " + std::string(why));
}

// What one field of the body held, as the parse below saw it last (Go's decoder and a JSON
// object both keep the last of duplicate keys).
struct Integer {
  enum class Kind { kAbsent, kSigned, kUnsigned, kOther } kind = Kind::kAbsent;  // absent: or null
  int64_t i = 0;
  uint64_t u = 0;
};
struct Text {
  enum class Kind { kAbsent, kString, kOther } kind = Kind::kAbsent;
  std::string s;
};
struct Metric {
  bool object = false;
  Text name, value;
};

// The body through nlohmann's SAX interface: the same lexer, so the same bytes are valid JSON as
// with json::parse, but no document is built; only trainerStatus' fields are kept. Kubeflow's
// rules are checked afterwards (Check), in a fixed order, so the first refusal named does not
// depend on where a field sits in the body. Metrics past kMaxProgressMetrics + 1 are counted only.
class BodySax : public nlohmann::json_sax<json> {
 public:
  enum class Slot {
    kTop,
    kTrainerStatus,
    kPercentage,
    kRemaining,
    kMetrics,
    kLastUpdated,
    kMetric,
    kName,
    kValue,
    kIgnored
  };
  // The body's shape as parsed.
  bool top_object = false;
  enum class Ts { kAbsent, kNotObject, kObject } ts = Ts::kAbsent;
  Integer percentage, remaining;
  Text last_updated;
  enum class List { kAbsent, kNotList, kList } metrics = List::kAbsent;
  size_t metric_count = 0;
  std::vector<Metric> metric_list;

  BodySax() { stack_.reserve(8); }  // one allocation for a body's usual depth (4)

  bool null() override { return Scalar(Kind::kNull); }
  bool boolean(bool) override { return Scalar(Kind::kOther); }
  bool number_integer(number_integer_t v) override { return Scalar(Kind::kSigned, v); }
  bool number_unsigned(number_unsigned_t v) override { return Scalar(Kind::kUnsigned, 0, v); }
  bool number_float(number_float_t, const string_t&) override { return Scalar(Kind::kOther); }
  bool string(string_t& v) override { return Scalar(Kind::kString, 0, 0, &v); }
  bool binary(binary_t&) override { return Scalar(Kind::kOther); }
  bool start_object(std::size_t) override { return Open(true); }
  bool start_array(std::size_t) override { return Open(false); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }
  bool key(string_t& k) override {
    Frame& f = stack_.back();
    f.key = Slot::kIgnored;
    if (f.role == Slot::kTop && k == "trainerStatus") {
      f.key = Slot::kTrainerStatus;
    } else if (f.role == Slot::kTrainerStatus) {
      if (k == "progressPercentage") f.key = Slot::kPercentage;
      if (k == "estimatedRemainingSeconds") f.key = Slot::kRemaining;
      if (k == "metrics") f.key = Slot::kMetrics;
      if (k == "lastUpdatedTime") f.key = Slot::kLastUpdated;
    } else if (f.role == Slot::kMetric) {
      if (k == "name") f.key = Slot::kName;
      if (k == "value") f.key = Slot::kValue;
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  struct Frame {
    Slot role;                  // what this object or array is
    Slot key = Slot::kIgnored;  // in an object: what the value of the last key is
  };

  // What the value starting now is.
  Slot Here() const {
    if (stack_.empty()) return Slot::kTop;
    const Frame& f = stack_.back();
    if (f.role == Slot::kMetrics) return Slot::kMetric;
    if (f.role == Slot::kTop || f.role == Slot::kTrainerStatus || f.role == Slot::kMetric) {
      return f.key;
    }
    return Slot::kIgnored;
  }
  Metric* CurrentMetric() {
    return metric_list.empty() || metric_count > metric_list.size() ? nullptr : &metric_list.back();
  }
  Text* TextAt(Slot slot) {
    if (slot == Slot::kLastUpdated) return &last_updated;
    Metric* m = CurrentMetric();
    if (m == nullptr) return nullptr;
    if (slot == Slot::kName) return &m->name;
    if (slot == Slot::kValue) return &m->value;
    return nullptr;
  }

  enum class Kind { kNull, kSigned, kUnsigned, kString, kOther };
  bool Scalar(Kind kind, int64_t i = 0, uint64_t u = 0, string_t* text = nullptr) {
    const Slot slot = Here();
    switch (slot) {
      case Slot::kTop:
        top_object = false;
        break;
      case Slot::kTrainerStatus:
        ts = kind == Kind::kNull ? Ts::kAbsent : Ts::kNotObject;
        break;
      case Slot::kPercentage:
      case Slot::kRemaining: {
        Integer& f = slot == Slot::kPercentage ? percentage : remaining;
        f = {kind == Kind::kNull       ? Integer::Kind::kAbsent
             : kind == Kind::kSigned   ? Integer::Kind::kSigned
             : kind == Kind::kUnsigned ? Integer::Kind::kUnsigned
                                       : Integer::Kind::kOther,
             i, u};
        break;
      }
      case Slot::kMetrics:
        metrics = kind == Kind::kNull ? List::kAbsent : List::kNotList;
        break;
      case Slot::kMetric:
        AddMetric(false);
        break;
      case Slot::kLastUpdated:
      case Slot::kName:
      case Slot::kValue:
        if (Text* t = TextAt(slot)) {
          t->kind = kind == Kind::kString ? Text::Kind::kString
                    : kind == Kind::kNull ? Text::Kind::kAbsent
                                          : Text::Kind::kOther;
          t->s = text != nullptr ? std::move(*text) : std::string();
        }
        break;
      case Slot::kIgnored:
        break;
    }
    return true;
  }

  bool Open(bool object) {
    const Slot slot = Here();
    Slot role = Slot::kIgnored;
    switch (slot) {
      case Slot::kTop:
        top_object = object;
        if (object) role = Slot::kTop;
        break;
      case Slot::kTrainerStatus:
        ts = object ? Ts::kObject : Ts::kNotObject;
        percentage = remaining = Integer{};
        last_updated = Text{};
        metrics = List::kAbsent;
        metric_count = 0;
        metric_list.clear();
        if (object) role = Slot::kTrainerStatus;
        break;
      case Slot::kPercentage:
        percentage = {Integer::Kind::kOther, 0, 0};
        break;
      case Slot::kRemaining:
        remaining = {Integer::Kind::kOther, 0, 0};
        break;
      case Slot::kMetrics:
        metrics = object ? List::kNotList : List::kList;
        metric_count = 0;
        metric_list.clear();
        if (!object) role = Slot::kMetrics;
        break;
      case Slot::kMetric:
        AddMetric(object);
        if (object && CurrentMetric() != nullptr) role = Slot::kMetric;
        break;
      case Slot::kLastUpdated:
      case Slot::kName:
      case Slot::kValue:
        if (Text* t = TextAt(slot)) *t = {Text::Kind::kOther, {}};
        break;
      case Slot::kIgnored:
        break;
    }
    stack_.push_back({role});
    return true;
  }

  bool Close() {
    stack_.pop_back();
    return true;
  }

  void AddMetric(bool object) {
    ++metric_count;
    if (metric_list.size() <= kMaxProgressMetrics) metric_list.push_back({object, {}, {}});
  }

  std::vector<Frame> stack_;
};

// An integer in [lo, hi]; 45.0 is not one, as for Go's decoder into int32.
Result<int64_t> IntegerIn(const Integer& v, std::string_view field, int64_t lo, int64_t hi) {
  const bool in_range = v.kind == Integer::Kind::kUnsigned
                            ? v.u <= static_cast<uint64_t>(hi)
                            : v.kind == Integer::Kind::kSigned && v.i >= lo && v.i <= hi;
  if (!in_range) {
    return FieldError(
        field, "must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  }
  return v.kind == Integer::Kind::kUnsigned ? static_cast<int64_t>(v.u) : v.i;
}

// The refusal of a metric's name or value, or nullopt when it is good.
std::optional<std::string_view> TextProblem(const Text& t) {
  if (t.kind == Text::Kind::kAbsent) return "required";
  if (t.kind != Text::Kind::kString) return "must be a string";
  if (t.s.empty() || t.s.size() > kMaxMetricTextBytes) return "must be 1 to 64 bytes";
  return std::nullopt;
}
static_assert(kMaxMetricTextBytes == 64, "TextProblem's message names the limit");

Status CheckMetrics(BodySax& body, v1::TrainerStatus* out) {
  constexpr std::string_view field = "trainerStatus.metrics";
  if (body.metrics == BodySax::List::kNotList) return FieldError(field, "must be a list");
  if (body.metric_count > kMaxProgressMetrics) {
    return FieldError(field, "at most " + std::to_string(kMaxProgressMetrics) + " metrics, got " +
                                 std::to_string(body.metric_count));
  }
  for (size_t i = 0; i < body.metric_list.size(); ++i) {
    Metric& metric = body.metric_list[i];
    auto at = [&] { return std::string(field) + "[" + std::to_string(i) + "]"; };
    if (!metric.object) return FieldError(at(), "must be an object with name and value");
    if (auto why = TextProblem(metric.name)) return FieldError(at() + ".name", *why);
    if (auto why = TextProblem(metric.value)) return FieldError(at() + ".value", *why);
    auto* m = out->add_metrics();
    m->set_name(std::move(metric.name.s));
    m->set_value(std::move(metric.value.s));
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

namespace {

// Kubeflow's rules over what the parse kept.
Result<std::optional<v1::TrainerStatus>> Interpret(BodySax& doc) {
  if (!doc.top_object) return InvalidError("body: must be a JSON object");
  if (doc.ts == BodySax::Ts::kAbsent) return std::optional<v1::TrainerStatus>();
  if (doc.ts == BodySax::Ts::kNotObject) return FieldError("trainerStatus", "must be an object");
  v1::TrainerStatus out;
  if (doc.percentage.kind != Integer::Kind::kAbsent) {
    TRAINLET_ASSIGN_OR_RETURN(
        auto v, IntegerIn(doc.percentage, "trainerStatus.progressPercentage", 0, 100));
    out.set_progress_percentage(static_cast<int32_t>(v));
  }
  if (doc.remaining.kind != Integer::Kind::kAbsent) {
    TRAINLET_ASSIGN_OR_RETURN(auto v,
                              IntegerIn(doc.remaining, "trainerStatus.estimatedRemainingSeconds", 0,
                                        std::numeric_limits<int32_t>::max()));
    out.set_estimated_remaining_seconds(v);
  }
  if (doc.metrics != BodySax::List::kAbsent) TRAINLET_RETURN_IF_ERROR(CheckMetrics(doc, &out));
  if (doc.last_updated.kind != Text::Kind::kAbsent) {
    std::optional<int64_t> ms;
    if (doc.last_updated.kind == Text::Kind::kString) ms = ParseRfc3339Ms(doc.last_updated.s);
    if (!ms) {
      return FieldError("trainerStatus.lastUpdatedTime",
                        "must be an RFC 3339 time such as \"2025-01-23T10:30:45Z\"");
    }
    out.set_last_updated_unix_ms(*ms);
  }
  return std::optional<v1::TrainerStatus>(std::move(out));
}

}  // namespace

Result<std::optional<v1::TrainerStatus>> ParseProgressBody(std::string_view body,
                                                           ProgressJsonParser parser) {
  if (parser == ProgressJsonParser::kSubsetFirst) {
    BodySax doc;
    if (ScanJsonSubset(body, &doc)) return Interpret(doc);
  }
  BodySax doc;  // a fresh one: the subset scan may have fed the other part of the body
  if (!json::sax_parse(body, &doc)) return InvalidError("body: not valid JSON");
  return Interpret(doc);
}

}  // namespace trainlet::agent
