// A strict parser of the Prometheus text exposition format 0.0.4, for tests: it accepts what
// Prometheus accepts and reports the first line that breaks the format or the histogram rules.
#pragma once

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace trainlet::testing {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Exposition {
  std::map<std::string, std::string> types;  // family -> counter, gauge, histogram, ...
  std::map<std::string, std::string> help;
  std::vector<Sample> samples;

  // Sum of the samples named `name` whose labels include `match`; NaN when none matched.
  double Value(const std::string& name,
               const std::map<std::string, std::string>& match = {}) const {
    double sum = 0;
    bool found = false;
    for (const auto& s : samples) {
      if (s.name != name) continue;
      bool ok = true;
      for (const auto& [k, v] : match) {
        auto it = s.labels.find(k);
        ok = ok && it != s.labels.end() && it->second == v;
      }
      if (ok) {
        sum += s.value;
        found = true;
      }
    }
    return found ? sum : NAN;
  }
};

namespace exposition_internal {

inline bool IsNameChar(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
         (!first && c >= '0' && c <= '9');
}

inline bool ParseValue(const std::string& s, double& out) {
  if (s == "+Inf" || s == "Inf") return out = INFINITY, true;
  if (s == "-Inf") return out = -INFINITY, true;
  if (s == "NaN") return out = NAN, true;
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

}  // namespace exposition_internal

// Returns "" and fills `out`, or the error with its line number.
inline std::string ParseExposition(const std::string& text, Exposition& out) {
  using namespace exposition_internal;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  std::set<std::string> seen_samples_of;  // families whose samples began
  auto family_of = [&](const std::string& name) -> std::string {
    if (out.types.count(name)) return name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string sfx(suffix);
      if (name.size() > sfx.size() &&
          name.compare(name.size() - sfx.size(), sfx.size(), sfx) == 0) {
        const std::string base = name.substr(0, name.size() - sfx.size());
        auto it = out.types.find(base);
        if (it != out.types.end() && (it->second == "histogram" || it->second == "summary")) {
          return base;
        }
      }
    }
    return "";
  };
  if (!text.empty() && text.back() != '\n') return "the exposition must end with a newline";
  while (std::getline(in, line)) {
    ++n;
    const std::string at = "line " + std::to_string(n) + ": ";
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream ls(line.substr(1));
      std::string kw, name;
      ls >> kw >> name;
      if (kw != "HELP" && kw != "TYPE") continue;  // other comments are allowed
      if (name.empty() || !IsNameChar(name[0], true)) return at + "bad metric name in " + kw;
      std::string rest;
      std::getline(ls, rest);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      if (kw == "HELP") {
        if (out.help.count(name)) return at + "second HELP for " + name;
        out.help[name] = rest;
      } else {
        static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary",
                                                     "untyped"};
        if (!kTypes.count(rest)) return at + "unknown type " + rest;
        if (out.types.count(name)) return at + "second TYPE for " + name;
        if (seen_samples_of.count(name)) return at + "TYPE after samples of " + name;
        out.types[name] = rest;
      }
      continue;
    }
    Sample s;
    size_t i = 0;
    while (i < line.size() && IsNameChar(line[i], i == 0)) ++i;
    s.name = line.substr(0, i);
    if (s.name.empty()) return at + "no metric name";
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t b = i;
        while (i < line.size() && IsNameChar(line[i], i == b)) ++i;
        const std::string lname = line.substr(b, i - b);
        if (lname.empty() || i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') {
          return at + "bad label in " + s.name;
        }
        i += 2;
        std::string value;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\') {
            if (i + 1 >= line.size()) return at + "dangling escape";
            const char e = line[i + 1];
            if (e == 'n')
              value += '\n';
            else if (e == '\\' || e == '"')
              value += e;
            else
              return at + "bad escape \\" + std::string(1, e);
            i += 2;
          } else {
            value += line[i++];
          }
        }
        if (i >= line.size()) return at + "unterminated label value";
        ++i;  // closing quote
        if (s.labels.count(lname)) return at + "label " + lname + " twice";
        s.labels[lname] = value;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) return at + "unterminated label set";
      ++i;  // '}'
    }
    if (i >= line.size() || line[i] != ' ') return at + "expected a space before the value";
    std::istringstream vs(line.substr(i + 1));
    std::string value, timestamp, extra;
    vs >> value >> timestamp >> extra;
    if (!ParseValue(value, s.value)) return at + "bad value \"" + value + "\"";
    if (!timestamp.empty()) {
      double ts;
      if (!ParseValue(timestamp, ts)) return at + "bad timestamp";
    }
    if (!extra.empty()) return at + "trailing text";
    const std::string family = family_of(s.name);
    if (family.empty()) return at + s.name + " has no TYPE line before it";
    seen_samples_of.insert(family);
    const std::string& type = out.types[family];
    if (type == "counter" && (s.value < 0 || std::isnan(s.value))) {
      return at + "counter " + s.name + " is negative or NaN";
    }
    if (type == "histogram" && s.name == family) return at + "bare sample of histogram " + family;
    out.samples.push_back(std::move(s));
  }
  // Histogram rules, per series (labels without le).
  for (const auto& [family, type] : out.types) {
    if (type != "histogram") continue;
    std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>> buckets;
    std::map<std::map<std::string, std::string>, double> counts;
    std::set<std::map<std::string, std::string>> sums;
    for (const auto& s : out.samples) {
      auto labels = s.labels;
      if (s.name == family + "_bucket") {
        auto le = labels.find("le");
        if (le == labels.end()) return family + ": bucket without le";
        double bound;
        if (!ParseValue(le->second, bound)) return family + ": bad le " + le->second;
        labels.erase(le);
        buckets[labels].push_back({bound, s.value});
      } else if (s.name == family + "_count") {
        counts[labels] = s.value;
      } else if (s.name == family + "_sum") {
        sums.insert(labels);
      }
    }
    for (const auto& [labels, bs] : buckets) {
      for (size_t k = 1; k < bs.size(); ++k) {
        if (!(bs[k].first > bs[k - 1].first)) return family + ": le not increasing";
        if (bs[k].second < bs[k - 1].second) return family + ": buckets not cumulative";
      }
      if (bs.empty() || !std::isinf(bs.back().first)) return family + ": no +Inf bucket";
      if (!counts.count(labels)) return family + ": no _count";
      if (counts[labels] != bs.back().second) return family + ": _count != +Inf bucket";
      if (!sums.count(labels)) return family + ": no _sum";
    }
    if (counts.size() != buckets.size()) return family + ": _count without buckets";
  }
  return "";
}

}  // namespace trainlet::testing
