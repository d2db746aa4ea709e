// trainlet-rss-floor: the resident memory a daemon built on the agent's libraries costs before any
// trainlet code runs. It loads the node's topology with hwloc (I/O devices kept, as the agent
// does), parses YAML, serialises a protobuf message, logs with spdlog, and waits on a CURVE DEALER
// socket of libzmq, then idles. It is linked as the agent is (cmake/TrainletStaticAgent.cmake).
// libsystemd is not in it: the agent loads it only under systemd (common/systemd_library.h). The
// launch benchmark samples it beside the agent, so the agent's RSS can be read against this floor.
#include <hwloc.h>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <string>
#include <zmq.hpp>

#include "trainlet/v1/node.pb.h"  // the wire messages, lite as the agent has them

int main() {
  // As the agent does (agent/topology.cpp): without hwloc's libxml2 plugin, which would leave
  // libstdc++.so mapped.
  setenv("HWLOC_PLUGINS_BLACKLIST", "hwloc_xml_libxml", 0);
  hwloc_topology_t topology;
  hwloc_topology_init(&topology);
  hwloc_topology_set_io_types_filter(topology, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  hwloc_topology_load(topology);
  const int pus = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_PU);
  hwloc_topology_destroy(topology);

  const YAML::Node config = YAML::Load("heartbeat_ms: 1000");
  trainlet::v1::Heartbeat beat;
  beat.set_node("floor");
  beat.set_seq(config["heartbeat_ms"].as<uint64_t>());
  const std::string bytes = beat.SerializeAsString();

  zmq::context_t ctx;
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  char server_public[41], public_key[41], secret_key[41];
  zmq_curve_keypair(server_public, secret_key);
  zmq_curve_keypair(public_key, secret_key);
  dealer.set(zmq::sockopt::curve_serverkey, std::string(server_public));
  dealer.set(zmq::sockopt::curve_publickey, std::string(public_key));
  dealer.set(zmq::sockopt::curve_secretkey, std::string(secret_key));
  dealer.connect("tcp://127.0.0.1:9");  // discard port: nothing answers, libzmq retries
  spdlog::info("rss floor: {} PUs, {} protobuf bytes; idling", pus, bytes.size());
  zmq_pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
  while (true) zmq_poll(&item, 1, 1000);
}
