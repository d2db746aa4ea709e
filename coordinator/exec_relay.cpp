#include "coordinator/exec_relay.h"

#include <spdlog/spdlog.h>

namespace trainlet::coordinator {
namespace {

// Joins the command words the way rsh and ssh do: with spaces, for the remote shell to parse.
std::string JoinCommand(const google::protobuf::RepeatedPtrField<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) out += (out.empty() ? "" : " ") + a;
  return out;
}

}  // namespace

ExecRelay::ExecRelay(JobController* jobs, NodeSink* agents, ReplyToClient reply)
    : jobs_(jobs), agents_(agents), reply_(std::move(reply)) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  next_id_ = (static_cast<uint64_t>(ms) << 16) + 1;  // 65,536 sessions a millisecond to spare
}

bool ExecRelay::TrimRelayed(uint64_t offset, std::string* data, uint64_t* relayed) {
  const uint64_t end = offset + data->size();
  if (end <= *relayed) return false;
  if (offset < *relayed) data->erase(0, static_cast<size_t>(*relayed - offset));
  *relayed = end;
  return true;
}

void ExecRelay::AddDelivered(const std::string& node, v1::HeartbeatAck* ack) const {
  for (const auto& [id, s] : sessions_) {
    if (s.node != node) continue;
    auto* d = ack->add_exec_sessions();
    d->set_exec_id(id);
    d->set_stdout_bytes(s.relayed[0]);
    d->set_stderr_bytes(s.relayed[1]);
  }
}

void ExecRelay::Refuse(const std::string& routing_id, uint64_t client_exec_id,
                       const std::string& why) {
  spdlog::warn("refused trainlet-exec request: {}", why);
  v1::Envelope env;
  auto* ex = env.mutable_exec_exited();
  ex->set_exec_id(client_exec_id);
  ex->set_exit_code(255);
  ex->set_error(why);
  reply_(routing_id, std::move(env));
}

void ExecRelay::OnClientMessage(const RouterMessage& msg, Clock::time_point now) {
  const v1::Envelope& env = msg.envelope;
  switch (env.body_case()) {
    case v1::Envelope::kExecRequest: {
      const auto& req = env.exec_request();
      if (req.argv_size() == 0) return Refuse(msg.routing_id, req.exec_id(), "no command given");
      auto target = jobs_->ResolveExec(msg.user_id, req.host());
      if (!target.ok()) return Refuse(msg.routing_id, req.exec_id(), target.status().message());
      const uint64_t id = next_id_++;
      sessions_[id] = {msg.routing_id, req.exec_id(), target->job, target->attempt, target->node,
                       now};
      v1::Envelope start;
      auto* s = start.mutable_exec_start();
      s->set_exec_id(id);
      s->set_job(target->job);
      s->set_attempt(target->attempt);
      s->set_command(JoinCommand(req.argv()));
      s->set_stop_grace_ms(target->stop_grace_ms);
      for (const auto& [k, v] : target->env) (*s->mutable_env())[k] = v;
      spdlog::info("exec {} for trainjob/{} attempt {} on {}: {}", id, target->job,
                   target->attempt, target->node, s->command().substr(0, 120));
      agents_->SendToNode(target->node, std::move(start));
      return;
    }
    case v1::Envelope::kExecCancel:
    case v1::Envelope::kExecKeepalive: {
      const uint64_t client_id = env.body_case() == v1::Envelope::kExecCancel
                                     ? env.exec_cancel().exec_id()
                                     : env.exec_keepalive().exec_id();
      for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
        if (it->second.routing_id != msg.routing_id || it->second.client_exec_id != client_id) {
          continue;
        }
        if (env.body_case() == v1::Envelope::kExecCancel) {
          End(it, "cancelled by trainlet-exec: " + env.exec_cancel().reason());
        } else {
          it->second.last_seen = now;
          v1::Envelope echo;
          echo.mutable_exec_keepalive()->set_exec_id(client_id);
          reply_(msg.routing_id, std::move(echo));
        }
        return;
      }
      return;
    }
    default:
      spdlog::warn("dropped unexpected {} on the exec endpoint", v1::MessageType_Name(env.type()));
  }
}

void ExecRelay::OnAgentMessage(const std::string& node, const v1::Envelope& env) {
  const uint64_t id = env.body_case() == v1::Envelope::kExecOutput ? env.exec_output().exec_id()
                                                                   : env.exec_exited().exec_id();
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.node != node) return;  // ended, or not that node's
  v1::Envelope out = env;
  if (out.body_case() == v1::Envelope::kExecOutput) {
    auto* o = out.mutable_exec_output();
    const uint32_t stream = o->stream();
    if (stream != 1 && stream != 2) return;
    uint64_t& relayed = it->second.relayed[stream - 1];
    if (o->offset() > relayed) {
      spdlog::warn("exec {} on {}: bytes {}..{} of stream {} never arrived", id, node, relayed,
                   o->offset(), stream);
    }
    // A restarted agent resends what was not acknowledged: trainlet-exec has part of it already.
    if (!TrimRelayed(o->offset(), o->mutable_data(), &relayed)) return;
    o->set_exec_id(it->second.client_exec_id);
    o->clear_offset();
  } else {
    out.mutable_exec_exited()->set_exec_id(it->second.client_exec_id);
  }
  reply_(it->second.routing_id, std::move(out));
  if (env.body_case() == v1::Envelope::kExecExited) sessions_.erase(it);
}

void ExecRelay::End(std::map<uint64_t, Session>::iterator it, const std::string& reason) {
  spdlog::info("exec {} on {} ends: {}", it->first, it->second.node, reason);
  v1::Envelope cancel;
  cancel.mutable_exec_cancel()->set_exec_id(it->first);
  cancel.mutable_exec_cancel()->set_reason(reason);
  agents_->SendToNode(it->second.node, std::move(cancel));
  sessions_.erase(it);
}

void ExecRelay::Tick(Clock::time_point now) {
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    auto next = std::next(it);
    if (now - it->second.last_seen > kClientSilence) {
      End(it, "trainlet-exec went silent");
    } else if (!jobs_->AttemptActive(it->second.job, it->second.attempt)) {
      End(it, "attempt " + std::to_string(it->second.attempt) + " of " + it->second.job +
                  " is over");
    }
    it = next;
  }
}

ExecRelay::Clock::time_point ExecRelay::NextDeadline(Clock::time_point now) const {
  auto next = now + std::chrono::seconds(1);
  for (const auto& [id, s] : sessions_) next = std::min(next, s.last_seen + kClientSilence);
  return std::max(next, now);
}

}  // namespace trainlet::coordinator
