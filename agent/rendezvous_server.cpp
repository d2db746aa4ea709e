#include "agent/rendezvous_server.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/envelope.h"
#include "common/rendezvous/fence_message.h"
#include "common/rendezvous/snapshot_format.h"

namespace trainlet::agent {
namespace fs = std::filesystem;
using rendezvous::FenceAbortMessage;

namespace {

// 128 random bits as hex. The token only has to be unguessable by other users' processes; the
// socket's mode already keeps them out, so this is the second lock, not the only one.
std::string NewToken() {
  unsigned char bytes[16];
  // The kernel's random source on Linux (getrandom) and macOS alike; never short below 256 bytes.
  TRAINLET_CHECK_MSG(getentropy(bytes, sizeof bytes) == 0,
                     std::string("getentropy: ") + std::strerror(errno));
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

// Room left for the envelope around a contribution's pairs.
constexpr size_t kContributionSlack = 64 << 10;

// Why a request's puts break a cap, or "" when none does.
std::string PutsOverCap(const v1::RendezvousRequest& req) {
  for (const auto& kv : req.puts()) {
    if (kv.key().size() > RendezvousServer::kMaxKeyBytes) {
      return "put: key of " + std::to_string(kv.key().size()) + " bytes, over the " +
             std::to_string(RendezvousServer::kMaxKeyBytes) + "-byte cap";
    }
    if (kv.value().size() > RendezvousServer::kMaxValueBytes) {
      return "put " + kv.key() + ": value of " + std::to_string(kv.value().size()) +
             " bytes, over the " + std::to_string(RendezvousServer::kMaxValueBytes) + "-byte cap";
    }
  }
  return "";
}

// Tells a retry (the same puts) from another process claiming the rank. Not a security
// boundary: that is the token; this only keeps a confused second process from going unnoticed.
size_t PutsDigest(const v1::RendezvousRequest& req) {
  std::string all;
  for (const auto& kv : req.puts()) {
    all += std::to_string(kv.key().size()) + ":" + kv.key() + std::to_string(kv.value().size()) +
           ":" + kv.value();
  }
  return std::hash<std::string>{}(all);
}

}  // namespace

RendezvousServer::RendezvousServer(std::string node, std::string state_dir, SendFn to_coordinator)
    : node_(std::move(node)),
      state_dir_(std::move(state_dir)),
      endpoint_("ipc://" + state_dir_ + "/rendezvous.sock"),
      to_coordinator_(std::move(to_coordinator)) {}

RendezvousServer::~RendezvousServer() {
  std::error_code ec;
  fs::remove_all(fs::path(state_dir_) / "rendezvous", ec);
}

Status RendezvousServer::Bind(zmq::context_t& ctx) {
  const std::string path = state_dir_ + "/rendezvous.sock";
  // sun_path holds 108 bytes on Linux, 104 on macOS; libzmq would fail with a less helpful
  // message.
  constexpr size_t kMaxPath = sizeof(sockaddr_un::sun_path) - 1;
  if (path.size() > kMaxPath) {
    return InvalidError("rendezvous socket " + path + ": path longer than " +
                        std::to_string(kMaxPath) + " bytes (shorten --state-dir)");
  }
  try {
    zmq::socket_t s(ctx, zmq::socket_type::router);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(kMaxMessageBytes));
    s.set(zmq::sockopt::router_mandatory, 0);  // a rank that went away: its reply is dropped
    s.bind(endpoint_);
    socket_ = std::move(s);
  } catch (const zmq::error_t& e) {
    return IoError("rendezvous endpoint " + endpoint_ + ": " + e.what());
  }
  // Only this user's processes (the ranks) may connect; the token is checked on top.
  if (::chmod(path.c_str(), 0600) != 0) {
    return IoError("rendezvous socket " + path + ": chmod: " + std::strerror(errno));
  }
  reply_ = [this](const std::string& peer, v1::RendezvousReply reply) {
    v1::Envelope env;
    *env.mutable_rendezvous_reply() = std::move(reply);
    const std::string bytes = EncodeEnvelope(env);
    zmq::send_result_t sent;
    try {
      sent = socket_->send(zmq::buffer(peer), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      if (sent) sent = socket_->send(zmq::buffer(bytes), zmq::send_flags::dontwait);
    } catch (const zmq::error_t& e) {
      spdlog::debug("rendezvous reply not sent: {}", e.what());
    }
  };
  spdlog::info("rendezvous endpoint {}", endpoint_);
  // Adopted ranks' endpoints: one that fails only fails its ranks (their next call says so), not
  // the agent.
  for (auto& [uid, u] : users_) {
    Status st = BindUserSocket(uid, u.gid);
    u.bound = st.ok();
    if (!st.ok()) spdlog::error("rendezvous: {}", st.message());
  }
  return Status::Ok();
}

std::string RendezvousServer::UserEndpoint(uid_t uid) const {
  return "ipc://" + state_dir_ + "/rendezvous/uid-" + std::to_string(uid) + ".sock";
}

std::string RendezvousServer::UserBindEndpoint(uid_t uid) const {
  return UserEndpoint(uid) + ".new";
}

Status RendezvousServer::BindUserSocket(uid_t uid, gid_t gid) {
  const std::string dir = state_dir_ + "/rendezvous";
  const std::string ep = UserEndpoint(uid);
  const std::string path = ep.substr(6);
  if (UserBindEndpoint(uid).size() - 6 > sizeof(sockaddr_un::sun_path) - 1) {
    return InvalidError("rendezvous socket " + path + ": path too long (shorten --state-dir)");
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  // The user searches it to reach its socket and snapshots; it may neither list nor write it.
  if (ec || ::chmod(dir.c_str(), 0711) != 0) {
    return IoError("rendezvous directory " + dir + ": " +
                   (ec ? ec.message() : std::string(std::strerror(errno))));
  }
  // Bound under another name, given to the user, then renamed into place: bind makes the socket
  // as this (the agent's) user with the umask, which the user may not connect to, and a rank
  // reconnecting meanwhile (an agent restarted under running ranks) would fail at once (EACCES).
  // Until the rename, its connect finds the file a killed agent left: refused, retried by zmq.
  const std::string bind_ep = UserBindEndpoint(uid);
  const std::string bind_path = bind_ep.substr(6);
  try {
    socket_->bind(bind_ep);  // replaces a file left there
  } catch (const zmq::error_t& e) {
    return IoError("rendezvous endpoint " + bind_ep + ": " + e.what());
  }
  if (::chown(bind_path.c_str(), uid, gid) != 0 || ::chmod(bind_path.c_str(), 0600) != 0 ||
      ::rename(bind_path.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    try {
      socket_->unbind(bind_ep);
    } catch (const zmq::error_t&) {
    }
    fs::remove(bind_path, ec);
    return IoError("rendezvous socket " + path + ": giving it to uid " + std::to_string(uid) +
                   ": " + why);
  }
  spdlog::info("rendezvous endpoint {} (uid {})", ep, uid);
  return Status::Ok();
}

std::string RendezvousServer::BindUser(const RendezvousUser& user) {
  UserSocket& u = users_[user.uid];
  u.gid = user.gid;
  if (!u.bound && socket_) {
    if (Status st = BindUserSocket(user.uid, user.gid); !st.ok()) {
      spdlog::error("rendezvous: {}", st.message());
      return endpoint_;
    }
    u.bound = true;
  }
  return UserEndpoint(user.uid);
}

void RendezvousServer::UnbindUnusedUsers() {
  for (auto it = users_.begin(); it != users_.end();) {
    const bool used = std::any_of(attempts_.begin(), attempts_.end(), [&](const auto& kv) {
      return kv.second.user && kv.second.user->uid == it->first;
    });
    if (used) {
      ++it;
      continue;
    }
    if (it->second.bound) {
      try {
        socket_->unbind(UserBindEndpoint(it->first));
      } catch (const zmq::error_t& e) {
        spdlog::debug("rendezvous: unbind {}: {}", UserBindEndpoint(it->first), e.what());
      }
    }
    std::error_code ec;
    fs::remove(UserEndpoint(it->first).substr(6), ec);
    it = users_.erase(it);
  }
}

std::map<std::string, std::string> RendezvousServer::AddAttempt(
    const std::string& job, uint32_t attempt, const std::vector<uint32_t>& ranks,
    std::optional<RendezvousUser> user) {
  Attempt& a = attempts_[{job, attempt}];
  if (a.token.empty()) a.token = NewToken();
  a.ranks.insert(ranks.begin(), ranks.end());
  if (user) {
    a.user = user;
    return {{"TRAINLET_RENDEZVOUS_ENDPOINT", BindUser(*user)},
            {"TRAINLET_RENDEZVOUS_TOKEN", a.token}};
  }
  return {{"TRAINLET_RENDEZVOUS_ENDPOINT", endpoint_}, {"TRAINLET_RENDEZVOUS_TOKEN", a.token}};
}

void RendezvousServer::RestoreAttempt(const std::string& job, uint32_t attempt,
                                      const std::vector<uint32_t>& ranks, const std::string& token,
                                      std::optional<RendezvousUser> user) {
  if (token.empty()) return;
  if (auto known = attempts_.find({job, attempt}); known != attempts_.end()) {
    // Another adopted step of the attempt: its ranks join (a repeated plan's, started later).
    Attempt& a = known->second;
    if (!a.restored || a.token != token) return;
    a.ranks.insert(ranks.begin(), ranks.end());
    if (a.user || !user) return;
  }
  Attempt& a = attempts_[{job, attempt}];
  a.token = token;
  a.ranks.insert(ranks.begin(), ranks.end());
  a.restored = true;
  a.user = user;
  if (user) BindUser(*user);  // before Bind: Bind binds it
}

std::string RendezvousServer::AttemptDir(const Key& key) const {
  return state_dir_ + "/rendezvous/" + key.first + "/attempt-" + std::to_string(key.second);
}

void RendezvousServer::EndAttempt(const std::string& job, uint32_t attempt,
                                  const std::string& why) {
  for (auto it = attempts_.lower_bound({job, 0});
       it != attempts_.end() && it->first.first == job;) {
    if (attempt != 0 && it->first.second != attempt) {
      ++it;
      continue;
    }
    Abort(it->second, why);
    std::error_code ec;
    fs::remove_all(AttemptDir(it->first), ec);
    it = attempts_.erase(it);
  }
  std::error_code ec;
  fs::remove(fs::path(state_dir_) / "rendezvous" / job, ec);  // only when empty
  UnbindUnusedUsers();
}

void RendezvousServer::OnRankExited(const std::string& job, uint32_t attempt, uint32_t rank,
                                    const std::string& how, v1::WorkerEvent* exit_event) {
  auto it = attempts_.find({job, attempt});
  if (it == attempts_.end() || !it->second.ranks.count(rank)) return;
  it->second.exited[rank] = how;
  if (auto ab = it->second.mpi_aborts.find(rank);
      ab != it->second.mpi_aborts.end() && exit_event != nullptr) {
    exit_event->set_mpi_abort(true);
    exit_event->set_mpi_abort_errorcode(ab->second.first);
    exit_event->set_mpi_abort_message(ab->second.second);
  }
  MaybeContribute(it->first, it->second);
}

void RendezvousServer::Reply(const std::string& peer, uint64_t id, v1::RendezvousReply::Code code,
                             std::string message) {
  v1::RendezvousReply r;
  r.set_id(id);
  r.set_code(code);
  r.set_message(std::move(message));
  if (reply_) reply_(peer, std::move(r));
}

void RendezvousServer::Abort(Attempt& a, const std::string& why) {
  if (a.aborted.empty()) a.aborted = why.empty() ? "the attempt's rendezvous was aborted" : why;
  for (const auto& [rank, w] : a.waiting)
    Reply(w.peer, w.id, v1::RendezvousReply::CODE_ABORTED, a.aborted);
  a.waiting.clear();
  for (const auto& g : a.gets) Reply(g.peer, g.id, v1::RendezvousReply::CODE_ABORTED, a.aborted);
  a.gets.clear();
  a.merged.clear();
}

void RendezvousServer::Handle(const std::string& peer, const v1::RendezvousRequest& req,
                              Clock::time_point now) {
  auto it = attempts_.find({req.job(), req.attempt()});
  if (it == attempts_.end() || it->second.token != req.token() ||
      !it->second.ranks.count(req.rank())) {
    // One reason for all three, so a caller cannot probe which jobs or ranks run here.
    Reply(peer, req.id(), v1::RendezvousReply::CODE_DENIED,
          "node " + node_ + " runs no rank " + std::to_string(req.rank()) + " of " + req.job() +
              " attempt " + std::to_string(req.attempt()) + " with this token");
    return;
  }
  Attempt& a = it->second;
  if (req.op() == v1::RendezvousRequest::OP_ABORT) {
    HandleAbort(a, peer, req);
    return;
  }
  if (!a.aborted.empty()) {
    Reply(peer, req.id(), v1::RendezvousReply::CODE_ABORTED, a.aborted);
    return;
  }
  switch (req.op()) {
    case v1::RendezvousRequest::OP_FENCE:
      HandleFence(it->first, a, peer, req);
      break;
    case v1::RendezvousRequest::OP_GET:
      HandleGet(a, peer, req, now);
      break;
    case v1::RendezvousRequest::OP_PUBLISH:
      HandlePublish(it->first, peer, req);
      break;
    default:
      Reply(peer, req.id(), v1::RendezvousReply::CODE_INVALID,
            "unknown op " + std::to_string(req.op()));
  }
}

void RendezvousServer::HandleFence(const Key& key, Attempt& a, const std::string& peer,
                                   const v1::RendezvousRequest& req) {
  if (std::string why = PutsOverCap(req); !why.empty()) {
    Reply(peer, req.id(), v1::RendezvousReply::CODE_INVALID, why);
    return;
  }
  if (a.restored && req.epoch() > 0) {
    // Adopted: the ranks' earlier fences ran under the previous agent. They continue from here.
    a.restored = false;
    a.completed = req.epoch() - 1;
    for (const uint32_t r : a.ranks) a.joined[r] = a.completed;
  }
  uint64_t& joined = a.joined[req.rank()];
  if (req.epoch() == joined &&
      (req.epoch() == a.open || (req.epoch() == a.completed && !a.snapshot_path.empty()))) {
    HandleRejoin(a, peer, req);
    return;
  }
  if (req.epoch() != joined + 1 || req.epoch() != a.completed + 1) {
    Reply(peer, req.id(), v1::RendezvousReply::CODE_INVALID,
          "fence " + std::to_string(req.epoch()) + ": rank " + std::to_string(req.rank()) +
              " last joined fence " + std::to_string(joined) + " and fence " +
              std::to_string(a.completed) + " is the last completed");
    return;
  }
  for (const auto& kv : req.puts()) {
    auto [slot, fresh] = a.merged.try_emplace(kv.key(), req.rank(), kv.value());
    if (!fresh && slot->second.first <= req.rank()) slot->second = {req.rank(), kv.value()};
  }
  joined = req.epoch();
  a.open = req.epoch();
  a.waiting[req.rank()] = {peer, req.id()};
  a.join_puts[req.rank()] = PutsDigest(req);
  MaybeContribute(key, a);
}

void RendezvousServer::HandlePublish(const Key& key, const std::string& peer,
                                     const v1::RendezvousRequest& req) {
  if (std::string why = PutsOverCap(req); !why.empty() || req.puts().empty()) {
    Reply(peer, req.id(), v1::RendezvousReply::CODE_INVALID,
          why.empty() ? "publish: nothing to publish" : why);
    return;
  }
  v1::Envelope env;
  v1::RendezvousPublish* p = env.mutable_rendezvous_publish();
  p->set_job(key.first);
  p->set_attempt(key.second);
  p->set_node(node_);
  *p->mutable_pairs() = req.puts();
  to_coordinator_(std::move(env));
  Reply(peer, req.id(), v1::RendezvousReply::CODE_OK, "");
}

void RendezvousServer::OnCoordinatorMessage(const v1::Envelope& env) {
  if (env.has_fence_result()) OnFenceResult(env.fence_result());
  if (env.has_rendezvous_publish()) OnPublish(env.rendezvous_publish());
}

void RendezvousServer::OnPublish(const v1::RendezvousPublish& publish) {
  auto it = attempts_.find({publish.job(), publish.attempt()});
  if (it == attempts_.end()) return;
  for (const auto& kv : publish.pairs()) {
    if (kv.value().empty()) {
      it->second.published.erase(kv.key());
    } else {
      it->second.published[kv.key()] = kv.value();
    }
  }
  AnswerGets(it->second);
}

void RendezvousServer::HandleAbort(Attempt& a, const std::string& peer,
                                   const v1::RendezvousRequest& req) {
  const std::string message = rendezvous::CleanMpiAbortMessage(req.abort_message());
  a.mpi_aborts[req.rank()] = {req.abort_status(), message};
  spdlog::info("rendezvous: {}",
               rendezvous::MpiAbortCause(req.rank(), node_, req.abort_status(), message));
  Abort(a, rendezvous::MpiAbortCause(req.rank(), node_, req.abort_status(), message));
  Reply(peer, req.id(), v1::RendezvousReply::CODE_OK, "");
}

void RendezvousServer::ReplyRelease(const std::string& peer, uint64_t id,
                                    const std::string& snapshot_path, uint64_t epoch) {
  v1::RendezvousReply r;
  r.set_id(id);
  r.set_snapshot_path(snapshot_path);
  r.set_epoch(epoch);
  if (reply_) reply_(peer, std::move(r));
}

void RendezvousServer::HandleRejoin(Attempt& a, const std::string& peer,
                                    const v1::RendezvousRequest& req) {
  const std::string fence =
      "fence " + std::to_string(req.epoch()) + ": rank " + std::to_string(req.rank());
  if (a.join_puts[req.rank()] != PutsDigest(req)) {
    Reply(peer, req.id(), v1::RendezvousReply::CODE_INVALID,
          fence +
              " already joined it from another process with other puts; two processes may "
              "not act as one rank");
    return;
  }
  if (req.epoch() != a.open) {
    // The last completed fence: its release was lost to the rank (its client reconnected across
    // an agent restart and sent the fence again). The same release again; the snapshot stays
    // until the next fence completes.
    ReplyRelease(peer, req.id(), a.snapshot_path, a.completed);
    return;
  }
  auto w = a.waiting.find(req.rank());
  if (w != a.waiting.end() && w->second.peer != peer) {
    Reply(w->second.peer, w->second.id, v1::RendezvousReply::CODE_INVALID,
          fence + " joined it again from another process; this request is superseded");
  }
  a.waiting[req.rank()] = {peer, req.id()};
}

void RendezvousServer::MaybeContribute(const Key& key, Attempt& a) {
  if (a.open == 0 || a.contributed || !a.aborted.empty()) return;
  size_t joined = 0;
  for (uint32_t r : a.ranks) {
    const auto j = a.joined.find(r);
    if (j != a.joined.end() && j->second == a.open) {
      ++joined;
      continue;
    }
    if (auto ex = a.exited.find(r); ex != a.exited.end()) {
      Abort(a, FenceAbortMessage(r, node_, ex->second, a.open));
      return;
    }
  }
  if (joined < a.ranks.size()) return;
  v1::Envelope env;
  auto* c = env.mutable_fence_contribute();
  c->set_job(key.first);
  c->set_attempt(key.second);
  c->set_epoch(a.open);
  c->set_node(node_);
  c->set_ranks(static_cast<uint32_t>(joined));
  for (auto& [k, rv] : a.merged) {
    auto* kv = c->add_puts();
    kv->set_key(k);
    kv->set_value(std::move(rv.second));
  }
  a.merged.clear();
  if (c->ByteSizeLong() + kContributionSlack > kMaxMessageBytes) {
    Abort(a, "fence " + std::to_string(a.open) + ": the puts of node " + node_ + " take " +
                 std::to_string(c->ByteSizeLong()) + " bytes, more than a message may carry");
    return;
  }
  a.contributed = true;
  a.sent = *c;
  ++contributions_sent_;
  to_coordinator_(std::move(env));
}

void RendezvousServer::Resync() {
  for (const auto& [key, a] : attempts_) {
    const bool pending = a.open != 0 && a.contributed;
    if (!a.aborted.empty() || (a.completed == 0 && !pending)) continue;
    v1::Envelope env;
    auto* c = env.mutable_fence_contribute();
    if (pending) *c = a.sent;
    c->set_job(key.first);
    c->set_attempt(key.second);
    c->set_node(node_);
    c->set_resync(true);
    c->set_released(a.completed);
    for (const auto& [k, v] : a.published) {
      auto* kv = c->add_released_pairs();
      kv->set_key(k);
      kv->set_value(v);
    }
    if (c->ByteSizeLong() + kContributionSlack > kMaxMessageBytes) {
      // Only near the cap: the coordinator then adopts the epoch without the pairs, and gets of
      // older keys are answered from each node's own snapshot only.
      spdlog::warn(
          "rendezvous: the resync of {} attempt {} is over the message cap; sent without "
          "fence {}'s pairs",
          key.first, key.second, a.completed);
      c->clear_released_pairs();
    }
    to_coordinator_(std::move(env));
  }
}

void RendezvousServer::HandleGet(Attempt& a, const std::string& peer,
                                 const v1::RendezvousRequest& req, Clock::time_point now) {
  if (req.key().empty()) {
    Reply(peer, req.id(), v1::RendezvousReply::CODE_INVALID, "get: empty key");
    return;
  }
  if (req.key().size() > kMaxKeyBytes) {
    Reply(peer, req.id(), v1::RendezvousReply::CODE_INVALID,
          "get: key of " + std::to_string(req.key().size()) + " bytes, over the " +
              std::to_string(kMaxKeyBytes) + "-byte cap");
    return;
  }
  if (auto it = a.published.find(req.key()); it != a.published.end()) {
    v1::RendezvousReply r;
    r.set_id(req.id());
    r.set_value(it->second);
    if (reply_) reply_(peer, std::move(r));
    return;
  }
  const auto parked = std::count_if(a.gets.begin(), a.gets.end(),
                                    [&](const PendingGet& g) { return g.rank == req.rank(); });
  if (static_cast<size_t>(parked) >= kMaxParkedGetsPerRank) {
    Reply(peer, req.id(), v1::RendezvousReply::CODE_INVALID,
          "get " + req.key() + ": rank " + std::to_string(req.rank()) + " already has " +
              std::to_string(kMaxParkedGetsPerRank) + " gets waiting, the cap per rank");
    return;
  }
  PendingGet g{req.rank(), peer, req.id(), req.key(),
               req.timeout_ms() == 0 ? Clock::time_point::max()
                                     : now + std::chrono::milliseconds(req.timeout_ms())};
  a.gets.push_back(std::move(g));
}

void RendezvousServer::OnFenceResult(const v1::FenceResult& result) {
  const Key key{result.job(), result.attempt()};
  auto it = attempts_.find(key);
  if (it == attempts_.end()) return;  // ended here already
  Attempt& a = it->second;
  if (!result.ok()) {
    Abort(a, result.message());
    return;
  }
  if (result.epoch() != a.open || !a.contributed || !a.aborted.empty()) {
    spdlog::warn("rendezvous: ignoring result of fence {} of {} attempt {} (open: {})",
                 result.epoch(), key.first, key.second, a.open);
    return;
  }
  a.published.clear();
  for (const auto& kv : result.pairs()) a.published[kv.key()] = kv.value();
  const std::string dir = AttemptDir(key);
  std::error_code ec;
  if (a.snapshot_path.empty()) {  // the attempt's first release here (or since a restart)
    fs::create_directories(dir, ec);
    // Searched by ranks of another user on their way to the file, never listed by anyone else.
    for (fs::path p = dir; p.string().size() > state_dir_.size(); p = p.parent_path())
      ::chmod(p.c_str(), 0711);
  }
  const std::string path = dir + "/fence-" + std::to_string(result.epoch()) + ".snap";
  const uid_t owner = a.user ? a.user->uid : static_cast<uid_t>(-1);
  if (Status s = rendezvous::WriteSnapshotFile(path, result.epoch(), a.published, owner); !s.ok()) {
    spdlog::error("rendezvous: {}", s.message());
    Abort(a, s.message());
    return;
  }
  const std::string previous = a.snapshot_path;
  a.snapshot_path = path;
  a.completed = result.epoch();
  a.open = 0;
  a.contributed = false;
  a.sent.Clear();
  for (const auto& [rank, w] : a.waiting) ReplyRelease(w.peer, w.id, path, result.epoch());
  a.waiting.clear();
  AnswerGets(a);
  // The rest is off the fence's path, the replies on their way (docs/rendezvous.md, "One fence
  // round, hop by hop"). Every rank mapped the previous file before it could join this fence:
  // nobody needs it now. And the next fence's file is made now, empty (the write truncates it
  // and gives it to the ranks' user): making a file allocates an inode, which took 0.07 ms on
  // average and up to 5 ms on ext4 here, between the coordinator's result and the replies.
  if (!previous.empty()) fs::remove(previous, ec);
  const std::string next = dir + "/fence-" + std::to_string(result.epoch() + 1) + ".snap.tmp";
  if (const int fd = ::open(next.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600); fd >= 0)
    ::close(fd);  // else the write makes it, as before
}

void RendezvousServer::AnswerGets(Attempt& a) {
  std::erase_if(a.gets, [&](const PendingGet& g) {
    auto v = a.published.find(g.key);
    if (v == a.published.end()) return false;
    v1::RendezvousReply r;
    r.set_id(g.id);
    r.set_value(v->second);
    if (reply_) reply_(g.peer, std::move(r));
    return true;
  });
}

std::optional<std::chrono::milliseconds> RendezvousServer::Tick(Clock::time_point now) {
  std::optional<Clock::time_point> next;
  for (auto& [key, a] : attempts_) {
    std::erase_if(a.gets, [&](const PendingGet& g) {
      if (g.deadline > now) return false;
      Reply(g.peer, g.id, v1::RendezvousReply::CODE_TIMEOUT,
            "get " + g.key + ": not published within the timeout");
      return true;
    });
    for (const auto& g : a.gets) {
      if (g.deadline != Clock::time_point::max() && (!next || g.deadline < *next))
        next = g.deadline;
    }
  }
  if (!next) return std::nullopt;
  return std::chrono::ceil<std::chrono::milliseconds>(*next - now);
}

void RendezvousServer::AddPollItems(std::vector<zmq_pollitem_t>& items) {
  if (!socket_) return;
  poll_index_ = static_cast<int>(items.size());
  items.push_back({socket_->handle(), 0, ZMQ_POLLIN, 0});
}

void RendezvousServer::OnPolled(const std::vector<zmq_pollitem_t>& items, Clock::time_point now) {
  if (!socket_ || poll_index_ < 0 || poll_index_ >= static_cast<int>(items.size())) return;
  if (!(items[poll_index_].revents & ZMQ_POLLIN)) return;
  // Bounded, so 4,096 ranks arriving at once do not starve the coordinator socket.
  for (int i = 0; i < 1024; ++i) {
    zmq::message_t id, body;
    if (!socket_->recv(id, zmq::recv_flags::dontwait)) return;
    if (!id.more()) continue;
    if (!socket_->recv(body, zmq::recv_flags::dontwait)) return;
    const bool several = body.more();
    bool extra = several;
    while (extra) {  // one envelope per message: anything more is dropped with the message
      zmq::message_t rest;
      if (!socket_->recv(rest, zmq::recv_flags::dontwait)) break;
      extra = rest.more();
    }
    if (several) continue;
    v1::Envelope env;
    if (auto err = DecodeEnvelope(body.data(), body.size(), env)) {
      spdlog::debug("rendezvous: dropped a request: {}", err->detail);
      continue;
    }
    if (env.body_case() != v1::Envelope::kRendezvousRequest) continue;
    Handle(id.to_string(), env.rendezvous_request(), now);
  }
}

}  // namespace trainlet::agent
