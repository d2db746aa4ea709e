#!/usr/bin/env bash
# Issue 19 (defect 9) and issue 18: the purge of a node that was away at a delete outlives a
# coordinator restart. node-2 runs a job in its own work dir and one in the cluster's shared
# directory; its agent is killed, both jobs are deleted (--force), the coordinator is killed -9
# and restarted, and then node-2's agent starts again: the jobs' logs, work dir and shared dir
# go within seconds. On today's main the restarted coordinator had forgotten the purge and the
# data stayed for good. Then the same name applied again on node-2 keeps its new data across
# another coordinator restart (an old tombstone never purges a new incarnation).
source "$(dirname "$0")/../lib.sh"

SHARED="$WORK/shared"
mkdir -p "$SHARED"
start_cluster 2 --slots 2 --shared-dir "$SHARED" --shared-dir "$SHARED"
remember_coordinator
A="$TRAINLET_HOME/agents/node-2"
agent_pid() { awk '{print $1}' "$TRAINLET_HOME/pids/node-2.pid"; }
running() { "$CTL" get trainjobs "$1" | grep -q Running; }
# job NAME ANNOTATIONS SCRIPT: a 1-rank TrainJob, placed while node-1 is cordoned (so on node-2).
job() {
  local f
  f=$(write_job "$1" 1 1 "$3")
  [ -z "$2" ] || sed -i "s|^metadata:|metadata:\n  annotations: {$2}|" "$f"
  "$CTL" apply -f "$f" >/dev/null || fail "apply $1"
  wait_for 30 running "$1" || fail "$1 never Running: $("$CTL" describe trainjob "$1")"
  "$CTL" describe trainjob "$1" | grep -q node-2 || fail "$1 is not on node-2"
}
left() { ls -d "$A/logs/$1" "$A/work/$1" "$SHARED/$1" 2>/dev/null || true; }

"$CTL" cordon node-1 >/dev/null
# shellcheck disable=SC2016
job local-data "" 'echo old-output; echo old > old-file; exec sleep 300'
# shellcheck disable=SC2016
job shared-data "trainlet.io/working-dir: shared" 'echo old > old-file; exec sleep 300'
wait_for 10 test -f "$A/work/local-data/old-file" || fail "local-data wrote nothing in $A/work"
wait_for 10 test -f "$SHARED/shared-data/old-file" || fail "shared-data wrote nothing in $SHARED"
if [ ! -d "$A/logs/local-data" ] || [ ! -d "$A/logs/shared-data" ]; then fail "no logs on node-2: $(ls "$A/logs")"; fi
"$CTL" uncordon node-1 >/dev/null

# node-2's agent goes away for good; both jobs are deleted while it is away.
apid=$(agent_pid)
mapfile -d '' aargs < "/proc/$apid/cmdline"
for i in "${!aargs[@]}"; do  # metrics on port 0: the new agent must not fight over a port
  [ "${aargs[$i]}" = --metrics-address ] && aargs[i + 1]=127.0.0.1:0
done
kill -9 "$apid"
wait_for 10 sh -c "'$CTL' get nodes node-2 | grep -q Lost" || fail "node-2 not Lost"
"$CTL" delete trainjob local-data --force >/dev/null || fail "delete local-data"
"$CTL" delete trainjob shared-data --force >/dev/null || fail "delete shared-data"
no_ranks() { [ -z "$(job_pids local-data)$(job_pids shared-data)" ]; }
wait_for 20 no_ranks || fail "ranks remain: $(job_pids local-data) $(job_pids shared-data)"

# The coordinator forgets everything but its store.
kill -9 "$COORD_PID"
restart_coordinator
wait_for 20 "$CTL" get nodes || fail "the restarted coordinator does not answer"
if [ -z "$(left local-data)" ] || [ -z "$(left shared-data)" ]; then fail "data went while node-2 was away"; fi

setsid "${aargs[@]}" >> "$TRAINLET_HOME/logs/node-2.log" 2>&1 < /dev/null &
apid=$!
disown "$apid"
echo "$apid $(awk '{print $22}' "/proc/$apid/stat")" > "$TRAINLET_HOME/pids/node-2.pid"
wait_for 20 sh -c "'$CTL' get nodes node-2 | grep -q Ready" || fail "node-2 not Ready again"
purged() { [ -z "$(left local-data)$(left shared-data)" ]; }
wait_for 5 purged || fail "data stayed after node-2 registered with the restarted coordinator: $(left local-data) $(left shared-data)"
log "a purge missed by node-2 outlived the coordinator's restart: logs, work dir and shared dir gone"

# The name again, on node-2: an old tombstone (sent again at every registration, were it kept)
# must never take the new incarnation's data. node-1's agent finds the restarted coordinator on
# its own schedule (its next heartbeat): wait for it before cordoning it.
wait_for 20 sh -c "'$CTL' get nodes node-1 | grep -q Ready" || fail "node-1 not Ready after the restart"
"$CTL" cordon node-1 >/dev/null || fail "cordon node-1"
# shellcheck disable=SC2016
job local-data "" 'echo new-output; echo new > new-file; exec sleep 300'
wait_for 10 test -f "$A/work/local-data/new-file" || fail "the new local-data wrote nothing"
kill -9 "$COORD_PID"
restart_coordinator
wait_for 20 sh -c "'$CTL' get nodes node-2 | grep -q Ready" || fail "node-2 not Ready after the restart"
sleep 3
[ -f "$A/work/local-data/new-file" ] || fail "the new local-data lost its work dir: $(ls -la "$A/work")"
assert_contains "$("$CTL" logs local-data)" "new-output" "logs of the new local-data"
case "$("$CTL" logs local-data)" in *old-output*) fail "the new local-data shows the old output" ;; esac
log "the name applied again on node-2 keeps its data"
echo "PASS purge_restart_test"
