// Resolve: a TrainJob's trainer laid over its runtime.

#include <algorithm>
#include <charconv>
#include <climits>

#include "common/trainjob/trainjob_model.h"

namespace trainlet::trainjob {

Result<ResolvedTrainer> Resolve(const TrainJob& job, const TrainingRuntime& runtime) {
  const std::string label = "TrainJob/" + job.name;
  const std::string runtime_label = runtime.kind + "/" + runtime.name;
  if (job.runtime_ref.kind != runtime.kind || job.runtime_ref.name != runtime.name) {
    return InvalidError(label + ": spec.runtimeRef: names " + job.runtime_ref.kind + "/" +
                        job.runtime_ref.name + ", not " + runtime_label);
  }

  ResolvedTrainer out;
  out.num_nodes = job.trainer.num_nodes.value_or(runtime.ml_policy.num_nodes.value_or(1));
  if (out.num_nodes < 1) {
    std::string field =
        job.trainer.num_nodes ? "spec.trainer.numNodes" : "numNodes of runtime " + runtime_label;
    return InvalidError(label + ": " + field + ": must be at least 1, got " +
                        std::to_string(out.num_nodes));
  }
  out.num_proc_per_node =
      job.trainer.num_proc_per_node.value_or(runtime.ml_policy.num_proc_per_node.value_or("1"));
  // Ranks are numbered in 32-bit signed ints (MPI, torch): a product over that would wrap round
  // (2^31-1 nodes x 4096 once showed as 4294963200 ranks). "auto" is counted on the node.
  int64_t procs = 0;
  const auto [end, ec] =
      std::from_chars(out.num_proc_per_node.data(),
                      out.num_proc_per_node.data() + out.num_proc_per_node.size(), procs);
  if (ec == std::errc() && end == out.num_proc_per_node.data() + out.num_proc_per_node.size() &&
      procs > 0 && procs <= INT32_MAX && out.num_nodes * procs > INT32_MAX) {
    const std::string nodes_field =
        job.trainer.num_nodes ? "spec.trainer.numNodes" : "numNodes of runtime " + runtime_label;
    const std::string procs_field = job.trainer.num_proc_per_node
                                        ? "spec.trainer.numProcPerNode"
                                        : "numProcPerNode of runtime " + runtime_label;
    return InvalidError(label + ": " + nodes_field + " x " + procs_field + ": " +
                        std::to_string(out.num_nodes) + " x " + std::to_string(procs) + " = " +
                        std::to_string(out.num_nodes * procs) + " ranks, more than " +
                        std::to_string(INT32_MAX));
  }

  // With a launcher (MPI), the launcher container is where the trainer runs; the node
  // containers only run sshd, which trainlet replaces.
  static const ContainerSpec kNone;
  const ContainerSpec& base = runtime.launcher ? *runtime.launcher
                              : runtime.node   ? *runtime.node
                                               : kNone;

  const std::vector<std::string>& command =
      job.trainer.command.empty() ? base.command : job.trainer.command;
  const std::vector<std::string>& args = job.trainer.args.empty() ? base.args : job.trainer.args;
  if (command.empty()) {
    return InvalidError(label +
                        ": spec.trainer.command: no command: neither the TrainJob nor runtime " +
                        runtime_label + " sets one");
  }
  out.argv = command;
  out.argv.insert(out.argv.end(), args.begin(), args.end());

  out.env = base.env;
  for (const EnvVar& var : job.trainer.env) {
    auto it = std::find_if(out.env.begin(), out.env.end(),
                           [&](const EnvVar& e) { return e.name == var.name; });
    if (it != out.env.end()) {
      it->value = var.value;
    } else {
      out.env.push_back(var);
    }
  }
  out.image = job.trainer.image.empty() ? base.image : job.trainer.image;
  out.working_dir = base.working_dir;
  out.run_as_user = base.run_as_user;
  out.run_as_group = base.run_as_group;
  out.allow_privilege_escalation = base.allow_privilege_escalation;
  out.fs_group = base.fs_group;
  return out;
}

}  // namespace trainlet::trainjob
