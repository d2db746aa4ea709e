#include "agent/step/step_gate.h"

#include <algorithm>

#include "common/status.h"

namespace trainlet::step {
namespace {

std::string Named(const std::string& step) { return step.empty() ? "node" : step; }

}  // namespace

StepGate::StepGate(std::vector<std::string> workers, const std::vector<StepOrder>& steps)
    : step_of_(std::move(workers)), state_(step_of_.size(), State::kHeld), steps_(steps) {}

const std::vector<StepNeed>& StepGate::NeedsOf(size_t worker) const {
  static const std::vector<StepNeed> kNone;
  for (const StepOrder& o : steps_) {
    if (o.name == step_of_[worker]) return o.depends_on;
  }
  return kNone;
}

bool StepGate::Met(const StepNeed& need, bool* doomed) const {
  bool met = true;
  for (size_t i = 0; i < step_of_.size(); ++i) {
    if (step_of_[i] != need.step) continue;
    const State s = state_[i];
    if (s == State::kNeverStarted) *doomed = true;
    if (need.status == "Ready") {
      met &= s == State::kStarted || s == State::kExitedZero || s == State::kFailed;
      // A worker that could not start never becomes ready; one that ran and failed did.
    } else {
      met &= s == State::kExitedZero;
      if (s == State::kFailed) *doomed = true;
    }
  }
  return met && !*doomed;
}

std::vector<size_t> StepGate::TakeStartable() {
  std::vector<size_t> out;
  for (size_t i = 0; i < state_.size(); ++i) {
    if (state_[i] != State::kHeld) continue;
    bool doomed = false;
    const auto& needs = NeedsOf(i);
    const bool met =
        std::all_of(needs.begin(), needs.end(), [&](const StepNeed& n) { return Met(n, &doomed); });
    if (met && !doomed) out.push_back(i);
  }
  for (size_t i : out) state_[i] = State::kHandedOut;
  return out;
}

std::vector<std::pair<size_t, std::string>> StepGate::TakeDoomed() {
  std::vector<std::pair<size_t, std::string>> out;
  // A doomed worker dooms those waiting for it in turn: repeat until nothing changes.
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < state_.size(); ++i) {
      if (state_[i] != State::kHeld) continue;
      for (const StepNeed& n : NeedsOf(i)) {
        bool doomed = false;
        Met(n, &doomed);
        if (!doomed) continue;
        state_[i] = State::kNeverStarted;
        out.emplace_back(i, "not started: dependency " + Named(n.step) + " failed");
        changed = true;
        break;
      }
    }
  }
  return out;
}

std::vector<std::pair<size_t, std::string>> StepGate::ReleaseHeld(const std::string& reason) {
  std::vector<std::pair<size_t, std::string>> out;
  for (size_t i = 0; i < state_.size(); ++i) {
    if (state_[i] != State::kHeld) continue;
    state_[i] = State::kNeverStarted;
    out.emplace_back(i, reason);
  }
  return out;
}

void StepGate::Started(size_t worker) { state_.at(worker) = State::kStarted; }

void StepGate::StartFailed(size_t worker) { state_.at(worker) = State::kNeverStarted; }

void StepGate::Exited(size_t worker, bool zero) {
  state_.at(worker) = zero ? State::kExitedZero : State::kFailed;
}

bool StepGate::holding() const {
  return std::any_of(state_.begin(), state_.end(), [](State s) { return s == State::kHeld; });
}

}  // namespace trainlet::step
