#include "trainletctl/queue_commands.h"

#include <algorithm>
#include <iostream>
#include <memory>
#include <sstream>

#include "trainletctl/command_support.h"

namespace trainlet::cli {
namespace {

int Error(const std::string& message) { return PrintError(message); }

Result<std::unique_ptr<CoordinatorClient>> Connect(const CommonFlags& f) {
  return ConnectCoordinator(f);
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), ::tolower);
  return s;
}

// "a=1,b=2", in key order; "<none>" for none, as kubectl prints an empty cell.
std::string Labels(const google::protobuf::Map<std::string, std::string>& labels) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : labels) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ",") + k + "=" + labels.at(k);
  return out.empty() ? "<none>" : out;
}

// Whether some object of the list is Terminating: the table then has a STATUS column.
bool AnyTerminating(const v1::QueueObjectList& list) {
  for (const auto& o : list.objects()) {
    if (!o.deletion_timestamp().empty()) return true;
  }
  return false;
}

std::string StatusOf(const v1::QueueObject& o) {
  return o.deletion_timestamp().empty() ? "Active" : "Terminating";
}

// describe's Status and In use by lines of a Terminating object; "" when not Terminating.
std::string TerminatingLine(const v1::QueueObject& o) {
  if (o.deletion_timestamp().empty()) return "";
  std::string users;
  for (const auto& u : o.in_use_by()) users += (users.empty() ? "" : ", ") + u;
  return "Status:        Terminating since " + o.deletion_timestamp() +
         " (deleted while in use; removed once unused)\n" +
         "In use by:     " + (users.empty() ? "nothing (removed at the next pass)" : users) + "\n";
}

std::vector<std::string> Row(const v1::QueueObject& o, const std::string& kind) {
  std::vector<std::string> row;
  if (kind == "ClusterQueue") {
    row = {o.name(), o.cohort().empty() ? "<none>" : o.cohort(), o.queueing_strategy()};
  } else if (kind == "LocalQueue") {
    row = {o.namespace_(), o.name(), o.cluster_queue()};
  } else if (kind == "ResourceFlavor") {
    row = {o.name(), Labels(o.node_labels())};
  } else {
    row = {o.name(), std::to_string(o.value())};
  }
  for (auto& cell : UsageColumns(kind, &o.usage())) row.push_back(std::move(cell));
  return row;
}

std::vector<std::string> Header(const std::string& kind) {
  std::vector<std::string> header;
  if (kind == "ClusterQueue") {
    header = {"NAME", "COHORT", "STRATEGY"};
  } else if (kind == "LocalQueue") {
    header = {"NAMESPACE", "NAME", "CLUSTERQUEUE"};
  } else if (kind == "ResourceFlavor") {
    header = {"NAME", "NODELABELS"};
  } else {
    header = {"NAME", "VALUE"};
  }
  for (auto& h : UsageColumns(kind, nullptr)) header.push_back(std::move(h));
  return header;
}

// The request for `kind`/`name` in the namespace the flags say.
v1::OperatorRequest Request(const CommonFlags& f, const std::string& kind,
                            const std::string& name) {
  v1::OperatorRequest req;
  auto* q = req.mutable_queue_objects();
  q->set_kind(kind);
  q->set_name(name);
  q->set_namespace_(f.ns);
  q->set_all_namespaces(f.all_namespaces && name.empty());
  return req;
}

}  // namespace

std::string QueueKindOf(std::string resource, std::string& name) {
  if (auto slash = resource.find('/'); slash != std::string::npos) {
    if (name.empty()) name = resource.substr(slash + 1);
    resource.resize(slash);
  }
  if (auto dot = resource.find('.'); dot != std::string::npos) resource.resize(dot);
  resource = Lower(resource);
  static const std::pair<const char*, const char*> kShort[] = {{"cq", "ClusterQueue"},
                                                               {"lq", "LocalQueue"},
                                                               {"rf", "ResourceFlavor"},
                                                               {"wpc", "WorkloadPriorityClass"}};
  for (const auto& [short_name, kind] : kShort) {
    if (resource == short_name || resource == Lower(kind) || resource == Lower(kind) + "s" ||
        resource == Lower(kind) + "es") {
      return kind;
    }
  }
  return "";
}

std::string QueueQuantity(const std::string& resource, int64_t amount) {
  if (resource == "cpu") {
    return amount % 1000 == 0 ? std::to_string(amount / 1000) : std::to_string(amount) + "m";
  }
  if (resource == "memory") {
    static const std::pair<int64_t, const char*> kUnits[] = {
        {int64_t{1} << 40, "Ti"}, {int64_t{1} << 30, "Gi"}, {int64_t{1} << 20, "Mi"}};
    for (const auto& [unit, suffix] : kUnits) {
      if (amount != 0 && amount % unit == 0) return std::to_string(amount / unit) + suffix;
    }
  }
  return std::to_string(amount);
}

std::vector<std::string> UsageColumns(const std::string& kind, const v1::QueueUsage* usage) {
  if (kind != "ClusterQueue" && kind != "LocalQueue") return {};
  if (usage == nullptr) {
    if (kind == "LocalQueue") return {"PENDING", "ADMITTED"};
    return {"PENDING", "ADMITTED", "USAGE (used/nominal)"};
  }
  std::vector<std::string> cells = {std::to_string(usage->pending()),
                                    std::to_string(usage->admitted())};
  if (kind == "ClusterQueue") {
    std::string text;
    for (const auto& f : usage->flavors()) {
      text += (text.empty() ? "" : ", ") + f.resource() + " " +
              QueueQuantity(f.resource(), f.used()) + "/" +
              QueueQuantity(f.resource(), f.nominal());
      if (f.borrowed() > 0) text += " (+" + QueueQuantity(f.resource(), f.borrowed()) + ")";
      if (usage->flavors_size() > 1) text += " [" + f.flavor() + "]";
    }
    cells.push_back(text.empty() ? "<none>" : text);
  }
  return cells;
}

std::string DescribeResourceFlavor(const v1::QueueObject& o) {
  std::ostringstream out;
  out << "Name:          " << o.name() << "\n";
  out << "Node labels:   " << Labels(o.node_labels()) << "\n";
  out << TerminatingLine(o);
  return out.str();
}

std::string DescribeClusterQueue(const v1::QueueObject& o) {
  std::ostringstream out;
  out << "Name:          " << o.name() << "\n";
  out << "Cohort:        " << (o.cohort().empty() ? "<none>" : o.cohort()) << "\n";
  out << "Strategy:      " << o.queueing_strategy() << "\n";
  out << TerminatingLine(o);
  const v1::QueueUsage& u = o.usage();
  out << "Jobs:          " << u.admitted() << " admitted, " << u.pending() << " pending\n";
  if (u.flavors_size() > 0) {
    std::vector<std::vector<std::string>> rows = {{"  FLAVOR", "RESOURCE", "NOMINAL", "USED",
                                                   "BORROWED", "BORROWING LIMIT", "LENDING LIMIT"}};
    auto limit = [&](const std::string& r, int64_t v) {
      return v < 0 ? std::string("-") : QueueQuantity(r, v);
    };
    for (const auto& f : u.flavors()) {
      rows.push_back(
          {"  " + f.flavor(), f.resource(), QueueQuantity(f.resource(), f.nominal()),
           QueueQuantity(f.resource(), f.used()), QueueQuantity(f.resource(), f.borrowed()),
           limit(f.resource(), f.borrowing_limit()), limit(f.resource(), f.lending_limit())});
    }
    out << "Quota:\n" << RenderTable(rows);
  }
  if (u.jobs_size() > 0) {
    std::vector<std::vector<std::string>> rows = {
        {"  POSITION", "NAMESPACE", "TRAINJOB", "STATE", "WHY"}};
    for (const auto& e : u.jobs()) {
      rows.push_back({e.admitted() ? "  -" : "  " + std::to_string(e.position() + 1),
                      e.namespace_(), e.job(), e.admitted() ? "Admitted" : e.wait_kind(),
                      e.message()});
    }
    out << "Jobs in order:\n" << RenderTable(rows);
    if (u.jobs_not_shown() > 0) out << "  ... and " << u.jobs_not_shown() << " more waiting\n";
  }
  return out.str();
}

std::string RenderQueueObjects(const v1::QueueObjectList& list, const std::string& kind,
                               OutputFormat format) {
  if (auto text = ListForScripts(list, list.objects(), kind, format)) return *text;
  const bool status = AnyTerminating(list);
  std::vector<std::vector<std::string>> rows{Header(kind)};
  if (status) rows[0].push_back("STATUS");
  for (const auto& o : list.objects()) {
    rows.push_back(Row(o, kind));
    if (status) rows.back().push_back(StatusOf(o));
  }
  return RenderTable(rows);
}

int CmdGetQueueObjects(const CommonFlags& f, const std::string& kind, const std::string& name) {
  auto format = ParseOutputFormat(f.output);
  if (!format.ok()) return Error(format.status().message());
  auto client = Connect(f);
  if (!client.ok()) return Error(client.status().message());
  auto resp = (*client)->Call(Request(f, kind, name));
  if (!resp.ok()) return Error(resp.status().message());
  const v1::QueueObjectList& list = resp->queue_objects();
  if (list.objects_size() == 0 && *format == OutputFormat::kTable) {
    std::cerr << "No " << Lower(kind) << "s found"
              << (kind == "LocalQueue" && !f.all_namespaces ? " in namespace " + f.ns : "")
              << ".\n";
    return 0;
  }
  std::cout << RenderQueueObjects(list, kind, *format);
  return 0;
}

int CmdDeleteQueueObject(const CommonFlags& f, const std::string& kind, const std::string& name) {
  if (name.empty()) return Error("delete " + Lower(kind) + ": expected a name");
  auto client = Connect(f);
  if (!client.ok()) return Error(client.status().message());
  v1::OperatorRequest req = Request(f, kind, name);
  req.mutable_queue_objects()->set_remove(true);
  auto resp = (*client)->Call(req);
  if (!resp.ok()) return Error(resp.status().message());
  // As kubectl: "deleted" once the delete is accepted, though the object may stay Terminating.
  std::cout << Lower(kind) << "/" << name << " deleted\n";
  for (const auto& o : resp->queue_objects().objects()) {
    if (o.deletion_timestamp().empty()) continue;
    std::string users;
    for (const auto& u : o.in_use_by()) users += (users.empty() ? "" : ", ") + u;
    std::cerr << Lower(kind) << "/" << name << " is in use (" << users
              << "): it stays Terminating and is removed once nothing uses it\n";
  }
  return 0;
}

int CmdDescribeQueueObject(const CommonFlags& f, const std::string& kind, const std::string& name) {
  if (name.empty()) return Error("describe " + Lower(kind) + ": give the " + kind + "'s name");
  auto format = ParseOutputFormat(f.output);
  if (!format.ok()) return Error(format.status().message());
  auto client = Connect(f);
  if (!client.ok()) return Error(client.status().message());
  auto resp = (*client)->Call(Request(f, kind, name));
  if (!resp.ok()) return Error(resp.status().message());
  for (const auto& o : resp->queue_objects().objects()) {
    std::cout << DescribeAs(*format, o, [&] {
      return kind == "ResourceFlavor" ? DescribeResourceFlavor(o) : DescribeClusterQueue(o);
    });
  }
  return 0;
}

}  // namespace trainlet::cli
