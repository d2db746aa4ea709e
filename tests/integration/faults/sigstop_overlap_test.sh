#!/usr/bin/env bash
# Two attempts of a job never run at once, even when an agent is stopped (SIGSTOP) rather than
# killed (issue 19, defect 2). A stopped agent still holds agent.lock, so its steps used to keep
# the ranks until it was continued, and the coordinator's restart hold left the stop grace out:
# attempt 2 ran beside attempt 1 for 10 s. Now the agent stamps its lock every heartbeat, a step
# whose agent's stamp stands still for its orphan grace stops the ranks, and the coordinator holds
# the restart for partition grace + stop grace + a margin.
#
# The ranks ignore SIGTERM, so each lives the whole stop grace: the worst case. The agent is
# stopped for 0.5x, 1x and 3x the partition grace (5, 10 and 30 s at the default 10 s), while a
# sampler reads the process table every 50 ms.
source "$(dirname "$0")/../lib.sh"

GRACE_MS=3000
STOP_GRACE_MS=2000
start_cluster 3 --slots 2 --partition-grace-ms "$GRACE_MS" --stop-grace-ms "$STOP_GRACE_MS"

job_yaml() {  # job_yaml NAME: 2 nodes, ranks that ignore SIGTERM, 3 restarts allowed
  retry_runtime_yaml plain-retry 3; echo "---"
  printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: %s\n' "$1"
  printf 'spec:\n  runtimeRef:\n    name: plain-retry\n  trainer:\n    numNodes: 2\n'
  printf '    command: ["/bin/sh", "-c", "trap \\"\\" TERM; while :; do sleep 0.05; done"]\n'
}
attempt_of() {
  "$CTL" get trainjobs "$1" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["attempt"])'
}

for factor in 0.5 1 3; do
  job="stop-${factor/./-}"
  stop_ms=$(python3 -c "print(int($factor * $GRACE_MS))")
  job_yaml "$job" > "$WORK/$job.yaml"
  "$CTL" apply -f "$WORK/$job.yaml" >/dev/null
  wait_for 20 sh -c "'$CTL' get trainjobs $job | grep -qE 'Running +2 +2 +1 '" \
    || fail "$job never Running: $("$CTL" describe trainjob "$job")"
  rm -f "$WORK/violations"
  start_attempt_sampler "$job"
  victim=$("$CTL" get trainjobs "$job" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["placement"][0])')
  vpid=$(awk '{print $1}' "$TRAINLET_HOME/pids/$victim.pid")
  log "$job: stopping $victim's agent (pid $vpid) for $stop_ms ms"
  kill -STOP "$vpid"
  sleep "$(python3 -c "print($stop_ms / 1000)")"
  kill -CONT "$vpid"
  # A stop past the lost timeout (2 s here, 3 s by default) makes the node Lost and the job
  # restarts; a shorter one may not. Either way the job runs again, and never twice at once.
  wait_for 10 sh -c "'$CTL' get nodes $victim | grep -q ' Ready '" || fail "$victim not Ready again"
  wait_for 40 sh -c "'$CTL' get trainjobs $job | grep -qE 'Running +2 +2 '" \
    || fail "$job does not run again: $("$CTL" describe trainjob "$job")"
  sleep 1  # room for a stale rank to show up beside the new attempt
  check_attempt_sampler
  log "$job: no two attempts at once (attempt $(attempt_of "$job"))"
  "$CTL" delete trainjob "$job" >/dev/null
  no_ranks() { [ -z "$(job_pids "$job")" ]; }
  wait_for 20 no_ranks || fail "ranks of $job remain after delete"
done
echo "PASS sigstop_overlap_test"
