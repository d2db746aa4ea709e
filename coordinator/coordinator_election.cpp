// Coordinator: leadership with store: etcd (the header's "High availability"). The campaign runs
// on its own thread; these methods run on the loop and only read its view.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/zmq_sockets.h"
#include "coordinator/coordinator.h"

namespace trainlet::coordinator {
namespace {

// Where the campaign keys live: beside the store's records, under the same prefix.
constexpr const char* kElectionDir = "election/";
// How often a follower's tick looks at the campaign's view.
constexpr std::chrono::milliseconds kFollowerTick{100};

}  // namespace

Status Coordinator::StartCampaign() {
  EtcdLeaderCampaign::Options o;
  o.client = etcd_store_->client_config();
  // A renewal that waits for longer than a third of the TTL is better given up and sent again:
  // after an etcd member's death the next attempt reaches a member with a leader.
  o.client.request_timeout =
      std::min(o.client.request_timeout,
               std::chrono::duration_cast<std::chrono::milliseconds>(config_.lease_ttl) / 3);
  o.election_prefix = etcd_store_->prefix() + kElectionDir;
  o.identity.operator_endpoint = Advertised(operator_endpoint_, config_.operator_advertise);
  o.identity.agent_endpoint = Advertised(agent_endpoint_, config_.agent_advertise);
  const Result<std::string> host = env_.Hostname();
  o.identity.name = (host.ok() ? *host : std::string("?")) + ":" + std::to_string(env_.ProcessId());
  o.ttl = config_.lease_ttl;
  TRAINLET_ASSIGN_OR_RETURN(campaign_, EtcdLeaderCampaign::Start(std::move(o)));
  spdlog::info("campaigning for leadership in {} (lease {} s); following until elected",
               store_->location(), config_.lease_ttl.count());
  return Status::Ok();
}

Status Coordinator::Lead() {
  if (etcd_store_ != nullptr) {
    const EtcdLeaderCampaign::View v = campaign_->view(env_.MonotonicNow());
    if (!v.fence) return UnavailableError("elected without a campaign key");
    etcd_store_->SetWriteFence(v.fence);
  }
  TRAINLET_RETURN_IF_ERROR(registry_->LoadCordons(store_.get()));
  TRAINLET_RETURN_IF_ERROR(jobs_->Load(config_.runtimes_dir));
  leading_ = true;
  return Status::Ok();
}

bool Coordinator::FollowElection(platform::EventLoop::TimePoint now) {
  const EtcdLeaderCampaign::View v = campaign_->view(env_.MonotonicNow());
  if (leading_) {
    if (etcd_store_->fence_lost()) {
      StepDown("a store write was refused by the fence: another coordinator leads");
    } else if (!v.leader) {
      StepDown("the lease was not renewed within its " + std::to_string(config_.lease_ttl.count()) +
               " s TTL" + (v.error.empty() ? std::string() : " (" + v.error + ")"));
    }
    return leading_;
  }
  if (!v.leader) return false;
  spdlog::info("elected leader: loading the store");
  if (Status s = Lead(); !s.ok()) {
    // A store that cannot be read now is no state to lead with: end, and let the supervisor
    // start a follower again.
    StepDown("cannot load the store: " + s.message());
    return false;
  }
  started_ = now;  // the lost timeout for nodes that never come back counts from here
  checked_unregistered_ = false;
  return true;
}

bool Coordinator::LeadingNow() {
  if (campaign_ == nullptr) return true;
  if (!leading_) return false;
  // A pause (SIGSTOP, a stall) past the TTL: the next tick steps down; refuse until then.
  return campaign_->view(env_.MonotonicNow()).leader;
}

void Coordinator::StepDown(const std::string& why) {
  spdlog::error("stepping down as leader: {}; exiting so the supervisor starts a follower", why);
  leading_ = false;
  stepped_down_ = UnavailableError("stepped down as leader: " + why);
  loop_.Stop();
}

void Coordinator::RefuseOperatorAsFollower(const RouterMessage& msg) {
  const EtcdLeaderCampaign::View v = campaign_->view(env_.MonotonicNow());
  v1::Envelope env;
  auto* r = env.mutable_operator_response();
  r->set_request_id(msg.envelope.operator_request().request_id());
  r->set_error_code("NotLeader");
  // A view that etcd no longer confirms names no one: its leader may be long gone.
  const bool known = v.error.empty() && v.leader_identity &&
                     !v.leader_identity->operator_endpoint.empty() &&
                     v.leader_identity->operator_endpoint !=
                         Advertised(operator_endpoint_, config_.operator_advertise);
  if (known) {
    r->set_leader(v.leader_identity->operator_endpoint);
    r->set_error("this coordinator is not the leader; the leader is " +
                 v.leader_identity->operator_endpoint);
  } else {
    r->set_error("this coordinator is not the leader and no leader is elected yet");
  }
  // Without etcd no one can lead: say why (a lost quorum above all).
  if (!v.error.empty()) r->set_error(r->error() + "; the election cannot reach etcd: " + v.error);
  if (!SendToRouterPeer(operators_, msg.routing_id, env)) spdlog::debug("operator went away");
}

void Coordinator::RefuseAgentAsFollower(const RouterMessage& msg) {
  const auto body = msg.envelope.body_case();
  if (body != v1::Envelope::kRegister && body != v1::Envelope::kHeartbeat) {
    drops_.Add(DropReason::kUnexpected);  // nothing else is for a follower
    return;
  }
  const EtcdLeaderCampaign::View v = campaign_->view(env_.MonotonicNow());
  v1::Envelope ack;
  auto* a = ack.mutable_register_ack();
  a->set_accepted(false);
  a->set_not_leader(true);
  if (v.error.empty() && v.leader_identity && !v.leader_identity->agent_endpoint.empty() &&
      v.leader_identity->agent_endpoint != Advertised(agent_endpoint_, config_.agent_advertise)) {
    a->set_leader_endpoint(v.leader_identity->agent_endpoint);
    a->set_reason("this coordinator is not the leader; the leader is " +
                  v.leader_identity->agent_endpoint);
  } else {
    a->set_reason("this coordinator is not the leader and no leader is elected yet");
  }
  SendToRouterPeer(agents_, msg.routing_id, ack);
}

}  // namespace trainlet::coordinator
