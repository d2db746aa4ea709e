#!/usr/bin/env bash
# A network partition, through a namespace link going down, then healing.
#
# A 2-node job runs on 3 simulated hosts. The link of one of its hosts goes down: the coordinator
# marks the node Lost and fails the attempt; the cut-off agent keeps its rank for the partition
# grace, then stops it, and only then does the next attempt start, on the two hosts still
# reachable. When the link comes back, the agent re-registers, is told attempt 1 is stale, and
# nothing of it runs. Throughout, a sampler checks the process table: no two attempts of the job
# ever run at once, and after the heal no orphan rank is left.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../netns_lib.sh"

GRACE_MS=3000
# The restart waits out partition grace + stop grace + 1.5 s after the node was last heard; the
# ranks (sleep) end at SIGTERM, so a 2 s stop grace (10 s by default) only shortens that hold.
NETNS_COORDINATOR_FLAGS=(--partition-grace-ms "$GRACE_MS" --stop-grace-ms 2000)
start_netns_cluster 3
if [ "$NETNS_MODE" != netns ]; then
  echo "SKIP: network namespaces are not available here; a partition needs a link to cut"
  exit 77
fi

start_sleeper_pair split
victim=$VICTIM
index=$VICTIM_INDEX
stale_pid=$VICTIM_PID
kill -0 "$stale_pid" || fail "the victim's rank $stale_pid is not alive"
log "cutting $victim (host $index) off the bridge; its rank is pid $stale_pid"
netns_link "$index" down
t0=$(date +%s%N)

wait_for 10 sh -c "'$CTL' get nodes $victim | grep -q Lost" || fail "$victim not Lost after the cut"
log "$victim Lost after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
# The cut-off agent cannot hear the coordinator, so it stops its rank after the grace.
wait_for 15 sh -c "! kill -0 $stale_pid 2>/dev/null" \
  || fail "the partitioned rank $stale_pid still runs $(( GRACE_MS / 1000 + 15 )) s after the cut"
stopped_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
log "partitioned rank stopped by its agent after $stopped_ms ms (grace $GRACE_MS ms)"
[ "$stopped_ms" -ge $(( GRACE_MS - 500 )) ] || fail "rank stopped before the grace ($stopped_ms ms)"

# The gang restarts on the two reachable hosts.
wait_for 30 sh -c "'$CTL' get trainjobs split | grep -qE 'Running +2 +2 +2 '" \
  || fail "split did not restart: $("$CTL" describe trainjob split)"
placement=$("$CTL" get trainjobs split -o json | python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["jobs"][0]["placement"]))')
case " $placement " in *" $victim "*) fail "attempt 2 placed on the partitioned node: $placement" ;; esac
assert_contains "$("$CTL" describe trainjob split)" "node $victim lost" "attempt 1 cause"

# Heal. The agent re-registers; the coordinator keeps attempt 2 and nothing of attempt 1 runs.
netns_link "$index" up
wait_for 20 sh -c "'$CTL' get nodes $victim | grep -q ' Ready '" || fail "$victim not Ready after the heal"
sleep 1  # a few heartbeats after the heal: room for a wrong duplicate to appear
[ "$("$CTL" get trainjobs split -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["attempt"])')" = 2 ] \
  || fail "the heal changed the attempt: $("$CTL" describe trainjob split)"
pids=$(job_pids split | wc -w)
[ "$pids" = 2 ] || fail "expected exactly the 2 ranks of attempt 2 after the heal, found $pids"
[ "$(attempts_running split)" = "2 " ] || fail "ranks of attempts '$(attempts_running split)' run after the heal"

check_attempt_sampler
"$CTL" delete trainjob split >/dev/null
no_split() { [ -z "$(job_pids split)" ]; }
wait_for 15 no_split || fail "ranks of the deleted job remain: $(job_pids split)"
log "partition: Lost, rank stopped after the grace, restart elsewhere, clean heal"
echo "PASS partition_test"
