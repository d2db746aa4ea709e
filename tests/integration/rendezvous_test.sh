#!/usr/bin/env bash
# The rendezvous store on 4 agents: 64 Python ranks (ctypes) put their address, fence and read all
# 64; shell ranks do the same with `trainletctl rendezvous`; a rank SIGKILLed while the others wait
# in a fence fails their fence within a fraction of the lost timeout, and the job fails.
source "$(dirname "$0")/lib.sh"

LIB="$TRAINLET_BIN/../lib/libtrainlet_rendezvous.so"
RANK_PY="$TRAINLET_SOURCE_DIR/tests/common/rendezvous/rdzv_rank.py"
[ -f "$LIB" ] || fail "$LIB missing (build target trainlet_rendezvous_shared)"
PY=/usr/bin/python3

start_cluster 4 --slots 16
log "cluster up"

# 1. 64 ranks across 4 agents, two fences each.
job=$(write_job rdzv64 4 16 "exec $PY $RANK_PY $LIB all")
"$CTL" apply -f "$job" >/dev/null
"$CTL" wait trainjob/rdzv64 --for=condition=Complete --timeout=60s || {
  "$CTL" logs rdzv64 | grep -v "read 64 addresses" | head -20
  fail "rdzv64 did not complete"
}
all=$("$CTL" logs rdzv64)
[ "$(grep -c 'read 64 addresses' <<<"$all")" = 64 ] || fail "64 ranks must read 64 addresses: $all"
# Each node sent one contribution per fence, and left no snapshot behind when the attempt ended.
left=$(find "$TRAINLET_HOME/agents" -name '*.snap' | wc -l)
[ "$left" = 0 ] || fail "$left snapshot files left after the job ended"
log "64 ranks x 2 fences ok"

# 2. Shell ranks: put, fence and get through trainletctl, two fences across invocations.
job=$(write_job rdzvsh 2 2 "set -e
'$CTL' rendezvous put host/\$TRAINLET_RANK \"\$TRAINLET_NODE\"
'$CTL' rendezvous put own 'mine'
[ \"\$('$CTL' rendezvous get own)\" = mine ]
'$CTL' rendezvous fence --timeout 30s
'$CTL' rendezvous put round2/\$TRAINLET_RANK yes
'$CTL' rendezvous fence --timeout 30s
next=\$(( (TRAINLET_RANK + 1) % 4 ))
echo \"rank \$TRAINLET_RANK next \$('$CTL' rendezvous get host/\$next) \$('$CTL' rendezvous get round2/\$next)\"
if '$CTL' rendezvous get nobody --timeout 200ms; then exit 9; fi")
"$CTL" apply -f "$job" >/dev/null
"$CTL" wait trainjob/rdzvsh --for=condition=Complete --timeout=60s || {
  "$CTL" logs rdzvsh; fail "rdzvsh did not complete"
}
out=$("$CTL" logs rdzvsh)
for r in 0 1 2 3; do
  grep -Eq "rank $r next node-[0-9]+ yes" <<<"$out" || fail "shell rank $r: $out"
done
assert_contains "$out" "TIMEOUT" "get of a key nobody puts times out"
log "shell ranks ok"

# 3. Rank 5 is SIGKILLed while the 7 others wait in fence 1: they must all hear of it quickly,
# not hang until the node or job times out, and the job fails.
job=$(write_job rdzvkill 4 2 "exec $PY $RANK_PY $LIB kill $WORK")
"$CTL" apply -f "$job" >/dev/null
"$CTL" wait trainjob/rdzvkill --for=condition=Failed --timeout=30s || fail "rdzvkill did not fail"
out=$("$CTL" logs rdzvkill --attempt 1)
[ -f "$WORK/killed_at" ] || fail "rank 5 never reached its kill"
killed=$(cat "$WORK/killed_at")
ended=$(grep -c "fence ended at" <<<"$out" || true)
[ "$ended" = 7 ] || fail "7 ranks must report their fence ending: $out"
assert_contains "$out" "exited with signal 9 before joining fence 1" "abort reason"
assert_contains "$out" "code 2" "ABORTED code"
# The slowest of them heard within 1 s of the kill (the lost timeout here is 2 s).
slowest=$(grep -o "fence ended at [0-9.]*" <<<"$out" | awk '{print $4}' | sort -n | tail -1)
lag=$(awk -v a="$slowest" -v b="$killed" 'BEGIN { printf "%d", (a - b) * 1000 }')
log "slowest rank heard of the kill after ${lag} ms"
[ "$lag" -lt 1000 ] || fail "fence abort took ${lag} ms"
assert_contains "$("$CTL" describe trainjob rdzvkill)" "rank 5 on node-" "job failure cause"
log "killed rank fails the fence ok"
echo "PASS rendezvous_test"
