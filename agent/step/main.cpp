// trainlet-step DIR: the parent process of one step of a job on this node. Started by
// trainlet-agent, never by hand; see agent/step/step_runner.h for what it does and why.
#include <cstdio>
#include <cstring>
#include <string>

#include "agent/step/step_runner.h"

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("trainlet-step %s\n", TRAINLET_VERSION);
    return 0;
  }
  if (argc != 2 || argv[1][0] != '/') {
    std::fprintf(stderr,
                 "usage: trainlet-step STEP_DIR\n"
                 "  Runs the ranks listed in STEP_DIR/launch.json and records their exits in\n"
                 "  STEP_DIR/events. Started by trainlet-agent; STEP_DIR must be absolute.\n");
    return 2;
  }
  return trainlet::step::RunStep(argv[1]);
}
