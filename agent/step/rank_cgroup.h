// RankCgroup: one step's cgroup for its ranks, from the step's side. It is made at the launch (or
// comes made, and entered, with a standby step), entered by the step before it spawns, so that
// every rank starts inside, left only to be killed (a process never kills the cgroup it is in),
// and removed at the end. Without one (a host that gives no cgroup, or `cgroup: none`) every
// call is a no-op, and the step finds what the ranks left behind as its orphans only.
//
// The move into the cgroup waits for an RCU grace period (the kernel's cgroup_threadgroup_rwsem;
// about 8 ms here), so it runs on a thread of its own (BeginEnter) while the step prepares ranks;
// nothing else touches the cgroup until FinishEnter has joined that thread. For the same reason
// the step does not leave between spawns: a leave right after them held back every rank's start
// and exit record by that much.
//
// Threads: owned by the step's one thread, but for that move. Messages go to `say` (the step's
// stderr, its step.log).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/platform/process_cgroup.h"
#include "common/status.h"

namespace trainlet::step {

class RankCgroup {
 public:
  using Say = std::function<void(const std::string&)>;

  // `entered`: a standby's cgroup, which the step is in already; null for none yet.
  RankCgroup(std::unique_ptr<platform::ProcessCgroup> entered, Say say);
  ~RankCgroup();
  RankCgroup(const RankCgroup&) = delete;
  RankCgroup& operator=(const RankCgroup&) = delete;

  // Makes the ranks' cgroup for this step (`mode`: the launch's cgroup setting, auto when empty
  // or unknown), unless it came with a standby; `none` gives up a standby's. A host that gives
  // none is said, and the step goes on without.
  void Open(const std::string& mode);
  // Starts the step's move into the cgroup; FinishEnter waits for it. No-ops without a cgroup,
  // once inside, or with a move under way.
  void BeginEnter();
  // Whether a move is under way and has not returned yet (the step prepares ranks meanwhile).
  bool Entering() const { return entering_ && !entered_; }
  // Joins the move; a failed one is said, and the cgroup given up.
  void FinishEnter();
  // Called before each spawn: a process started while the step is outside is beyond the
  // cgroup's reach, so End cannot vouch that nothing is left.
  void NoteSpawn() {
    if (!in_) spawned_outside_ = true;
  }
  // SIGKILL to everything in the cgroup (the step leaves it first).
  void Kill();
  // The ranks are gone: leaves, kills what is left in the cgroup, reaps this process's children
  // while it empties (at most `patience`), removes it. True when every process the step started
  // was inside and the cgroup emptied (the D record's C).
  bool End(std::chrono::milliseconds patience);

 private:
  void Leave();
  void Drop();

  Say say_;
  std::unique_ptr<platform::ProcessCgroup> cgroup_;  // null when none
  bool in_ = false;                                  // the step is in it
  bool spawned_outside_ = false;                     // a process was started out of it
  bool entering_ = false;                            // a move runs on enter_thread_
  std::atomic<bool> entered_{false};                 // set by enter_thread_ once it returned
  Status enter_status_ = Status::Ok();               // its result, read after the join
  std::thread enter_thread_;
};

}  // namespace trainlet::step
