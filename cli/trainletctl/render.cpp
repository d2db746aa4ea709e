#include "trainletctl/render.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "common/status.h"
#include "proto/reflection.h"
#include "trainletctl/describe_node.h"
#include "trainletctl/progress_text.h"
#include "trainletctl/state_text.h"

namespace trainlet::cli {

Result<OutputFormat> ParseOutputFormat(const std::string& text) {
  if (text.empty()) return OutputFormat::kTable;
  if (text == "wide") return OutputFormat::kWide;
  if (text == "json") return OutputFormat::kJson;
  if (text == "yaml") return OutputFormat::kYaml;
  if (text == "name") return OutputFormat::kName;
  return InvalidError("-o " + text + ": unknown output format; use json, yaml, wide or name");
}

std::string RenderTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 3, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string ToJson(const google::protobuf::MessageLite& message) { return proto::ToJson(message); }

namespace {

// Whether a string, written plain, would read back as something else: null, a boolean (YAML 1.1's
// yes/no/on/off too, as yaml-cpp and PyYAML read them) or a number. Errs toward quoting: any
// text that starts like a number is quoted.
bool ReadsAsAnotherType(const std::string& s) {
  if (s.empty()) return true;
  static const std::set<std::string> kWords = {
      "~",     "null", "Null", "NULL", "true", "True",  "TRUE",  "false", "False",
      "FALSE", "yes",  "Yes",  "YES",  "no",   "No",    "NO",    "on",    "On",
      "ON",    "off",  "Off",  "OFF",  "y",    "Y",     "n",     "N",     ".inf",
      ".Inf",  ".INF", ".nan", ".NaN", ".NAN", "-.inf", "+.inf", "-.Inf", "+.Inf"};
  if (kWords.contains(s)) return true;
  const char c = s[0];
  return (c >= '0' && c <= '9') || ((c == '-' || c == '+' || c == '.') && s.size() > 1);
}

void EmitYaml(YAML::Emitter& out, const YAML::Node& n) {
  if (n.IsMap()) {
    out << YAML::BeginMap;
    for (const auto& kv : n) {
      out << YAML::Key << kv.first.as<std::string>() << YAML::Value;
      EmitYaml(out, kv.second);
    }
    out << YAML::EndMap;
  } else if (n.IsSequence()) {
    out << YAML::BeginSeq;
    for (const auto& v : n) EmitYaml(out, v);
    out << YAML::EndSeq;
  } else if (n.IsScalar()) {
    // A JSON string ("!": it was quoted) that plain would read as another type stays a string:
    // a command "true", a version "1.10", an int64 "1700000000000" (protobuf's JSON form).
    if (n.Tag() == "!" && ReadsAsAnotherType(n.Scalar())) out << YAML::DoubleQuoted;
    out << n.Scalar();
  } else {
    out << YAML::Null;
  }
}

}  // namespace

std::string ToYaml(const google::protobuf::MessageLite& message) {
  return JsonToYaml(ToJson(message));
}

std::string JsonToYaml(const std::string& json) {
  YAML::Node node = YAML::Load(json);  // JSON is YAML
  YAML::Emitter out;
  EmitYaml(out, node);
  return std::string(out.c_str()) + "\n";
}

std::string Age(int64_t unix_ms, int64_t now_ms) {
  if (unix_ms <= 0) return "<unknown>";
  const int64_t s = std::max<int64_t>(0, (now_ms - unix_ms) / 1000);
  if (s >= 86400 * 2) return std::to_string(s / 86400) + "d";
  if (s >= 3600 * 2) return std::to_string(s / 3600) + "h";
  if (s >= 120) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

std::string HumanBytes(uint64_t bytes) {
  const double gib = static_cast<double>(bytes) / (1024.0 * 1024 * 1024);
  std::ostringstream o;
  o.precision(gib >= 10 ? 0 : 1);
  o << std::fixed << gib << "Gi";
  return o.str();
}

std::string RenderNodes(const v1::NodeList& nodes, OutputFormat format, int64_t now_ms) {
  if (format == OutputFormat::kJson) return ToJson(nodes);
  if (format == OutputFormat::kYaml) return ToYaml(nodes);
  std::vector<std::vector<std::string>> rows;
  if (format == OutputFormat::kName) {
    std::string out;
    for (const auto& n : nodes.nodes()) out += "node/" + n.info().name() + "\n";
    return out;
  }
  const bool wide = format == OutputFormat::kWide;
  std::vector<std::string> header = {"NAME", "STATUS", "CPUS", "MEMORY", "GPUS", "AGE"};
  if (wide) header.insert(header.end(), {"SLOTS", "USED", "ADDRESS", "TOPOLOGY"});
  rows.push_back(header);
  for (const auto& n : nodes.nodes()) {
    const auto& t = n.info().topology();
    std::string status = n.state();
    for (const auto& c : n.conditions()) {
      // A failing health check: the node takes no new ranks, as a NotReady one in Kubernetes.
      if (c.type() == "Healthy" && c.status() == "False" && n.state() == "Ready")
        status = "NotReady";
    }
    if (!n.schedulable()) status += ",SchedulingDisabled";
    std::vector<std::string> row = {n.info().name(),         status,
                                    std::to_string(t.pus()), HumanBytes(t.memory_bytes()),
                                    GpuColumn(n.info()),     Age(n.registered_unix_ms(), now_ms)};
    if (wide) {
      row.insert(row.end(), {std::to_string(n.info().slots()), std::to_string(n.used_slots()),
                             n.info().address(), t.source()});
    }
    rows.push_back(std::move(row));
  }
  return RenderTable(rows);
}

std::string RenderJobs(const v1::JobList& jobs, OutputFormat format, int64_t now_ms,
                       bool namespace_column) {
  if (format == OutputFormat::kJson || format == OutputFormat::kYaml) {
    v1::JobList shown = jobs;
    FillStateStrings(shown);  // the old keys scripts read, beside the enums
    // trainerStatus under Kubeflow's names (progress_text.h).
    const std::string json = WithKubeflowTrainerStatus(ToJson(shown), shown);
    return format == OutputFormat::kJson ? json : JsonToYaml(json);
  }
  if (format == OutputFormat::kName) {
    std::string out;
    for (const auto& j : jobs.jobs()) {
      out += "trainjob/" + (namespace_column ? j.namespace_() + "/" : "") + j.name() + "\n";
    }
    return out;
  }
  const bool wide = format == OutputFormat::kWide;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header = {"NAME",    "PHASE",    "NODES", "RANKS",
                                     "ATTEMPT", "PROGRESS", "ETA",   "AGE"};
  if (wide) header.insert(header.end(), {"RUNTIME", "REASON"});
  if (namespace_column) header.insert(header.begin(), "NAMESPACE");
  rows.push_back(header);
  for (const auto& j : jobs.jobs()) {
    const uint32_t ranks = j.num_nodes() * j.procs_per_node();
    std::vector<std::string> row = {j.name(),
                                    j.deleting() ? "Terminating" : PhaseText(j),
                                    std::to_string(j.num_nodes()),
                                    std::to_string(ranks),
                                    std::to_string(j.attempt()),
                                    ProgressColumn(j),
                                    EtaColumn(j),
                                    Age(j.created_unix_ms(), now_ms)};
    if (wide) row.insert(row.end(), {j.runtime(), ReasonText(j)});
    if (namespace_column)
      row.insert(row.begin(), j.namespace_().empty() ? "default" : j.namespace_());
    rows.push_back(std::move(row));
  }
  return RenderTable(rows);
}

// Queue, Priority and Admission (issue 14): shown only when the job went through a queue.
template <typename Field>
void QueueLines(const v1::JobStatus& j, int64_t now_ms, Field& field) {
  if (j.queue().empty() && j.cluster_queue().empty() && !j.has_admission() && !j.has_queue_wait()) {
    return;
  }
  std::string queue = j.queue().empty() ? "(the default queue)" : j.queue();
  if (!j.cluster_queue().empty()) queue += " -> ClusterQueue " + j.cluster_queue();
  field("Queue", queue);
  field("Priority", std::to_string(j.priority()));
  if (j.has_admission()) {
    const auto& a = j.admission();
    std::string text = a.unmanaged() ? "admitted without a queue"
                                     : "admitted by ClusterQueue " + a.cluster_queue();
    for (const auto& r : a.resources()) {
      text += ", " + r.resource() + " " + std::to_string(r.amount()) + " of " + r.flavor();
    }
    if (a.borrowing()) text += " (borrowing)";
    field("Admission", text + ", " + Age(a.unix_ms(), now_ms) + " ago");
    // Its ranks go only to nodes with the flavor's nodeLabels (coordinator/flavor_constraint.h).
    std::string flavors;
    std::set<std::string> seen;
    for (const auto& r : a.resources()) {
      if (r.flavor().empty() || !seen.insert(r.flavor()).second) continue;
      flavors += (flavors.empty() ? "" : ", ") + r.flavor();
    }
    if (!flavors.empty()) field("Flavor", flavors + " (placed on its nodes only)");
    if (j.has_queue_wait() && j.queue_wait().kind() == "AdmissionCheck") {
      field("Admission checks", j.queue_wait().message());  // quota reserved, not placed yet
    }
  } else if (j.has_queue_wait()) {
    const auto& w = j.queue_wait();
    field("Admission", "waiting (" + w.kind() + ", position " + std::to_string(w.position() + 1) +
                           ", for " + Age(w.since_unix_ms(), now_ms) + "): " + w.message());
  }
}

namespace {

// How each node's ranks reached the job's workspace (RankStatus.workspace, from their start):
// "/workspace (private mount namespace)" or "TRAINLET_WORKSPACE=<path>", one line per node in
// rank order; nothing before a rank has started.
std::string WorkspaceLines(const v1::JobStatus& j) {
  std::vector<std::vector<std::string>> rows;
  std::set<std::string> nodes;
  for (const auto& r : j.ranks()) {
    if (!r.workspace().empty() && nodes.insert(r.node()).second) {
      rows.push_back({"  " + r.node(), r.workspace()});
    }
  }
  return rows.empty() ? "" : "Workspace:\n" + RenderTable(rows);
}

// Who each node's ranks run as (RankStatus.run_as, from their start: the agent's run_as or the
// job's securityContext, resolved on that node), one line per node in rank order; nothing when
// every started rank runs as its agent's own user. An MPI job's orteds run as its ranks do.
std::string RunAsLines(const v1::JobStatus& j) {
  std::vector<std::string> nodes;  // in rank order
  std::map<std::string, std::vector<std::string>> users;
  bool any = false;
  for (const auto& r : j.ranks()) {
    if (r.pid() == 0) continue;  // not started: nobody yet
    const std::string user = r.run_as().empty() ? "the agent's own user" : r.run_as();
    any |= !r.run_as().empty();
    auto& seen = users[r.node()];
    if (seen.empty()) nodes.push_back(r.node());
    if (std::find(seen.begin(), seen.end(), user) == seen.end()) seen.push_back(user);
  }
  if (!any) return "";
  std::vector<std::vector<std::string>> rows;
  for (const std::string& node : nodes) {
    std::string text;
    for (const std::string& u : users[node]) text += (text.empty() ? "" : "; ") + u;
    rows.push_back({"  " + node, text});
  }
  return "Runs as:\n" + RenderTable(rows);
}

// The CPUs the current attempt must share with other jobs, one line per node's note (the
// agents' CpusShared events, "attempt N: CPUs 0-1 of node node-b shared with trainjob/a (...)";
// issue 19, defect 11); nothing when it shares none. Older attempts' notes stay in Events only.
std::string SharedCpuLines(const v1::JobStatus& j) {
  const std::string prefix = "attempt " + std::to_string(j.attempt()) + ": ";
  std::string out;
  for (const auto& e : j.events()) {
    if (e.reason() == "CpusShared" && e.message().starts_with(prefix)) {
      out += "  " + e.message().substr(prefix.size()) + "\n";
    }
  }
  return out.empty() ? "" : "CPUs shared:\n" + out;
}

}  // namespace
std::string StepState(const std::vector<const v1::RankStatus*>& workers) {
  bool running = false, all_done = true, any_started = false;
  for (const v1::RankStatus* r : workers) {
    switch (r->rank_state()) {
      case v1::RANK_STATE_FAILED:
      case v1::RANK_STATE_START_FAILED:
      case v1::RANK_STATE_LOST:
        return "Failed";
      case v1::RANK_STATE_RUNNING:
        running = true;
        any_started = true;
        all_done = false;
        break;
      case v1::RANK_STATE_SUCCEEDED:
        any_started = true;
        break;
      case v1::RANK_STATE_STOPPED:
        return "Stopped";
      default:
        all_done = false;
    }
  }
  if (all_done) return "Complete";
  return running || any_started ? "Running" : "Pending";
}

std::string DescribeSteps(const v1::JobStatus& j) {
  // Only a job with replicated jobs beside the main one has steps to show.
  std::vector<std::string> steps;  // in rank order: main first, then each step
  std::map<std::pair<std::string, std::string>, std::vector<const v1::RankStatus*>> cells;
  bool has_steps = false;
  for (const auto& r : j.ranks()) {
    has_steps |= !r.step().empty();
    const std::string name = r.step().empty() ? "node" : r.step();
    if (std::find(steps.begin(), steps.end(), name) == steps.end()) steps.push_back(name);
    cells[{name, r.node()}].push_back(&r);
  }
  if (!has_steps) return "";
  std::ostringstream o;
  o << "Steps (attempt " << j.attempt() << "):\n";
  // WORKING-DIR: where each step's workers run on the node (their Started events' cwd; each step
  // has its own container's workingDir), shown once any worker has started.
  const bool cwds = std::any_of(j.ranks().begin(), j.ranks().end(),
                                [](const auto& r) { return !r.cwd().empty(); });
  std::vector<std::vector<std::string>> rows = {{"  STEP", "NODE", "WORKERS", "STATE"}};
  if (cwds) rows[0].push_back("WORKING-DIR");
  for (const std::string& step : steps) {
    for (const auto& node : j.placement()) {
      auto it = cells.find({step, node});
      if (it == cells.end()) continue;
      rows.push_back({"  " + step, node, std::to_string(it->second.size()), StepState(it->second)});
      if (!cwds) continue;
      std::set<std::string> dirs;
      for (const v1::RankStatus* r : it->second) {
        if (!r->cwd().empty()) dirs.insert(r->cwd());
      }
      std::string dir;
      for (const auto& d : dirs) dir += (dir.empty() ? "" : ", ") + d;
      rows.back().push_back(dir.empty() ? "-" : dir);
    }
  }
  o << RenderTable(rows);
  return o.str();
}

std::string DescribeJob(const v1::JobStatus& j, int64_t now_ms) {
  std::ostringstream o;
  auto field = [&](const std::string& k, const std::string& v) {
    o << k << ":" << std::string(k.size() < 14 ? 14 - k.size() : 1, ' ') << v << "\n";
  };
  field("Name", j.name());
  field("Namespace", j.namespace_().empty() ? "default" : j.namespace_());
  if (!j.source_kind().empty()) {
    // A Training Operator job: what it was applied as, and what it became.
    field("Kind",
          j.source_kind() + " (" + j.source_api_version() + "), run as TrainJob " + j.name());
  }
  field("Runtime", j.runtime() + " (plugin " + j.plugin() + ")");
  field("Phase", j.deleting() ? PhaseText(j) + " (Terminating)" : PhaseText(j));
  if (!j.reason().empty()) field("Reason", ReasonText(j));
  field("Attempt",
        std::to_string(j.attempt()) + " (restart limit " + std::to_string(j.max_restarts()) + ")");
  // The failure rules that decided what followed a failed attempt (coordinator/failure_rules.h).
  for (const auto& a : j.attempts()) {
    if (a.failure_rule().empty()) continue;
    field("Failure rule",
          a.failure_rule() + " fired on attempt " + std::to_string(a.attempt()) + ": " + a.cause());
  }
  if (j.ttl_delete_unix_ms() != 0) {
    field("TTL", "deleted at " + Rfc3339(j.ttl_delete_unix_ms()) +
                     " (ttlSecondsAfterFinished after it finished)");
  }
  QueueLines(j, now_ms, field);
  field("Gang", std::to_string(j.num_nodes()) + " nodes x " + std::to_string(j.procs_per_node()) +
                    " ranks");
  std::string cmd;
  for (const auto& a : j.command()) {
    std::string shown = a.size() > 60 ? a.substr(0, 57) + "..." : a;
    std::replace(shown.begin(), shown.end(), '\n', ' ');
    cmd += (cmd.empty() ? "" : " ") + shown;
  }
  field("Command", cmd);
  if (!j.launch_mode().empty()) field("Launch", j.launch_mode());
  field("Created", Age(j.created_unix_ms(), now_ms) + " ago");
  if (j.notes_size() > 0) {
    o << "Notes:\n";
    for (const auto& n : j.notes()) o << "  - " << n << "\n";
  }
  if (j.placement_size() > 0) {
    o << "Placement:\n";
    // WORKING-DIR: where the node's ranks run (their Started events' cwd), "-" before they start.
    std::vector<std::vector<std::string>> rows = {{"  NODE-RANK", "NODE", "WORKING-DIR"}};
    for (int i = 0; i < j.placement_size(); ++i) {
      std::set<std::string> cwds;
      for (const auto& r : j.ranks()) {
        if (r.node() == j.placement(i) && !r.cwd().empty()) cwds.insert(r.cwd());
      }
      std::string cwd;
      for (const auto& c : cwds) cwd += (cwd.empty() ? "" : ", ") + c;
      rows.push_back({"  " + std::to_string(i), j.placement(i), cwd.empty() ? "-" : cwd});
    }
    o << RenderTable(rows);
  }
  if (j.ranks_size() > 0) {
    o << "Ranks (attempt " << j.attempt() << "):\n";
    std::vector<std::vector<std::string>> rows = {{"  RANK", "NODE", "LOCAL", "STATE", "PID",
                                                   "EXIT", "SIGNAL", "DEVICES", "CPUS", "MESSAGE"}};
    for (const auto& r : j.ranks()) {
      const std::string state = StateText(r);
      const bool ended = state == "Succeeded" || state == "Failed";
      // A replicated job's worker says which: "4 (dataset-initializer)".
      rows.push_back(
          {"  " + std::to_string(r.rank()) + (r.step().empty() ? "" : " (" + r.step() + ")"),
           r.node(), std::to_string(r.local_rank()), state, r.pid() ? std::to_string(r.pid()) : "-",
           ended && r.signal() == 0 ? std::to_string(r.exit_code()) : "-",
           r.signal() ? std::to_string(r.signal()) : "-", r.devices().empty() ? "-" : r.devices(),
           r.cpuset().empty() ? "-" : r.cpuset(), r.message()});
    }
    o << RenderTable(rows);
  }
  o << WorkspaceLines(j);
  o << RunAsLines(j);
  o << SharedCpuLines(j);
  o << DescribeSteps(j);
  if (j.attempts_size() > 0) {
    o << "Attempts:\n";
    std::vector<std::vector<std::string>> rows = {{"  ATTEMPT", "STARTED", "RESULT", "CAUSE"}};
    for (const auto& a : j.attempts()) {
      // An infrastructure failure (a plan that never reached its node, a lost node) restarts
      // without counting against maxRestarts: say so where the result is read.
      rows.push_back({"  " + std::to_string(a.attempt()), Age(a.started_unix_ms(), now_ms) + " ago",
                      ResultText(a) + (a.infrastructure() ? " (not counted)" : ""), a.cause()});
    }
    o << RenderTable(rows);
  }
  o << DescribeProgress(j, now_ms);
  o << "Conditions:\n";
  if (j.conditions_size() == 0)
    o << "  <none>\n";
  else {
    std::vector<std::vector<std::string>> rows = {{"  TYPE", "STATUS", "REASON", "MESSAGE"}};
    for (const auto& c : j.conditions()) {
      rows.push_back({"  " + c.type(), c.status(), c.reason(), c.message()});
    }
    o << RenderTable(rows);
  }
  o << "Events:\n";
  std::vector<std::vector<std::string>> rows = {{"  AGE", "TYPE", "REASON", "MESSAGE"}};
  for (const auto& e : j.events()) {
    rows.push_back({"  " + Age(e.unix_ms(), now_ms), e.type(), e.reason(), e.message()});
  }
  o << RenderTable(rows);
  return o.str();
}

}  // namespace trainlet::cli
