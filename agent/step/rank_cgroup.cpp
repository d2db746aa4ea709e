#include "agent/step/rank_cgroup.h"

#include <sys/wait.h>
#include <unistd.h>

#include <utility>

namespace trainlet::step {

RankCgroup::RankCgroup(std::unique_ptr<platform::ProcessCgroup> entered, Say say)
    : say_(std::move(say)), cgroup_(std::move(entered)), in_(cgroup_ != nullptr) {}

RankCgroup::~RankCgroup() {
  if (enter_thread_.joinable()) enter_thread_.join();
}

void RankCgroup::Open(const std::string& mode_text) {
  const auto mode = platform::ParseCgroupMode(mode_text).value_or(platform::CgroupMode::kAuto);
  if (mode == platform::CgroupMode::kNone && cgroup_) {  // a standby's: unwanted
    Leave();
    if (cgroup_) Drop();
  }
  if (mode == platform::CgroupMode::kNone || cgroup_) return;  // none, or a standby's
  auto cgroup = platform::ProcessCgroup::Create("step-" + std::to_string(getpid()), mode);
  if (!cgroup.ok()) {
    say_("no cgroup for the ranks (" + cgroup.status().message() +
         "): processes they detach are found only as orphans of the step");
    return;
  }
  cgroup_ = std::move(*cgroup);
}

void RankCgroup::BeginEnter() {
  if (!cgroup_ || in_ || entering_) return;
  entered_ = false;
  entering_ = true;
  enter_thread_ = std::thread([this] {
    enter_status_ = cgroup_->Enter();
    entered_ = true;
  });
}

void RankCgroup::FinishEnter() {
  if (!entering_) return;
  enter_thread_.join();
  entering_ = false;
  if (!enter_status_.ok()) {
    say_("cannot enter the ranks' cgroup: " + enter_status_.message());
    Drop();
    return;
  }
  in_ = true;
}

void RankCgroup::Kill() {
  Leave();
  if (!cgroup_) return;
  if (Status st = cgroup_->Kill(); !st.ok()) say_("killing the ranks' cgroup: " + st.message());
}

bool RankCgroup::End(std::chrono::milliseconds patience) {
  Kill();
  if (!cgroup_) return false;
  const auto deadline = std::chrono::steady_clock::now() + patience;
  while (cgroup_->Populated() && std::chrono::steady_clock::now() < deadline) {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const bool contained = !spawned_outside_ && !cgroup_->Populated();
  Drop();
  return contained;
}

void RankCgroup::Leave() {
  if (!cgroup_ || !in_) return;
  in_ = false;
  if (Status st = cgroup_->Leave(); !st.ok()) {
    // Still inside: killing the cgroup would kill the step. Give it up (it stays, and holds the
    // step until the step exits).
    say_("cannot leave the ranks' cgroup: " + st.message() + "; not using it");
    cgroup_.reset();
  }
}

void RankCgroup::Drop() {
  if (Status st = cgroup_->Remove(); !st.ok()) say_(st.message());
  cgroup_.reset();
}

}  // namespace trainlet::step
