// trainlet-step DIR: the parent process of one step of a job on this node. Started by
// trainlet-agent, never by hand; see agent/step/step_runner.h for what it does and why.
// trainlet-step --as ID -- argv...: what a step starts a rank through to drop to the rank's user
// (agent/step/rank_identity.h).
// trainlet-step --standby MODE: a step that waits for its directory (agent/step/step_standby.h).
#include <cstdio>
#include <cstring>
#include <string>

#include "agent/step/rank_identity.h"
#include "agent/step/step_runner.h"
#include "agent/step/step_standby.h"

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("trainlet-step %s\n", TRAINLET_VERSION);
    return 0;
  }
  // trainlet-step --as UID:GID:GROUPS -- argv...: how a step starts a rank as its own user.
  if (argc >= 2 && std::strcmp(argv[1], "--as") == 0) return trainlet::step::RunAs(argc, argv);
  // trainlet-step --standby CGROUP_MODE: started ahead of a launch (agent/step/step_standby.h).
  if (argc == 3 && std::strcmp(argv[1], "--standby") == 0)
    return trainlet::step::RunStandbyStep(argv[2]);
  if (argc != 2 || argv[1][0] != '/') {
    std::fprintf(stderr,
                 "usage: trainlet-step STEP_DIR\n"
                 "  Runs the ranks listed in STEP_DIR/launch.json and records their exits in\n"
                 "  STEP_DIR/events. Started by trainlet-agent; STEP_DIR must be absolute.\n");
    return 2;
  }
  return trainlet::step::RunStep(argv[1]);
}
