// PollItemSource: hosts on a platform::EventLoop a component that still reports what it waits for
// as zmq_pollitem_t entries (ExecSessions, HealthChecker: AddPollItems/OnPolled), whose set of
// descriptors comes and goes (a health program's pipe, the exec output watch while sessions run).
//
// Before every poll (a tick on the loop, so it runs after the ticks registered before it) it asks
// the component for its items, registers each new one on the loop, and removes those no longer
// asked for. When one is ready, the component's items are asked for again, that item's revents
// set, and the whole list handed to its OnPolled, which finds its own entries by descriptor or
// socket; two ready items mean two OnPolled calls. Nobody indexes poll items by position.
//
// Ownership: the caller owns the loop and the component, both outliving this object, which
// removes its tick and sources from the loop when destroyed. Threads: the loop's thread only.
#pragma once

#include <functional>
#include <map>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "common/platform/event_loop.h"

namespace trainlet::agent {

class PollItemSource {
 public:
  using AddItems = std::function<void(std::vector<zmq_pollitem_t>&)>;
  using OnPolled = std::function<void(const std::vector<zmq_pollitem_t>&)>;

  PollItemSource(platform::EventLoop& loop, AddItems add_items, OnPolled on_polled);
  ~PollItemSource();
  PollItemSource(const PollItemSource&) = delete;
  PollItemSource& operator=(const PollItemSource&) = delete;

  // How many items are registered on the loop now.
  size_t registered() const { return registered_.size(); }

 private:
  using Key = std::pair<void*, int>;  // a socket, or a descriptor (socket null)
  void Sync();
  void OnReady(Key key, short revents);

  platform::EventLoop& loop_;
  AddItems add_items_;
  OnPolled on_polled_;
  platform::EventLoop::SourceId tick_;
  std::map<Key, platform::EventLoop::SourceId> registered_;
};

}  // namespace trainlet::agent
