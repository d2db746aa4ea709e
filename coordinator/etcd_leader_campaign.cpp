#include "coordinator/etcd_leader_campaign.h"

#include <spdlog/spdlog.h>

#include <exception>
#include <nlohmann/json.hpp>
#include <utility>

namespace trainlet::coordinator {

std::string LeaderIdentity::ToJson() const {
  return nlohmann::json{{"name", name}, {"operator", operator_endpoint}, {"agent", agent_endpoint}}
      .dump();
}

LeaderIdentity LeaderIdentity::FromJson(const std::string& value) {
  LeaderIdentity id;
  const nlohmann::json j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    id.name = value;
    return id;
  }
  auto text = [&](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  id.name = text("name");
  id.operator_endpoint = text("operator");
  id.agent_endpoint = text("agent");
  return id;
}

Result<std::unique_ptr<EtcdLeaderCampaign>> EtcdLeaderCampaign::Start(Options options) {
  if (options.election_prefix.empty() || options.election_prefix.back() != '/') {
    return InvalidError("election prefix \"" + options.election_prefix + "\": must end with '/'");
  }
  if (options.ttl.count() < 1) return InvalidError("lease TTL: must be at least 1 s");
  TRAINLET_ASSIGN_OR_RETURN(auto client, EtcdClient::Create(options.client));
  std::unique_ptr<EtcdLeaderCampaign> c(
      new EtcdLeaderCampaign(std::move(options), std::move(client)));
  c->thread_ = std::thread([raw = c.get()] { raw->Run(); });
  return c;
}

EtcdLeaderCampaign::EtcdLeaderCampaign(Options options, std::unique_ptr<EtcdClient> client)
    : options_(std::move(options)),
      client_(std::move(client)),
      election_(std::make_unique<EtcdLeaderElection>(*client_, options_.election_prefix,
                                                     options_.identity.ToJson(), options_.ttl)) {}

EtcdLeaderCampaign::~EtcdLeaderCampaign() { StopThread(); }

void EtcdLeaderCampaign::StopThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EtcdLeaderCampaign::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    // Taken before the renewal goes out: etcd counts the TTL from when the renewal arrives, so
    // this side's count ends first.
    const Clock::time_point now = Clock::now();
    Result<EtcdLeaderElection::State> r = InternalError("not polled");
    try {
      r = election_->Poll(now);
    } catch (const std::exception& e) {
      // An answer the client did not expect must not end the process from this thread; the
      // view ages out as for any failed renewal.
      r = IoError(std::string("etcd answered unexpectedly: ") + e.what());
    }
    lock.lock();
    std::chrono::milliseconds next = options_.follower_poll;
    if (r.ok()) {
      if (r->leader != leader_) {
        spdlog::info("leader election: this coordinator {} the leader",
                     r->leader ? "is now" : "is not");
      }
      leader_ = r->leader;
      leader_identity_.reset();
      if (!r->leader_identity.empty()) {
        leader_identity_ = LeaderIdentity::FromJson(r->leader_identity);
      }
      fence_ = election_->Fence();
      renewed_ = election_->renewed();
      if (!error_.empty()) spdlog::info("leader election: etcd answers again");
      error_.clear();
      if (leader_) next = std::chrono::duration_cast<std::chrono::milliseconds>(options_.ttl) / 3;
    } else {
      if (error_ != r.status().message()) {
        spdlog::warn("leader election: {}", r.status().message());
      }
      error_ = r.status().message();
    }
    wake_.wait_for(lock, next, [this] { return stop_; });
  }
}

EtcdLeaderCampaign::View EtcdLeaderCampaign::view(Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mu_);
  View v;
  // Past the TTL since the last renewal etcd may have ended the lease: not the leader, without
  // waiting for the thread to hear it.
  v.leader = leader_ && renewed_ != Clock::time_point{} && now - renewed_ < options_.ttl;
  v.leader_identity = leader_identity_;
  v.fence = fence_;
  v.error = error_;
  return v;
}

Status EtcdLeaderCampaign::Resign() {
  StopThread();
  return election_->Resign();
}

}  // namespace trainlet::coordinator
