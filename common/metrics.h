// Prometheus metrics: counters, gauges and histograms with labels, rendered in the text
// exposition format, version 0.0.4 (Content-Type: text/plain; version=0.0.4).
//
// Ownership: a MetricsRegistry owns its families; a family owns its series. Pointers and
// references returned by the registry and by Family::With stay valid for the registry's life.
// Threading: owned by one event loop, like everything else in a daemon; no locks.
//
// Gauges that mirror state the daemon already holds (nodes by state, jobs by phase) are set by a
// collector that Render() runs first, so the loop pays for them only when someone scrapes.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace trainlet {

class Counter {
 public:
  void Inc(double v = 1) { value_ += v; }  // v must be >= 0: a counter never goes down
  double value() const { return value_; }

 private:
  double value_ = 0;
};

class Gauge {
 public:
  void Set(double v) { value_ = v; }
  void Add(double v) { value_ += v; }
  double value() const { return value_; }

 private:
  double value_ = 0;
};

// Buckets are upper bounds, strictly increasing; +Inf is implicit.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  // Per bucket, not cumulative; one more entry than bounds() (the +Inf bucket).
  const std::vector<uint64_t>& counts() const { return counts_; }
  double sum() const { return sum_; }
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
};

// A metric name with its help text, type and label names; one series per label-value tuple.
template <typename Series>
class Family {
 public:
  using Factory = std::function<std::unique_ptr<Series>()>;
  Family(std::string name, std::string help, std::vector<std::string> label_names, Factory factory)
      : name_(std::move(name)),
        help_(std::move(help)),
        label_names_(std::move(label_names)),
        factory_(std::move(factory)) {}

  // The series for these label values (as many as label names; checked), created on first use.
  Series& With(const std::vector<std::string>& label_values);
  // The one series of a family without labels.
  Series& Get() { return With({}); }
  // Drops every series, for a family a collector rebuilds at each scrape (series of things that
  // no longer exist disappear). References to its series dangle afterwards.
  void Clear() { series_.clear(); }

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  const std::map<std::vector<std::string>, std::unique_ptr<Series>>& series() const {
    return series_;
  }

 private:
  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
  Factory factory_;
  std::map<std::vector<std::string>, std::unique_ptr<Series>> series_;
};

class MetricsRegistry {
 public:
  // Names must match [a-zA-Z_:][a-zA-Z0-9_:]* and be unique in the registry (checked: a
  // clash is a bug). Counter names end in _total by convention.
  Family<Counter>& AddCounter(const std::string& name, const std::string& help,
                              std::vector<std::string> label_names = {});
  Family<Gauge>& AddGauge(const std::string& name, const std::string& help,
                          std::vector<std::string> label_names = {});
  Family<Histogram>& AddHistogram(const std::string& name, const std::string& help,
                                  std::vector<double> bounds,
                                  std::vector<std::string> label_names = {});

  // Runs before every Render(), in the order added.
  void AddCollector(std::function<void()> collector);

  // The whole exposition, families in the order added, series sorted by label values.
  std::string Render();

 private:
  void CheckNewName(const std::string& name);

  std::vector<std::function<void()>> collectors_;
  std::vector<std::unique_ptr<Family<Counter>>> counters_;
  std::vector<std::unique_ptr<Family<Gauge>>> gauges_;
  std::vector<std::unique_ptr<Family<Histogram>>> histograms_;
  std::vector<std::function<void(std::string&)>> renderers_;  // one per family, in order
};

// Prometheus' text format for a sample value: integers without a fraction, +Inf/-Inf/NaN.
std::string FormatMetricValue(double v);
// Escapes a label value: backslash, double quote and newline.
std::string EscapeLabelValue(const std::string& v);

// Bucket bounds for latencies from a millisecond to a few minutes, in seconds.
std::vector<double> LatencyBucketsSeconds();

}  // namespace trainlet
