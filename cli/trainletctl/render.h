// How trainletctl prints what the coordinator answers: kubectl-like tables, describe text, and
// JSON or YAML for scripts (-o json, -o yaml).
#pragma once

#include <google/protobuf/message_lite.h>

#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::cli {

enum class OutputFormat { kTable, kWide, kJson, kYaml, kName };
// "", "wide", "json", "yaml", "name"; errors name the -o flag.
Result<OutputFormat> ParseOutputFormat(const std::string& text);

// Columns padded to their widest cell, separated by three spaces, header first.
std::string RenderTable(const std::vector<std::vector<std::string>>& rows);
std::string ToJson(const google::protobuf::MessageLite& message);
std::string ToYaml(const google::protobuf::MessageLite& message);
// What describe prints of `message`: all of it as JSON or YAML for -o json / -o yaml, else the
// text `describe()` makes for people.
template <typename Describe>
std::string DescribeAs(OutputFormat format, const google::protobuf::MessageLite& message,
                       Describe describe) {
  if (format == OutputFormat::kJson) return ToJson(message);
  if (format == OutputFormat::kYaml) return ToYaml(message);
  return describe();
}
// The YAML form of a JSON document (ToYaml's second half).
std::string JsonToYaml(const std::string& json);

// What `get` prints for scripts: -o json or yaml of the whole `list`, or -o name's
// "<lowercase kind>/<name>" line per item of `items` (each with name()); nullopt for a table
// (-o wide included), which the caller draws.
template <typename Items>
std::optional<std::string> ListForScripts(const google::protobuf::MessageLite& list,
                                          const Items& items, const std::string& kind,
                                          OutputFormat format) {
  switch (format) {
    case OutputFormat::kJson:
      return ToJson(list);
    case OutputFormat::kYaml:
      return ToYaml(list);
    case OutputFormat::kName: {
      std::string prefix;
      for (char c : kind) prefix += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string out;
      for (const auto& item : items) out += prefix + "/" + item.name() + "\n";
      return out;
    }
    case OutputFormat::kTable:
    case OutputFormat::kWide:
      break;
  }
  return std::nullopt;
}

// "3d", "5h", "12m", "40s" since `unix_ms`; "<unknown>" when 0.
std::string Age(int64_t unix_ms, int64_t now_ms);
std::string HumanBytes(uint64_t bytes);

std::string RenderNodes(const v1::NodeList& nodes, OutputFormat format, int64_t now_ms);
// With `namespace_column` (get -A), the table's first column is NAMESPACE, and -o name gives
// "trainjob/NS/NAME".
std::string RenderJobs(const v1::JobList& jobs, OutputFormat format, int64_t now_ms,
                       bool namespace_column = false);
std::string DescribeJob(const v1::JobStatus& job, int64_t now_ms);
// The "Steps" section of describe: each replicated job ("node" for the main one) on each node
// with its workers' state: Pending, Running, Complete, Failed (or Stopped). "" for a job whose
// runtime has no replicated job beside the main one.
std::string DescribeSteps(const v1::JobStatus& job);

}  // namespace trainlet::cli
