#include "agent/pmix/pmix_host.h"

#include <event2/event.h>
#include <pmix.h>
#include <pmix_server.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>

#include "agent/pmix/agent_topology.h"
#include "common/pmix/fence_data.h"
#include "common/rendezvous/fence_message.h"
#include "trainlet/rendezvous.h"

// libpmix's own progress threads (src/runtime/pmix_progress_threads.h, installed with libpmix
// 4.2 but outside its public headers, which would bring its internal config along): a null name
// is the PMIx-wide thread, on whose libevent base the server's upcalls run. init takes a
// reference to it and stop gives one back (the last one stops the thread).
extern "C" {
struct event_base* pmix_progress_thread_init(const char* name);
int pmix_progress_thread_stop(const char* name);
}

namespace trainlet::pmix {
namespace {

// The exit status after a rank's PMIx_Abort with status 0 (trainlet-step stops the ranks).
constexpr int kAbortedWithoutStatus = 3;

// libpmix keeps its server state process-wide and its upcalls carry no host pointer, so the host
// is one object per process too. The queue is shared with libpmix's progress thread; the
// rendezvous handles belong to whichever thread holds handles_mu: libpmix's progress thread (a
// fence: FenceUpcall, then its events) or the Run thread (opening and connecting them, and a
// fence that came meanwhile).
struct Host {
  PmixHostConfig config;
  std::mutex mu;
  std::condition_variable wake;
  std::deque<std::function<void()>> work;  // guarded by mu
  bool stop = false;                       // guarded by mu: SIGTERM or SIGINT came
  std::mutex handles_mu;
  // Guarded by handles_mu.
  std::vector<trainlet_rdzv*> handles;  // one per local rank, opened and connected in RunPmixHost
  uint64_t fences = 0;
  std::string rendezvous_error;  // not empty: the handles could not be opened
  // The fence libpmix's progress thread waits for (FenceUpcall .. CheckFence), if any: one event
  // per handle on libpmix's base, on the handle's descriptor (trainlet_rdzv_fd), so that the
  // agent's reply wakes that thread itself, which answers libpmix there. Guarded by handles_mu.
  struct Watch {
    uint64_t n = 0;
    pmix_modex_cbfunc_t cbfunc = nullptr;
    void* cbdata = nullptr;
    std::vector<bool> done;      // per handle: its reply came
    std::vector<int> fds;        // per handle: the descriptor its event watches
    std::vector<event*> events;  // per handle; null once done
  };
  std::optional<Watch> watch;
  // Constant after StartPmixHost: libpmix's progress thread's event base (a reference we hold).
  event_base* evbase = nullptr;
  // Constant after StartPmixHost: the agent's topology, which libpmix uses until it exits.
  std::optional<AgentTopology> topology;
};
Host* g_host = nullptr;

void Queue(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(g_host->mu);
    g_host->work.push_back(std::move(fn));
  }
  g_host->wake.notify_one();
}

void Say(const std::string& what) { std::fprintf(stderr, "trainlet-pmix: %s\n", what.c_str()); }

// A libpmix call answered through an op callback, waited for on this thread.
struct OpWait {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  pmix_status_t status = PMIX_SUCCESS;
  static void Done(pmix_status_t status, void* cbdata) {
    auto* w = static_cast<OpWait*>(cbdata);
    std::lock_guard<std::mutex> lock(w->mu);
    w->status = status;
    w->done = true;
    w->cv.notify_all();
  }
  pmix_status_t Wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    return status;
  }
};

std::string StatusText(pmix_status_t rc) { return PMIx_Error_string(rc); }

bool OpenHandles(Host& h) {
  if (!h.handles.empty() || !h.rendezvous_error.empty()) return h.rendezvous_error.empty();
  for (const uint32_t rank : h.config.map.nodes[h.config.node_rank].ranks) {
    trainlet_rdzv* handle = nullptr;
    const int rc = trainlet_rdzv_open_with(h.config.rendezvous_endpoint.c_str(),
                                           h.config.rendezvous_token.c_str(), h.config.job.c_str(),
                                           h.config.attempt, rank, &handle);
    if (rc != TRAINLET_RDZV_OK) {
      h.rendezvous_error = "rendezvous open as rank " + std::to_string(rank) + ": " +
                           trainlet_rdzv_last_error(handle);
      if (handle != nullptr) trainlet_rdzv_close(handle);
      return false;
    }
    h.handles.push_back(handle);
  }
  return true;
}

// How long one handle's fence_finish waits before the next handle's turn.
constexpr int kFenceSliceMs = 200;

// Joins fence number ++h.fences with this node's data (fence_data.h) on every handle: the requests
// are on their way to the agent when this returns. Never blocks (a DEALER's send queues).
// Call with handles_mu held.
Result<uint64_t> StartFence(Host& h, const std::string& data) {
  if (!OpenHandles(h)) return UnavailableError(h.rendezvous_error);
  const uint64_t n = ++h.fences;
  for (const auto& [key, value] : FenceDataPuts(n, h.config.node_rank, data)) {
    if (trainlet_rdzv_put(h.handles[0], key.c_str(), value.data(), value.size()) !=
        TRAINLET_RDZV_OK)
      return InvalidError(std::string("rendezvous put: ") + trainlet_rdzv_last_error(h.handles[0]));
  }
  for (trainlet_rdzv* handle : h.handles) {
    if (trainlet_rdzv_fence_start(handle) != TRAINLET_RDZV_OK)
      return UnavailableError(std::string("fence: ") + trainlet_rdzv_last_error(handle));
  }
  return n;
}

std::string FenceResultData(Host& h, uint64_t n);

// Waits for fence `n`, started by StartFence, on every handle: every node's data out
// (fence_data.h). Call with handles_mu held.
Result<std::string> FinishFence(Host& h, uint64_t n) {
  // Every handle in turn, a slice each, not one to the end: after an agent restart each handle
  // resends its own lost request from within its finish (client.cpp), and the new agent's fence
  // completes only once all of them have.
  std::vector<bool> done(h.handles.size(), false);
  for (size_t left = done.size(); left > 0;) {
    for (size_t i = 0; i < done.size(); ++i) {
      if (done[i]) continue;
      const int rc = trainlet_rdzv_fence_finish(h.handles[i], kFenceSliceMs);
      if (rc == TRAINLET_RDZV_TIMEOUT) continue;
      if (rc != TRAINLET_RDZV_OK)
        return UnavailableError(std::string("fence: ") + trainlet_rdzv_last_error(h.handles[i]));
      done[i] = true;
      --left;
    }
  }
  return FenceResultData(h, n);
}

// Every node's data of fence `n` from the snapshot handle 0 mapped (fence_data.h).
std::string FenceResultData(Host& h, uint64_t n) {
  std::vector<std::pair<std::string_view, std::string_view>> pairs;
  size_t count = 0;
  trainlet_rdzv_count(h.handles[0], &count);
  for (size_t i = 0; i < count; ++i) {
    const char* key = nullptr;
    const void* value = nullptr;
    size_t key_len = 0, value_len = 0;
    if (trainlet_rdzv_entry(h.handles[0], i, &key, &key_len, &value, &value_len) ==
        TRAINLET_RDZV_OK)
      pairs.emplace_back(std::string_view(key, key_len),
                         std::string_view(static_cast<const char*>(value), value_len));
  }
  return JoinFenceData(n, pairs);
}

void ReleaseBuffer(void* cbdata) { std::free(cbdata); }

// Hands libpmix fence `n`'s outcome: every node's data, or an error (said on stderr). Any thread.
void AnswerFence(uint64_t n, Result<std::string> all, pmix_modex_cbfunc_t cbfunc, void* cbdata) {
  if (!all.ok()) {
    Say("fence " + std::to_string(n) + " failed: " + all.status().message());
    cbfunc(PMIX_ERROR, nullptr, 0, cbdata, nullptr, nullptr);
    return;
  }
  char* out = static_cast<char*>(std::malloc(std::max<size_t>(1, all->size())));
  std::memcpy(out, all->data(), all->size());
  cbfunc(PMIX_SUCCESS, out, all->size(), cbdata, ReleaseBuffer, out);
}

// The wait of a watched fence: each handle's event fires on its descriptor, or every slice, when
// fence_finish(h, 0) also notices an agent restart and resends (client.cpp).
constexpr timeval kFenceSlice = {0, kFenceSliceMs * 1000};

void OnFenceEvent(evutil_socket_t, short what, void*);

// (Re)arms handle i's event on its current descriptor: a new one after a reconnect, and anew
// when `again` (a slice passed: a reconnect may have reused the closed descriptor's number,
// which epoll forgot when it closed).
void WatchHandle(Host& h, size_t i, bool again) {
  Host::Watch& w = *h.watch;
  int fd = -1;
  if (trainlet_rdzv_fd(h.handles[i], &fd) != TRAINLET_RDZV_OK) fd = -1;  // the slice still ticks
  if (w.events[i] != nullptr && fd == w.fds[i] && !again) return;
  if (w.events[i] != nullptr) event_free(w.events[i]);
  w.fds[i] = fd;
  w.events[i] =
      event_new(h.evbase, fd, fd < 0 ? EV_PERSIST : EV_READ | EV_PERSIST, OnFenceEvent, nullptr);
  event_add(w.events[i], &kFenceSlice);
}

// Stops watching; the fence's outcome goes to libpmix from here, its progress thread. Called
// with handles_mu held by `lock`, which is released first.
void EndWatch(Host& h, Result<std::string> outcome, std::unique_lock<std::mutex>& lock) {
  Host::Watch w = std::move(*h.watch);
  h.watch.reset();
  for (event* ev : w.events) {
    if (ev != nullptr) event_free(ev);
  }
  lock.unlock();
  AnswerFence(w.n, std::move(outcome), w.cbfunc, w.cbdata);
}

// Takes whatever replies came for the watched fence; answers libpmix once every handle's has.
// On libpmix's progress thread, handles_mu held by `lock`; `slice`: a slice passed.
void CheckFence(Host& h, std::unique_lock<std::mutex>& lock, bool slice) {
  Host::Watch& w = *h.watch;
  bool all = true;
  for (size_t i = 0; i < w.done.size(); ++i) {
    if (w.done[i]) continue;
    const int rc = trainlet_rdzv_fence_finish(h.handles[i], 0);
    if (rc == TRAINLET_RDZV_OK) {
      w.done[i] = true;
      event_free(w.events[i]);
      w.events[i] = nullptr;
      continue;
    }
    if (rc != TRAINLET_RDZV_TIMEOUT) {
      EndWatch(h, UnavailableError(std::string("fence: ") + trainlet_rdzv_last_error(h.handles[i])),
               lock);
      return;
    }
    all = false;
    WatchHandle(h, i, slice);  // a reconnect (agent restart) gives the handle a new descriptor
  }
  if (all) EndWatch(h, FenceResultData(h, w.n), lock);
}

void OnFenceEvent(evutil_socket_t, short what, void*) {
  // Free unless the Run thread does a fence of its own (queued whole, FenceUpcall), which never
  // overlaps a watched one: the next slice looks again.
  std::unique_lock<std::mutex> lock(g_host->handles_mu, std::try_to_lock);
  if (lock.owns_lock() && g_host->watch) CheckFence(*g_host, lock, (what & EV_TIMEOUT) != 0);
}

pmix_status_t FenceUpcall(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t[], size_t,
                          char* data, size_t ndata, pmix_modex_cbfunc_t cbfunc, void* cbdata) {
  // Only fences of the whole job (MPI_Init's and MPI_Finalize's): a subset would need a fence
  // the other nodes do not join.
  const bool whole_job = nprocs == 1 && procs[0].rank == PMIX_RANK_WILDCARD &&
                         g_host->config.map.nspace == procs[0].nspace;
  if (!whole_job) return PMIX_ERR_NOT_SUPPORTED;
  std::string bytes(data == nullptr ? "" : std::string(data, ndata));
  // The whole fence runs on this thread, libpmix's progress thread: the node's requests leave
  // from here, and the agent's replies wake this thread (an event per handle on libpmix's own
  // base), which gives libpmix the outcome at once. No hand-off to another thread either way:
  // two thread wake-ups fewer on every fence's critical path (docs/rendezvous.md, "One fence
  // round, hop by hop"). The handles are free here unless the Run thread is still opening them
  // (ranks fencing within a millisecond or two of "ready"): that fence is then queued whole to
  // the Run thread, which waits for it there.
  std::unique_lock<std::mutex> lock(g_host->handles_mu, std::try_to_lock);
  if (!lock.owns_lock() || g_host->evbase == nullptr) {
    if (lock.owns_lock()) lock.unlock();
    Queue([bytes = std::move(bytes), cbfunc, cbdata] {
      std::lock_guard<std::mutex> held(g_host->handles_mu);
      Result<uint64_t> n = StartFence(*g_host, bytes);
      AnswerFence(g_host->fences, n.ok() ? FinishFence(*g_host, *n) : n.status(), cbfunc, cbdata);
    });
    return PMIX_SUCCESS;
  }
  Result<uint64_t> started = StartFence(*g_host, bytes);
  if (!started.ok()) {
    lock.unlock();
    AnswerFence(g_host->fences, started.status(), cbfunc, cbdata);
    return PMIX_SUCCESS;
  }
  const size_t count = g_host->handles.size();
  g_host->watch = Host::Watch{*started,
                              cbfunc,
                              cbdata,
                              std::vector<bool>(count, false),
                              std::vector<int>(count, -1),
                              std::vector<event*>(count, nullptr)};
  for (size_t i = 0; i < count; ++i) WatchHandle(*g_host, i, false);
  // A reply is taken, and the descriptor rearmed, only by a fence_finish: one now, as the
  // descriptor's contract asks after fence_start.
  CheckFence(*g_host, lock, false);
  return PMIX_SUCCESS;
}

// Tells the agent that `rank` aborts (OP_ABORT on a handle of its own, apart from the Run
// thread's, which may be inside a fence), so that the rank's exit names MPI_Abort, its status and
// message. An agent that cannot be reached (restarting) costs at most kAbortReportMs; the rank's
// exit then fails the attempt by its code alone.
constexpr int kAbortReportMs = 2000;
void ReportAbort(uint32_t rank, int status, const std::string& message) {
  const PmixHostConfig& c = g_host->config;
  trainlet_rdzv* handle = nullptr;
  int rc = trainlet_rdzv_open_with(c.rendezvous_endpoint.c_str(), c.rendezvous_token.c_str(),
                                   c.job.c_str(), c.attempt, rank, &handle);
  if (rc == TRAINLET_RDZV_OK)
    rc = trainlet_rdzv_abort(handle, status, message.c_str(), kAbortReportMs);
  if (rc != TRAINLET_RDZV_OK)
    Say("could not tell the agent about rank " + std::to_string(rank) +
        "'s abort: " + trainlet_rdzv_last_error(handle));
  trainlet_rdzv_close(handle);
}

pmix_status_t AbortUpcall(const pmix_proc_t* proc, void*, int status, const char msg[],
                          pmix_proc_t[], size_t, pmix_op_cbfunc_t cbfunc, void* cbdata) {
  const uint32_t rank = proc->rank;
  const std::string message = rendezvous::CleanMpiAbortMessage(msg == nullptr ? "" : msg);
  Say("rank " + std::to_string(rank) + " called PMIx_Abort (MPI_Abort) with status " +
      std::to_string(status) + ": " + message + "; the attempt fails with it");
  std::fflush(stderr);
  // The rank is released only once the agent has recorded the abort, so its exit, which the
  // agent sees later, carries it. Off libpmix's progress thread, which must keep running.
  std::thread([rank, status, message, cbfunc, cbdata] {
    ReportAbort(rank, status, message);
    if (cbfunc != nullptr) cbfunc(PMIX_SUCCESS, cbdata);
    if (status == 0) {
      // The rank exits 0 after an abort, which would count as a success while its peers wait
      // for it (should the agent not have recorded the abort). The server's own exit makes
      // trainlet-step stop every local rank (and so the attempt fails); the rank gets a moment
      // to read the reply first.
      Say("status 0 is no failure to trainlet: exiting, so that the step stops the ranks");
      Queue([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        std::fflush(stderr);
        std::_Exit(kAbortedWithoutStatus);
      });
    }
  }).detach();
  return PMIX_SUCCESS;
}

// PMIx_Publish / Lookup / Unpublish (MPI_Publish_name, MPI_Lookup_name, MPI_Unpublish_name)
// ride the rendezvous store's publish (trainlet_rdzv_publish: every node sees a key at once, not
// at the next fence). A published value is stored under "pmix.pub/<key>" as the publisher's rank
// (4 bytes, little-endian) and the pmix_value_t packed by libpmix. Each call runs on a thread of
// its own with a handle of the calling rank, off libpmix's progress thread and the fence thread.
constexpr const char* kPublishedPrefix = "pmix.pub/";
constexpr int kPublishWaitMs = 10000;  // for the node's agent to take a publish
constexpr int kLookupWaitMs = 5000;    // for a key not there yet, unless PMIX_WAIT/PMIX_TIMEOUT say

trainlet_rdzv* HandleFor(uint32_t rank) {
  const PmixHostConfig& c = g_host->config;
  trainlet_rdzv* handle = nullptr;
  if (trainlet_rdzv_open_with(c.rendezvous_endpoint.c_str(), c.rendezvous_token.c_str(),
                              c.job.c_str(), c.attempt, rank, &handle) != TRAINLET_RDZV_OK) {
    Say(std::string("rendezvous open for publish/lookup: ") + trainlet_rdzv_last_error(handle));
    trainlet_rdzv_close(handle);
    return nullptr;
  }
  return handle;
}

bool IsDirective(const char* key) { return std::strncmp(key, "pmix.", 5) == 0; }

pmix_status_t PublishUpcall(const pmix_proc_t* proc, const pmix_info_t info[], size_t ninfo,
                            pmix_op_cbfunc_t cbfunc, void* cbdata) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (size_t i = 0; i < ninfo; ++i) {
    if (IsDirective(info[i].key)) continue;
    pmix_data_buffer_t buf;
    PMIX_DATA_BUFFER_CONSTRUCT(&buf);
    pmix_value_t value = info[i].value;  // packed from a copy: the API takes a non-const pointer
    if (PMIx_Data_pack(nullptr, &buf, &value, 1, PMIX_VALUE) != PMIX_SUCCESS) {
      PMIX_DATA_BUFFER_DESTRUCT(&buf);
      return PMIX_ERR_NOT_SUPPORTED;
    }
    std::string bytes(4, '\0');
    for (int b = 0; b < 4; ++b) bytes[b] = static_cast<char>((proc->rank >> (8 * b)) & 0xff);
    bytes.append(buf.base_ptr, buf.bytes_used);
    PMIX_DATA_BUFFER_DESTRUCT(&buf);
    pairs.emplace_back(kPublishedPrefix + std::string(info[i].key), std::move(bytes));
  }
  const uint32_t rank = proc->rank;
  std::thread([rank, pairs = std::move(pairs), cbfunc, cbdata] {
    pmix_status_t status = PMIX_SUCCESS;
    trainlet_rdzv* handle = HandleFor(rank);
    for (const auto& [key, bytes] : pairs) {
      if (handle == nullptr ||
          trainlet_rdzv_publish(handle, key.c_str(), bytes.data(), bytes.size(), kPublishWaitMs) !=
              TRAINLET_RDZV_OK) {
        if (handle != nullptr) Say(std::string("publish: ") + trainlet_rdzv_last_error(handle));
        status = PMIX_ERROR;
        break;
      }
    }
    trainlet_rdzv_close(handle);
    if (cbfunc != nullptr) cbfunc(status, cbdata);
  }).detach();
  return PMIX_SUCCESS;
}

// How long a lookup waits for a key: PMIX_TIMEOUT (seconds; 0: no limit) or PMIX_WAIT (as long
// as the attempt lives), else kLookupWaitMs.
int LookupWaitMs(const pmix_info_t info[], size_t ninfo) {
  for (size_t i = 0; i < ninfo; ++i) {
    if (std::strcmp(info[i].key, PMIX_TIMEOUT) == 0 && info[i].value.type == PMIX_INT)
      return info[i].value.data.integer <= 0 ? -1 : info[i].value.data.integer * 1000;
    if (std::strcmp(info[i].key, PMIX_WAIT) == 0) return -1;
  }
  return kLookupWaitMs;
}

// Unpacks one value stored by PublishUpcall into `out`; false when it is not one.
bool UnpackPublished(std::string bytes, pmix_pdata_t& out, const std::string& key) {
  if (bytes.size() < 4) return false;
  uint32_t rank = 0;
  for (int b = 0; b < 4; ++b)
    rank |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[b])) << (8 * b);
  PMIX_LOAD_PROCID(&out.proc, g_host->config.map.nspace.c_str(), rank);
  PMIX_LOAD_KEY(out.key, key.c_str());
  pmix_byte_object_t bo;
  bo.size = bytes.size() - 4;
  bo.bytes = static_cast<char*>(std::malloc(std::max<size_t>(1, bo.size)));
  std::memcpy(bo.bytes, bytes.data() + 4, bo.size);
  pmix_data_buffer_t buf;
  PMIX_DATA_BUFFER_CONSTRUCT(&buf);
  PMIx_Data_load(&buf, &bo);  // the buffer owns the bytes now
  int32_t n = 1;
  const pmix_status_t rc = PMIx_Data_unpack(nullptr, &buf, &out.value, &n, PMIX_VALUE);
  PMIX_DATA_BUFFER_DESTRUCT(&buf);
  return rc == PMIX_SUCCESS;
}

pmix_status_t LookupUpcall(const pmix_proc_t* proc, char** keys, const pmix_info_t info[],
                           size_t ninfo, pmix_lookup_cbfunc_t cbfunc, void* cbdata) {
  std::vector<std::string> wanted;
  for (char** k = keys; k != nullptr && *k != nullptr; ++k) wanted.emplace_back(*k);
  const int wait_ms = LookupWaitMs(info, ninfo);
  const uint32_t rank = proc->rank;
  std::thread([rank, wanted = std::move(wanted), wait_ms, cbfunc, cbdata] {
    trainlet_rdzv* handle = HandleFor(rank);
    pmix_pdata_t* data = nullptr;
    PMIX_PDATA_CREATE(data, std::max<size_t>(1, wanted.size()));
    size_t found = 0;
    std::vector<char> buf(TRAINLET_RDZV_MAX_VALUE + 4);
    for (const std::string& key : wanted) {
      size_t len = 0;
      if (handle == nullptr ||
          trainlet_rdzv_get(handle, (kPublishedPrefix + key).c_str(), buf.data(), buf.size(), &len,
                            wait_ms) != TRAINLET_RDZV_OK)
        continue;
      if (UnpackPublished(std::string(buf.data(), len), data[found], key)) ++found;
    }
    trainlet_rdzv_close(handle);
    // libpmix packs the answer before the callback returns: the array is ours to free after.
    cbfunc(found == 0 ? PMIX_ERR_NOT_FOUND : PMIX_SUCCESS, found == 0 ? nullptr : data, found,
           cbdata);
    PMIX_PDATA_FREE(data, std::max<size_t>(1, wanted.size()));
  }).detach();
  return PMIX_SUCCESS;
}

pmix_status_t UnpublishUpcall(const pmix_proc_t* proc, char** keys, const pmix_info_t[], size_t,
                              pmix_op_cbfunc_t cbfunc, void* cbdata) {
  std::vector<std::string> gone;
  for (char** k = keys; k != nullptr && *k != nullptr; ++k) gone.emplace_back(*k);
  const uint32_t rank = proc->rank;
  std::thread([rank, gone = std::move(gone), cbfunc, cbdata] {
    pmix_status_t status = PMIX_SUCCESS;
    trainlet_rdzv* handle = HandleFor(rank);
    for (const std::string& key : gone) {
      if (handle == nullptr ||
          trainlet_rdzv_publish(handle, (kPublishedPrefix + key).c_str(), nullptr, 0,
                                kPublishWaitMs) != TRAINLET_RDZV_OK)
        status = PMIX_ERROR;
    }
    trainlet_rdzv_close(handle);
    if (cbfunc != nullptr) cbfunc(status, cbdata);
  }).detach();
  return PMIX_SUCCESS;
}

// The namespace as libpmix wants it: job-level facts, this node's, and every rank's.
void* NamespaceInfo(const PmixHostConfig& c) {
  const PmixJobMap& map = c.map;
  const auto& local = map.nodes[c.node_rank];
  void* list = PMIx_Info_list_start();
  const uint32_t size = map.Size();
  const uint32_t nodes = static_cast<uint32_t>(map.nodes.size());
  const uint32_t local_size = static_cast<uint32_t>(local.ranks.size());
  const uint32_t appnum = 0;
  const pmix_rank_t leader = 0, local_leader = local.ranks.front();
  const bool no = false;
  PMIx_Info_list_add(list, PMIX_JOBID, map.nspace.c_str(), PMIX_STRING);
  PMIx_Info_list_add(list, PMIX_UNIV_SIZE, &size, PMIX_UINT32);
  PMIx_Info_list_add(list, PMIX_JOB_SIZE, &size, PMIX_UINT32);
  PMIx_Info_list_add(list, PMIX_MAX_PROCS, &size, PMIX_UINT32);
  PMIx_Info_list_add(list, PMIX_APP_SIZE, &size, PMIX_UINT32);
  PMIx_Info_list_add(list, PMIX_APPNUM, &appnum, PMIX_UINT32);
  PMIx_Info_list_add(list, PMIX_APPLDR, &leader, PMIX_PROC_RANK);
  PMIx_Info_list_add(list, PMIX_SPAWNED, &no, PMIX_BOOL);
  PMIx_Info_list_add(list, PMIX_NUM_NODES, &nodes, PMIX_UINT32);
  char* regex = nullptr;
  if (PMIx_generate_regex(NodeListText(map).c_str(), &regex) == PMIX_SUCCESS) {
    PMIx_Info_list_add(list, PMIX_NODE_MAP, regex, PMIX_REGEX);
    std::free(regex);
  }
  char* ppn = nullptr;
  if (PMIx_generate_ppn(ProcMapText(map).c_str(), &ppn) == PMIX_SUCCESS) {
    PMIx_Info_list_add(list, PMIX_PROC_MAP, ppn, PMIX_REGEX);
    std::free(ppn);
  }
  PMIx_Info_list_add(list, PMIX_LOCAL_SIZE, &local_size, PMIX_UINT32);
  PMIx_Info_list_add(list, PMIX_LOCAL_PEERS, RankListText(local.ranks).c_str(), PMIX_STRING);
  PMIx_Info_list_add(list, PMIX_LOCALLDR, &local_leader, PMIX_PROC_RANK);
  PMIx_Info_list_add(list, PMIX_HOSTNAME, local.hostname.c_str(), PMIX_STRING);
  PMIx_Info_list_add(list, PMIX_NODEID, &c.node_rank, PMIX_UINT32);
  for (uint32_t n = 0; n < nodes; ++n) {
    const auto& node = map.nodes[n];
    for (uint16_t i = 0; i < node.ranks.size(); ++i) {
      const pmix_rank_t rank = node.ranks[i];
      void* proc = PMIx_Info_list_start();
      PMIx_Info_list_add(proc, PMIX_RANK, &rank, PMIX_PROC_RANK);
      PMIx_Info_list_add(proc, PMIX_GLOBAL_RANK, &rank, PMIX_PROC_RANK);
      PMIx_Info_list_add(proc, PMIX_APP_RANK, &rank, PMIX_PROC_RANK);
      PMIx_Info_list_add(proc, PMIX_APPNUM, &appnum, PMIX_UINT32);
      PMIx_Info_list_add(proc, PMIX_LOCAL_RANK, &i, PMIX_UINT16);
      PMIx_Info_list_add(proc, PMIX_NODE_RANK, &i, PMIX_UINT16);
      PMIx_Info_list_add(proc, PMIX_NODEID, &n, PMIX_UINT32);
      PMIx_Info_list_add(proc, PMIX_HOSTNAME, node.hostname.c_str(), PMIX_STRING);
      pmix_data_array_t array;
      PMIx_Info_list_convert(proc, &array);
      PMIx_Info_list_release(proc);
      PMIx_Info_list_add(list, PMIX_PROC_DATA, &array, PMIX_DATA_ARRAY);
      PMIx_Data_array_destruct(&array);
    }
  }
  return list;
}

Status RegisterNamespace(const PmixHostConfig& c) {
  void* list = NamespaceInfo(c);
  pmix_data_array_t array;
  PMIx_Info_list_convert(list, &array);
  PMIx_Info_list_release(list);
  OpWait wait;
  pmix_status_t rc = PMIx_server_register_nspace(
      c.map.nspace.c_str(), static_cast<int>(c.map.nodes[c.node_rank].ranks.size()),
      static_cast<pmix_info_t*>(array.array), array.size, OpWait::Done, &wait);
  if (rc == PMIX_SUCCESS) rc = wait.Wait();
  PMIx_Data_array_destruct(&array);
  if (rc != PMIX_SUCCESS && rc != PMIX_OPERATION_SUCCEEDED)
    return InternalError("PMIx_server_register_nspace: " + StatusText(rc));
  return Status::Ok();
}

// Registers `rank` as a client and returns its stream lines (the env setup_fork gives it).
Result<std::string> RegisterRank(const PmixHostConfig& c, uint32_t rank) {
  pmix_proc_t proc;
  PMIX_LOAD_PROCID(&proc, c.map.nspace.c_str(), rank);
  OpWait wait;
  pmix_status_t rc =
      PMIx_server_register_client(&proc, getuid(), getgid(), nullptr, OpWait::Done, &wait);
  if (rc == PMIX_SUCCESS) rc = wait.Wait();
  if (rc != PMIX_SUCCESS && rc != PMIX_OPERATION_SUCCEEDED)
    return InternalError("PMIx_server_register_client rank " + std::to_string(rank) + ": " +
                         StatusText(rc));
  char** env = nullptr;
  rc = PMIx_server_setup_fork(&proc, &env);
  if (rc != PMIX_SUCCESS)
    return InternalError("PMIx_server_setup_fork rank " + std::to_string(rank) + ": " +
                         StatusText(rc));
  std::string lines;
  Status bad = Status::Ok();
  for (char** e = env; e != nullptr && *e != nullptr; ++e) {
    Result<std::string> line = EncodeRankEnvLine(rank, *e);
    if (line.ok()) {
      lines += *line;
    } else if (bad.ok()) {
      bad = line.status();
    }
    std::free(*e);
  }
  std::free(env);
  if (!bad.ok()) return bad;
  return lines;
}

// PMIx_server_init with `infos`, plus PMIX_TOPOLOGY2 for `topology` when not null. That entry is
// built here, not with PMIx_Info_list_add: loading a pmix_value_t copies the topology
// (hwloc_topology_dup) and PMIx_Data_array_destruct would then free the copy libpmix keeps.
pmix_status_t InitServer(pmix_server_module_t* module, const pmix_data_array_t& infos,
                         hwloc_topology_t topology) {
  const auto* first = static_cast<const pmix_info_t*>(infos.array);
  std::vector<pmix_info_t> all(first, first + infos.size);       // shallow: freed with `infos`
  pmix_topology_t handed{const_cast<char*>("hwloc"), topology};  // libpmix copies both fields
  if (topology != nullptr) {
    pmix_info_t info;
    PMIX_INFO_CONSTRUCT(&info);
    PMIX_LOAD_KEY(info.key, PMIX_TOPOLOGY2);
    info.value.type = PMIX_TOPO;
    info.value.data.topo = &handed;
    all.push_back(info);
  }
  return PMIx_server_init(module, all.data(), all.size());
}

// The agent's topology of this node, when it handed one over and it loads; else libpmix discovers.
std::optional<AgentTopology> LoadAgentTopology(const std::string& xml_path) {
  if (xml_path.empty()) return std::nullopt;
  Result<AgentTopology> topology = AgentTopology::Load(xml_path);
  if (topology.ok()) return std::move(topology).value();
  Say(topology.status().message() + "; libpmix discovers the node's topology itself");
  return std::nullopt;
}

}  // namespace

Result<std::string> StartPmixHost(const PmixHostConfig& config) {
  if (g_host != nullptr) return InternalError("StartPmixHost called twice");
  if (config.node_rank >= config.map.nodes.size())
    return InvalidError("node rank " + std::to_string(config.node_rank) + " is not in the job map");
  g_host = new Host;
  g_host->config = config;
  static pmix_server_module_t module = {};
  module.abort = AbortUpcall;
  module.fence_nb = FenceUpcall;
  module.publish = PublishUpcall;
  module.lookup = LookupUpcall;
  module.unpublish = UnpublishUpcall;
  void* list = PMIx_Info_list_start();
  PMIx_Info_list_add(list, PMIX_SERVER_TMPDIR, config.tmpdir.c_str(), PMIX_STRING);
  PMIx_Info_list_add(list, PMIX_SYSTEM_TMPDIR, config.tmpdir.c_str(), PMIX_STRING);
  const std::string server_nspace = config.map.nspace + ".server";
  PMIx_Info_list_add(list, PMIX_SERVER_NSPACE, server_nspace.c_str(), PMIX_STRING);
  const pmix_rank_t server_rank = config.node_rank;
  PMIx_Info_list_add(list, PMIX_SERVER_RANK, &server_rank, PMIX_PROC_RANK);
  // The node's topology (the agent's, else libpmix's own discovery); shared, it goes to every
  // client as a shared-memory segment (and as XML), which OpenMPI's opal_hwloc_base_get_topology
  // adopts (PMIX_HWLOC_SHMEM_FILE/ADDR/SIZE, else PMIX_HWLOC_XML_V2) instead of discovering the
  // machine again in every rank's MPI_Init: about 10 ms of CPU per rank (bench/README.md).
  const bool share_topology = true;
  PMIx_Info_list_add(list, PMIX_SERVER_SHARE_TOPOLOGY, &share_topology, PMIX_BOOL);
  pmix_data_array_t array;
  PMIx_Info_list_convert(list, &array);
  PMIx_Info_list_release(list);
  g_host->topology = LoadAgentTopology(config.topology_xml);
  const pmix_status_t rc =
      InitServer(&module, array, g_host->topology ? g_host->topology->get() : nullptr);
  PMIx_Data_array_destruct(&array);
  if (rc != PMIX_SUCCESS) return InternalError("PMIx_server_init: " + StatusText(rc));
  // The base the upcalls run on; without it (not expected) fences wait on the Run thread.
  g_host->evbase = pmix_progress_thread_init(nullptr);
  TRAINLET_RETURN_IF_ERROR(RegisterNamespace(config));
  std::string lines;
  for (const uint32_t rank : config.map.nodes[config.node_rank].ranks) {
    TRAINLET_ASSIGN_OR_RETURN(std::string more, RegisterRank(config, rank));
    lines += more;
  }
  return lines;
}

int RunPmixHost() {
  // The fence path made ready while the ranks start, not in their first fence: the rendezvous
  // handles, the ZeroMQ context (two threads) and each handle's connection to the agent were
  // 1.3-14 ms of the first fence's critical path, 20-190 us of a later one's (bench/README.md).
  // A failure here is left for that fence to meet and report, as before.
  {
    std::lock_guard<std::mutex> lock(g_host->handles_mu);
    if (OpenHandles(*g_host)) {
      for (trainlet_rdzv* handle : g_host->handles) trainlet_rdzv_connect(handle);
    }
  }
  // SIGTERM or SIGINT (blocked in every thread) ends the loop at once: a thread waits for it.
  std::thread signals([] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    int sig = 0;
    sigwait(&set, &sig);
    std::lock_guard<std::mutex> lock(g_host->mu);
    g_host->stop = true;
    g_host->wake.notify_all();
  });
  signals.detach();  // it ends with the process
  while (true) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(g_host->mu);
      g_host->wake.wait(lock, [] { return g_host->stop || !g_host->work.empty(); });
      if (g_host->stop) break;
      fn = std::move(g_host->work.front());
      g_host->work.pop_front();
    }
    fn();
  }
  // A fence still in flight is left to libpmix's finalize, which releases its clients. Its
  // events go first (event_free from here waits for one running on the progress thread), and
  // the reference to the progress thread, so that finalize stops that thread.
  {
    std::lock_guard<std::mutex> lock(g_host->handles_mu);
    if (g_host->watch) {
      for (event* ev : g_host->watch->events) {
        if (ev != nullptr) event_free(ev);
      }
      g_host->watch.reset();
    }
  }
  if (g_host->evbase != nullptr) pmix_progress_thread_stop(nullptr);
  PMIx_server_finalize();
  return 0;
}

}  // namespace trainlet::pmix
