#include "agent/event_outbox.h"

namespace trainlet::agent {

uint64_t EventOutbox::Add(v1::Envelope env) {
  const uint64_t seq = next_seq_++;
  env.mutable_worker_event()->set_seq(seq);
  entries_.push_back({seq, std::move(env), std::nullopt});
  return seq;
}

void EventOutbox::Ack(uint64_t seq) {
  while (!entries_.empty() && entries_.front().seq <= seq) entries_.pop_front();
}

std::vector<v1::Envelope*> EventOutbox::Due(Clock::time_point now, bool everything) {
  std::vector<v1::Envelope*> due;
  for (auto& e : entries_) {
    if (everything || !e.sent_at || now - *e.sent_at >= resend_after_) {
      e.sent_at = now;
      due.push_back(&e.env);
    }
  }
  return due;
}

void EventOutbox::Unsent(const std::vector<v1::Envelope*>& due, size_t index) {
  for (size_t i = index; i < due.size(); ++i) {
    for (auto& e : entries_) {
      if (&e.env == due[i]) e.sent_at.reset();
    }
  }
}

std::optional<EventOutbox::Clock::time_point> EventOutbox::NextDue() const {
  std::optional<Clock::time_point> next;
  for (const auto& e : entries_) {
    const Clock::time_point t = e.sent_at ? *e.sent_at + resend_after_ : Clock::time_point{};
    if (!next || t < *next) next = t;
  }
  return next;
}

}  // namespace trainlet::agent
