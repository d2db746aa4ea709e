// The body of `trainlet-step <dir>`: the parent process of one step (the ranks of one job attempt
// on this node), in the spirit of Slurm's slurmstepd and containerd's shim. It exists so that the
// ranks outlive an agent restart and no exit status is lost while no agent runs.
//
// Contract with the agent (agent/worker_supervisor.h is the other side):
//  - The agent creates <dir>, writes <dir>/launch.json (step_launch.h), creates <dir>/events empty
//    and spawns the step in a session of its own, its stdout a pipe.
//  - The step becomes a child subreaper, appends the H record, starts every rank with the agent's
//    own spawner (same process groups, log files, affinity and env as a worker the agent starts
//    itself), appends S or F for each, writes "ready\n" to stdout and closes it.
//  - Except the ranks whose replicated job waits (launch.steps, step_gate.h): those are held, with
//    no record, until their dependencies are met among this step's ranks (then S or F, after
//    "ready"), or can no longer be (F "not started: dependency X failed"). A stop (SIGTERM,
//    SIGUSR1, a gone agent) gives every held rank an F record ("not started: stopped before its
//    dependencies were met") and starts nothing more, so the step still ends.
//  - MPI ranks started directly (their env has TRAINLET_PMIX_JOB_MAP, common/pmix/pmix_job_map.h):
//    before them it starts trainlet-pmix (beside its own binary) and sets the PMIx env the server
//    hands it for each rank; no server, no ranks (each gets an F record with the reason). The
//    server gets SIGTERM once the ranks are gone (SIGKILL a second later); a server that ends
//    while ranks run gets them SIGKILLed. libpmix itself is never loaded into the step.
//  - It reaps its ranks (and any orphan re-parented to it). When a rank leader exits, its process
//    group is SIGKILLed before the leader is reaped, as the agent does for its own workers. Each
//    batch of exits is appended as X records and made durable with platform::SyncData (fdatasync).
//  - SIGTERM: SIGTERM to every live rank's group, SIGKILL after the launch file's stop grace.
//    When the agent wrote <dir>/stop with a warning first (step_stop.h: preemption, drain
//    --force), the warning signal goes to every rank's group and SIGTERM follows only after the
//    warning grace; the step times it, so it survives the agent. A stop under way is not
//    restarted by a second SIGTERM. SIGUSR2: the warning signal of <dir>/warn to every rank's
//    group, nothing stops (before an activeDeadlineSeconds).
//    SIGUSR1: SIGKILL to every live rank's group now (the agent's grace ran out). SIGINT and
//    SIGHUP are ignored: only the agent stops a step.
//  - While the agent's lock (launch.agent_lock) stays unheld, or held but with its stamp standing
//    still (launch.agent_stamps), for orphan_grace_ms, it stops the ranks as for SIGTERM.
//  - Once every rank has exited it appends D, syncs and exits 0. Exit 2: the launch file or the
//    events file was unusable (the message is on stderr, <dir>/step.log).
#pragma once

#include <memory>
#include <string>

#include "common/platform/process_cgroup.h"

namespace trainlet::step {

// Runs the step in `dir` to the end and returns the process exit code. Changes process-wide
// state (signal mask, subreaper, stdout): call it only from trainlet-step's main. `entered`: the
// ranks' cgroup, made and entered already by a standby step (step_standby.h), used instead of
// making one; null: the step makes its own, as launch.cgroup says.
int RunStep(const std::string& dir, std::unique_ptr<platform::ProcessCgroup> entered = nullptr);

}  // namespace trainlet::step
