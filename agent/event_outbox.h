// EventOutbox: at-least-once delivery of worker events to the coordinator.
//
// Every event gets the next number of this agent's sequence and stays here until the coordinator
// acknowledges that number (acks are cumulative: the coordinator applies events in order). What is
// unacknowledged is sent again after each (re-)registration, and again whenever it has waited
// longer than `resend_after`, so an exit status survives a coordinator restart or a dropped
// connection. The coordinator skips numbers it has applied already.
//
// Owned by the agent's loop; no locks. Add, Due and Ack cost what they add, send or forget, not
// what waits: a node that starts 256 ranks holds 512 events at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "trainlet/v1/envelope.pb.h"

namespace trainlet::agent {

class EventOutbox {
 public:
  using Clock = std::chrono::steady_clock;
  explicit EventOutbox(std::chrono::milliseconds resend_after = std::chrono::seconds(3))
      : resend_after_(resend_after) {}

  // Numbers the event (sets worker_event.seq) and keeps it. Returns the number.
  uint64_t Add(v1::Envelope env);
  // Forgets every event numbered up to `seq`.
  void Ack(uint64_t seq);
  // Events to send now: those never sent, and those sent longer than resend_after ago (or all
  // of them when `everything`, after a registration). Marks them sent at `now`.
  std::vector<v1::Envelope*> Due(Clock::time_point now, bool everything);
  // The send of the events just returned by Due failed from `index` on: try them again soon.
  void Unsent(const std::vector<v1::Envelope*>& due, size_t index);
  size_t size() const { return entries_.size(); }
  uint64_t last_seq() const { return next_seq_ - 1; }
  // Every event numbered up to this was acknowledged.
  uint64_t acked_through() const {
    return entries_.empty() ? next_seq_ - 1 : entries_.front().seq - 1;
  }
  // When Due next has something to return, if anything waits.
  std::optional<Clock::time_point> NextDue() const;

 private:
  struct Entry {
    uint64_t seq;
    v1::Envelope env;
    std::optional<Clock::time_point> sent_at;
  };
  std::chrono::milliseconds resend_after_;
  std::deque<Entry> entries_;
  uint64_t next_seq_ = 1;
  // Every entry before this index was sent (has sent_at); those from it on may not have been.
  size_t unsent_from_ = 0;
  // No entry was sent before this (none when nothing was sent): it may be earlier than the
  // oldest send still held (an ack removed that one), which only makes Due look at all of them
  // once more, and NextDue wake early.
  std::optional<Clock::time_point> oldest_sent_;
};

}  // namespace trainlet::agent
