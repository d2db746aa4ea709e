#include "common/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "common/status.h"

namespace trainlet {
namespace {

bool IsValidMetricName(const std::string& name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

std::string EscapeHelp(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

// `{a="x",b="y"}` (with `extra` appended, e.g. le="0.5"), or "" when there is nothing to show.
std::string LabelSet(const std::vector<std::string>& names, const std::vector<std::string>& values,
                     const std::string& extra = "") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += (out.empty() ? "" : ",") + names[i] + "=\"" + EscapeLabelValue(values[i]) + "\"";
  }
  if (!extra.empty()) out += (out.empty() ? "" : ",") + extra;
  return out.empty() ? "" : "{" + out + "}";
}

void Header(std::string& out, const std::string& name, const std::string& help, const char* type) {
  out += "# HELP " + name + " " + EscapeHelp(help) + "\n";
  out += "# TYPE " + name + " " + type + "\n";
}

}  // namespace

std::string FormatMetricValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  // The shortest text that reads back as the same double: 0.025, not 0.025000000000000001.
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, ec == std::errc() ? end : buf);
}

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::vector<double> LatencyBucketsSeconds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {
  TRAINLET_CHECK_MSG(std::is_sorted(bounds_.begin(), bounds_.end()) &&
                         std::adjacent_find(bounds_.begin(), bounds_.end()) == bounds_.end(),
                     "histogram bounds must increase strictly");
  counts_.assign(bounds_.size() + 1, 0);
}

void Histogram::Observe(double v) {
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  ++counts_[i];  // bucket i holds bounds_[i-1] < v <= bounds_[i]
  sum_ += v;
  ++count_;
}

template <typename Series>
Series& Family<Series>::With(const std::vector<std::string>& label_values) {
  TRAINLET_CHECK_MSG(label_values.size() == label_names_.size(),
                     name_ + ": wrong number of label values");
  auto& slot = series_[label_values];
  if (!slot) slot = factory_();
  return *slot;
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

void MetricsRegistry::CheckNewName(const std::string& name) {
  TRAINLET_CHECK_MSG(IsValidMetricName(name), "bad metric name " + name);
  for (const auto& f : counters_) TRAINLET_CHECK_MSG(f->name() != name, "duplicate " + name);
  for (const auto& f : gauges_) TRAINLET_CHECK_MSG(f->name() != name, "duplicate " + name);
  for (const auto& f : histograms_) TRAINLET_CHECK_MSG(f->name() != name, "duplicate " + name);
}

Family<Counter>& MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                             std::vector<std::string> label_names) {
  CheckNewName(name);
  auto* f = counters_
                .emplace_back(std::make_unique<Family<Counter>>(
                    name, help, std::move(label_names), [] { return std::make_unique<Counter>(); }))
                .get();
  renderers_.push_back([f](std::string& out) {
    Header(out, f->name(), f->help(), "counter");
    for (const auto& [values, c] : f->series()) {
      out += f->name() + LabelSet(f->label_names(), values) + " " + FormatMetricValue(c->value()) +
             "\n";
    }
  });
  if (f->label_names().empty()) f->Get();  // shown as 0 from the start
  return *f;
}

Family<Gauge>& MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                                         std::vector<std::string> label_names) {
  CheckNewName(name);
  auto* f = gauges_
                .emplace_back(std::make_unique<Family<Gauge>>(
                    name, help, std::move(label_names), [] { return std::make_unique<Gauge>(); }))
                .get();
  renderers_.push_back([f](std::string& out) {
    Header(out, f->name(), f->help(), "gauge");
    for (const auto& [values, g] : f->series()) {
      out += f->name() + LabelSet(f->label_names(), values) + " " + FormatMetricValue(g->value()) +
             "\n";
    }
  });
  if (f->label_names().empty()) f->Get();  // shown as 0 from the start
  return *f;
}

Family<Histogram>& MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                                 std::vector<double> bounds,
                                                 std::vector<std::string> label_names) {
  CheckNewName(name);
  Histogram probe(bounds);  // checks the bounds now, not at the first observation
  auto* f = histograms_
                .emplace_back(std::make_unique<Family<Histogram>>(
                    name, help, std::move(label_names),
                    [bounds] { return std::make_unique<Histogram>(bounds); }))
                .get();
  renderers_.push_back([f](std::string& out) {
    Header(out, f->name(), f->help(), "histogram");
    for (const auto& [values, h] : f->series()) {
      uint64_t cumulative = 0;
      for (size_t i = 0; i <= h->bounds().size(); ++i) {
        cumulative += h->counts()[i];
        const std::string le =
            i < h->bounds().size() ? FormatMetricValue(h->bounds()[i]) : std::string("+Inf");
        out += f->name() + "_bucket" + LabelSet(f->label_names(), values, "le=\"" + le + "\"") +
               " " + std::to_string(cumulative) + "\n";
      }
      const std::string labels = LabelSet(f->label_names(), values);
      out += f->name() + "_sum" + labels + " " + FormatMetricValue(h->sum()) + "\n";
      out += f->name() + "_count" + labels + " " + std::to_string(h->count()) + "\n";
    }
  });
  // A histogram without labels shows its (empty) series from the start, as a scraper expects.
  if (f->label_names().empty()) f->Get();
  return *f;
}

void MetricsRegistry::AddCollector(std::function<void()> collector) {
  collectors_.push_back(std::move(collector));
}

std::string MetricsRegistry::Render() {
  for (auto& c : collectors_) c();
  std::string out;
  for (auto& r : renderers_) r(out);
  return out;
}

}  // namespace trainlet
