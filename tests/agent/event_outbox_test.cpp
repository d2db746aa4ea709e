// EventOutbox: numbering, what is due when (new events, resends after resend_after, everything
// after a registration), a failed send's events due again, and acks.
#include "agent/event_outbox.h"

#include <gtest/gtest.h>

#include <vector>

namespace trainlet::agent {
namespace {

using namespace std::chrono_literals;
using Clock = EventOutbox::Clock;

v1::Envelope Event(uint32_t rank) {
  v1::Envelope env;
  env.mutable_worker_event()->set_rank(rank);
  return env;
}

std::vector<uint32_t> Ranks(const std::vector<v1::Envelope*>& due) {
  std::vector<uint32_t> out;
  for (const v1::Envelope* e : due) out.push_back(e->worker_event().rank());
  return out;
}

TEST(EventOutbox, NewEventsAreDueOnceThenAgainAfterResendAfter) {
  EventOutbox box(3s);
  const Clock::time_point t0{1000s};
  EXPECT_FALSE(box.NextDue().has_value());
  EXPECT_EQ(box.Add(Event(0)), 1u);
  EXPECT_EQ(box.NextDue(), Clock::time_point{});  // now
  EXPECT_EQ(Ranks(box.Due(t0, false)), std::vector<uint32_t>{0});
  EXPECT_EQ(box.Add(Event(1)), 2u);
  EXPECT_EQ(Ranks(box.Due(t0 + 1s, false)), std::vector<uint32_t>{1});  // not 0 again
  EXPECT_EQ(box.NextDue(), t0 + 3s);
  EXPECT_TRUE(box.Due(t0 + 2s, false).empty());
  EXPECT_EQ(Ranks(box.Due(t0 + 3s, false)), std::vector<uint32_t>{0});  // 1 is not due yet
  EXPECT_EQ(box.NextDue(), t0 + 4s);
  EXPECT_EQ(Ranks(box.Due(t0 + 4s, false)), std::vector<uint32_t>{1});
  EXPECT_EQ(box.Due(t0 + 4s, false).size(), 0u);
  // After a registration, everything, whenever it was sent.
  EXPECT_EQ(Ranks(box.Due(t0 + 4s, true)), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(box.size(), 2u);
  EXPECT_EQ(box.last_seq(), 2u);
}

TEST(EventOutbox, ASendThatFailedMakesItsEventsDueAgainInOrder) {
  EventOutbox box(3s);
  const Clock::time_point t0{1000s};
  for (uint32_t r = 0; r < 5; ++r) box.Add(Event(r));
  auto due = box.Due(t0, false);
  ASSERT_EQ(due.size(), 5u);
  box.Unsent(due, 2);  // ranks 2, 3 and 4 did not go
  EXPECT_EQ(box.NextDue(), Clock::time_point{});
  box.Add(Event(5));
  EXPECT_EQ(Ranks(box.Due(t0 + 1s, false)), (std::vector<uint32_t>{2, 3, 4, 5}));
  EXPECT_TRUE(box.Due(t0 + 1s, false).empty());
  // Unsent from the middle of a resend: only those after the failure come again.
  due = box.Due(t0 + 3s, false);
  EXPECT_EQ(Ranks(due), (std::vector<uint32_t>{0, 1}));
  box.Unsent(due, 1);
  EXPECT_EQ(Ranks(box.Due(t0 + 3s, false)), std::vector<uint32_t>{1});
  box.Unsent(due, due.size());  // nothing failed: no-op
  EXPECT_TRUE(box.Due(t0 + 3s, false).empty());
}

TEST(EventOutbox, AcksAreCumulativeAndForgetTheirEvents) {
  EventOutbox box(3s);
  const Clock::time_point t0{1000s};
  for (uint32_t r = 0; r < 4; ++r) box.Add(Event(r));
  EXPECT_EQ(box.acked_through(), 0u);
  box.Due(t0, false);
  box.Ack(2);
  EXPECT_EQ(box.size(), 2u);
  EXPECT_EQ(box.acked_through(), 2u);
  box.Add(Event(4));  // seq 5
  EXPECT_EQ(Ranks(box.Due(t0 + 1s, false)), std::vector<uint32_t>{4});
  EXPECT_EQ(Ranks(box.Due(t0 + 3s, false)), (std::vector<uint32_t>{2, 3}));
  box.Ack(1);  // old ack: nothing more goes
  EXPECT_EQ(box.size(), 3u);
  box.Ack(5);
  EXPECT_EQ(box.size(), 0u);
  EXPECT_EQ(box.acked_through(), 5u);
  EXPECT_FALSE(box.NextDue().has_value());
  EXPECT_TRUE(box.Due(t0 + 100s, true).empty());
}

// Many events, added and sent one at a time as a step's ranks start: each goes exactly once,
// and a resend after resend_after sends them all again, once.
TEST(EventOutbox, EachOfManyEventsGoesOnceUntilItsResend) {
  EventOutbox box(3s);
  const Clock::time_point t0{1000s};
  for (uint32_t r = 0; r < 512; ++r) {
    box.Add(Event(r));
    EXPECT_EQ(Ranks(box.Due(t0 + std::chrono::microseconds(r), false)), std::vector<uint32_t>{r});
  }
  EXPECT_EQ(Ranks(box.Due(t0 + 3s, false)), std::vector<uint32_t>{0});  // sent at t0 itself
  EXPECT_EQ(box.Due(t0 + 4s, false).size(), 511u);
  EXPECT_TRUE(box.Due(t0 + 4s, false).empty());
  EXPECT_EQ(box.NextDue(), t0 + 6s);
}

}  // namespace
}  // namespace trainlet::agent
