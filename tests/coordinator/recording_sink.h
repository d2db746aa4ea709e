// A NodeSink that records every (node, envelope) it is given, in order, for tests of the types
// that send to agents without the rest of the controller.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "coordinator/agent_commands.h"

namespace trainlet::coordinator::testing {

class EnvelopeRecorder : public NodeSink {
 public:
  void SendToNode(const std::string& node, v1::Envelope env) override {
    sent.emplace_back(node, std::move(env));
  }
  std::vector<std::pair<std::string, v1::Envelope>> sent;
};

}  // namespace trainlet::coordinator::testing
