// ApplyParser: parses and checks applied files on a thread of its own, so that a large file never
// holds the coordinator's loop (issue 19, defect 1: 10,000 TrainJobs held it 5.5 s and every node
// was declared Lost). What needs the loop's state (the runtimes, the jobs held, the store) stays
// on the loop: the loop takes each parsed file back (TakeParsed) and finishes the apply there, in
// one store transaction, before it answers, so "stored before acknowledged" and "all or nothing"
// hold as before.
//
// Files are parsed one at a time, in the order they were submitted, and handed back in that
// order, so two applies of the same name are decided in the order they arrived.
//
// Threads: construct, Submit, TakeParsed and the destructor on the loop's thread; the worker
// thread only parses (trainjob::ParseDocuments, CheckApplySizes: pure functions). The loop polls
// notify_socket() (a ZeroMQ inproc PAIR) and calls TakeParsed when it is readable. The destructor
// stops the worker after the file it is parsing, dropping the rest.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/status.h"
#include "common/trainjob/trainjob_model.h"

namespace trainlet::coordinator {

class ApplyParser {
 public:
  struct Parsed {
    uint64_t ticket = 0;
    // The parsed file, or Invalid naming the file (a parse error) or the TrainJob and field that
    // is too large (apply_limits.h).
    Result<trainjob::ParsedFile> file = InvalidError("not parsed");
  };

  // `ctx` must outlive the parser.
  explicit ApplyParser(zmq::context_t& ctx);
  ~ApplyParser();
  ApplyParser(const ApplyParser&) = delete;
  ApplyParser& operator=(const ApplyParser&) = delete;

  // At most this many files wait to be parsed (each up to 4 MiB): a flood of applies is refused,
  // not held in memory without bound.
  static constexpr size_t kMaxQueued = 16;

  // Queues `yaml` (of `source`, "" for stdin, which errors name); returns its ticket.
  // Unavailable when kMaxQueued files already wait (the operator tries again).
  Result<uint64_t> Submit(std::string yaml, std::string source);
  // The files parsed since the last call, in submission order.
  std::vector<Parsed> TakeParsed();
  // Readable when TakeParsed has something.
  void* notify_socket() { return notify_loop_.handle(); }

 private:
  struct Job {
    uint64_t ticket;
    std::string yaml, source;
  };
  void Work();

  // Constant after construction.
  std::string endpoint_;
  // Owned by the loop.
  zmq::socket_t notify_loop_;
  uint64_t next_ticket_ = 1;
  // Owned by the worker thread (created before it starts).
  zmq::socket_t notify_worker_;
  // Shared, under mu_.
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Job> queue_;
  std::vector<Parsed> done_;
  bool stopping_ = false;
  std::thread worker_;  // last: started once everything above exists
};

}  // namespace trainlet::coordinator
