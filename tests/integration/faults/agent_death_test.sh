#!/usr/bin/env bash
# An agent killed with SIGKILL and never started again.
#
# A 2-node job runs on 3 simulated hosts. One of its agents is killed: the coordinator marks the
# node Lost within the timeout and fails the attempt. The dead agent's rank lives on under its
# trainlet-step process, which notices that no agent holds the agent lock any more and stops the
# rank before the partition grace is over; only then does the next attempt start, on the two
# hosts left. A sampler checks the process table throughout: never two attempts at once, and in
# the end no rank or step of the dead agent is left.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../netns_lib.sh"

GRACE_MS=3000
# The restart waits out partition grace + stop grace + 1.5 s after the node was last heard; the
# ranks (sleep) end at SIGTERM, so a 2 s stop grace (10 s by default) only shortens that hold.
NETNS_COORDINATOR_FLAGS=(--partition-grace-ms "$GRACE_MS" --stop-grace-ms 2000)
start_netns_cluster 3
start_sleeper_pair orphan
victim=$VICTIM
agent_pid=${EXTRA_PIDS[$VICTIM_INDEX]}  # start_netns_cluster: coordinator, then node-1..3
stale_pid=$VICTIM_PID
step_pid=$(awk '{print $4}' "/proc/$stale_pid/stat")  # the rank's parent: its step
grep -q trainlet-step "/proc/$step_pid/cmdline" || fail "rank $stale_pid's parent $step_pid is not a trainlet-step"
log "killing the agent of $victim (pid $agent_pid); its rank $stale_pid runs under step $step_pid"
{ kill -9 "$agent_pid"; wait "$agent_pid"; } 2>/dev/null || true
t0=$(date +%s%N)

wait_for 10 sh -c "'$CTL' get nodes $victim | grep -q Lost" || fail "$victim not Lost after its agent died"
lost_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
log "$victim Lost after $lost_ms ms"
[ "$lost_ms" -lt 3500 ] || fail "Lost took $lost_ms ms (timeout 2000 ms)"
wait_for 15 sh -c "! kill -0 $stale_pid 2>/dev/null" || fail "the dead agent's rank $stale_pid still runs"
log "orphaned rank stopped by its step after $(( ($(date +%s%N) - t0) / 1000000 )) ms (grace $GRACE_MS ms)"
wait_for 10 sh -c "! kill -0 $step_pid 2>/dev/null" || fail "step $step_pid still runs after its rank ended"

wait_for 30 sh -c "'$CTL' get trainjobs orphan | grep -qE 'Running +2 +2 +2 '" \
  || fail "orphan did not restart: $("$CTL" describe trainjob orphan)"
placement=$("$CTL" get trainjobs orphan -o json | python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["jobs"][0]["placement"]))')
case " $placement " in *" $victim "*) fail "attempt 2 placed on the dead node: $placement" ;; esac
assert_contains "$("$CTL" describe trainjob orphan)" "node $victim lost" "attempt 1 cause"
sleep 0.5
[ "$(attempts_running orphan)" = "2 " ] || fail "ranks of attempts '$(attempts_running orphan)' run after the restart"

check_attempt_sampler
"$CTL" delete trainjob orphan >/dev/null
no_orphan() { [ -z "$(job_pids orphan)" ]; }
wait_for 15 no_orphan || fail "ranks of the deleted job remain: $(job_pids orphan)"
log "agent SIGKILL without restart: Lost, rank stopped by its step, restart elsewhere"
echo "PASS agent_death_test"
