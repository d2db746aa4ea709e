#!/usr/bin/env bash
# Workers outlive an agent restart (issues 5 and 7). A one-node cluster runs a job whose ranks
# wait for a go file and then exit with a known code. The agent is killed (SIGKILL, and in a
# second round SIGTERM, as `systemctl restart` sends), one rank is let go while no agent runs,
# and the agent is started again on the same state dir. The ranks keep their pids, the exit
# recorded during the outage is delivered, the job ends with every exit code right and in its
# first attempt, and nothing of it is left behind.
source "$(dirname "$0")/../lib.sh"

# A lost timeout long enough that the restart below never makes the node Lost.
"$CTL" local up --agents 1 --dir "$TRAINLET_HOME" --heartbeat-ms 200 --lost-timeout-ms 8000 \
  --slots 4 > "$WORK/up.out"
pidfile="$TRAINLET_HOME/pids/node-1.pid"
state="$TRAINLET_HOME/agents/node-1"
apid=$(awk '{print $1}' "$pidfile")
mapfile -d '' aargs < "/proc/$apid/cmdline"
for i in "${!aargs[@]}"; do  # metrics on port 0: the new agent must not fight over a port
  [ "${aargs[$i]}" = --metrics-address ] && aargs[$((i + 1))]=127.0.0.1:0
done

start_agent() {
  setsid "${aargs[@]}" >> "$TRAINLET_HOME/logs/node-1.log" 2>&1 < /dev/null &
  apid=$!
  disown "$apid"  # no "Killed" line from this shell when the test kills it
  echo "$apid $(awk '{print $22}' "/proc/$apid/stat")" > "$pidfile"  # `local down` stops it
}

# describe's rank table: RANK NODE LOCAL STATE PID EXIT ...
rank_field() {
  "$CTL" describe trainjob "$1" |
    awk -v r="$2" -v f="$3" '/^Ranks/ {t = 1; next} /^[A-Z]/ {t = 0} t && $1 == r {print $f}'
}
ranks_running() { [ "$("$CTL" describe trainjob "$1" | awk '$2 == "node-1" && $4 == "Running"' | wc -l)" = "$2" ]; }

# run_round NAME SIGNAL: the whole scenario for one way of stopping the agent.
run_round() {
  local name=$1 sig=$2 go="$WORK/go-$1"
  mkdir -p "$go"
  # Rank r waits for go/r, then exits with the code written there (0 here; the job "coded"
  # below checks a non-zero one).
  job=$(write_job "$name" 1 3 "while [ ! -e $go/\$TRAINLET_RANK ]; do sleep 0.05; done; echo \"rank \$TRAINLET_RANK out\"; exit \$(cat $go/\$TRAINLET_RANK)")
  "$CTL" apply -f "$job" >/dev/null
  wait_for 20 ranks_running "$name" 3 || fail "$name: 3 ranks never Running: $("$CTL" describe trainjob "$name")"
  local pids=() r
  for r in 0 1 2; do pids[$r]=$(rank_field "$name" $r 5); done
  log "$name: ranks running as ${pids[*]}; agent pid $apid gets SIG$sig"

  kill -"$sig" "$apid"
  wait_for 15 sh -c "! kill -0 $apid 2>/dev/null" || fail "$name: the agent did not exit on SIG$sig"
  for r in 0 1 2; do kill -0 "${pids[$r]}" 2>/dev/null || fail "$name: rank $r died with the agent"; done
  # Rank 0 ends while no agent runs: only its step records the exit.
  echo 0 > "$go/0"
  wait_for 10 sh -c "! kill -0 ${pids[0]} 2>/dev/null" || fail "$name: rank 0 did not exit"
  start_agent
  log "$name: agent restarted as pid $apid"
  wait_for 10 grep -q "adopted step .*$name" "$TRAINLET_HOME/logs/node-1.log" \
    || fail "$name: the new agent adopted no step"
  for r in 1 2; do kill -0 "${pids[$r]}" 2>/dev/null || fail "$name: rank $r gone after the restart"; done
  echo 0 > "$go/1"
  echo 0 > "$go/2"
  "$CTL" wait "trainjob/$name" --for=condition=Complete --timeout=30s \
    || fail "$name did not complete: $("$CTL" describe trainjob "$name")"
  local d
  d=$("$CTL" describe trainjob "$name")
  grep -q "Attempt: *1 " <<<"$d" || fail "$name must not have restarted: $d"
  for r in 0 1 2; do
    [ "$(rank_field "$name" $r 5)" = "${pids[$r]}" ] || fail "$name: rank $r changed pid: $d"
    [ "$(rank_field "$name" $r 4)" = Succeeded ] || fail "$name: rank $r not Succeeded: $d"
    [ "$(rank_field "$name" $r 6)" = 0 ] || fail "$name: rank $r exit code: $d"
    assert_contains "$("$CTL" logs "$name" --rank $r)" "rank $r out" "$name rank $r log"
  done
  no_pids() { [ -z "$(job_pids "$name")" ]; }
  wait_for 10 no_pids || fail "$name: processes left: $(job_pids "$name")"
  log "$name: complete in attempt 1 with the same pids"
}

run_round survive-kill 9
run_round survive-term TERM

# A non-zero code recorded while no agent runs is delivered as it was.
mkdir -p "$WORK/go-coded"
job=$(write_job coded 1 2 "while [ ! -e $WORK/go-coded/\$TRAINLET_RANK ]; do sleep 0.05; done; exit \$(cat $WORK/go-coded/\$TRAINLET_RANK)")
sed -i 's/^metadata:$/metadata:\n  annotations:\n    trainlet.io\/max-restarts: "0"/' "$job"
"$CTL" apply -f "$job" >/dev/null
wait_for 20 ranks_running coded 2 || fail "coded never Running"
cpid=$(rank_field coded 1 5)
kill -9 "$apid"
wait_for 15 sh -c "! kill -0 $apid 2>/dev/null" || fail "agent survived SIGKILL"
echo 3 > "$WORK/go-coded/1"
wait_for 10 sh -c "! kill -0 $cpid 2>/dev/null" || fail "coded rank 1 did not exit"
start_agent
"$CTL" wait trainjob/coded --for=condition=Failed --timeout=30s \
  || fail "coded did not fail: $("$CTL" describe trainjob coded)"
[ "$(rank_field coded 1 6)" = 3 ] || fail "rank 1's exit code 3 was lost: $("$CTL" describe trainjob coded)"
wait_for 15 sh -c "[ -z \"\$(ls '$state/steps')\" ]" || fail "step records left: $(ls "$state/steps")"
log "exit code 3 from the outage delivered; the step records are gone once acknowledged"

# Reserved ports survive the restart too: the new agent reads <state>/ports, so a job started
# after it never gets the MASTER_PORT a running attempt owns, and the port is given back when that
# attempt ends.
master_port() { tr '\0' '\n' < "/proc/$1/environ" | sed -n 's/^MASTER_PORT=//p'; }
job=$(write_job ported 1 1 'sleep 300')
sed -i 's/name: plain/name: torch-distributed/' "$job"
"$CTL" apply -f "$job" >/dev/null
wait_for 20 ranks_running ported 1 || fail "ported never Running: $("$CTL" describe trainjob ported)"
port1=$(master_port "$(rank_field ported 0 5)")
[ -n "$port1" ] || fail "ported has no MASTER_PORT"
grep -q "^ported 1 handed $port1\$" "$state/ports" || fail "port journal: $(cat "$state/ports")"
kill -9 "$apid"
wait_for 15 sh -c "! kill -0 $apid 2>/dev/null" || fail "agent survived SIGKILL"
start_agent
wait_for 10 grep -q "restored the ports of ported attempt 1" "$TRAINLET_HOME/logs/node-1.log" \
  || fail "the new agent did not restore the ports"
for i in 1 2 3; do  # the agent's cursor starts over: without the journal it would pick port1 again
  job=$(write_job "second-$i" 1 1 'sleep 300')
  sed -i 's/name: plain/name: torch-distributed/' "$job"
  "$CTL" apply -f "$job" >/dev/null
  wait_for 20 ranks_running "second-$i" 1 || fail "second-$i never Running"
  port2=$(master_port "$(rank_field "second-$i" 0 5)")
  [ "$port2" != "$port1" ] || fail "MASTER_PORT $port1 of a running attempt was handed out again"
  "$CTL" delete trainjob "second-$i" >/dev/null
done
"$CTL" delete trainjob ported >/dev/null
wait_for 10 sh -c "! grep -q '^ported ' '$state/ports'" || fail "ported's port not given back: $(cat "$state/ports")"
log "reserved ports kept across the restart (MASTER_PORT $port1), given back at the end"

# `local down` (SIGUSR2 to agents) stops what still runs: a job started now leaves nothing.
job=$(write_job lingering 1 2 'sleep 300')
"$CTL" apply -f "$job" >/dev/null
wait_for 20 ranks_running lingering 2 || fail "lingering never Running"
"$CTL" local down --dir "$TRAINLET_HOME" --timeout 10 >/dev/null 2>&1
no_lingering() { [ -z "$(job_pids lingering)" ]; }
wait_for 10 no_lingering || fail "local down left ranks: $(job_pids lingering)"
for p in /proc/[0-9]*; do
  if tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -q "trainlet-step $state"; then
    fail "a step process is left: ${p#/proc/}"
  fi
done
echo "PASS agent_restart_test"
