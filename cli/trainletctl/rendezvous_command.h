// `trainletctl rendezvous put|get|fence`: the rendezvous C API for ranks that are shell scripts.
//
// A rank's puts normally live in its process until its next fence; a script's rank is a series
// of trainletctl processes, so `put` keeps them in a per-rank file under the job's work dir
// ($TRAINLET_WORK_DIR/.rendezvous/attempt-A/rank-R.puts, the snapshot format), and `fence` sends
// them and records how many fences the rank has completed (rank-R.fences) for the next one.
#pragma once

#include <CLI/CLI.hpp>

namespace trainlet::cli {

// Adds the `rendezvous` subcommand; its callbacks set `rc` (0 ok, 1 failed, 2 timed out).
void AddRendezvousCommand(CLI::App& app, int& rc);

}  // namespace trainlet::cli
