#include "trainletctl/commands.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "common/wall_clock.h"
#include "trainletctl/apply_input.h"
#include "trainletctl/command_support.h"
#include "trainletctl/coordinator_client.h"
#include "trainletctl/delete_text.h"
#include "trainletctl/describe_node.h"
#include "trainletctl/queue_commands.h"
#include "trainletctl/render.h"
#include "trainletctl/runtime_commands.h"

namespace trainlet::cli {
namespace {

using namespace std::chrono_literals;

int Error(const std::string& message) {
  std::cerr << "error: " << message << "\n";
  return 1;
}

int Error(const Status& s) { return Error(s.message()); }

Result<std::unique_ptr<CoordinatorClient>> Open(const CommonFlags& f) {
  return ConnectCoordinator(f);
}

// The Training Operator kind a resource name means ("pytorchjobs", "PyTorchJob",
// "pytorchjobs.kubeflow.org" -> "PyTorchJob"), or "" for any other. Such jobs are TrainJobs that
// keep the kind they were applied as (JobStatus.source_kind).
std::string SourceKindOf(std::string resource) {
  if (auto slash = resource.find('/'); slash != std::string::npos) resource.resize(slash);
  if (auto dot = resource.find('.'); dot != std::string::npos) resource.resize(dot);
  std::transform(resource.begin(), resource.end(), resource.begin(), ::tolower);
  for (const char* kind : {"PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob"}) {
    std::string lower = kind;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (resource == lower || resource == lower + "s") return kind;
  }
  return "";
}

// "trainjobs", "trainjob", "tj", "trainjob.trainer.kubeflow.org" -> "trainjob"; same for nodes.
// The Training Operator kinds ("pytorchjobs", ...) are trainjobs too.
std::string NormalizeKind(std::string kind, std::string& name) {
  if (auto slash = kind.find('/'); slash != std::string::npos && name.empty()) {
    name = kind.substr(slash + 1);
    kind = kind.substr(0, slash);
  }
  std::transform(kind.begin(), kind.end(), kind.begin(), ::tolower);
  if (auto dot = kind.find('.'); dot != std::string::npos) kind = kind.substr(0, dot);
  if (kind == "trainjobs" || kind == "trainjob" || kind == "tj") return "trainjob";
  if (!SourceKindOf(kind).empty()) return "trainjob";
  if (kind == "nodes" || kind == "node" || kind == "no") return "node";
  return "";
}

// The jobs of `jobs` applied as `source_kind` (JobStatus.source_kind: "PyTorchJob", ...).
v1::JobList OfSourceKind(const v1::JobList& jobs, const std::string& source_kind) {
  v1::JobList of_kind;
  for (const auto& j : jobs.jobs()) {
    if (j.source_kind() == source_kind) *of_kind.add_jobs() = j;
  }
  return of_kind;
}

// "trainjobs", or "pytorchjobs" for "PyTorchJob", for "No ... found".
std::string LowerPlural(const std::string& source_kind) {
  std::string lower = source_kind.empty() ? "trainjob" : source_kind;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  return lower + "s";
}

// Every job, or the first paging.limit, a page of paging.chunk_size at a time. Jobs come without
// their specs (GetJobsRequest). When --limit cut the list, the result keeps the continue token and
// the count of jobs after it.
Result<v1::JobList> FetchJobPages(CoordinatorClient& client, const CommonFlags& f,
                                  const ListPaging& paging) {
  v1::JobList all;
  std::string token;
  do {
    uint32_t want = paging.chunk_size;
    if (paging.limit != 0) {
      const uint32_t left = paging.limit - static_cast<uint32_t>(all.jobs_size());
      want = want == 0 ? left : std::min(want, left);
    }
    v1::OperatorRequest req;
    req.mutable_get_jobs()->set_limit(want);
    req.mutable_get_jobs()->set_continue_token(token);
    req.mutable_get_jobs()->set_namespace_(f.ns);
    req.mutable_get_jobs()->set_all_namespaces(f.all_namespaces);
    TRAINLET_ASSIGN_OR_RETURN(v1::OperatorResponse resp, client.Call(req));
    v1::JobList* page = resp.mutable_jobs();
    for (auto& j : *page->mutable_jobs()) *all.add_jobs() = std::move(j);
    token = page->continue_token();
    all.set_continue_token(token);
    all.set_remaining(page->remaining());
  } while (!token.empty() &&
           (paging.limit == 0 || static_cast<uint32_t>(all.jobs_size()) < paging.limit));
  return all;
}

// "team-a/llm-7" (apply's answers outside namespace default) -> namespace team-a, name llm-7;
// "llm-7" -> `ns`, llm-7.
std::pair<std::string, std::string> SplitShownName(const std::string& shown,
                                                   const std::string& ns) {
  if (auto slash = shown.find('/'); slash != std::string::npos) {
    return {shown.substr(0, slash), shown.substr(slash + 1)};
  }
  return {ns, shown};
}

}  // namespace

int64_t ParseDuration(const std::string& text) {
  if (text.empty()) return -1;
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (const std::exception&) {
    return -1;
  }
  const std::string unit = text.substr(pos);
  static const std::map<std::string, double> kUnits = {
      {"", 1000}, {"s", 1000}, {"ms", 1}, {"m", 60000}, {"h", 3600000}};
  auto it = kUnits.find(unit);
  if (it == kUnits.end() || !(value >= 0)) return -1;  // also NaN
  // At most 31 years (and no infinity): a deadline past that overflows the clock's nanoseconds.
  const double ms = value * it->second;
  if (!(ms <= 1e12)) return -1;
  return static_cast<int64_t>(ms);
}

namespace {

// kubectl's two ways to name several objects, `KIND a b` and `KIND/a KIND/b`, as (kind, name)
// pairs; one pair with an empty name for a lone KIND. Invalid, naming the argument, when the first
// is KIND/NAME and a later one is not.
Result<std::vector<std::pair<std::string, std::string>>> KindNamePairs(
    const std::string& verb, const std::string& first, const std::vector<std::string>& rest) {
  std::vector<std::pair<std::string, std::string>> pairs;
  if (first.find('/') == std::string::npos) {
    for (const std::string& name : rest) pairs.emplace_back(first, name);
    if (rest.empty()) pairs.emplace_back(first, "");
    return pairs;
  }
  for (size_t i = 0; i <= rest.size(); ++i) {
    const std::string& arg = i == 0 ? first : rest[i - 1];
    const size_t slash = arg.find('/');
    if (slash == std::string::npos) {
      return InvalidError(verb + ": " + arg + ": expected KIND/NAME, as " + first +
                          " (or give the kind once: " + verb + " KIND NAME...)");
    }
    pairs.emplace_back(arg.substr(0, slash), arg.substr(slash + 1));
  }
  return pairs;
}

// `get` of named nodes, or trainjobs (of `source_kind` when it is a Training Operator kind's), in
// one table: a name not found is said, the others shown, and 1 returned.
int GetNamed(const CommonFlags& f, CoordinatorClient& client, OutputFormat format,
             const std::string& kind, const std::string& source_kind,
             const std::vector<std::string>& names) {
  int rc = 0;
  if (kind == "node") {
    v1::OperatorRequest req;
    req.mutable_get_nodes();
    auto resp = client.Call(req);
    if (!resp.ok()) return Error(resp.status());
    v1::NodeList picked;
    const auto& all = resp->nodes().nodes();
    for (const std::string& name : names) {
      const auto it = std::find_if(all.begin(), all.end(),
                                   [&](const auto& n) { return n.info().name() == name; });
      if (it == all.end()) {
        rc = Error("node/" + name + " not found");
      } else {
        *picked.add_nodes() = *it;
      }
    }
    if (picked.nodes_size() > 0) std::cout << RenderNodes(picked, format, NowUnixMs());
    return rc;
  }
  // Each asked for by name, and shown in one table.
  v1::JobList picked;
  for (const std::string& name : names) {
    v1::OperatorRequest req;
    req.mutable_get_jobs()->set_name(name);
    req.mutable_get_jobs()->set_namespace_(f.ns);
    auto resp = client.Call(req);
    if (!resp.ok()) {
      rc = Error(resp.status());
      continue;
    }
    v1::JobList jobs = resp->jobs();
    // `get pytorchjobs` shows the jobs applied as PyTorchJobs, under their own kind.
    if (!source_kind.empty()) {
      v1::JobList of_kind = OfSourceKind(jobs, source_kind);
      if (of_kind.jobs_size() == 0 && jobs.jobs_size() > 0) {
        rc = Error(source_kind + "/" + name + " not found (trainjob/" + name + " is a " +
                   (jobs.jobs(0).source_kind().empty() ? std::string("TrainJob")
                                                       : jobs.jobs(0).source_kind()) +
                   ")");
      }
      jobs = std::move(of_kind);
    }
    for (auto& j : *jobs.mutable_jobs()) *picked.add_jobs() = std::move(j);
  }
  if (picked.jobs_size() > 0) std::cout << RenderJobs(picked, format, NowUnixMs());
  return rc;
}

}  // namespace

int CmdGet(const CommonFlags& f, const std::string& kind_arg, const std::string& name_arg,
           const ListPaging& paging) {
  std::string name = name_arg;
  // Kueue's queue objects (queue_commands.h); QueueKindOf takes the name out of "kind/NAME", so
  // it is given a copy.
  if (std::string qname = name_arg, qkind = QueueKindOf(kind_arg, qname); !qkind.empty()) {
    return CmdGetQueueObjects(f, qkind, qname);
  }
  if (std::string rname = name_arg, rkind = RuntimeKindOf(kind_arg, rname); !rkind.empty()) {
    return CmdGetRuntimes(f, rkind, rname);  // runtime_commands.h
  }
  const std::string kind = NormalizeKind(kind_arg, name);
  if (kind.empty())
    return Error("unknown resource type \"" + kind_arg +
                 "\"; use nodes, trainjobs, a Training Operator kind (pytorchjobs, tfjobs, "
                 "xgboostjobs, paddlejobs, jaxjobs, mpijobs), clustertrainingruntimes, "
                 "trainingruntimes or a queue kind (clusterqueues, localqueues, "
                 "resourceflavors, workloadpriorityclasses)");
  auto format = ParseOutputFormat(f.output);
  if (!format.ok()) return Error(format.status());
  if (kind == "trainjob" && NamedAcrossNamespaces(f, name)) return 1;
  auto client = Open(f);
  if (!client.ok()) return Error(client.status());
  if (!name.empty()) return GetNamed(f, **client, *format, kind, SourceKindOf(kind_arg), {name});
  if (kind == "node") {
    v1::OperatorRequest req;
    req.mutable_get_nodes();
    auto resp = (*client)->Call(req);
    if (!resp.ok()) return Error(resp.status());
    if (resp->nodes().nodes_size() == 0 && *format == OutputFormat::kTable) {
      std::cerr << "No nodes registered.\n";
      return 0;
    }
    std::cout << RenderNodes(resp->nodes(), *format, NowUnixMs());
    return 0;
  }
  auto jobs = FetchJobPages(**client, f, paging);
  if (!jobs.ok()) return Error(jobs.status());
  // `get pytorchjobs` lists the jobs applied as PyTorchJobs, under their own kind.
  const std::string source_kind = SourceKindOf(kind_arg);
  if (!source_kind.empty()) *jobs = OfSourceKind(*jobs, source_kind);
  if (jobs->jobs_size() == 0 && *format == OutputFormat::kTable) {
    std::cerr << "No " << LowerPlural(source_kind) << " found.\n";
    return 0;
  }
  std::cout << RenderJobs(*jobs, *format, NowUnixMs(), f.all_namespaces);
  if (!jobs->continue_token().empty() && *format != OutputFormat::kJson &&
      *format != OutputFormat::kYaml) {
    std::cerr << "(" << jobs->remaining() << " more trainjobs not shown: raise --limit)\n";
  }
  return 0;
}

int CmdGetSeveral(const CommonFlags& f, const std::string& kind_arg,
                  const std::vector<std::string>& names_arg) {
  auto pairs = KindNamePairs("get", kind_arg, names_arg);
  if (!pairs.ok()) return Error(pairs.status());
  const std::string kind_in = pairs->front().first;
  std::vector<std::string> names;
  for (const auto& [k, name] : *pairs) {
    if (k != kind_in)
      return Error("get: " + k + "/" + name + ": one kind at a time, as " + kind_in);
    names.push_back(name);
  }
  std::string none;
  const std::string kind = NormalizeKind(kind_in, none);
  if (kind.empty()) {
    return Error("get " + kind_in +
                 ": several names are taken for trainjobs (and Training Operator kinds) and "
                 "nodes; give one name at a time for this kind");
  }
  auto format = ParseOutputFormat(f.output);
  if (!format.ok()) return Error(format.status());
  if (kind == "trainjob") {
    for (const std::string& name : names) {
      if (NamedAcrossNamespaces(f, name)) return 1;
    }
  }
  auto client = Open(f);
  if (!client.ok()) return Error(client.status());
  return GetNamed(f, **client, *format, kind, SourceKindOf(kind_in), names);
}

int CmdDescribe(const CommonFlags& f, const std::string& kind_arg, const std::string& name_arg) {
  std::string name = name_arg;
  const std::string kind = NormalizeKind(kind_arg, name);
  if (std::string qname = name_arg; QueueKindOf(kind_arg, qname) == "ClusterQueue" ||
                                    QueueKindOf(kind_arg, qname) == "ResourceFlavor") {
    return CmdDescribeQueueObject(f, QueueKindOf(kind_arg, qname), qname);  // queue_commands.h
  }
  if (kind != "trainjob" && kind != "node") {
    return Error("describe supports trainjob, node, clusterqueue and resourceflavor, got \"" +
                 kind_arg + "\"");
  }
  if (name.empty()) return Error("describe " + kind + ": give the " + kind + "'s name");
  if (kind == "trainjob" && NamedAcrossNamespaces(f, name)) return 1;
  auto client = Open(f);
  if (!client.ok()) return Error(client.status());
  v1::OperatorRequest req;
  if (kind == "node") {  // describe_node.h
    req.mutable_get_nodes();
    auto nodes = (*client)->Call(req);
    if (!nodes.ok()) return Error(nodes.status());
    auto format = ParseOutputFormat(f.output);
    if (!format.ok()) return Error(format.status());
    for (const auto& n : nodes->nodes().nodes()) {
      if (n.info().name() != name) continue;
      // The same data as the text: conditions, packages, NUMA nodes, devices, accelerators.
      std::cout << DescribeAs(*format, n, [&] { return DescribeNode(n, NowUnixMs()); });
      return 0;
    }
    return Error("node \"" + name + "\" not found");
  }
  req.mutable_get_jobs()->set_name(name);
  req.mutable_get_jobs()->set_namespace_(f.ns);
  auto resp = (*client)->Call(req);
  if (!resp.ok()) return Error(resp.status());
  auto format = ParseOutputFormat(f.output);
  if (!format.ok()) return Error(format.status());
  const v1::JobStatus& job = resp->jobs().jobs(0);
  std::cout << DescribeAs(*format, job, [&] { return DescribeJob(job, NowUnixMs()); });
  return 0;
}

static int WaitForEnd(CoordinatorClient& client, const std::vector<std::string>& jobs,
                      const std::string& ns, int64_t timeout_ms, bool say_complete);

int CmdApply(const CommonFlags& f, const std::string& file, bool wait, const std::string& timeout) {
  const int64_t wait_ms = ParseDuration(timeout);
  if (wait_ms < 0)
    return Error("--timeout=" + timeout + ": expected a duration such as 60s, 5m or 1h");
  auto text = ReadApplyInput(file);
  if (!text.ok()) return Error(text.status());
  auto client = Open(f);
  if (!client.ok()) return Error(client.status());
  v1::OperatorRequest req;
  req.mutable_apply()->set_yaml(*std::move(text));
  req.mutable_apply()->set_source_name(file == "-" ? "stdin" : file);
  auto resp = (*client)->Call(req);
  if (!resp.ok()) return Error(resp.status());
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), ::tolower);
    return s;
  };
  const auto& r = resp->apply();
  for (const auto& w : r.warnings()) std::cerr << "Warning: " << w << "\n";
  if (r.created().empty() && r.configured().empty() && r.unchanged().empty()) {
    return Error("-f " + file + ": holds nothing to apply (only comments or empty documents)");
  }
  if (f.output == "json") {
    std::cout << ToJson(r);
  } else {
    // One write: std::cout's buffer passes every piece straight to the descriptor
    // (output_writer.h), and a file of 200 jobs made 400 writes.
    std::string out;
    for (const auto& c : r.created()) out += lower(c) + " created\n";
    for (const auto& c : r.configured()) out += lower(c) + " configured\n";
    for (const auto& c : r.unchanged()) out += lower(c) + " unchanged\n";
    std::cout << out;
  }
  if (!wait) return 0;
  std::cout.flush();
  // Every TrainJob of the file, unchanged ones too: a step retried after its CI runner died
  // must not go on while the job it submitted still runs, nor call a Failed one a success.
  std::vector<std::string> jobs;
  for (const auto* list : {&r.created(), &r.configured(), &r.unchanged()}) {
    for (const auto& c : *list) {
      if (lower(c).rfind("trainjob/", 0) == 0) jobs.push_back(c.substr(9));
    }
  }
  // -o json keeps stdout one JSON document; the exit status says how the jobs ended.
  return WaitForEnd(**client, jobs, f.ns, wait_ms, f.output != "json");
}

// Asks the coordinator to wait until trainjob `name` meets `condition`, an hour at most per
// request (the coordinator holds one no longer), until it is met, cannot be any more, or
// `timeout_ms` passed (0: no limit). The last answer; its `met` says which.
static Result<v1::WaitJobResult> WaitFor(CoordinatorClient& client, const std::string& ns,
                                         const std::string& name, const std::string& condition,
                                         int64_t timeout_ms) {
  constexpr int64_t kOneWait = 3600 * 1000;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    int64_t left = kOneWait;
    if (timeout_ms > 0) {
      left = std::min(kOneWait,
                      static_cast<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                               deadline - std::chrono::steady_clock::now())
                                               .count()));
      if (left <= 0) {
        v1::WaitJobResult timed_out;
        timed_out.set_message("timed out waiting for trainjob/" + name + " to be " + condition +
                              " (--timeout)");
        return timed_out;
      }
    }
    v1::OperatorRequest req;
    req.mutable_wait_job()->set_name(name);
    req.mutable_wait_job()->set_namespace_(ns);
    req.mutable_wait_job()->set_condition(condition);
    req.mutable_wait_job()->set_timeout_ms(static_cast<uint32_t>(left));
    auto resp = client.Call(req, std::chrono::milliseconds(left) + 10s);
    if (!resp.ok()) return resp.status();
    const v1::WaitJobResult& r = resp->wait_job();
    // A whole hour's request that ran out is asked again; the last one's answer is final.
    if (r.met() || r.impossible() || left < kOneWait) return r;
  }
}

// Waits for each job in turn until it is Complete; the first that cannot be any more, or the
// timeout, ends the wait with that reason. The jobs run concurrently meanwhile, so waiting in turn
// costs nothing.
static int WaitForEnd(CoordinatorClient& client, const std::vector<std::string>& jobs,
                      const std::string& ns, int64_t timeout_ms, bool say_complete) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (const auto& name : jobs) {
    int64_t left = 0;  // no limit
    if (timeout_ms > 0) {
      left = std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::milliseconds>(
                                      deadline - std::chrono::steady_clock::now())
                                      .count());
    }
    const auto [job_ns, job_name] = SplitShownName(name, ns);
    auto r = WaitFor(client, job_ns, job_name, "Complete", left);
    if (!r.ok()) return Error(r.status());
    if (!r->met()) return Error(r->message());
    if (say_complete) std::cout << "trainjob/" << name << " complete\n";
  }
  return 0;
}

namespace {

// What is left of one --timeout shared by several waits: 0 for a timeout of 0 (no limit), else at
// least 1 ms, since a wait of 0 ms is the coordinator's default (30 s).
class TimeoutLeft {
 public:
  explicit TimeoutLeft(int64_t ms)
      : ms_(ms), deadline_(std::chrono::steady_clock::now() + std::chrono::milliseconds(ms)) {}
  int64_t ms() const {
    if (ms_ == 0) return 0;
    return std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::milliseconds>(
                                    deadline_ - std::chrono::steady_clock::now())
                                    .count());
  }

 private:
  int64_t ms_;
  std::chrono::steady_clock::time_point deadline_;
};

}  // namespace

int CmdWait(const CommonFlags& f, const std::vector<std::string>& targets,
            const std::string& for_condition, const std::string& timeout) {
  if (targets.empty()) return Error("wait: expected trainjob/NAME (or trainjob NAME...)");
  auto pairs = KindNamePairs("wait", targets[0], {targets.begin() + 1, targets.end()});
  if (!pairs.ok()) return Error(pairs.status());
  std::vector<std::string> names;
  for (auto [kind_in, name] : *pairs) {
    const std::string kind = NormalizeKind(kind_in, name);
    if (kind != "trainjob" || name.empty() || name.find('/') != std::string::npos) {
      return Error("wait: expected trainjob/NAME (or trainjob NAME...), got \"" + kind_in +
                   (name.empty() ? "" : " " + name) + "\"");
    }
    if (NamedAcrossNamespaces(f, name)) return 1;
    names.push_back(name);
  }
  std::string condition;
  if (for_condition.rfind("condition=", 0) == 0) {
    condition = for_condition.substr(10);
    if (auto eq = condition.find('='); eq != std::string::npos) {
      if (condition.substr(eq + 1) != "True" && condition.substr(eq + 1) != "true") {
        return Error("--for=" + for_condition + ": only condition=NAME (or =True) is supported");
      }
      condition = condition.substr(0, eq);
    }
  } else if (for_condition == "delete") {
    condition = "Deleted";
  } else if (for_condition.rfind("jsonpath=", 0) == 0 || for_condition.empty()) {
    return Error("--for: use condition=Complete, condition=Failed, condition=Suspended or delete");
  } else {
    return Error("--for=" + for_condition +
                 ": use condition=Complete, condition=Failed, condition=Suspended or delete");
  }
  const int64_t ms = ParseDuration(timeout);
  if (ms < 0) return Error("--timeout=" + timeout + ": expected a duration such as 60s, 5m or 1h");
  auto client = Open(f);
  if (!client.ok()) return Error(client.status());
  // One --timeout for them all, as kubectl; 0 waits without a limit for each.
  const TimeoutLeft left(ms);
  int rc = 0;
  for (const std::string& name : names) {
    auto r = WaitFor(**client, f.ns, name, condition, left.ms());
    if (!r.ok()) {
      rc = Error(r.status());
    } else if (r->met()) {
      std::cout << "trainjob/" << name << " condition met\n";
    } else {
      rc = Error(r->message());
    }
  }
  return rc;
}

namespace {

// Deletes every trainjob of `names`: the deletes all go first, so their ranks stop together, then
// each is waited for (`wait`), within one `ms` for all. One that fails (not found, a timeout) is
// said and the others go on; 1 then, as kubectl.
int DeleteTrainJobs(const CommonFlags& f, const std::vector<std::string>& names, bool wait,
                    const std::string& timeout, int64_t ms, bool force) {
  auto client = Open(f);
  if (!client.ok()) return Error(client.status());
  int rc = 0;
  std::vector<std::string> asked;
  for (const std::string& name : names) {
    v1::OperatorRequest req;
    req.mutable_delete_job()->set_name(name);
    req.mutable_delete_job()->set_namespace_(f.ns);
    req.mutable_delete_job()->set_force(force);
    auto resp = (*client)->Call(req);
    if (!resp.ok()) {
      rc = Error(resp.status());
      continue;
    }
    if (!wait) std::cout << "trainjob/" << name << " deleted\n";
    asked.push_back(name);
  }
  if (!wait) return rc;
  const TimeoutLeft timeout_left(ms);
  for (const std::string& name : asked) {
    const int64_t left = timeout_left.ms();
    v1::OperatorRequest w;
    w.mutable_wait_job()->set_name(name);
    w.mutable_wait_job()->set_namespace_(f.ns);
    w.mutable_wait_job()->set_condition("Deleted");
    w.mutable_wait_job()->set_timeout_ms(static_cast<uint32_t>(left));
    auto done = (*client)->Call(w, std::chrono::milliseconds(left) + 10s);
    if (!done.ok()) {
      rc = Error(done.status());
    } else if (!done->wait_job().met()) {
      rc = Error(DeleteNotDoneMessage(name, timeout, done->wait_job()));
    } else {
      std::cout << "trainjob/" << name << " deleted\n";
    }
  }
  return rc;
}

}  // namespace

int CmdDelete(const CommonFlags& f, const std::string& kind_arg,
              const std::vector<std::string>& names_arg, bool wait, const std::string& timeout,
              bool force) {
  // kubectl's two forms, `delete trainjob a b` and `delete trainjob/a trainjob/b`.
  auto targets = KindNamePairs("delete", kind_arg, names_arg);
  if (!targets.ok()) return Error(targets.status());
  const int64_t ms = ParseDuration(timeout);
  if (ms < 0) return Error("--timeout=" + timeout + ": expected a duration such as 60s");
  int rc = 0;
  std::vector<std::string> jobs;
  for (const auto& [kind_in, name_in] : *targets) {
    // QueueKindOf takes the name out of "kind/NAME": only for a queue kind, on a copy.
    if (std::string qname = name_in, qkind = QueueKindOf(kind_in, qname); !qkind.empty()) {
      if (const int r = CmdDeleteQueueObject(f, qkind, qname); r != 0) rc = r;
      continue;
    }
    std::string name = name_in;
    const std::string kind = NormalizeKind(kind_in, name);
    if (kind != "trainjob" || name.empty()) return Error("delete: expected trainjob NAME");
    if (NamedAcrossNamespaces(f, name)) return 1;
    jobs.push_back(name);
  }
  if (jobs.empty()) return rc;
  const int jobs_rc = DeleteTrainJobs(f, jobs, wait, timeout, ms, force);
  return rc != 0 ? rc : jobs_rc;
}

}  // namespace trainlet::cli
