#include "agent/event_outbox.h"

#include <algorithm>

namespace trainlet::agent {

uint64_t EventOutbox::Add(v1::Envelope env) {
  const uint64_t seq = next_seq_++;
  env.mutable_worker_event()->set_seq(seq);
  entries_.push_back({seq, std::move(env), std::nullopt});
  return seq;
}

void EventOutbox::Ack(uint64_t seq) {
  size_t popped = 0;
  while (!entries_.empty() && entries_.front().seq <= seq) {
    entries_.pop_front();
    ++popped;
  }
  unsent_from_ -= std::min(unsent_from_, popped);
  if (entries_.empty()) oldest_sent_.reset();
}

std::vector<v1::Envelope*> EventOutbox::Due(Clock::time_point now, bool everything) {
  std::vector<v1::Envelope*> due;
  // Only what was never sent, unless something may be due again: events come one at a time, and
  // a walk of every unacknowledged one per event was quadratic in the ranks a node starts.
  const bool resend = everything || (oldest_sent_ && now - *oldest_sent_ >= resend_after_);
  std::optional<Clock::time_point> oldest;
  for (size_t i = resend ? 0 : unsent_from_; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    if (everything || !e.sent_at || now - *e.sent_at >= resend_after_) {
      e.sent_at = now;
      due.push_back(&e.env);
    }
    if (!oldest || *e.sent_at < *oldest) oldest = e.sent_at;
  }
  if (resend) {
    oldest_sent_ = oldest;
  } else if (oldest && (!oldest_sent_ || *oldest < *oldest_sent_)) {
    oldest_sent_ = oldest;
  }
  unsent_from_ = entries_.size();
  return due;
}

void EventOutbox::Unsent(const std::vector<v1::Envelope*>& due, size_t index) {
  if (index >= due.size()) return;
  // `due` is in the outbox's order: one walk from the first unsent one marks them all.
  size_t next = index;
  for (size_t i = 0; i < entries_.size() && next < due.size(); ++i) {
    if (&entries_[i].env != due[next]) continue;
    if (next == index) unsent_from_ = std::min(unsent_from_, i);
    entries_[i].sent_at.reset();
    ++next;
  }
}

std::optional<EventOutbox::Clock::time_point> EventOutbox::NextDue() const {
  if (unsent_from_ < entries_.size()) return Clock::time_point{};  // now
  if (!oldest_sent_) return std::nullopt;
  return *oldest_sent_ + resend_after_;
}

}  // namespace trainlet::agent
