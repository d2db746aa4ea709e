#include "trainletctl/runtime_commands.h"

#include <algorithm>
#include <iostream>

#include "trainletctl/command_support.h"

namespace trainlet::cli {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string Command(const v1::RuntimeInfo& r) {
  std::string out;
  for (const auto& c : r.command()) out += (out.empty() ? "" : " ") + c;
  constexpr size_t kWidth = 60;
  if (out.size() > kWidth) out = out.substr(0, kWidth - 3) + "...";
  return out.empty() ? "<none>" : out;
}

}  // namespace

std::string RuntimeKindOf(std::string resource, std::string& name) {
  if (auto slash = resource.find('/'); slash != std::string::npos) {
    if (name.empty()) name = resource.substr(slash + 1);
    resource.resize(slash);
  }
  if (auto dot = resource.find('.'); dot != std::string::npos) resource.resize(dot);
  resource = Lower(resource);
  for (const char* kind : {"ClusterTrainingRuntime", "TrainingRuntime"}) {
    if (resource == Lower(kind) || resource == Lower(kind) + "s") return kind;
  }
  return "";
}

std::string RenderRuntimes(const v1::RuntimeList& list, const std::string& kind,
                           OutputFormat format, bool all_namespaces) {
  if (auto text = ListForScripts(list, list.runtimes(), kind, format)) return *text;
  const bool ns_column = all_namespaces && kind == "TrainingRuntime";
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header = {"NAME", "FRAMEWORK", "PLUGIN", "NODES", "COMMAND"};
  if (ns_column) header.insert(header.begin(), "NAMESPACE");
  rows.push_back(header);
  for (const auto& r : list.runtimes()) {
    std::vector<std::string> row = {r.name(), r.framework(), r.plugin(),
                                    std::to_string(r.num_nodes()), Command(r)};
    if (ns_column) row.insert(row.begin(), r.namespace_());
    rows.push_back(std::move(row));
  }
  return RenderTable(rows);
}

int CmdGetRuntimes(const CommonFlags& f, const std::string& kind, const std::string& name) {
  auto format = ParseOutputFormat(f.output);
  if (!format.ok()) return PrintError(format.status().message());
  auto client = ConnectCoordinator(f);
  if (!client.ok()) return PrintError(client.status().message());
  v1::OperatorRequest req;
  auto* get = req.mutable_get_runtimes();
  get->set_kind(kind);
  get->set_name(name);
  get->set_namespace_(f.ns);
  get->set_all_namespaces(f.all_namespaces && name.empty());
  auto resp = (*client)->Call(req);
  if (!resp.ok()) return PrintError(resp.status().message());
  const v1::RuntimeList& list = resp->runtimes();
  if (list.runtimes_size() == 0 && *format == OutputFormat::kTable) {
    std::cerr << "No " << Lower(kind) << "s found"
              << (kind == "TrainingRuntime" && !f.all_namespaces ? " in namespace " + f.ns : "")
              << ".\n";
    return 0;
  }
  std::cout << RenderRuntimes(list, kind, *format, f.all_namespaces);
  return 0;
}

}  // namespace trainlet::cli
