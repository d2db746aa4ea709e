// RendezvousServer: the node's end of the rendezvous store (proto/trainlet/v1/rendezvous.proto).
//
// Ranks reach it on a ROUTER bound at ipc://<state_dir>/rendezvous.sock (mode 0600, the agent's
// user), so only processes of the agent's user can connect. Ranks that run as another user (the
// agent's run_as, a job's securityContext) get an endpoint of their own on the same ROUTER:
// ipc://<state_dir>/rendezvous/uid-<uid>.sock, owned by that uid, mode 0600, in a directory of
// mode 0711 (searched, not listed); it is bound while some attempt here runs ranks as that user
// (AddAttempt, RestoreAttempt) and removed when the last one ends. Each request
// names job, attempt and rank and carries the attempt's token, which the agent made when it
// started the attempt here and gave only to its ranks (TRAINLET_RENDEZVOUS_TOKEN); a wrong token
// or a rank not started here is DENIED.
//
// Fence: a rank's request carries its puts. Once every local rank of the attempt has joined fence
// e, ONE FenceContribute goes to the coordinator with their merged puts (a higher rank wins a
// clash). The coordinator's FenceResult is written to a snapshot file (common/rendezvous/
// snapshot_format.h) renamed into place (mode 0600; owned by the ranks' user when they run as
// another, so only they and the agent read it), and every waiting rank is answered with its path;
// the previous epoch's file is removed (every rank has mapped it before it could join this fence).
// Get: answered from the published pairs, or when a later fence publishes the key, or TIMEOUT.
//
// Failure: a FenceResult with ok=false, a local rank that exits before joining an open fence, or
// the attempt ending here answers every waiting rank ABORTED with the reason, and every later
// request of that attempt too (until EndAttempt forgets it).
//
// Threading: owned by the agent's loop, like everything in it; no locks. Replies and messages to
// the coordinator go out through the functions given at construction, never blocking.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "agent/rendezvous_user.h"
#include "common/status.h"
#include "trainlet/v1/envelope.pb.h"

namespace trainlet::agent {

class RendezvousServer {
 public:
  using Clock = std::chrono::steady_clock;

  // Caps per attempt on this node, so one rank (buggy or hostile, holding the attempt's token)
  // cannot grow the agent without bound; a request over one is INVALID and names the cap
  // (docs/rendezvous.md, "Limits"). Keys and values: the C API's own limits
  // (TRAINLET_RDZV_MAX_KEY, 1 MiB), enforced here too for clients that skip it. Parked gets: the
  // C API parks at most one per handle, so 64 per rank leaves room for threads and handles.
  static constexpr size_t kMaxKeyBytes = 4096;
  static constexpr size_t kMaxValueBytes = 1u << 20;
  static constexpr size_t kMaxParkedGetsPerRank = 64;
  // peer: the rank's ROUTER routing id.
  using ReplyFn = std::function<void(const std::string& peer, v1::RendezvousReply reply)>;
  // An Envelope holding a FenceContribute, for the coordinator.
  using SendFn = std::function<void(v1::Envelope env)>;

  // Snapshots live under <state_dir>/rendezvous/. Nothing is bound until Bind.
  RendezvousServer(std::string node, std::string state_dir, SendFn to_coordinator);
  ~RendezvousServer();

  // Binds the ROUTER, and the endpoint of every user some attempt known already runs as (one of
  // those failing is logged); replies go on it from now on. kIo/kInvalid naming the endpoint on
  // failure.
  Status Bind(zmq::context_t& ctx);
  // Tests drive Handle() without a socket: replies go to `reply` instead.
  void SetReplyForTest(ReplyFn reply) { reply_ = std::move(reply); }
  // "ipc://<state_dir>/rendezvous.sock", also before Bind.
  const std::string& endpoint() const { return endpoint_; }

  // The ranks of (job, attempt) that run here, from the plan. Returns the env each of those
  // workers gets: TRAINLET_RENDEZVOUS_ENDPOINT and TRAINLET_RENDEZVOUS_TOKEN (a fresh random
  // secret per attempt; the same one again for a repeated plan, whose ranks are added).
  // `user`: the ranks run as that user (TrainingUser): the endpoint is that user's own,
  // bound now (once bound at all); its snapshots are owned by it. Should that endpoint fail to
  // bind (logged), the ranks get endpoint() and fail at once, naming it, when they connect.
  std::map<std::string, std::string> AddAttempt(const std::string& job, uint32_t attempt,
                                                const std::vector<uint32_t>& ranks,
                                                std::optional<RendezvousUser> user = {});
  // An attempt whose ranks a previous agent started here and this one adopted (they outlived it):
  // its ranks keep `token` (from the step's launch file) and may call again. The fences they
  // joined before are not known here, so the first fence request sets where the attempt stands:
  // the coordinator's fence table kept counting. `ranks` are those that take part, as AddAttempt
  // was given them (AdoptedRendezvousOf: not an initializer's). Another step of an attempt
  // restored already adds its ranks; nothing for an attempt known otherwise.
  // `user` as for AddAttempt: that user's endpoint is bound again, so its ranks reconnect.
  void RestoreAttempt(const std::string& job, uint32_t attempt, const std::vector<uint32_t>& ranks,
                      const std::string& token, std::optional<RendezvousUser> user = {});
  // The attempt stopped or was replaced here (attempt 0: every attempt of the job): its waiting
  // ranks get ABORTED with `why`, its snapshots are removed and it is forgotten.
  void EndAttempt(const std::string& job, uint32_t attempt, const std::string& why);
  // A local rank ended ("exited with code 3", "exited with signal 9"). If it has not joined a
  // fence its peers here are gathering, or one they start later, that fence is aborted. A rank
  // that asked to abort first (OP_ABORT: PMIx_Abort through trainlet-pmix) has that written into
  // `exit_event` (WorkerEvent.mpi_abort*), when given, so its exit names the call.
  void OnRankExited(const std::string& job, uint32_t attempt, uint32_t rank, const std::string& how,
                    v1::WorkerEvent* exit_event = nullptr);
  // The coordinator's answer to a contribution (or its news that the attempt's rendezvous failed).
  void OnFenceResult(const v1::FenceResult& result);
  // This node's registration was just accepted, maybe by a new coordinator (a restart, an HA
  // failover) whose fence table is empty: sends a resync FenceContribute for every attempt with a
  // fence released here or a contribution unanswered, holding the last released result and that
  // contribution again, so fences in flight complete and later results keep every pair.
  void Resync();
  // Pairs some rank of the attempt published outside a fence (OP_PUBLISH), from the coordinator:
  // gets see them at once (an empty value removes one), and parked gets of them are answered.
  void OnPublish(const v1::RendezvousPublish& publish);
  // A FenceResult or RendezvousPublish from the coordinator, to the function above for it.
  void OnCoordinatorMessage(const v1::Envelope& env);
  // One request from a rank.
  void Handle(const std::string& peer, const v1::RendezvousRequest& request, Clock::time_point now);

  // Loop integration: the ROUTER joins the poll set; OnPolled reads what it holds.
  void AddPollItems(std::vector<zmq_pollitem_t>& items);
  void OnPolled(const std::vector<zmq_pollitem_t>& items, Clock::time_point now);
  // Answers gets whose time ran out; returns how long until the next one would, if any waits.
  std::optional<std::chrono::milliseconds> Tick(Clock::time_point now);

  // For tests and metrics.
  size_t attempts() const { return attempts_.size(); }
  // "ipc://<state_dir>/rendezvous/uid-<uid>.sock", bound or not.
  std::string UserEndpoint(uid_t uid) const;
  uint64_t contributions_sent() const { return contributions_sent_; }

 private:
  struct Waiter {
    std::string peer;
    uint64_t id = 0;
  };
  struct PendingGet {
    uint32_t rank = 0;
    std::string peer;
    uint64_t id = 0;
    std::string key;
    Clock::time_point deadline;  // Clock::time_point::max(): while the attempt lives
  };
  struct Attempt {
    std::string token;
    std::set<uint32_t> ranks;              // local ranks, from the plan
    std::map<uint32_t, uint64_t> joined;   // rank -> last fence it joined
    std::map<uint32_t, Waiter> waiting;    // rank -> its fence request in flight
    std::map<uint32_t, size_t> join_puts;  // rank -> digest of the puts it joined `open` with
    uint64_t completed = 0;                // last fence published here
    uint64_t open = 0;                     // fence being gathered; 0 when none
    bool contributed = false;              // FenceContribute for `open` sent
    v1::FenceContribute sent;              // that contribution, kept for Resync until answered
    std::map<std::string, std::pair<uint32_t, std::string>> merged;  // key -> (rank, value)
    std::map<std::string, std::string> published;  // everything the last fence released
    std::string snapshot_path;                     // "" before the first fence
    std::vector<PendingGet> gets;
    std::map<uint32_t, std::string> exited;                      // rank -> how it ended
    std::map<uint32_t, std::pair<int, std::string>> mpi_aborts;  // rank -> (status, message)
    std::string aborted;    // non-empty: why every request fails
    bool restored = false;  // adopted: no fence seen yet, the first one sets `completed`
    std::optional<RendezvousUser> user;  // the ranks' user when not the agent's
  };
  // A user's endpoint, bound while some attempt runs ranks as that user.
  struct UserSocket {
    gid_t gid = 0;
    bool bound = false;
  };
  using Key = std::pair<std::string, uint32_t>;

  void Reply(const std::string& peer, uint64_t id, v1::RendezvousReply::Code code,
             std::string message);
  void HandleFence(const Key& key, Attempt& a, const std::string& peer,
                   const v1::RendezvousRequest& req);
  // A rank joining the fence it already joined, still open or the last completed: the same puts
  // again is a retry (a new `trainletctl rendezvous fence` after a timeout, or a client that
  // reconnected across an agent restart) that takes the wait over, or gets the completed fence's
  // release again; other puts are a second process claiming the rank, refused so the real rank's
  // puts stand.
  void HandleRejoin(Attempt& a, const std::string& peer, const v1::RendezvousRequest& req);
  // A fence's release to one waiter: the snapshot file of fence `epoch`.
  void ReplyRelease(const std::string& peer, uint64_t id, const std::string& snapshot_path,
                    uint64_t epoch);
  void HandleGet(Attempt& a, const std::string& peer, const v1::RendezvousRequest& req,
                 Clock::time_point now);
  // OP_PUBLISH: forwards the puts to the coordinator (RendezvousPublish), answers OK.
  void HandlePublish(const Key& key, const std::string& peer, const v1::RendezvousRequest& req);
  // Answers the parked gets whose key is published now.
  void AnswerGets(Attempt& a);
  // OP_ABORT: records the rank's PMIx_Abort for its exit event and aborts the node's rendezvous
  // of the attempt with the call named; answered OK even when the attempt was aborted already.
  void HandleAbort(Attempt& a, const std::string& peer, const v1::RendezvousRequest& req);
  // Aborts the open fence if a rank that cannot join it has exited; sends the contribution when
  // every local rank has joined.
  void MaybeContribute(const Key& key, Attempt& a);
  void Abort(Attempt& a, const std::string& why);
  std::string AttemptDir(const Key& key) const;
  // Binds `user`'s endpoint when the ROUTER is and it is not yet: its endpoint when bound,
  // endpoint() when it could not be (logged). Unbinds endpoints no attempt needs.
  std::string BindUser(const RendezvousUser& user);
  Status BindUserSocket(uid_t uid, gid_t gid);
  // What BindUserSocket binds (and unbind names): UserEndpoint's path + ".new", renamed to
  // UserEndpoint's once given to the user.
  std::string UserBindEndpoint(uid_t uid) const;
  void UnbindUnusedUsers();

  // Constant after construction.
  std::string node_;
  std::string state_dir_;
  std::string endpoint_;
  SendFn to_coordinator_;
  // Owned by the loop.
  ReplyFn reply_;
  std::optional<zmq::socket_t> socket_;
  int poll_index_ = -1;
  std::map<Key, Attempt> attempts_;
  std::map<uid_t, UserSocket> users_;
  uint64_t contributions_sent_ = 0;
};

}  // namespace trainlet::agent
