#include "coordinator/attempt_steps.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "coordinator/working_dir.h"

namespace trainlet::coordinator {
namespace {

bool IsMain(const std::string& name) { return name == "node" || name == "launcher"; }

// The plan's name of a replicated job: "" for the main one.
std::string PlanName(const std::string& name) { return IsMain(name) ? "" : name; }

std::vector<v1::StepDependency> PlanDependencies(const trainjob::ReplicatedJob& job) {
  std::vector<v1::StepDependency> out;
  for (const trainjob::JobDependency& d : job.depends_on) {
    // `launcher` waiting for `node` (the mpi runtimes) is inside the main one: its plugin orders
    // them itself.
    if (IsMain(job.name) && IsMain(d.name)) continue;
    v1::StepDependency dep;
    dep.set_step(PlanName(d.name));
    dep.set_status(d.status);
    out.push_back(std::move(dep));
  }
  return out;
}

// Sets `key` in `env`, in place when present (keeping its position), appended otherwise.
void SetEnv(std::vector<std::pair<std::string, std::string>>& env, const std::string& key,
            const std::string& value) {
  for (auto& [k, v] : env) {
    if (k == key) {
      v = value;
      return;
    }
  }
  env.emplace_back(key, value);
}

const std::optional<trainjob::TrainJob::Initializer>* InitializerOf(const trainjob::TrainJob& job,
                                                                    const std::string& step) {
  if (step == "dataset-initializer") return &job.dataset_initializer;
  if (step == "model-initializer") return &job.model_initializer;
  return nullptr;
}

Result<StepSpec> SpecOf(const trainjob::TrainJob& job, const trainjob::TrainingRuntime& runtime,
                        const trainjob::ReplicatedJob& rj, size_t index, WorkDirPlace place) {
  const std::string where = "TrainJob/" + job.name + ": runtime " + runtime.kind + "/" +
                            runtime.name + " spec.template.spec.replicatedJobs[" +
                            std::to_string(index) + "] (" + rj.name + ")";
  if (rj.replicas < 1) return InvalidError(where + ": replicas must be at least 1");
  if (!rj.container) return InvalidError(where + ": no container to run");
  StepSpec spec;
  spec.name = rj.name;
  spec.replicas = static_cast<uint32_t>(rj.replicas);
  const auto* init = InitializerOf(job, rj.name);
  if (!rj.container->command.empty()) {
    spec.argv = rj.container->command;
    spec.argv.insert(spec.argv.end(), rj.container->args.begin(), rj.container->args.end());
  } else if (init != nullptr) {
    spec.argv = {kInitializerBinary, rj.name == "dataset-initializer" ? "dataset" : "model"};
    spec.argv.insert(spec.argv.end(), rj.container->args.begin(), rj.container->args.end());
  } else {
    return InvalidError(where + ": its container sets no command (only dataset-initializer and " +
                        "model-initializer have a built-in one)");
  }
  for (const auto& e : rj.container->env) SetEnv(spec.env, e.name, e.value);
  if (init != nullptr && init->has_value()) {
    if (!(*init)->storage_uri.empty()) SetEnv(spec.env, "STORAGE_URI", (*init)->storage_uri);
    for (const auto& e : (*init)->env) SetEnv(spec.env, e.name, e.value);
  }
  spec.depends_on = PlanDependencies(rj);
  spec.run_as_user = rj.container->run_as_user;
  spec.run_as_group = rj.container->run_as_group;
  spec.allow_privilege_escalation = rj.container->allow_privilege_escalation;
  spec.fs_group = rj.container->fs_group;
  spec.cwd = WorkerCwdFor(place, rj.container->working_dir);
  return spec;
}

}  // namespace

Result<AttemptSteps> StepsOf(const trainjob::TrainJob& job,
                             const trainjob::TrainingRuntime& runtime) {
  AttemptSteps out;
  std::map<std::string, StepSpec> specs;
  std::vector<std::string> order;  // runtime order
  TRAINLET_ASSIGN_OR_RETURN(const WorkDirPlace where, WorkDirPlaceOf(job.annotations));
  for (size_t i = 0; i < runtime.jobs.size(); ++i) {
    const trainjob::ReplicatedJob& rj = runtime.jobs[i];
    if (rj.name == "node") out.main_depends_on = PlanDependencies(rj);
    if (IsMain(rj.name)) continue;
    TRAINLET_ASSIGN_OR_RETURN(StepSpec spec, SpecOf(job, runtime, rj, i, where));
    order.push_back(rj.name);
    specs.emplace(rj.name, std::move(spec));
  }
  // Each step after the ones it depends on (the parser refused cycles; a dependency left unmet
  // by a broken runtime still ends: a step is placed once).
  std::set<std::string> placed;
  std::function<void(const std::string&)> place = [&](const std::string& name) {
    if (!specs.contains(name) || !placed.insert(name).second) return;
    for (const auto& d : specs.at(name).depends_on) place(d.step());
    out.steps.push_back(specs.at(name));
  };
  for (const std::string& name : order) place(name);
  return out;
}

std::vector<std::string> StepWarnings(const trainjob::TrainJob& job,
                                      const trainjob::TrainingRuntime& runtime) {
  std::vector<std::string> out;
  for (const char* which : {"dataset", "model"}) {
    const std::string step = std::string(which) + "-initializer";
    const auto* init = InitializerOf(job, step);
    if (!init->has_value()) continue;
    const bool runs = std::any_of(runtime.jobs.begin(), runtime.jobs.end(),
                                  [&](const auto& rj) { return rj.name == step; });
    if (!runs) {
      out.push_back("TrainJob/" + job.name + ": spec.initializer." + which + ": ignored (runtime " +
                    runtime.kind + "/" + runtime.name + " has no " + step +
                    " replicated job to run it)");
    }
  }
  return out;
}

std::vector<StepWorker> LayOutSteps(const AttemptSteps& steps, const AttemptLayout& layout) {
  uint32_t next = 0;
  for (const NodeLayout& n : layout.nodes) next += static_cast<uint32_t>(n.ranks.size());
  std::vector<StepWorker> out;
  for (const StepSpec& s : steps.steps) {
    for (size_t node = 0; node < layout.nodes.size(); ++node) {
      for (uint32_t replica = 0; replica < s.replicas; ++replica) {
        out.push_back({next++, replica, node, &s});
      }
    }
  }
  return out;
}

void AddStepsToPlans(const AttemptSteps& steps, const AttemptLayout& layout,
                     std::vector<v1::LaunchPlan>& plans) {
  if (steps.empty()) return;
  for (const StepWorker& w : LayOutSteps(steps, layout)) {
    v1::WorkerSpec* spec = plans.at(w.node).add_workers();
    spec->set_rank(w.rank);
    spec->set_local_rank(w.local_rank);
    spec->set_step(w.step->name);
    spec->set_cwd(w.step->cwd);
    for (const auto& a : w.step->argv) spec->add_argv(a);
    if (w.step->run_as_user) spec->set_run_as_user(*w.step->run_as_user);
    if (w.step->run_as_group) spec->set_run_as_group(*w.step->run_as_group);
    if (w.step->allow_privilege_escalation)
      spec->set_allow_privilege_escalation(*w.step->allow_privilege_escalation);
    if (w.step->fs_group) spec->set_fs_group(*w.step->fs_group);
    auto& env = *spec->mutable_env();
    for (const auto& [k, v] : w.step->env) env[k] = v;
    // What the agent and its sweep know a job's processes by, and which worker this is; none of
    // the training's rank variables.
    const v1::LaunchPlan& plan = plans.at(w.node);
    env["TRAINLET_JOB"] = plan.job();
    env["TRAINLET_ATTEMPT"] = std::to_string(plan.attempt());
    env["TRAINLET_STEP"] = w.step->name;
    env["TRAINLET_STEP_REPLICA"] = std::to_string(w.local_rank);
    env["TRAINLET_NODE_RANK"] = std::to_string(w.node);
    env["TRAINLET_NUM_NODES"] = std::to_string(plans.size());
  }
  for (v1::LaunchPlan& plan : plans) {
    if (!steps.main_depends_on.empty()) {
      v1::PlanStep* main = plan.add_steps();
      main->set_name("");
      for (const auto& d : steps.main_depends_on) *main->add_depends_on() = d;
    }
    for (const StepSpec& s : steps.steps) {
      if (s.depends_on.empty()) continue;
      v1::PlanStep* step = plan.add_steps();
      step->set_name(s.name);
      for (const auto& d : s.depends_on) *step->add_depends_on() = d;
    }
  }
}

void AddStepRanks(const AttemptSteps& steps, const AttemptLayout& layout,
                  const std::vector<std::string>& nodes, uint32_t attempt, v1::JobStatus& st) {
  for (const StepWorker& w : LayOutSteps(steps, layout)) {
    auto* r = st.add_ranks();
    r->set_rank(w.rank);
    r->set_local_rank(w.local_rank);
    r->set_node(nodes.at(w.node));
    r->set_rank_state(v1::RANK_STATE_PENDING);
    r->set_attempt(attempt);
    r->set_step(w.step->name);
    // Each step's workers are consecutive ranks (LayOutSteps): one record per step and attempt,
    // so `logs --step S --attempt N` finds attempt N's own (log_target.h).
    const int n = st.attempt_steps_size();
    if (n > 0 && st.attempt_steps(n - 1).attempt() == attempt &&
        st.attempt_steps(n - 1).step() == w.step->name) {
      st.mutable_attempt_steps(n - 1)->set_count(st.attempt_steps(n - 1).count() + 1);
    } else {
      v1::Steps18AttemptStep* rec = st.add_attempt_steps();
      rec->set_attempt(attempt);
      rec->set_step(w.step->name);
      rec->set_first_rank(w.rank);
      rec->set_count(1);
    }
  }
  st.set_step_progress_unix_ms(0);
}

bool IsStepWorker(const v1::JobStatus& st, uint32_t attempt, uint32_t rank) {
  for (const auto& s : st.attempt_steps()) {
    if (s.attempt() == attempt && rank >= s.first_rank() && rank - s.first_rank() < s.count()) {
      return true;
    }
  }
  // An attempt placed before attempt_steps existed: the current one's ranks say.
  return attempt == st.attempt() &&
         std::any_of(st.ranks().begin(), st.ranks().end(),
                     [&](const auto& r) { return r.rank() == rank && !r.step().empty(); });
}

std::optional<uint32_t> StepWorkerRank(const v1::JobStatus& st, const std::string& step,
                                       uint32_t index) {
  std::vector<uint32_t> ranks;
  for (const auto& r : st.ranks()) {
    if (r.step() == step) ranks.push_back(r.rank());
  }
  std::sort(ranks.begin(), ranks.end());
  if (step.empty()) {
    return std::find(ranks.begin(), ranks.end(), index) != ranks.end()
               ? std::optional<uint32_t>(index)
               : std::nullopt;
  }
  if (index >= ranks.size()) return std::nullopt;
  return ranks[index];
}

std::optional<int64_t> StartClockMs(const v1::JobStatus& st, int64_t attempt_started_ms) {
  std::set<std::string> busy;     // nodes where a step worker runs
  std::set<std::string> reached;  // nodes where a step worker got past Pending: its plan came
  for (const auto& r : st.ranks()) {
    if (r.step().empty()) continue;
    if (r.rank_state() == v1::RANK_STATE_RUNNING) busy.insert(r.node());
    if (r.rank_state() != v1::RANK_STATE_PENDING) reached.insert(r.node());
  }
  // On more than one node a dependency is met on every node (step_release.h): a node whose own
  // steps came also waits while a step worker runs elsewhere.
  const bool elsewhere = st.placement_size() > 1 && !busy.empty();
  const bool counted = std::any_of(st.ranks().begin(), st.ranks().end(), [&](const auto& r) {
    return r.rank_state() == v1::RANK_STATE_PENDING && !busy.contains(r.node()) &&
           !(elsewhere && reached.contains(r.node()));
  });
  if (!counted) return std::nullopt;
  return std::max(attempt_started_ms, st.step_progress_unix_ms());
}

}  // namespace trainlet::coordinator
