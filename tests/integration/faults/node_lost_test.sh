#!/usr/bin/env bash
# Failure detection and gang restart: a hung agent (SIGSTOP) is Lost within the timeout and its job
# restarts on the other nodes; when the agent resumes, its stale ranks are stopped, so two attempts
# never run at once. A rank killed with SIGKILL restarts the gang, and after the restart limit the
# job is Failed with the cause.
source "$(dirname "$0")/../lib.sh"

# The restart waits out partition grace + stop grace + 1.5 s after the node was last heard (21.5 s
# by default): 3 s and 2 s make it 6.5 s. The ranks (sleep) end at SIGTERM.
start_cluster 3 --slots 2 --partition-grace-ms 3000 --stop-grace-ms 2000
write_runtime() {  # a plain runtime allowing $1 restarts
  printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: ClusterTrainingRuntime\nmetadata:\n  name: plain-retry\nspec:\n  mlPolicy:\n    numNodes: 1\n  template:\n    spec:\n      failurePolicy:\n        maxRestarts: %s\n      replicatedJobs:\n        - name: node\n          template:\n            spec:\n              template:\n                spec:\n                  containers:\n                    - name: node\n' "$1"
}
retry_job() {  # retry_job NAME NODES SCRIPT
  local file; file=$(write_job "$1" "$2" 1 "$3")
  sed -i 's/name: plain$/name: plain-retry/' "$file"
  { write_runtime 2; echo "---"; cat "$file"; } > "$file.full"
  echo "$file.full"
}

# 1. Hung agent: Lost within the timeout (2 s here), the job restarts on the 2 healthy nodes.
"$CTL" apply -f "$(retry_job hang 2 'sleep 300')" >/dev/null
wait_for 20 sh -c "'$CTL' get trainjobs hang | grep -q Running" || fail "hang never Running"
victim=$("$CTL" get trainjobs hang -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["placement"][0])')
vpid=$(awk '{print $1}' "$TRAINLET_HOME/pids/$victim.pid")
kill -STOP "$vpid"
t0=$(date +%s%N)
wait_for 10 sh -c "'$CTL' get nodes $victim | grep -q Lost" || fail "$victim not Lost"
lost_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
log "$victim Lost after $lost_ms ms"
[ "$lost_ms" -lt 3500 ] || fail "Lost took $lost_ms ms (timeout 2000 ms)"
wait_for 30 sh -c "'$CTL' get trainjobs hang | grep -qE 'Running +2 +2 +2 '" \
  || fail "hang did not restart: $("$CTL" describe trainjob hang)"
placement=$("$CTL" get trainjobs hang -o json | python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["jobs"][0]["placement"]))')
case " $placement " in *" $victim "*) fail "attempt 2 placed on the lost node: $placement" ;; esac
assert_contains "$("$CTL" describe trainjob hang)" "node $victim lost" "attempt 1 cause"
# 2. It wakes up: its attempt-1 rank is stopped, no two attempts run at once.
kill -CONT "$vpid"
stale_gone() {
  for p in $(job_pids hang); do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "TRAINLET_ATTEMPT=1" && return 1
  done
  return 0
}
wait_for 20 stale_gone || fail "a stale attempt-1 rank still runs after the node came back"
wait_for 10 sh -c "'$CTL' get nodes $victim | grep -q Ready" || fail "$victim not Ready again"
"$CTL" delete trainjob hang >/dev/null
log "hung agent: Lost, gang restarted elsewhere, stale rank stopped after resume"

# 3. A rank killed with SIGKILL: the gang restarts, and after 2 restarts the job is Failed.
"$CTL" apply -f "$(retry_job crashy 2 'sleep 300')" >/dev/null
for attempt in 1 2 3; do
  wait_for 30 sh -c "'$CTL' get trainjobs crashy | grep -qE 'Running +2 +2 +$attempt '" \
    || fail "crashy attempt $attempt not Running: $("$CTL" describe trainjob crashy)"
  rank_pid=$("$CTL" get trainjobs crashy -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["ranks"][1]["pid"])')
  kill -9 "$rank_pid"
done
"$CTL" wait trainjob/crashy --for=condition=Failed --timeout=30s >/dev/null || fail "crashy not Failed"
d=$("$CTL" describe trainjob crashy)
assert_contains "$d" "killed by signal 9" "attempt cause"
[ "$(grep -cE '^  [123] +[0-9]+s ago +Failed +rank 1' <<<"$d")" = 3 ] || fail "three failed attempts expected: $d"
no_crashy() { [ -z "$(job_pids crashy)" ]; }
wait_for 20 no_crashy || fail "ranks of the failed job remain"
log "rank SIGKILL: gang restarts, Failed after the limit with the cause"
echo "PASS node_lost_test"
