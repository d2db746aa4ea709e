// Whether the ranks of an attempt would resume from the same state.
//
// A job whose ranks run in per-node work dirs (not trainlet.io/working-dir: shared) keeps a
// checkpoint only on the node that wrote it. After a restart, the ranks of that node resume from
// it and the others start over: pytorch/examples' DDP tutorial resumed at epoch 10 on one node and
// at epoch 0 on the other, and hung in mismatched collectives until its deadline. So:
//   - a job that names its checkpoint (annotation trainlet.io/checkpoint-path, relative to the
//     ranks' working directory, or absolute) has every node report what it holds there before an
//     attempt after the first starts (ReservePorts.checkpoint_path -> PortsReserved.work_dir);
//     when the nodes disagree the job fails at once, naming the nodes, what each holds and the fix,
//     instead of starting ranks that would hang;
//   - without it, a restart on nodes whose work dirs last ran different attempts (a replaced node,
//     a node left out of an attempt) is only warned of, in an event: trainlet cannot tell what the
//     ranks will read.
//
// Pure functions; any thread.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainlet/runtime_plugin.h"
#include "trainlet/v1/launch.pb.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::coordinator {

inline constexpr std::string_view kCheckpointPathAnnotation = "trainlet.io/checkpoint-path";

// The checkpoint path the nodes are asked about for `request`'s attempt, relative to the job's work
// dir or absolute; "" when none is asked: the first attempt, a single node, a shared working dir,
// or no trainlet.io/checkpoint-path annotation. A relative annotation is taken under the
// request's (relative) working_dir, where the ranks run.
std::string CheckpointToCompare(const PlanRequest& request);

// Nullopt when `states` (one per node of `nodes`, in the same order) agree: every checkpoint is
// missing, or every one has the same size and digest. Otherwise the reason the job fails:
//   "the ranks would resume from different state: snapshot.pt is 1048576 bytes (sha256 1a2b3c4d),
//    in a work dir last run by attempt 1 on node-a; missing, in a work dir last run by attempt 1
//    on node-b. each node keeps its own work dir, so a checkpoint written on one node is not seen
//    on the others: run the job in the shared directory (annotation trainlet.io/working-dir:
//    shared), or have every node save it"
// A node that could not read its checkpoint (WorkDirState.error) disagrees with every other.
std::optional<std::string> DivergentWorkDirs(const std::string& checkpoint,
                                             const std::vector<std::string>& nodes,
                                             const std::vector<v1::WorkDirState>& states);

// A warning for `request`'s attempt, after the first, with per-node work dirs, when its nodes
// last ran different attempts of the job (status.attempts' rank_nodes, before this attempt), e.g.
//   "node-a last ran attempt 1, node-c never ran it: ranks that resume from their work dir may
//    start from different state (annotation trainlet.io/working-dir: shared keeps one directory
//    for every node; trainlet.io/checkpoint-path makes trainlet compare the nodes' checkpoints
//    first)"
// Only the nodes that run ranks of the attempt (`layout`, over `placement`) count: an mpi node
// that only waits for mpirun has no ranks of its own to resume.
// "" when they agree, for a first attempt, a single node, or a shared working dir.
std::string MixedAttemptsWarning(const v1::JobStatus& status, const PlanRequest& request,
                                 const std::vector<std::string>& placement,
                                 const AttemptLayout& layout);

}  // namespace trainlet::coordinator
