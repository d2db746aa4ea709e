#include "trainletctl/delete_text.h"

namespace trainlet::cli {

std::string DeleteNotDoneMessage(const std::string& name, const std::string& timeout,
                                 const v1::WaitJobResult& wait) {
  int active = 0;  // as the coordinator counts them (rank_state_machine.h, IsRankActive)
  for (const auto& r : wait.job().ranks()) {
    active += r.rank_state() == v1::RANK_STATE_PENDING || r.rank_state() == v1::RANK_STATE_RUNNING;
  }
  const std::string job = "trainjob/" + name;
  // A Lost node keeps it Terminating until it confirms (coordinator/delete_gate.h): its last
  // event says which node.
  const auto& events = wait.job().events();
  if (!events.empty() && events.Get(events.size() - 1).reason() == "DeleteWaitsForNode") {
    return job + " is still Terminating after " + timeout + ": " +
           events.Get(events.size() - 1).message();
  }
  if (active > 0) {
    return job + " is still stopping its ranks after " + timeout + " (" + std::to_string(active) +
           (active == 1 ? " rank runs" : " ranks run") + "); it will be removed once they exit";
  }
  return job + " is not deleted after " + timeout +
         ", and none of its ranks runs: the coordinator has not finished removing it (it cannot "
         "write its state dir when the disk is full or read-only; its log says why). Run the "
         "delete again once it can" +
         (wait.message().empty() ? "" : " (" + wait.message() + ")");
}

}  // namespace trainlet::cli
