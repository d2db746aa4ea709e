#include "coordinator/exec_relay.h"

#include <spdlog/spdlog.h>

#include <algorithm>

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
  first_id_ = next_id_;
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
      auto target = jobs_->exec().ResolveExec(msg.user_id, req.host());
      if (!target.ok()) return Refuse(msg.routing_id, req.exec_id(), target.status().message());
      const uint64_t id = next_id_++;
      Session& session = sessions_[id];
      session.routing_id = msg.routing_id;
      session.client_exec_id = req.exec_id();
      session.job = target->job;
      session.attempt = target->attempt;
      session.node = target->node;
      session.last_seen = now;
      v1::Envelope start;
      auto* s = start.mutable_exec_start();
      s->set_exec_id(id);
      s->set_job(target->job);
      s->set_attempt(target->attempt);
      s->set_command(JoinCommand(req.argv()));
      s->set_stop_grace_ms(target->stop_grace_ms);
      if (target->run_as_user) s->set_run_as_user(*target->run_as_user);
      if (target->run_as_group) s->set_run_as_group(*target->run_as_group);
      if (target->allow_privilege_escalation)
        s->set_allow_privilege_escalation(*target->allow_privilege_escalation);
      if (target->fs_group) s->set_fs_group(*target->fs_group);
      for (const auto& [k, v] : target->env) (*s->mutable_env())[k] = v;
      spdlog::info("exec {} for trainjob/{} attempt {} on {}: {}", id, target->job, target->attempt,
                   target->node, s->command().substr(0, 120));
      agents_->SendToNode(target->node, std::move(start));
      return;
    }
    case v1::Envelope::kExecCancel:
    case v1::Envelope::kExecKeepalive: {
      const uint64_t client_id = env.body_case() == v1::Envelope::kExecCancel
                                     ? env.exec_cancel().exec_id()
                                     : env.exec_keepalive().exec_id();
      const uint64_t session_id = env.body_case() == v1::Envelope::kExecCancel
                                      ? env.exec_cancel().session_id()
                                      : env.exec_keepalive().session_id();
      auto it = FindForClient(msg, client_id, session_id, now);
      if (it == sessions_.end()) return;
      if (env.body_case() == v1::Envelope::kExecCancel) {
        End(it, "cancelled by trainlet-exec: " + env.exec_cancel().reason());
      } else {
        it->second.last_seen = now;
        v1::Envelope echo;
        echo.mutable_exec_keepalive()->set_exec_id(client_id);
        echo.mutable_exec_keepalive()->set_session_id(it->first);
        reply_(msg.routing_id, std::move(echo));
      }
      return;
    }
    default:
      spdlog::warn("dropped unexpected {} on the exec endpoint", v1::MessageType_Name(env.type()));
  }
}

std::map<uint64_t, ExecRelay::Session>::iterator ExecRelay::FindForClient(const RouterMessage& msg,
                                                                          uint64_t client_id,
                                                                          uint64_t session_id,
                                                                          Clock::time_point now) {
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    if (it->second.routing_id == msg.routing_id && it->second.client_exec_id == client_id) {
      return it;
    }
  }
  auto it = sessions_.find(session_id);
  if (session_id == 0 || it == sessions_.end()) return sessions_.end();
  const auto keys = jobs_->exec().LauncherKeys();  // launcher key -> job, of live attempts
  const auto key = keys.find(msg.user_id);
  if (key == keys.end() || key->second != it->second.job) {
    spdlog::warn("refused to re-attach exec {} of {}: the client's key is not that job's launcher",
                 it->first, it->second.job);
    return sessions_.end();
  }
  spdlog::info("exec {} of trainjob/{} on {}: trainlet-exec re-attached", it->first, it->second.job,
               it->second.node);
  Session& s = it->second;
  s.routing_id = msg.routing_id;
  s.client_exec_id = client_id;
  s.last_seen = now;
  s.allowed_silence = kClientSilence;
  // What came from the agent meanwhile, in order, under the client's id.
  bool exited = false;
  for (v1::Envelope& env : s.pending) {
    if (env.body_case() == v1::Envelope::kExecOutput) {
      env.mutable_exec_output()->set_exec_id(client_id);
    } else {
      env.mutable_exec_exited()->set_exec_id(client_id);
      exited = true;
    }
    reply_(s.routing_id, std::move(env));
  }
  s.pending.clear();
  s.pending_bytes = 0;
  if (exited) {
    sessions_.erase(it);
    return sessions_.end();
  }
  return it;
}

void ExecRelay::AdoptSessions(
    const std::string& node,
    const google::protobuf::RepeatedPtrField<v1::ExecSessionReport>& reports,
    Clock::time_point now) {
  for (const auto& r : reports) {
    // Ours and unknown: this process ended it (the agent learns so from the next ack).
    if (r.exec_id() >= first_id_ || sessions_.count(r.exec_id()) != 0) continue;
    if (!jobs_->exec().AttemptActive(r.job(), r.attempt())) continue;
    Session& s = sessions_[r.exec_id()];
    s.job = r.job();
    s.attempt = r.attempt();
    s.node = node;
    s.last_seen = now;  // the client's time to re-attach starts now
    s.allowed_silence = kReattachWindow;
    s.relayed[0] = r.stdout_bytes();
    s.relayed[1] = r.stderr_bytes();
    spdlog::info(
        "exec {} of trainjob/{} attempt {} on {}: taken back from the agent; waiting "
        "for its trainlet-exec",
        r.exec_id(), r.job(), r.attempt(), node);
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
    const uint64_t start = std::max(o->offset(), relayed);
    if (!TrimRelayed(o->offset(), o->mutable_data(), &relayed)) return;
    o->set_exec_id(it->second.client_exec_id);
    // Kept towards trainlet-exec, which drops what it has: after a coordinator restart the
    // count the agent resends from is the last acknowledged one, behind what it received.
    o->set_offset(start);
  } else {
    out.mutable_exec_exited()->set_exec_id(it->second.client_exec_id);
  }
  Session& s = it->second;
  if (s.routing_id.empty()) {
    // Taken back after a restart, its trainlet-exec not re-attached yet: kept for it, up to a
    // bound (what is over it is dropped, and said).
    s.pending_bytes += out.ByteSizeLong();
    if (s.pending_bytes > kMaxPendingBytes && out.body_case() == v1::Envelope::kExecOutput) {
      spdlog::warn(
          "exec {} on {}: {} bytes of output for a trainlet-exec not re-attached; "
          "dropping the rest until it is",
          id, node, s.pending_bytes);
      return;
    }
    s.pending.push_back(std::move(out));
    return;
  }
  reply_(s.routing_id, std::move(out));
  if (env.body_case() == v1::Envelope::kExecExited) sessions_.erase(it);
}

void ExecRelay::End(std::map<uint64_t, Session>::iterator it, const std::string& reason,
                    bool tell_client) {
  spdlog::info("exec {} on {} ends: {}", it->first, it->second.node, reason);
  if (tell_client && !it->second.routing_id.empty()) {
    // Else trainlet-exec hears nothing more and, 10 s on, says it lost the coordinator (issue 19).
    v1::Envelope exited;
    auto* ex = exited.mutable_exec_exited();
    ex->set_exec_id(it->second.client_exec_id);
    ex->set_exit_code(255);
    ex->set_error(reason + ": the command on " + it->second.node + " was stopped");
    reply_(it->second.routing_id, std::move(exited));
  }
  v1::Envelope cancel;
  cancel.mutable_exec_cancel()->set_exec_id(it->first);
  cancel.mutable_exec_cancel()->set_reason(reason);
  agents_->SendToNode(it->second.node, std::move(cancel));
  sessions_.erase(it);
}

void ExecRelay::Tick(Clock::time_point now) {
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    auto next = std::next(it);
    if (now - it->second.last_seen > it->second.allowed_silence) {
      End(it, "trainlet-exec went silent");
    } else if (!jobs_->exec().AttemptActive(it->second.job, it->second.attempt)) {
      End(it,
          "attempt " + std::to_string(it->second.attempt) + " of trainjob/" + it->second.job +
              " is over",
          /*tell_client=*/true);
    }
    it = next;
  }
}

ExecRelay::Clock::time_point ExecRelay::NextDeadline(Clock::time_point now) const {
  auto next = now + std::chrono::seconds(1);
  for (const auto& [id, s] : sessions_) next = std::min(next, s.last_seen + s.allowed_silence);
  return std::max(next, now);
}

}  // namespace trainlet::coordinator
