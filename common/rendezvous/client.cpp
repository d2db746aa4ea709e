// The rendezvous C API (include/trainlet/rendezvous.h): one ZeroMQ DEALER per handle to the
// node agent's local ROUTER, protobuf Envelopes on the wire, the snapshot mapped after a fence.
//
// This file is built into libtrainlet_rendezvous.so as well as the static library, so it uses
// only the protobuf types and libzmq: nothing of trainlet_common (logging, config) comes along.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <zmq.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>

#include "common/rendezvous/snapshot_format.h"
#include "common/secret_env.h"
#include "trainlet/rendezvous.h"
#include "trainlet/v1/envelope.pb.h"

namespace v1 = trainlet::v1;
using trainlet::rendezvous::MappedSnapshot;

namespace {
// Which file an ipc endpoint is (EndpointFile).
struct EndpointId {
  uint64_t dev = 0;
  uint64_t ino = 0;
  int64_t ctime_ns = 0;
  bool operator==(const EndpointId&) const = default;
};
}  // namespace

struct trainlet_rdzv {
  // Constant after open.
  std::string endpoint;
  std::string token;
  std::string job;
  uint32_t attempt = 0;
  uint32_t rank = 0;
  // Owned by the calling thread.
  void* socket = nullptr;  // connected on first use
  // The ipc socket file the socket connected to: a restarted agent binds a new one, and a
  // request the old agent took is then sent again (see Receive).
  EndpointId endpoint_file;
  trainlet::v1::RendezvousRequest fence_request;  // the fence in flight, for a resend
  uint64_t next_id = 1;
  std::map<std::string, std::string> own;      // every put of this handle: gets see them first
  std::map<std::string, std::string> pending;  // puts since the last fence
  bool in_fence = false;
  uint64_t fence_id = 0;  // request id of the fence in flight
  uint64_t epoch = 0;     // fences completed
  bool aborted = false;
  std::string abort_message;
  MappedSnapshot snapshot;
  std::string error;
};

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kProtocolVersion = 1;  // common/envelope.h; not linked into this library
constexpr size_t kMaxReplyBytes = 8u << 20;

// One context per process: sockets are per handle, and the bench opens thousands of handles.
void* Context() {
  static void* ctx = [] {
    void* c = zmq_ctx_new();
    zmq_ctx_set(c, ZMQ_MAX_SOCKETS, 65536);
    return c;
  }();
  return ctx;
}

int Fail(trainlet_rdzv* h, int code, std::string message) {
  if (h != nullptr) h->error = std::move(message);
  return code;
}

int Ok(trainlet_rdzv* h) {
  h->error.clear();
  return TRAINLET_RDZV_OK;
}

// The identity of an ipc endpoint's socket file: device, inode and change time (a file made
// again may get the inode number just freed); all 0 when missing or not ipc.
EndpointId EndpointFile(const trainlet_rdzv* h) {
  struct stat st {};
  if (h->endpoint.rfind("ipc://", 0) != 0 || ::stat(h->endpoint.c_str() + 6, &st) != 0) return {};
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
          static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec};
}

// Whether this process may connect to the ipc socket file `path`: zmq retries a connect the
// kernel refuses (EACCES: the socket or a directory on its path is not this user's to use)
// silently and forever, so a rank would hang in its first fence. Tried once by hand instead; the
// errno of a refusal for permission, 0 otherwise (a socket nobody listens on yet, as while the
// agent restarts, is left to zmq's retries).
int IpcPermissionError(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return 0;  // zmq_connect says why
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  int err = 0;
  while (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno == EINTR) continue;
    if (errno == EACCES || errno == EPERM) err = errno;
    break;
  }
  ::close(fd);  // the agent sees a connection open and close, nothing else
  return err;
}

int Connect(trainlet_rdzv* h) {
  if (h->socket != nullptr) return TRAINLET_RDZV_OK;
  if (h->endpoint.rfind("ipc://", 0) == 0) {
    // zmq would retry a missing socket file forever; say so now instead.
    struct stat st {};
    const std::string path = h->endpoint.substr(6);
    if (::stat(path.c_str(), &st) != 0) {
      return Fail(h, TRAINLET_RDZV_IO,
                  "rendezvous endpoint " + path + ": " + std::strerror(errno) +
                      " (is the node's agent running?)");
    }
    if (const int err = IpcPermissionError(path); err != 0) {
      return Fail(h, TRAINLET_RDZV_IO,
                  "rendezvous endpoint " + path + ": " + std::strerror(err) + " for uid " +
                      std::to_string(::geteuid()) +
                      " (the agent gives ranks of another user an endpoint of their own: "
                      "is TRAINLET_RENDEZVOUS_ENDPOINT the one it gave?)");
    }
  }
  void* s = zmq_socket(Context(), ZMQ_DEALER);
  if (s == nullptr)
    return Fail(h, TRAINLET_RDZV_IO, std::string("zmq_socket: ") + zmq_strerror(zmq_errno()));
  const int linger = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
  const int64_t max = static_cast<int64_t>(kMaxReplyBytes);
  zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max, sizeof max);
  if (zmq_connect(s, h->endpoint.c_str()) != 0) {
    const std::string why = zmq_strerror(zmq_errno());
    zmq_close(s);
    return Fail(h, TRAINLET_RDZV_IO, "connect " + h->endpoint + ": " + why);
  }
  h->socket = s;
  h->endpoint_file = EndpointFile(h);
  return TRAINLET_RDZV_OK;
}

// How often a request waiting for its reply checks whether the agent was restarted.
constexpr int kAgentCheckMs = 1000;

// Whether the agent's ipc socket file is another one than the handle connected to: the agent was
// restarted (a kill -9 loses what the old one was doing). Reconnects then; false otherwise.
bool ReconnectIfAgentRestarted(trainlet_rdzv* h) {
  const EndpointId now = EndpointFile(h);
  if (now.ino == 0 || now == h->endpoint_file) return false;
  zmq_close(h->socket);
  h->socket = nullptr;
  return Connect(h) == TRAINLET_RDZV_OK;
}

v1::RendezvousRequest NewRequest(trainlet_rdzv* h, v1::RendezvousRequest::Op op) {
  v1::RendezvousRequest r;
  r.set_id(h->next_id++);
  r.set_job(h->job);
  r.set_attempt(h->attempt);
  r.set_rank(h->rank);
  r.set_token(h->token);
  r.set_op(op);
  return r;
}

int Send(trainlet_rdzv* h, v1::RendezvousRequest request) {
  if (int rc = Connect(h); rc != TRAINLET_RDZV_OK) return rc;
  v1::Envelope env;
  env.set_version(kProtocolVersion);
  env.set_type(v1::MESSAGE_TYPE_RENDEZVOUS_REQUEST);
  *env.mutable_rendezvous_request() = std::move(request);
  const std::string bytes = env.SerializeAsString();
  while (zmq_send(h->socket, bytes.data(), bytes.size(), 0) < 0) {
    if (zmq_errno() == EINTR) continue;
    return Fail(h, TRAINLET_RDZV_IO,
                std::string("send to the agent: ") + zmq_strerror(zmq_errno()));
  }
  return TRAINLET_RDZV_OK;
}

// Waits for the reply to request `id`; replies to older requests (a get that timed out) are
// dropped. timeout_ms < 0 waits forever. `resend` (the request `id`, or null): sent again when the
// agent was restarted meanwhile, since the new agent never saw it (an adopted attempt's fence
// then completes: docs/rendezvous.md, "Agent restarts").
int Receive(trainlet_rdzv* h, uint64_t id, int timeout_ms, v1::RendezvousReply* out,
            const v1::RendezvousRequest* resend = nullptr) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  while (true) {
    long wait = -1;
    if (timeout_ms >= 0) {
      wait = static_cast<long>(std::max<int64_t>(
          0,
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
    }
    const long slice =
        resend != nullptr && (wait < 0 || wait > kAgentCheckMs) ? kAgentCheckMs : wait;
    zmq_pollitem_t item = {h->socket, 0, ZMQ_POLLIN, 0};
    const int n = zmq_poll(&item, 1, slice);
    if (n < 0) {
      if (zmq_errno() == EINTR) continue;
      return Fail(h, TRAINLET_RDZV_IO, std::string("zmq_poll: ") + zmq_strerror(zmq_errno()));
    }
    if (n == 0) {
      if (resend != nullptr && ReconnectIfAgentRestarted(h)) {
        if (int rc = Send(h, *resend); rc != TRAINLET_RDZV_OK) return rc;
      }
      if (timeout_ms >= 0 && Clock::now() >= deadline)
        return Fail(h, TRAINLET_RDZV_TIMEOUT,
                    "timed out after " + std::to_string(timeout_ms) + " ms");
      continue;
    }
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, h->socket, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&msg);
      continue;
    }
    v1::Envelope env;
    const bool parsed =
        env.ParseFromArray(zmq_msg_data(&msg), static_cast<int>(zmq_msg_size(&msg)));
    const bool more = zmq_msg_more(&msg);
    zmq_msg_close(&msg);
    if (more) {  // the agent sends one frame; drain anything else
      int flag = 1;
      while (flag) {
        zmq_msg_t rest;
        zmq_msg_init(&rest);
        zmq_msg_recv(&rest, h->socket, 0);
        flag = zmq_msg_more(&rest);
        zmq_msg_close(&rest);
      }
      continue;
    }
    if (!parsed || env.version() != kProtocolVersion ||
        env.type() != v1::MESSAGE_TYPE_RENDEZVOUS_REPLY || !env.has_rendezvous_reply()) {
      continue;
    }
    if (env.rendezvous_reply().id() != id) continue;
    *out = std::move(*env.mutable_rendezvous_reply());
    return TRAINLET_RDZV_OK;
  }
}

int CodeOf(v1::RendezvousReply::Code code) {
  switch (code) {
    case v1::RendezvousReply::CODE_OK:
      return TRAINLET_RDZV_OK;
    case v1::RendezvousReply::CODE_TIMEOUT:
      return TRAINLET_RDZV_TIMEOUT;
    case v1::RendezvousReply::CODE_ABORTED:
      return TRAINLET_RDZV_ABORTED;
    case v1::RendezvousReply::CODE_DENIED:
      return TRAINLET_RDZV_DENIED;
    default:
      return TRAINLET_RDZV_INVALID;
  }
}

int FromReply(trainlet_rdzv* h, const v1::RendezvousReply& reply) {
  const int code = CodeOf(reply.code());
  if (code == TRAINLET_RDZV_ABORTED) {
    h->aborted = true;
    h->abort_message = reply.message();
  }
  return code == TRAINLET_RDZV_OK ? Ok(h) : Fail(h, code, reply.message());
}

int CopyOut(trainlet_rdzv* h, std::string_view value, void* buf, size_t cap, size_t* len) {
  if (len != nullptr) *len = value.size();
  if (value.size() > cap) {
    return Fail(h, TRAINLET_RDZV_TOO_SMALL,
                "value of " + std::to_string(value.size()) + " bytes does not fit in " +
                    std::to_string(cap));
  }
  if (!value.empty()) std::memcpy(buf, value.data(), value.size());
  return Ok(h);
}

bool ParseU32(const char* text, uint32_t* out) {
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long v = std::strtoul(text, &end, 10);
  if (errno != 0 || *end != '\0' || v > UINT32_MAX) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

}  // namespace

extern "C" {

int trainlet_rdzv_open_with(const char* endpoint, const char* token, const char* job,
                            uint32_t attempt, uint32_t rank, trainlet_rdzv** out) {
  if (out == nullptr) return TRAINLET_RDZV_INVALID;
  *out = nullptr;
  auto* h = new (std::nothrow) trainlet_rdzv;
  if (h == nullptr) return TRAINLET_RDZV_IO;
  *out = h;
  if (endpoint == nullptr || *endpoint == '\0')
    return Fail(h, TRAINLET_RDZV_INVALID, "endpoint: empty");
  if (token == nullptr || *token == '\0') return Fail(h, TRAINLET_RDZV_INVALID, "token: empty");
  if (job == nullptr || *job == '\0') return Fail(h, TRAINLET_RDZV_INVALID, "job: empty");
  h->endpoint = endpoint;
  h->token = token;
  h->job = job;
  h->attempt = attempt;
  h->rank = rank;
  return Ok(h);
}

int trainlet_rdzv_open(trainlet_rdzv** out) {
  if (out == nullptr) return TRAINLET_RDZV_INVALID;
  *out = nullptr;
  const char* names[] = {"TRAINLET_RENDEZVOUS_ENDPOINT", "TRAINLET_RENDEZVOUS_TOKEN",
                         "TRAINLET_JOB", "TRAINLET_ATTEMPT", "TRAINLET_RANK"};
  const char* values[5];
  // The token comes from its file (TRAINLET_RENDEZVOUS_TOKEN_FILE) under a current agent.
  const trainlet::SecretFromEnv token = trainlet::ReadSecretFromEnv(names[1]);
  if (!token.error.empty()) {
    auto* h = new (std::nothrow) trainlet_rdzv;
    *out = h;
    return Fail(h, TRAINLET_RDZV_INVALID, token.error);
  }
  for (int i = 0; i < 5; ++i) {
    values[i] = i == 1 ? token.value.c_str() : std::getenv(names[i]);
    if (values[i] == nullptr || *values[i] == '\0') {
      auto* h = new (std::nothrow) trainlet_rdzv;
      *out = h;
      return Fail(h, TRAINLET_RDZV_INVALID,
                  std::string(names[i]) + (i == 1 ? " (or TRAINLET_RENDEZVOUS_TOKEN_FILE)" : "") +
                      ": not set (is this process a rank started by trainlet?)");
    }
  }
  uint32_t attempt = 0, rank = 0;
  if (!ParseU32(values[3], &attempt) || !ParseU32(values[4], &rank)) {
    auto* h = new (std::nothrow) trainlet_rdzv;
    *out = h;
    return Fail(h, TRAINLET_RDZV_INVALID, "TRAINLET_ATTEMPT/TRAINLET_RANK: not a number");
  }
  return trainlet_rdzv_open_with(values[0], values[1], values[2], attempt, rank, out);
}

int trainlet_rdzv_connect(trainlet_rdzv* h) {
  if (h == nullptr) return TRAINLET_RDZV_INVALID;
  if (int rc = Connect(h); rc != TRAINLET_RDZV_OK) return rc;
  return Ok(h);
}

int trainlet_rdzv_put(trainlet_rdzv* h, const char* key, const void* value, size_t len) {
  if (h == nullptr) return TRAINLET_RDZV_INVALID;
  if (key == nullptr || *key == '\0') return Fail(h, TRAINLET_RDZV_INVALID, "put: empty key");
  const size_t key_len = std::strlen(key);
  if (key_len > TRAINLET_RDZV_MAX_KEY)
    return Fail(h, TRAINLET_RDZV_INVALID, "put: key longer than 4096 bytes");
  if (len > TRAINLET_RDZV_MAX_VALUE)
    return Fail(h, TRAINLET_RDZV_INVALID, "put " + std::string(key) + ": value larger than 1 MiB");
  if (value == nullptr && len != 0)
    return Fail(h, TRAINLET_RDZV_INVALID, "put " + std::string(key) + ": null value");
  if (h->in_fence)
    return Fail(h, TRAINLET_RDZV_INVALID, "put " + std::string(key) + ": a fence is in flight");
  std::string v(static_cast<const char*>(value), len);
  h->own[key] = v;
  h->pending[key] = std::move(v);
  return Ok(h);
}

int trainlet_rdzv_fence_start(trainlet_rdzv* h) {
  if (h == nullptr) return TRAINLET_RDZV_INVALID;
  if (h->aborted) return Fail(h, TRAINLET_RDZV_ABORTED, h->abort_message);
  if (h->in_fence)
    return Fail(h, TRAINLET_RDZV_INVALID, "fence_start: a fence is already in flight");
  auto req = NewRequest(h, v1::RendezvousRequest::OP_FENCE);
  req.set_epoch(h->epoch + 1);
  for (const auto& [k, v] : h->pending) {
    auto* kv = req.add_puts();
    kv->set_key(k);
    kv->set_value(v);
  }
  const uint64_t id = req.id();
  h->fence_request = req;
  if (int rc = Send(h, std::move(req)); rc != TRAINLET_RDZV_OK) return rc;
  h->pending.clear();
  h->in_fence = true;
  h->fence_id = id;
  return Ok(h);
}

int trainlet_rdzv_fence_finish(trainlet_rdzv* h, int timeout_ms) {
  if (h == nullptr) return TRAINLET_RDZV_INVALID;
  if (!h->in_fence) {
    if (h->aborted) return Fail(h, TRAINLET_RDZV_ABORTED, h->abort_message);
    return Fail(h, TRAINLET_RDZV_INVALID, "fence_finish: no fence in flight");
  }
  v1::RendezvousReply reply;
  if (int rc = Receive(h, h->fence_id, timeout_ms, &reply, &h->fence_request);
      rc != TRAINLET_RDZV_OK)
    return rc;
  h->in_fence = false;
  h->fence_request.Clear();
  if (reply.code() != v1::RendezvousReply::CODE_OK) return FromReply(h, reply);
  auto snap = MappedSnapshot::Open(reply.snapshot_path());
  if (!snap.ok()) return Fail(h, TRAINLET_RDZV_IO, snap.status().message());
  h->snapshot = std::move(snap).value();
  h->epoch = reply.epoch();
  return Ok(h);
}

int trainlet_rdzv_fd(trainlet_rdzv* h, int* fd) {
  if (h == nullptr || fd == nullptr) return TRAINLET_RDZV_INVALID;
  if (h->socket == nullptr) return Fail(h, TRAINLET_RDZV_IO, "fd: the handle is not connected");
  size_t size = sizeof *fd;
  if (zmq_getsockopt(h->socket, ZMQ_FD, fd, &size) != 0)
    return Fail(h, TRAINLET_RDZV_IO, std::string("zmq ZMQ_FD: ") + zmq_strerror(zmq_errno()));
  return Ok(h);
}

int trainlet_rdzv_fence(trainlet_rdzv* h, int timeout_ms) {
  if (int rc = trainlet_rdzv_fence_start(h); rc != TRAINLET_RDZV_OK) return rc;
  return trainlet_rdzv_fence_finish(h, timeout_ms);
}

int trainlet_rdzv_get(trainlet_rdzv* h, const char* key, void* buf, size_t cap, size_t* len,
                      int timeout_ms) {
  if (h == nullptr) return TRAINLET_RDZV_INVALID;
  if (key == nullptr || *key == '\0') return Fail(h, TRAINLET_RDZV_INVALID, "get: empty key");
  if (buf == nullptr && cap != 0) return Fail(h, TRAINLET_RDZV_INVALID, "get: null buffer");
  if (auto it = h->own.find(key); it != h->own.end()) return CopyOut(h, it->second, buf, cap, len);
  if (h->snapshot.mapped()) {
    if (auto v = h->snapshot.view().Find(key)) return CopyOut(h, *v, buf, cap, len);
  }
  if (h->aborted) return Fail(h, TRAINLET_RDZV_ABORTED, h->abort_message);
  if (timeout_ms == 0)
    return Fail(h, TRAINLET_RDZV_NOT_FOUND, std::string("get ") + key + ": not published");
  if (h->in_fence)
    return Fail(h, TRAINLET_RDZV_INVALID, std::string("get ") + key + ": a fence is in flight");
  auto req = NewRequest(h, v1::RendezvousRequest::OP_GET);
  req.set_key(key);
  req.set_timeout_ms(timeout_ms < 0 ? 0 : static_cast<uint32_t>(timeout_ms));
  const uint64_t id = req.id();
  const v1::RendezvousRequest resend = req;
  if (int rc = Send(h, std::move(req)); rc != TRAINLET_RDZV_OK) return rc;
  // The agent enforces the timeout; waiting a little longer here keeps its answer, which says why.
  v1::RendezvousReply reply;
  if (int rc = Receive(h, id, timeout_ms < 0 ? -1 : timeout_ms + 2000, &reply, &resend);
      rc != TRAINLET_RDZV_OK) {
    return rc;
  }
  if (reply.code() != v1::RendezvousReply::CODE_OK) return FromReply(h, reply);
  return CopyOut(h, reply.value(), buf, cap, len);
}

int trainlet_rdzv_resume(trainlet_rdzv* h, uint64_t fences_done) {
  if (h == nullptr) return TRAINLET_RDZV_INVALID;
  if (h->epoch != 0 || h->in_fence)
    return Fail(h, TRAINLET_RDZV_INVALID, "resume: the handle has fenced already");
  h->epoch = fences_done;
  return Ok(h);
}

int trainlet_rdzv_abort(trainlet_rdzv* h, int status, const char* message, int timeout_ms) {
  if (h == nullptr) return TRAINLET_RDZV_INVALID;
  if (h->in_fence) return Fail(h, TRAINLET_RDZV_INVALID, "abort: a fence is in flight");
  auto req = NewRequest(h, v1::RendezvousRequest::OP_ABORT);
  req.set_abort_status(status);
  req.set_abort_message(message == nullptr ? "" : message);
  const uint64_t id = req.id();
  if (int rc = Send(h, std::move(req)); rc != TRAINLET_RDZV_OK) return rc;
  v1::RendezvousReply reply;
  if (int rc = Receive(h, id, timeout_ms, &reply); rc != TRAINLET_RDZV_OK) return rc;
  return FromReply(h, reply);
}

int trainlet_rdzv_publish(trainlet_rdzv* h, const char* key, const void* value, size_t len,
                          int timeout_ms) {
  if (h == nullptr) return TRAINLET_RDZV_INVALID;
  if (key == nullptr || *key == '\0') return Fail(h, TRAINLET_RDZV_INVALID, "publish: empty key");
  if (std::strlen(key) > TRAINLET_RDZV_MAX_KEY || len > TRAINLET_RDZV_MAX_VALUE)
    return Fail(h, TRAINLET_RDZV_INVALID,
                "publish " + std::string(key) + ": key or value too long");
  if (value == nullptr && len != 0)
    return Fail(h, TRAINLET_RDZV_INVALID, "publish " + std::string(key) + ": null value");
  if (h->in_fence) return Fail(h, TRAINLET_RDZV_INVALID, "publish: a fence is in flight");
  auto req = NewRequest(h, v1::RendezvousRequest::OP_PUBLISH);
  auto* kv = req.add_puts();
  kv->set_key(key);
  kv->set_value(len == 0 ? std::string() : std::string(static_cast<const char*>(value), len));
  const uint64_t id = req.id();
  if (int rc = Send(h, std::move(req)); rc != TRAINLET_RDZV_OK) return rc;
  v1::RendezvousReply reply;
  if (int rc = Receive(h, id, timeout_ms, &reply); rc != TRAINLET_RDZV_OK) return rc;
  return FromReply(h, reply);
}

uint64_t trainlet_rdzv_epoch(const trainlet_rdzv* h) { return h == nullptr ? 0 : h->epoch; }

int trainlet_rdzv_count(trainlet_rdzv* h, size_t* count) {
  if (h == nullptr || count == nullptr) return TRAINLET_RDZV_INVALID;
  if (!h->snapshot.mapped()) return Fail(h, TRAINLET_RDZV_INVALID, "count: no fence has completed");
  *count = h->snapshot.view().size();
  return Ok(h);
}

int trainlet_rdzv_entry(trainlet_rdzv* h, size_t i, const char** key, size_t* key_len,
                        const void** value, size_t* value_len) {
  if (h == nullptr) return TRAINLET_RDZV_INVALID;
  if (!h->snapshot.mapped() || i >= h->snapshot.view().size()) {
    return Fail(h, TRAINLET_RDZV_INVALID, "entry " + std::to_string(i) + ": out of range");
  }
  const auto& view = h->snapshot.view();
  if (key != nullptr) *key = view.key(i).data();
  if (key_len != nullptr) *key_len = view.key(i).size();
  if (value != nullptr) *value = view.value(i).data();
  if (value_len != nullptr) *value_len = view.value(i).size();
  return Ok(h);
}

const char* trainlet_rdzv_last_error(const trainlet_rdzv* h) {
  if (h == nullptr) return "no handle (out of memory, or a null pointer was passed)";
  return h->error.c_str();
}

const char* trainlet_rdzv_code_name(int code) {
  switch (code) {
    case TRAINLET_RDZV_OK:
      return "OK";
    case TRAINLET_RDZV_TIMEOUT:
      return "TIMEOUT";
    case TRAINLET_RDZV_ABORTED:
      return "ABORTED";
    case TRAINLET_RDZV_DENIED:
      return "DENIED";
    case TRAINLET_RDZV_INVALID:
      return "INVALID";
    case TRAINLET_RDZV_NOT_FOUND:
      return "NOT_FOUND";
    case TRAINLET_RDZV_TOO_SMALL:
      return "TOO_SMALL";
    case TRAINLET_RDZV_IO:
      return "IO";
    default:
      return "UNKNOWN";
  }
}

void trainlet_rdzv_close(trainlet_rdzv* h) {
  if (h == nullptr) return;
  if (h->socket != nullptr) zmq_close(h->socket);
  delete h;
}

}  // extern "C"
