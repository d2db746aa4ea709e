#include "coordinator/apply_parser.h"

#include <atomic>

#include "coordinator/apply_limits.h"

namespace trainlet::coordinator {

ApplyParser::ApplyParser(zmq::context_t& ctx)
    : notify_loop_(ctx, zmq::socket_type::pair), notify_worker_(ctx, zmq::socket_type::pair) {
  static std::atomic<uint64_t> instances{0};
  endpoint_ = "inproc://trainlet-apply-parser-" + std::to_string(instances++);
  notify_loop_.set(zmq::sockopt::linger, 0);
  notify_worker_.set(zmq::sockopt::linger, 0);
  notify_loop_.bind(endpoint_);
  notify_worker_.connect(endpoint_);
  worker_ = std::thread([this] { Work(); });
}

ApplyParser::~ApplyParser() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  worker_.join();
}

Result<uint64_t> ApplyParser::Submit(std::string yaml, std::string source) {
  const uint64_t ticket = next_ticket_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= kMaxQueued) {
      return UnavailableError("the coordinator is busy parsing " + std::to_string(queue_.size()) +
                              " applied files: apply again shortly");
    }
    queue_.push_back({ticket, std::move(yaml), std::move(source)});
  }
  ++next_ticket_;
  wake_.notify_one();
  return ticket;
}

std::vector<ApplyParser::Parsed> ApplyParser::TakeParsed() {
  zmq::message_t ignored;
  while (notify_loop_.recv(ignored, zmq::recv_flags::dontwait)) {
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Parsed> out = std::move(done_);
  done_.clear();
  return out;
}

void ApplyParser::Work() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    Parsed parsed;
    parsed.ticket = job.ticket;
    const std::string named = job.source.empty() ? "" : job.source + ": ";
    auto file = trainjob::ParseDocuments(job.yaml);
    if (!file.ok()) {
      parsed.file = InvalidError(named + file.status().message());
    } else if (Status s = CheckApplySizes(*file, job.source); !s.ok()) {
      parsed.file = s;
    } else {
      parsed.file = std::move(file);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_.push_back(std::move(parsed));
    }
    notify_worker_.send(zmq::str_buffer("."), zmq::send_flags::dontwait);
  }
}

}  // namespace trainlet::coordinator
