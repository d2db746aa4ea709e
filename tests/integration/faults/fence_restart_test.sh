#!/usr/bin/env bash
# A rendezvous fence in flight across a coordinator restart completes (docs/rendezvous.md,
# "Coordinator restart and failover"; issue 17). Three shell ranks on three nodes put an address
# and pass fence 1; ranks 0 and 1 then join fence 2 while rank 2 waits for a go file. The
# coordinator is killed with SIGKILL (its fence table, in memory only, is lost with it) and
# restarted on the same endpoints; then rank 2 joins fence 2. The agents resync their fence state
# when they register again, so fence 2 completes in the first attempt and every rank reads the
# keys put before fence 1 and fence 2. Before resync, the restarted coordinator refused every
# later contribution and the fence hung until the ranks' timeout failed the job.
source "$(dirname "$0")/../lib.sh"

start_cluster 3 --slots 1
remember_coordinator

go="$WORK/go"
job=$(write_job fenced 3 1 "set -e
'$CTL' rendezvous put addr/\$TRAINLET_RANK \"a-\$TRAINLET_RANK\"
'$CTL' rendezvous fence --timeout 30s
'$CTL' rendezvous put late/\$TRAINLET_RANK \"l-\$TRAINLET_RANK\"
if [ \$TRAINLET_RANK = 2 ]; then while [ ! -e '$go' ]; do sleep 0.1; done; fi
echo \"rank \$TRAINLET_RANK joins fence 2\"
'$CTL' rendezvous fence --timeout 30s
next=\$(( (TRAINLET_RANK + 1) % 3 ))
echo \"rank \$TRAINLET_RANK read \$('$CTL' rendezvous get addr/\$next) \$('$CTL' rendezvous get late/\$next)\"")
"$CTL" apply -f "$job" >/dev/null

joined() { [ "$("$CTL" logs fenced 2>/dev/null | grep -c 'joins fence 2')" = 2 ]; }
wait_for 30 joined || fail "ranks 0 and 1 never reached fence 2: $("$CTL" logs fenced 2>&1)"
sleep 1  # their agents have sent the coordinator their contributions to fence 2
kill -9 "$COORD_PID"
log "coordinator killed (pid $COORD_PID) with fence 2 open"
restart_coordinator
wait_for 20 sh -c "[ \$('$CTL' get nodes 2>/dev/null | grep -c ' Ready') = 3 ]" \
  || fail "the agents did not register again"
touch "$go"

"$CTL" wait trainjob/fenced --for=condition=Complete --timeout=40s \
  || fail "fence 2 did not complete across the restart: $("$CTL" describe trainjob fenced; "$CTL" logs fenced)"
d=$("$CTL" describe trainjob fenced)
grep -q "Attempt: *1 " <<<"$d" || fail "the job must not have restarted: $d"
out=$("$CTL" logs fenced)
for r in 0 1 2; do
  n=$(( (r + 1) % 3 ))
  assert_contains "$out" "rank $r read a-$n l-$n" "rank $r's gets after the restart"
done
log "fence 2 completed across the coordinator restart, attempt 1, every key readable"
echo "PASS fence_restart_test"
