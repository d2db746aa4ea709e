// JobEntry: one TrainJob as JobController holds it, and how an applied or stored spec becomes one.
//
// BuildJobEntry resolves a TrainJob against its runtime (trainjob::Resolve), picks the runtime
// plugin, and fills what placing needs (the plan template, ranks per node, the gang request) and
// the status fields that follow from the spec. NewJobEntry does that for a TrainJob applied now:
// the record to store, phase Pending (Suspended with spec.suspend), the Created event. Neither
// stores anything nor touches JobController's job map: the caller owns the entry it returns.
//
// Errors: Invalid when the spec does not resolve (numNodes below 1, a bad restart limit, a
// plugin refusing numProcPerNode); the message names the TrainJob. Any thread; no state.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/trainjob/trainjob_model.h"
#include "coordinator/gang_planner.h"
#include "coordinator/job_progress.h"
#include "coordinator/job_store.h"
#include "trainlet/runtime_plugin.h"

namespace trainlet::coordinator {

struct JobEntry {
  JobRecord record;  // what the store holds: spec and runtime documents, status
  trainjob::TrainJob spec;
  trainjob::TrainingRuntime runtime;
  const RuntimePlugin* plugin = nullptr;  // null: stored, waits for a plugin trainlet lacks
  PlanRequest plan_template;              // argv, env, num_proc_per_node
  uint32_t procs_per_node = 1;
  int64_t not_before_ms = 0;  // restart backoff (a resume clears it)
  GangRequest gang;           // resources, nodeSelector, tolerations; sizes are set when placing
  bool dirty = false;         // changed since JobController's last Flush
  StallPolicy stall;          // progress-timeout and on-stall (job_progress.h)
  // The room (PassCapacity::Fingerprint) in which the last placement found no room; 0: none.
  // Schedule does not try again while the room is the same. Any phase move clears it.
  uint64_t unplaced_room = 0;
};

// Picks a job's runtime plugin from its framework and runtime labels; empty means
// SelectRuntimePlugin (the built-ins). Same as JobControllerOptions::select_plugin.
using RuntimePluginSelector = std::function<const RuntimePlugin*(
    std::string_view framework, const std::map<std::string, std::string>& labels)>;

// What BuildJobEntry needs of the controller's options.
struct JobEntryOptions {
  uint32_t stop_grace_ms = 0;  // SIGTERM -> SIGKILL, copied into every plan
  RuntimePluginSelector select_plugin;
};

// `spec` resolved against `runtime`. Warnings (an ignored image, ignored resources) are appended
// to `warnings`. The record's name and documents are left for the caller (stored jobs have them).
Result<std::unique_ptr<JobEntry>> BuildJobEntry(const trainjob::TrainJob& spec,
                                                const trainjob::TrainingRuntime& runtime,
                                                const JobEntryOptions& options,
                                                std::vector<std::string>& warnings);

// A new TrainJob of an applied file (`source`, "" for stdin), Pending (or Suspended), not stored
// yet. Its notes are the warnings about this TrainJob.
Result<std::unique_ptr<JobEntry>> NewJobEntry(const trainjob::TrainJob& spec,
                                              const trainjob::TrainingRuntime& runtime,
                                              const JobEntryOptions& options,
                                              const std::string& source, int64_t now_ms,
                                              std::vector<std::string>& warnings);

}  // namespace trainlet::coordinator
