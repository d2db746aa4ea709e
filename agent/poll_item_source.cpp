#include "agent/poll_item_source.h"

#include <set>

namespace trainlet::agent {

PollItemSource::PollItemSource(platform::EventLoop& loop, AddItems add_items, OnPolled on_polled)
    : loop_(loop), add_items_(std::move(add_items)), on_polled_(std::move(on_polled)) {
  tick_ = loop_.AddTick([this](platform::EventLoop::TimePoint) {
    Sync();
    return std::optional<platform::EventLoop::TimePoint>();
  });
}

PollItemSource::~PollItemSource() {
  loop_.Remove(tick_);
  for (const auto& [key, id] : registered_) loop_.Remove(id);
}

void PollItemSource::Sync() {
  std::vector<zmq_pollitem_t> items;
  add_items_(items);
  std::set<Key> wanted;
  for (const auto& item : items) {
    const Key key{item.socket, item.socket != nullptr ? -1 : item.fd};
    wanted.insert(key);
    if (registered_.count(key) != 0) continue;
    auto on_ready = [this, key](short revents) { OnReady(key, revents); };
    registered_[key] = item.socket != nullptr ? loop_.AddSocket(item.socket, item.events, on_ready)
                                              : loop_.AddFd(item.fd, item.events, on_ready);
  }
  for (auto it = registered_.begin(); it != registered_.end();) {
    if (wanted.count(it->first) != 0) {
      ++it;
      continue;
    }
    loop_.Remove(it->second);
    it = registered_.erase(it);
  }
}

void PollItemSource::OnReady(Key key, short revents) {
  std::vector<zmq_pollitem_t> items;
  add_items_(items);
  bool found = false;
  for (auto& item : items) {
    if (item.socket == key.first && (key.first != nullptr || item.fd == key.second)) {
      item.revents = revents;
      found = true;
    }
  }
  if (found) on_polled_(items);  // else: no longer asked for since the poll began
}

}  // namespace trainlet::agent
