#!/usr/bin/env bash
# Launch plans lost on the way to an agent are sent again (issue 19, defect 4). Before, a placed
# job whose plan never reached its agent stayed Starting until the start timeout failed it,
# counted against maxRestarts (0 here: the job Failed).
#   1. The plan goes out while the agent is down (killed, its node not yet Suspect): the agent
#      comes back, registers without that attempt, and is sent the plan again; attempt 1 runs.
#   2. The coordinator is killed with SIGKILL during a burst of 30 applies and started again:
#      every job that was stored ends Succeeded, with no StartTimeout and no restart.
source "$(dirname "$0")/../lib.sh"

# Beats of 1 s: a killed agent's node stays Ready for about a second and a half, long enough to
# place a job on it. A lost timeout that the outages below never reach.
"$CTL" local up --agents 1 --dir "$TRAINLET_HOME" --heartbeat-ms 1000 --lost-timeout-ms 15000 \
  --slots 8 > "$WORK/up.out"
remember_coordinator
pidfile="$TRAINLET_HOME/pids/node-1.pid"
apid=$(awk '{print $1}' "$pidfile")
mapfile -d '' aargs < "/proc/$apid/cmdline"
for i in "${!aargs[@]}"; do  # metrics on port 0: the new agent must not fight over a port
  [ "${aargs[$i]}" = --metrics-address ] && aargs[$((i + 1))]=127.0.0.1:0
done
start_agent() {
  setsid "${aargs[@]}" >> "$TRAINLET_HOME/logs/node-1.log" 2>&1 < /dev/null &
  apid=$!
  disown "$apid"
  echo "$apid $(awk '{print $22}' "/proc/$apid/stat")" > "$pidfile"  # `local down` stops it
}
# check_clean NAME: the job ran in attempt 1 only and never timed out starting.
check_clean() {
  local d
  d=$("$CTL" describe trainjob "$1")
  grep -q "StartTimeout" <<<"$d" && fail "$1 timed out starting: $d"
  grep -q "Attempt: *1 " <<<"$d" || fail "$1 restarted: $d"
  return 0
}

# 1. The plan sent while the agent is down.
wait_for 20 sh -c "'$CTL' get nodes | grep -q 'node-1 .*Ready'" || fail "node-1 never Ready"
kill -9 "$apid"
"$CTL" apply -f "$(write_job away 1 1 'echo ran away')" >/dev/null
log "job applied while the agent is down"
sleep 2
start_agent
"$CTL" wait trainjob/away --for=condition=Complete --timeout=30s \
  || fail "the plan sent while the agent was down never ran: $("$CTL" describe trainjob away)"
check_clean away
assert_contains "$("$CTL" logs away --rank 0)" "ran away" "away's output"
grep -q "does not hold the plan" "$TRAINLET_HOME/logs/coordinator.log" \
  || fail "the coordinator did not say it sent the plan again"
log "the plan lost with the agent was sent again; attempt 1 succeeded"

# 2. SIGKILL of the coordinator during a burst of applies.
for i in $(seq 1 30); do write_job "burst-$i" 1 1 'sleep 1; echo done' >/dev/null; done
(
  for i in $(seq 1 30); do
    timeout 20 "$CTL" apply -f "$WORK/burst-$i.yaml" >/dev/null 2>&1 || true
  done
) &
burst=$!
# Killed in the middle: once a few of the burst are stored (placed, their plans on the way).
stored_now() { [ "$("$CTL" get trainjobs -o name 2>/dev/null | grep -c burst-)" -ge "$1" ]; }
wait_for 30 stored_now 8 || fail "the burst was not being stored"
kill -9 "$COORD_PID"
log "coordinator killed during the burst (pid $COORD_PID)"
sleep 1
restart_coordinator
wait "$burst" || true
stored=$("$CTL" get trainjobs -o name 2>/dev/null | grep -c burst- || true)
log "$stored of the burst's 30 jobs were stored"
[ "$stored" -gt 0 ] || fail "no job of the burst was stored"
for name in $("$CTL" get trainjobs -o name | grep burst- | sed 's|.*/||'); do
  "$CTL" wait "trainjob/$name" --for=condition=Complete --timeout=90s \
    || fail "$name did not complete: $("$CTL" describe trainjob "$name")"
  check_clean "$name"
done
log "every stored job of the burst succeeded in attempt 1, none timed out starting"
echo "PASS lost_plan_test"
