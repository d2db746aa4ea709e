// Writes the envelope fuzzer's seed corpus: one small valid envelope per body type.
//
//   envelope_seed_gen <dir>
//
// The files it writes are committed under fuzz/corpus/envelope/; rerun it when the wire contract
// grows a body type. Seeds stay tiny so the fuzzer mutates structure rather than payload.
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "common/envelope.h"

namespace {

using trainlet::v1::Envelope;

std::vector<std::pair<std::string, Envelope>> Seeds() {
  std::vector<std::pair<std::string, Envelope>> out;
  auto add = [&out](const char* name) -> Envelope& {
    out.emplace_back(name, Envelope());
    return out.back().second;
  };

  auto* node = add("register").mutable_register_();
  node->set_name("n1");
  node->set_address("10.0.0.1");
  node->set_slots(2);
  (*node->mutable_labels())["zone"] = "a";
  auto* numa = node->mutable_topology()->add_numa_nodes();
  numa->set_cpuset("0-3");
  numa->set_memory_bytes(1 << 20);

  auto* ack = add("register_ack").mutable_register_ack();
  ack->set_accepted(true);
  ack->set_heartbeat_interval_ms(1000);

  auto* beat = add("heartbeat").mutable_heartbeat();
  beat->set_node("n1");
  beat->set_seq(7);
  beat->set_sent_unix_ms(-1);

  auto* plan = add("launch_plan").mutable_launch_plan();
  plan->set_job("j");
  plan->set_attempt(1);
  auto* worker = plan->add_workers();
  worker->set_rank(1);
  worker->add_argv("python");
  worker->add_argv("t.py");
  (*worker->mutable_env())["RANK"] = "1";

  auto* stop = add("stop_workers").mutable_stop_workers();
  stop->set_job("j");
  stop->set_reason("x");

  auto* event = add("worker_event").mutable_worker_event();
  event->set_job("j");
  event->set_kind(trainlet::v1::WorkerEvent::KIND_EXITED);
  event->set_exit_code(-3);
  event->set_signal(9);

  auto* read = add("log_read").mutable_log_read();
  read->set_request_id(1);
  read->set_max_bytes(4096);

  auto* chunk = add("log_chunk").mutable_log_chunk();
  chunk->set_data(std::string("a\0\xff", 3));
  chunk->set_eof(true);

  auto* request = add("operator_request").mutable_operator_request();
  request->set_request_id(3);
  request->mutable_apply()->set_yaml("kind: TrainJob\n");

  auto* response = add("operator_response").mutable_operator_response();
  response->set_error("no");
  response->mutable_jobs()->add_jobs()->set_name("j");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <dir>\n", argv[0]);
    return 2;
  }
  for (auto& [name, envelope] : Seeds()) {
    const std::string path = std::string(argv[1]) + "/" + name + ".bin";
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << trainlet::EncodeEnvelope(envelope);
    if (!out.flush()) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}
